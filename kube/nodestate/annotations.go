package nodestate

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/plan"
)

// Node annotations a corepin node publishes for the scheduler extender
// (kube/extender reads them).
const (
	// AnnotationTopology holds the node's `corepin topo -o json` document,
	// compact.
	AnnotationTopology = "corepin.io/topology"
	// AnnotationAssigned holds the CPUs already held on the node, as the
	// "assigned" list of `corepin plan`: [{"id":"ns/pod","cpuset":"2-5","qos":"LSE"}].
	// Absent means nothing is held.
	AnnotationAssigned = "corepin.io/assigned"
	// AnnotationNUMAFree is the coarse fallback: free CPUs per NUMA node,
	// in node order, e.g. "[4,0]". It stands for a machine of that many
	// single-thread cores per node, one socket and one L3 per node.
	AnnotationNUMAFree = "corepin.io/numa-free"
	// AnnotationAllocator holds the node allocator's settings, compact
	// JSON (Allocator), published beside either form above:
	// {"policy":"kubelet","options":["full-pcpus-only"],"topology_policy":"single-numa-node"}.
	// Absent (a node running an older corepin) means policy corepin, no
	// options, topology policy none.
	AnnotationAllocator = "corepin.io/allocator"
	// MaxAnnotationBytes bounds what a node publishes in these annotations
	// together (Kubernetes caps all of an object's annotations at 256 KiB
	// together), and what the extender decodes of each.
	MaxAnnotationBytes = 256 << 10
	// MaxNUMAFreeNodes bounds the entries of AnnotationNUMAFree.
	MaxNUMAFreeNodes = 64
	// ReservedID is the assigned entry standing for the node's reserved
	// CPUs, published as held (as exclusive, out of every pool: the
	// cluster cannot place on them). An extender that reads
	// AnnotationAllocator makes them its allocator's reserved CPUs again
	// (they count under full-pcpus-only and strict-cpu-reservation); an
	// older one keeps them held.
	ReservedID = plan.ReservedID
)

// settingsOf are the node settings of st's allocator with the node's
// default topology policy topologyPolicy (its reserved CPUs left out: they
// are published as held).
func settingsOf(st *alloc.State, topologyPolicy alloc.TopologyPolicy) alloc.NodeSettings {
	return alloc.NodeSettings{Policy: st.Policy(), Options: st.Options(), TopologyPolicy: topologyPolicy}
}

// MaxPodUIDBytes bounds a pod UID published in AnnotationAssigned
// (Kubernetes' are 36-byte UUIDs).
const MaxPodUIDBytes = 128

// ErrTooLarge means a node's state does not fit in its annotations at all.
var ErrTooLarge = errors.New("node state too large to publish")

// NodeAnnotations encodes st (a node's whole state) and topologyPolicy
// (the node's default topology policy, "" for none) as the extender
// decodes them: AnnotationTopology (st's machine, with the topology
// package's own document), AnnotationAssigned (plan's Assigned entries:
// every exclusive set with its exclusive policy, every LS and BE quota,
// and the reserved CPUs as ReservedID) and AnnotationAllocator
// (AllocatorOf), removing AnnotationNUMAFree. With pods not nil (the
// publisher knows which pod each container assignment is for: pod UID by
// assignment id), each entry names its pod (plan.Assigned.PodUID) and
// Allocator.PodUIDs is set; an assignment pods does not name is another
// front door's. When the three together
// would pass MaxAnnotationBytes it publishes AnnotationNUMAFree and
// AnnotationAllocator only (coarse is true) and removes the other two.
func NodeAnnotations(st *alloc.State, topologyPolicy alloc.TopologyPolicy, pods map[string]string) (ann Annotations, coarse bool, err error) {
	// settings is the AnnotationAllocator value, saying whether the
	// entries name their pods.
	settings := func(podUIDs bool) (*string, error) {
		a := AllocatorOf(settingsOf(st, topologyPolicy))
		a.PodUIDs = podUIDs
		b, err := json.Marshal(a)
		if err != nil {
			return nil, fmt.Errorf("encoding the allocator settings: %w", err)
		}
		s := string(b)
		return &s, nil
	}
	set, err := settings(pods != nil)
	if err != nil {
		return nil, false, err
	}
	topo, err := json.Marshal(st.Topology().Doc())
	if err != nil {
		return nil, false, fmt.Errorf("encoding the topology: %w", err)
	}
	assigned := []plan.Assigned{}
	if r := st.Reserved(); !r.IsEmpty() {
		assigned = append(assigned, plan.Assigned{ID: ReservedID, CPUSet: r.String(), QoS: string(alloc.LSE)})
	}
	for _, a := range st.Assignments() {
		e := plan.Assigned{ID: a.ID, QoS: string(a.QoS), PodUID: pods[a.ID]}
		if len(e.PodUID) > MaxPodUIDBytes {
			e.PodUID = "" // not a UID the API server gave
		}
		switch a.QoS {
		case alloc.LSE, alloc.LSR:
			e.CPUSet, e.Exclusive = a.CPUs.String(), string(a.Exclusive)
		case alloc.LS, alloc.BE:
			cpus := float64(a.MilliCPUs) / 1000
			e.CPUs = &cpus
		default:
			continue // SYSTEM runs on the reserved CPUs, published above
		}
		assigned = append(assigned, e)
	}
	as, err := json.Marshal(assigned)
	if err != nil {
		return nil, false, fmt.Errorf("encoding the assignments: %w", err)
	}
	if len(topo)+len(as)+len(*set) <= MaxAnnotationBytes {
		t, a := string(topo), string(as)
		return Annotations{AnnotationTopology: &t, AnnotationAssigned: &a, AnnotationNUMAFree: nil, AnnotationAllocator: set}, false, nil
	}
	free, err := NUMAFree(st)
	if err != nil {
		return nil, false, err
	}
	// The coarse form names no pod: the extender cannot tell admitted
	// pods from those on their way.
	if set, err = settings(false); err != nil {
		return nil, false, err
	}
	return Annotations{AnnotationTopology: nil, AnnotationAssigned: nil, AnnotationNUMAFree: &free, AnnotationAllocator: set}, true, nil
}

// NUMAFree is st's AnnotationNUMAFree: per NUMA node id from 0, the CPUs an
// exclusive request could still take there (allowed, not reserved, not
// held by LSE or LSR).
func NUMAFree(st *alloc.State) (string, error) {
	t := st.Topology()
	nodes := t.NodesWithCPUs()
	if len(nodes) == 0 {
		return "[0]", nil
	}
	last := nodes[len(nodes)-1]
	if int(last) >= MaxNUMAFreeNodes {
		return "", fmt.Errorf("%w: NUMA node %d is beyond the %d nodes %s can name", ErrTooLarge, last, MaxNUMAFreeNodes, AnnotationNUMAFree)
	}
	p := st.Pools()
	free := make([]int, int(last)+1)
	for _, n := range nodes {
		free[n] = t.NodeCPUs(n).Intersection(t.Allowed()).Difference(p.Reserved).Difference(p.LSE).Difference(p.LSR).Size()
	}
	b, err := json.Marshal(free)
	return string(b), err
}
