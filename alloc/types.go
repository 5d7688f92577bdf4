package alloc

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/topology"
)

// QoS is a workload's quality-of-service class (after Koordinator).
type QoS string

// QoS classes. See the package documentation for the pool each one draws from.
const (
	SYSTEM QoS = "SYSTEM" // the reserved CPUs
	LSE    QoS = "LSE"    // exclusive CPUs, shared with nobody
	LSR    QoS = "LSR"    // bound CPUs; best-effort work may borrow them when idle
	LS     QoS = "LS"     // the shared pool, bounded by quota
	BE     QoS = "BE"     // best effort: the LS pool plus LSR CPUs
)

// Bind says how an exclusive request maps onto physical cores.
type Bind string

// Bind policies.
const (
	BindDefault       Bind = "Default"       // whole cores first, then single threads
	BindFullPCPUs     Bind = "FullPCPUs"     // whole physical cores only, siblings together
	BindSpreadByPCPUs Bind = "SpreadByPCPUs" // one logical CPU per physical core first
)

// Exclusive keeps exclusive workloads of the same level apart.
type Exclusive string

// Exclusive policies.
const (
	ExclusiveNone          Exclusive = "None"
	ExclusivePCPULevel     Exclusive = "PCPULevel"     // no other PCPULevel workload on my physical cores
	ExclusiveNUMANodeLevel Exclusive = "NUMANodeLevel" // no other NUMANodeLevel workload on my NUMA nodes
)

// NUMAStrategy orders NUMA nodes when more than one could take a request.
type NUMAStrategy string

// NUMA strategies.
const (
	MostAllocated    NUMAStrategy = "MostAllocated"    // pack: the fullest node that fits
	LeastAllocated   NUMAStrategy = "LeastAllocated"   // spread: the emptiest node
	DistributeEvenly NUMAStrategy = "DistributeEvenly" // split evenly over the fewest nodes that can
)

// TopologyPolicy is the NUMA admission policy (after the kubelet Topology Manager).
type TopologyPolicy string

// Topology policies.
const (
	TopologyNone           TopologyPolicy = "none"
	TopologyBestEffort     TopologyPolicy = "best-effort"
	TopologyRestricted     TopologyPolicy = "restricted"
	TopologySingleNUMANode TopologyPolicy = "single-numa-node"
)

// Policy selects the placement engine.
type Policy string

// Placement engines.
const (
	PolicyCorepin Policy = "corepin" // corepin's own L3-aware best fit (the default)
	PolicyKubelet Policy = "kubelet" // the kubelet static CPU manager policy, tie-breaks included
)

// Kubelet static-policy option names, as upstream spells them.
const (
	OptFullPCPUsOnly            = "full-pcpus-only"
	OptDistributeAcrossNUMA     = "distribute-cpus-across-numa"
	OptAlignBySocket            = "align-by-socket"
	OptDistributeAcrossCores    = "distribute-cpus-across-cores"
	OptStrictCPUReservation     = "strict-cpu-reservation"
	OptPreferAlignByUncoreCache = "prefer-align-cpus-by-uncorecache"
)

// ErrInvalid is wrapped by errors about a malformed configuration or request:
// the caller's input is wrong, no state could satisfy it.
var ErrInvalid = errors.New("invalid allocation input")

// ErrRejected is what every Rejection matches with errors.Is.
var ErrRejected = errors.New("placement rejected")

// ErrNoStrategy is wrapped, beside ErrInvalid, by the kubelet engine's
// refusal of a request naming a bind, exclusive or NUMA strategy
// (NodeSettings.On, State.Allocate): the rule every door answers by.
var ErrNoStrategy = errors.New("the kubelet policy has no bind, exclusive or numa strategy")

// ErrUnknownID is returned by Release for an id that holds nothing.
var ErrUnknownID = errors.New("unknown assignment id")

// Rejection says why a well-formed request could not be placed in the
// current state: Constraint names the rule that refused it (a topology
// policy, a kubelet option, a bind or exclusive policy, "capacity"), and
// Reason says what was needed and what would satisfy it.
type Rejection struct {
	Constraint string
	Reason     string
	// CoreSize, when not zero, says the request was refused for its shape
	// alone: whole-core placement (FullPCPUs, full-pcpus-only) and a CPU
	// count that is not a multiple of CoreSize, the threads per core. No
	// state of the machine would take it.
	CoreSize int
}

func (r Rejection) Error() string { return r.Constraint + ": " + r.Reason }

// Is makes errors.Is(err, ErrRejected) true for every Rejection.
func (r Rejection) Is(target error) bool { return target == ErrRejected }

func reject(constraint, format string, args ...any) error {
	return Rejection{Constraint: constraint, Reason: fmt.Sprintf(format, args...)}
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// NodeSettings are a node's allocator settings: the one type every front
// door converts its own form to (the agent's YAML, the shared state, the
// node annotations and NRT attributes). Policy, Options, Reserved and
// ReservedCount stay fixed for the life of a State; TopologyPolicy, Bind
// and NUMA are the node's defaults for the requests placed on it, applied
// by Apply.
type NodeSettings struct {
	// Policy selects the engine; empty means PolicyCorepin.
	Policy Policy
	// Options are kubelet static-policy option names. The kubelet engine
	// honours all of them; the corepin engine honours full-pcpus-only (every
	// exclusive request takes whole cores), strict-cpu-reservation and
	// distribute-cpus-across-numa (as the DistributeEvenly strategy).
	Options []string
	// Reserved are the CPUs kept for the system (--reserved-cpus).
	Reserved cpuset.CPUSet
	// ReservedCount, when Reserved is empty, reserves that many CPUs chosen
	// the way the engine places an exclusive request (kubelet's
	// --kube-reserved cpu without --reserved-cpus).
	ReservedCount int
	// TopologyPolicy is given to requests that name none (kubelet's
	// topologyManagerPolicy); empty is none.
	TopologyPolicy TopologyPolicy
	// Bind, when set, is the bind policy of every exclusive (LSE, LSR)
	// request placed on the node, whatever the request asks (Koordinator's
	// node label node.koordinator.sh/cpu-bind-policy).
	Bind Bind
	// NUMA, when set, is the NUMA strategy of every exclusive request
	// placed on the node (node.koordinator.sh/numa-allocate-strategy).
	NUMA NUMAStrategy
}

// On is r as a node with settings s admits it: the one rule every door
// (the node's admission, the scheduler's judge, the simulator) puts a
// node's settings on a request by. It is Apply, except that the kubelet
// engine refuses a request naming a bind, exclusive or NUMA strategy
// (ErrInvalid and ErrNoStrategy, as State.Allocate does) where Apply
// drops them.
func (s NodeSettings) On(r Request) (Request, error) {
	if s.Policy == PolicyKubelet {
		if err := noStrategy(r); err != nil {
			return Request{}, err
		}
	}
	return s.Apply(r), nil
}

// noStrategy is the kubelet engine's refusal of r when r names a bind,
// exclusive or NUMA strategy other than the defaults, nil otherwise: one
// message, whether r is normalized or not.
func noStrategy(r Request) error {
	var got []string
	if r.Bind != "" && r.Bind != BindDefault {
		got = append(got, "bind "+string(r.Bind))
	}
	if r.Exclusive != "" && r.Exclusive != ExclusiveNone {
		got = append(got, "exclusive "+string(r.Exclusive))
	}
	if r.NUMA != "" && r.NUMA != MostAllocated {
		got = append(got, "numa "+string(r.NUMA))
	}
	if got == nil {
		return nil
	}
	return fmt.Errorf("%w: request %q: %w (got %s); use policy corepin, or kubelet's options", ErrInvalid, r.ID, ErrNoStrategy, strings.Join(got, ", "))
}

// Apply is the one rule that puts a node's settings on a request: r gets
// the node's topology policy when it names none; on the kubelet engine,
// which knows neither bind, exclusivity nor NUMA strategy (its options say
// how it places), r loses all three; otherwise an exclusive r (LSE, LSR or
// no class, which means LSE) takes the node's bind and NUMA strategy when
// the node sets them.
func (s NodeSettings) Apply(r Request) Request {
	if r.TopologyPolicy == "" {
		r.TopologyPolicy = cmp.Or(s.TopologyPolicy, TopologyNone)
	}
	if s.Policy == PolicyKubelet {
		r.Bind, r.Exclusive, r.NUMA = "", "", ""
		return r
	}
	if r.QoS == LSE || r.QoS == LSR || r.QoS == "" {
		if s.Bind != "" {
			r.Bind = s.Bind
		}
		if s.NUMA != "" {
			r.NUMA = s.NUMA
		}
	}
	return r
}

// Request asks for CPUs for one workload.
type Request struct {
	ID string
	// CPUs is the number of whole CPUs for SYSTEM, LSE and LSR requests.
	CPUs int
	// MilliCPUs is the quota of an LS or BE request in thousandths of a CPU;
	// zero means CPUs*1000.
	MilliCPUs int
	// QoS defaults to LSE.
	QoS       QoS
	Bind      Bind
	Exclusive Exclusive
	NUMA      NUMAStrategy
	// TopologyPolicy defaults to none.
	TopologyPolicy TopologyPolicy
	// Hint, when not empty, is a NUMA affinity decided elsewhere (a topology
	// manager merging several resources): CPUs are taken from these nodes
	// first, as kubelet's static policy does with its merged hint.
	Hint []topology.NodeID
	// Isolated says how an exclusive request (LSE, LSR) treats the CPUs the
	// kernel keeps apart (IsolatedCPUs): by default it avoids them unless
	// the other CPUs cannot hold it; IsolatedPrefer takes them first;
	// IsolatedRequire takes only them, or is rejected.
	Isolated IsolatedPolicy
}

// IsolatedPolicy is a request's use of isolated CPUs (after nri-plugins'
// prefer-isolated-cpus and require-isolated-cpus).
type IsolatedPolicy string

// Isolated policies; the empty one avoids isolated CPUs where it can.
const (
	IsolatedAvoid   IsolatedPolicy = ""
	IsolatedPrefer  IsolatedPolicy = "prefer"
	IsolatedRequire IsolatedPolicy = "require"
)

// Placement is the answer to a Request.
type Placement struct {
	ID  string
	QoS QoS
	// CPUs is the exclusive set of an LSE or LSR workload, the reserved set
	// of a SYSTEM one, and the pool an LS or BE workload shares.
	CPUs cpuset.CPUSet
	// MilliCPUs is the quota of an LS or BE workload.
	MilliCPUs int
	// NUMANodes are the nodes CPUs spans, as a set of node ids.
	NUMANodes cpuset.CPUSet
	Quality   Quality
}

// Quality describes how well a set of CPUs is aligned and what a placement
// left behind.
type Quality struct {
	NUMANodes int `json:"numa_nodes"`
	Sockets   int `json:"sockets"`
	L3Groups  int `json:"l3_groups"`
	// SharedCores counts physical cores of the set that also hold CPUs of
	// another workload (another exclusive set, or the reserved CPUs).
	SharedCores int `json:"shared_cores"`
	// Fragmentation left behind, counted after the placement: physical
	// cores, L3 groups and NUMA nodes whose CPUs are all still free.
	FreeCores     int `json:"free_cores"`
	FreeL3Groups  int `json:"free_l3_groups"`
	FreeNUMANodes int `json:"free_numa_nodes"`
}

// Assignment is a placement held in a State.
type Assignment struct {
	ID        string
	QoS       QoS
	CPUs      cpuset.CPUSet // exclusive CPUs (LSE, LSR); empty for LS and BE
	MilliCPUs int           // quota for LS and BE
	Exclusive Exclusive
	// Added are the CPUs of an LSE or LSR assignment that Resize added
	// beyond those it was placed on (Promised), in the order they were
	// added; a shrink gives back the last first.
	Added []int
}

// options is the parsed form of NodeSettings.Options.
type options struct {
	fullPCPUs, distributeNUMA, alignBySocket, distributeCores, strict, uncore bool
}

var knownOptions = []string{OptFullPCPUsOnly, OptDistributeAcrossNUMA, OptAlignBySocket, OptDistributeAcrossCores, OptStrictCPUReservation, OptPreferAlignByUncoreCache}

// CheckOptions reports whether NewState accepts names as NodeSettings.Options:
// every name one of the kubelet option names, and no pair kubelet refuses
// together. It does not check what depends on a machine (align-by-socket
// on fewer NUMA nodes than sockets). Errors wrap ErrInvalid and list the
// known names.
func CheckOptions(names []string) error {
	_, err := parseOptions(names)
	return err
}

// ParsePolicy returns the engine named s, "" being PolicyCorepin. An
// unknown name is an error wrapping ErrInvalid that names the two engines.
func ParsePolicy(s string) (Policy, error) {
	switch p := Policy(s); p {
	case "":
		return PolicyCorepin, nil
	case PolicyCorepin, PolicyKubelet:
		return p, nil
	}
	return "", invalid("unknown policy %q (want corepin or kubelet)", s)
}

// ParseTopologyPolicy returns the topology policy named s, "" being
// TopologyNone. An unknown name is an error wrapping ErrInvalid that names
// the four policies.
func ParseTopologyPolicy(s string) (TopologyPolicy, error) {
	switch p := TopologyPolicy(s); p {
	case "":
		return TopologyNone, nil
	case TopologyNone, TopologyBestEffort, TopologyRestricted, TopologySingleNUMANode:
		return p, nil
	}
	return "", invalid("unknown topology policy %q (want none, best-effort, restricted or single-numa-node)", s)
}

func parseOptions(names []string) (options, error) {
	var o options
	for _, n := range names {
		switch n {
		case OptFullPCPUsOnly:
			o.fullPCPUs = true
		case OptDistributeAcrossNUMA:
			o.distributeNUMA = true
		case OptAlignBySocket:
			o.alignBySocket = true
		case OptDistributeAcrossCores:
			o.distributeCores = true
		case OptStrictCPUReservation:
			o.strict = true
		case OptPreferAlignByUncoreCache:
			o.uncore = true
		default:
			return o, invalid("unknown option %q (known: %v)", n, knownOptions)
		}
	}
	// The pairs kubelet refuses together.
	for _, p := range []struct {
		a, b       bool
		nameA, nmB string
	}{
		{o.fullPCPUs, o.distributeCores, OptFullPCPUsOnly, OptDistributeAcrossCores},
		{o.distributeNUMA, o.distributeCores, OptDistributeAcrossNUMA, OptDistributeAcrossCores},
		{o.uncore, o.distributeCores, OptPreferAlignByUncoreCache, OptDistributeAcrossCores},
		{o.uncore, o.distributeNUMA, OptPreferAlignByUncoreCache, OptDistributeAcrossNUMA},
	} {
		if p.a && p.b {
			return o, invalid("options %s and %s can not be used together", p.nameA, p.nmB)
		}
	}
	return o, nil
}

// normalize fills defaults and checks a request's vocabulary.
func (r *Request) normalize() error {
	if r.QoS == "" {
		r.QoS = LSE
		if r.CPUs == 0 && r.MilliCPUs > 0 {
			r.QoS = LS
		}
	}
	if r.Bind == "" {
		r.Bind = BindDefault
	}
	if r.Exclusive == "" {
		r.Exclusive = ExclusiveNone
	}
	if r.NUMA == "" {
		r.NUMA = MostAllocated
	}
	if !slices.Contains([]QoS{SYSTEM, LSE, LSR, LS, BE}, r.QoS) {
		return invalid("unknown qos %q (want SYSTEM, LSE, LSR, LS or BE)", r.QoS)
	}
	if !slices.Contains([]Bind{BindDefault, BindFullPCPUs, BindSpreadByPCPUs}, r.Bind) {
		return invalid("unknown bind policy %q (want FullPCPUs, SpreadByPCPUs or Default)", r.Bind)
	}
	if !slices.Contains([]Exclusive{ExclusiveNone, ExclusivePCPULevel, ExclusiveNUMANodeLevel}, r.Exclusive) {
		return invalid("unknown exclusive policy %q (want None, PCPULevel or NUMANodeLevel)", r.Exclusive)
	}
	if !slices.Contains([]NUMAStrategy{MostAllocated, LeastAllocated, DistributeEvenly}, r.NUMA) {
		return invalid("unknown numa strategy %q (want MostAllocated, LeastAllocated or DistributeEvenly)", r.NUMA)
	}
	if !slices.Contains([]IsolatedPolicy{IsolatedAvoid, IsolatedPrefer, IsolatedRequire}, r.Isolated) {
		return invalid("unknown isolated policy %q (want prefer, require or none)", r.Isolated)
	}
	if r.Isolated != IsolatedAvoid && r.QoS != LSE && r.QoS != LSR {
		return invalid("request %q: isolated %s is for exclusive requests (LSE, LSR); shared pools never use isolated CPUs", r.ID, r.Isolated)
	}
	tp, err := ParseTopologyPolicy(string(r.TopologyPolicy))
	if err != nil {
		return err
	}
	r.TopologyPolicy = tp
	if r.CPUs < 0 || r.MilliCPUs < 0 {
		return invalid("request %q: negative cpus", r.ID)
	}
	switch r.QoS {
	case LS, BE:
		if r.MilliCPUs == 0 {
			r.MilliCPUs = r.CPUs * 1000
		}
		if r.MilliCPUs == 0 && r.QoS == LS {
			return invalid("request %q: an LS request needs a cpu quota above 0", r.ID)
		}
	default:
		if r.MilliCPUs != 0 && r.MilliCPUs != r.CPUs*1000 {
			return invalid("request %q: %s takes whole CPUs, not %d millicpus (fractional requests are LS or BE)", r.ID, r.QoS, r.MilliCPUs)
		}
		if r.CPUs == 0 {
			return invalid("request %q: %s needs at least 1 cpu", r.ID, r.QoS)
		}
	}
	return nil
}
