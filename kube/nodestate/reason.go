package nodestate

import (
	"errors"
	"fmt"

	"github.com/corepin/corepin/alloc"
)

// MaxScore is the best Score, the scheduler extender protocol's
// MaxExtenderPriority (a framework plugin scales it to its own range).
const MaxScore = 10

// ComingSuffix ends the reason of a refusal that only pods bound to the
// node (or reserved there) and not yet admitted there cause.
const ComingSuffix = " (counting pods bound there and not yet admitted)"

// Score rates a placement: up to 6 points for alignment (one NUMA node,
// one socket, one L3 group, no core shared with another workload) and up to
// 4 for packing (the share of the node's free CPUs it uses, so the tighter
// node wins and the roomy one stays whole for a large pod). Shared-pool
// placements (LS, BE) have no alignment to compare and score 5.
func Score(pl alloc.Placement, free int) int64 {
	if pl.QoS == alloc.LS || pl.QoS == alloc.BE || free <= 0 {
		return 5
	}
	q := pl.Quality
	align := 6 - 2*(q.NUMANodes-1) - (q.Sockets - 1) - (q.L3Groups - 1) - min(q.SharedCores, 1)
	align = max(align, 0)
	pack := (4*pl.CPUs.Size() + free/2) / free
	return int64(min(max(align+pack, 0), MaxScore))
}

// constraint is the constraint a refusal is worded by: the Rejection's,
// except that under single-numa-node too few CPUs on the whole node is
// also too few on every NUMA node (one reason, counted once per node).
// ok is false for an error that is no Rejection.
func constraint(req alloc.Request, err error) (c string, rj alloc.Rejection, ok bool) {
	if !errors.As(err, &rj) {
		return "", rj, false
	}
	c = rj.Constraint
	if rj.CoreSize > 0 {
		return c, rj, true // the request's shape, whatever the topology policy
	}
	if req.TopologyPolicy == alloc.TopologySingleNUMANode && (c == "capacity" || c == string(alloc.BindFullPCPUs) || c == alloc.OptFullPCPUsOnly) {
		c = string(alloc.TopologySingleNUMANode)
	}
	return c, rj, true
}

// BindCaused reports whether err refuses req for its bind policy (or the
// option full-pcpus-only, which acts as one).
func BindCaused(req alloc.Request, err error) bool {
	c, _, ok := constraint(req, err)
	return ok && (c == string(alloc.BindFullPCPUs) || c == string(alloc.BindSpreadByPCPUs) || c == alloc.OptFullPCPUsOnly)
}

// TopologyCaused reports whether err refuses req for its topology policy.
func TopologyCaused(req alloc.Request, err error) bool {
	c, _, ok := constraint(req, err)
	return ok && c == string(req.TopologyPolicy)
}

// isolatedConstraint is the constraint of alloc's refusal of a request
// that requires isolated CPUs (alloc.IsolatedRequire) where too few are
// free, none on a machine without any.
const isolatedConstraint = "isolated CPUs"

// Reason words a refusal the way the scheduler's own reasons read ("no
// NUMA node with 9 free CPUs"), with the same text on every node refused
// for the same cause.
func Reason(req alloc.Request, err error) string {
	c, rj, ok := constraint(req, err)
	if !ok {
		return err.Error()
	}
	what := "CPUs"
	if req.Bind == alloc.BindFullPCPUs {
		what = "CPUs in whole cores"
	}
	if rj.CoreSize > 0 {
		return fmt.Sprintf("%d CPUs is not a whole number of %d-thread cores", req.CPUs, rj.CoreSize)
	}
	switch c {
	case string(alloc.TopologySingleNUMANode):
		return fmt.Sprintf("no NUMA node with %d free %s", req.CPUs, what)
	case string(alloc.TopologyRestricted), string(alloc.TopologyBestEffort):
		return fmt.Sprintf("no %d free %s on the fewest NUMA nodes that could hold them", req.CPUs, what)
	case "capacity":
		return fmt.Sprintf("fewer than %d free exclusive CPUs", req.CPUs)
	case string(alloc.BindFullPCPUs), alloc.OptFullPCPUsOnly:
		return fmt.Sprintf("fewer than %d free CPUs in whole cores", req.CPUs)
	case string(alloc.ExclusivePCPULevel):
		return fmt.Sprintf("fewer than %d free CPUs on cores without another PCPULevel workload", req.CPUs)
	case string(alloc.ExclusiveNUMANodeLevel):
		return fmt.Sprintf("fewer than %d free CPUs on NUMA nodes without another NUMANodeLevel workload", req.CPUs)
	case "LS pool":
		if req.QoS == alloc.LSE || req.QoS == alloc.LSR {
			return fmt.Sprintf("%d exclusive CPUs would leave the shared pool fewer CPUs than its LS pods hold", req.CPUs)
		}
		return fmt.Sprintf("shared CPU pool cannot take %d more millicpus", req.MilliCPUs)
	case "BE pool":
		return fmt.Sprintf("%d exclusive CPUs would leave no CPU for the node's BE pods", req.CPUs)
	case isolatedConstraint:
		return fmt.Sprintf("fewer than %d free isolated CPUs (the pod requires them)", req.CPUs)
	}
	return rj.Error()
}

// RequestOn is req as a node judged under set judges it: under the node's
// settings by alloc.NodeSettings.On, the rule the node's own admission
// (nodecore.Request) and the simulator answer by (the node's default
// topology policy when req names none, the node's bind policy and NUMA
// strategy when it has them and req is exclusive; the kubelet engine
// refuses req's own bind, exclusive or NUMA strategy, err, which no
// preemption helps). nodeDefault reports whether req took a default
// topology policy other than none.
func RequestOn(set alloc.NodeSettings, req alloc.Request) (_ alloc.Request, nodeDefault bool, _ error) {
	nodeDefault = req.TopologyPolicy == "" && set.TopologyPolicy != "" && set.TopologyPolicy != alloc.TopologyNone
	on, err := set.On(req)
	if err != nil {
		return req, nodeDefault, err
	}
	return on, nodeDefault, nil
}

// Refusal words err, the node's refusal of req (as RequestOn made it;
// nodeDefault as it reported), as Reason does, and says whose policy
// refused it when the pod did not ask for it: the Koordinator label that
// decided the node's topology policy (policyLabel) or bind policy
// (bindLabel), "" when none did, else the node's default topology policy.
func Refusal(req alloc.Request, err error, nodeDefault bool, bindLabel, policyLabel string) string {
	reason := Reason(req, err)
	switch {
	case nodeDefault && TopologyCaused(req, err) && policyLabel != "":
		reason += " (the node's label " + LabelKoordNUMATopologyPolicy + " " + policyLabel + ")"
	case nodeDefault && TopologyCaused(req, err):
		reason += " (the node's default topology policy " + string(req.TopologyPolicy) + ")"
	case bindLabel != "" && BindCaused(req, err):
		reason += " (the node's label " + LabelKoordCPUBindPolicy + " " + bindLabel + ")"
	}
	return reason
}

// Prejudged is a node's answer for a pod that needs no placement
// (Prejudge).
type Prejudged struct {
	OK     bool
	Reason string // why not, when !OK
	// Unresolvable: preempting the node's pods would not help.
	Unresolvable bool
}

// Prejudge answers a pod's request req on a node where no placement is
// needed, as the scheduler extender and the scheduler plugin both do: a
// node publishing no corepin state (judged false) takes it, a pod whose
// metadata did not read (reqErr) is refused for good, a node whose
// published state does not read (stateErr: its annotations or its
// NodeResourceTopology object alike) takes the pods that need nothing of
// corepin and refuses for good those that need aligned CPUs
// (NeedsAlignment), and a node without a free CPU at all (hasState false)
// takes only a BE pod. decided is false when the node's state must place
// req.
func Prejudge(judged bool, req alloc.Request, reqErr, stateErr error, hasState bool) (v Prejudged, decided bool) {
	switch {
	case !judged:
		return Prejudged{OK: true}, true // not a corepin node: not ours to judge
	case reqErr != nil:
		return Prejudged{Reason: reqErr.Error(), Unresolvable: true}, true
	case stateErr != nil && !NeedsAlignment(req):
		return Prejudged{OK: true}, true
	case stateErr != nil:
		return Prejudged{Reason: stateErr.Error(), Unresolvable: true}, true
	case !hasState && req.QoS == alloc.BE:
		return Prejudged{OK: true}, true
	case !hasState:
		return Prejudged{Reason: "no free CPUs"}, true
	}
	return Prejudged{}, false
}

// NeedsAlignment reports whether req needs of a node what only its
// published state can say: CPUs of its own (LSE or LSR; an empty QoS is
// LSE), an exclusive policy, a topology policy other than none, or
// isolated CPUs. A pod that needs none of these (a BE pod, an LS pod in
// the shared pool) runs on any node whose CPUs the kube-scheduler finds
// enough.
func NeedsAlignment(req alloc.Request) bool {
	switch {
	case req.QoS != alloc.LS && req.QoS != alloc.BE:
		return true
	case req.Exclusive != "" && req.Exclusive != alloc.ExclusiveNone:
		return true
	case req.TopologyPolicy != "" && req.TopologyPolicy != alloc.TopologyNone:
		return true
	}
	return req.Isolated != alloc.IsolatedAvoid
}

// Shape is what a node's answer to a request depends on besides the
// node: the request's comparable fields but its id (a Hint, which no
// scheduler's request carries, is left out). A scheduler keys the
// answers it keeps by it.
type Shape struct {
	CPUs, MilliCPUs int
	QoS             alloc.QoS
	Bind            alloc.Bind
	Exclusive       alloc.Exclusive
	NUMA            alloc.NUMAStrategy
	TopologyPolicy  alloc.TopologyPolicy
	Isolated        alloc.IsolatedPolicy
}

// ShapeOf is r's Shape.
func ShapeOf(r alloc.Request) Shape {
	return Shape{CPUs: r.CPUs, MilliCPUs: r.MilliCPUs, QoS: r.QoS, Bind: r.Bind, Exclusive: r.Exclusive, NUMA: r.NUMA, TopologyPolicy: r.TopologyPolicy, Isolated: r.Isolated}
}
