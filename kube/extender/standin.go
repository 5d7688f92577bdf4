package extender

import (
	"cmp"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/kube/nodestate"
	"github.com/corepin/corepin/kube/nrt"
	"github.com/corepin/corepin/topology"
)

// StandInTopology is the stand-in machine of free CPUs per NUMA node
// (AnnotationNUMAFree, or a NodeResourceTopology's zones): NUMA node i has
// free[i] CPUs, each its own single-thread core, and each NUMA node with
// CPUs its own L3 and socket (their indexes dense over those nodes). It is
// nil, without an error, when free counts no CPU. A negative count, more
// than cpuset.MaxCPU+1 CPUs in all, or more NUMA nodes than
// topology.MaxNodeID+1 is an error.
func StandInTopology(free []int) (*topology.Topology, error) {
	if len(free) > topology.MaxNodeID+1 {
		return nil, fmt.Errorf("building the stand-in machine: %d NUMA nodes, more than %d", len(free), topology.MaxNodeID+1)
	}
	total := 0
	for n, f := range free {
		if f < 0 || f > cpuset.MaxCPU+1-total {
			return nil, fmt.Errorf("building the stand-in machine: NUMA node %d: %d free CPUs: want 0 or more and at most %d in all", n, f, cpuset.MaxCPU+1)
		}
		total += f
	}
	if total == 0 {
		return nil, nil
	}
	cpus := make([]topology.CPU, 0, total)
	dense := 0
	for n, f := range free {
		for range f {
			id := len(cpus)
			cpus = append(cpus, topology.CPU{ID: id, Online: true, Allowed: true, Socket: topology.SocketID(dense),
				NUMA: topology.NodeID(n), L3: topology.CacheID(dense), Core: topology.CoreID(id)})
		}
		if f > 0 {
			dense++
		}
	}
	t, err := topology.New(cpus, nil)
	if err != nil {
		return nil, fmt.Errorf("building the stand-in machine: %w", err)
	}
	return t, nil
}

// NRTNode is what one NodeResourceTopology object says of its node, read
// as NRTStore reads it (ParseNRT): either Koordinator's description of the
// whole machine or the free CPUs per NUMA node of its zones, and the
// allocator settings of its attributes and topologyPolicies.
type NRTNode struct {
	// Name is the object's name, its node's.
	Name string
	// Koord is Koordinator's description (nodestate.ParseKoord) when the object
	// carries nodestate.AnnotationKoordCPUTopology; nil otherwise.
	Koord *nodestate.Koord
	// Free is the free CPUs per NUMA node of the object's Node zones
	// (nodestate.FreeCPUs) when Koord is nil.
	Free []int
	// Settings are the allocator settings of the object's attributes
	// (nodestate.AllocatorFromAttributes), with, absent the
	// topologyManagerPolicy attribute, the topology policy of its
	// topologyPolicies (nodestate.TopologyPolicyOfNRT).
	Settings nrt.Allocator
}

// ParseNRT reads a NodeResourceTopology object (v1alpha1 or v1alpha2) the
// way NRTStore does, so that what judges a node and what replays over it
// agree. An object NRTStore would leave unjudged (zones or settings that
// do not read, more than cpuset.MaxCPU+1 free CPUs) or whose Koordinator
// annotations fail its node is an error wrapping ErrNode.
func ParseNRT(u *unstructured.Unstructured) (NRTNode, error) {
	o, err := objectOf(u)
	if err != nil {
		return NRTNode{}, fmt.Errorf("%w: NodeResourceTopology: %w", ErrNode, err)
	}
	n, koordErr, err := readNRT(o)
	if err = cmp.Or(err, koordErr); err != nil {
		return NRTNode{}, fmt.Errorf("%w: NodeResourceTopology: %w", ErrNode, err)
	}
	n.Name = u.GetName()
	return n, nil
}

// ErrNoFreeCPU is wrapped when a NodeResourceTopology's zones count no
// free CPU: there is no stand-in machine to build.
var ErrNoFreeCPU = errors.New("its zones count no free CPU")

// Machine is the node's machine and the workloads holding CPUs on it
// before any placement. For Koordinator's description: its whole machine,
// its reserved CPUs held as one exclusive nodestate.ReservedID entry (as a
// corepin node publishes them) and its held CPUs. For zones: the stand-in
// machine of the free CPUs (StandInTopology), nothing held (the zones do
// not say what is); no free CPU at all is an error wrapping ErrNoFreeCPU.
func (n NRTNode) Machine() (*topology.Topology, []alloc.Assignment, error) {
	if n.Koord != nil {
		held := make([]alloc.Assignment, 0, len(n.Koord.Held)+1)
		if !n.Koord.Reserved.IsEmpty() {
			held = append(held, alloc.Assignment{ID: nodestate.ReservedID, QoS: alloc.LSE, CPUs: n.Koord.Reserved})
		}
		return n.Koord.Topology, append(held, n.Koord.Held...), nil
	}
	t, err := StandInTopology(n.Free)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: NodeResourceTopology: %w", ErrNode, err)
	}
	if t == nil {
		return nil, nil, fmt.Errorf("%w: NodeResourceTopology: %w", ErrNode, ErrNoFreeCPU)
	}
	return t, nil, nil
}

// JudgedSettings are the allocator settings the node is judged under, as
// the extender judges it: for Koordinator's description, its kubelet's
// engine and options under the Node's Koordinator labels nodeLabels as
// koord-scheduler applies them (see settingsOfKoord); for zones, the
// object's settings (the labels are not read there). An unknown value of a
// Koordinator label, or a bind label the kubelet's options refuse, is an
// error wrapping ErrNode.
func (n NRTNode) JudgedSettings(nodeLabels map[string]string) (alloc.NodeSettings, error) {
	if n.Koord == nil {
		return n.Settings.Settings(), nil
	}
	labels, err := nodestate.ParseKoordLabels(nodeLabels[nodestate.LabelKoordCPUBindPolicy], nodeLabels[nodestate.LabelKoordNUMATopologyPolicy],
		nodeLabels[nodestate.LabelKoordNUMAAllocateStrategy])
	if err == nil {
		var set judgedSettings
		if set, err = settingsOfKoord(n.Koord, alloc.TopologyPolicy(n.Settings.TopologyPolicy), labels); err == nil {
			return set.NodeSettings, nil
		}
	}
	return alloc.NodeSettings{}, fmt.Errorf("%w: %w", ErrNode, err)
}
