package nodestate

import (
	"errors"
	"fmt"

	"github.com/corepin/corepin/alloc"
)

// MaxScore is the best Score, the scheduler extender protocol's
// MaxExtenderPriority (a framework plugin scales it to its own range).
const MaxScore = 10

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
	}
	return rj.Error()
}
