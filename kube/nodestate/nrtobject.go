package nodestate

import (
	"cmp"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
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
// as the scheduler extender's store reads it (ParseNRT, NRTFields.Read): either Koordinator's description of the
// whole machine or the free CPUs per NUMA node of its zones, and the
// allocator settings of its attributes and topologyPolicies.
type NRTNode struct {
	// Name is the object's name, its node's.
	Name string
	// Koord is Koordinator's description (ParseKoord) when the object
	// carries AnnotationKoordCPUTopology; nil otherwise.
	Koord *Koord
	// Free is the free CPUs per NUMA node of the object's Node zones
	// (FreeCPUs) when Koord is nil.
	Free []int
	// Settings are the allocator settings of the object's attributes
	// (AllocatorFromAttributes), with, absent the
	// topologyManagerPolicy attribute, the topology policy of its
	// topologyPolicies (TopologyPolicyOfNRT).
	Settings alloc.NodeSettings
}

// ParseNRT reads a NodeResourceTopology object (v1alpha1 or v1alpha2) the
// way the scheduler extender's store does (FieldsOf, NRTFields.Read), so
// that what judges a node and what replays over it agree. An object whose
// zones or settings do not read (more than cpuset.MaxCPU+1 free CPUs
// included) or whose Koordinator annotations do not, which fails its node
// in both scheduler doors (NRTError), is an error wrapping ErrNode.
func ParseNRT(u *unstructured.Unstructured) (NRTNode, error) {
	o, err := FieldsOf(u)
	if err != nil {
		return NRTNode{}, fmt.Errorf("%w: NodeResourceTopology: %w", ErrNode, err)
	}
	n, koordErr, err := o.Read()
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
// its reserved CPUs held as one exclusive ReservedID entry (as a
// corepin node publishes them) and its held CPUs. For zones: the stand-in
// machine of the free CPUs (StandInTopology), nothing held (the zones do
// not say what is); no free CPU at all is an error wrapping ErrNoFreeCPU.
func (n NRTNode) Machine() (*topology.Topology, []alloc.Assignment, error) {
	if n.Koord != nil {
		held := make([]alloc.Assignment, 0, len(n.Koord.Held)+1)
		if !n.Koord.Reserved.IsEmpty() {
			held = append(held, alloc.Assignment{ID: ReservedID, QoS: alloc.LSE, CPUs: n.Koord.Reserved})
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
// koord-scheduler applies them (KoordSettings); for zones, the
// object's settings (the labels are not read there). An unknown value of a
// Koordinator label, or a bind label the kubelet's options refuse, is an
// error wrapping ErrNode.
func (n NRTNode) JudgedSettings(nodeLabels map[string]string) (alloc.NodeSettings, error) {
	if n.Koord == nil {
		return n.Settings, nil
	}
	labels, err := ParseKoordLabels(nodeLabels[LabelKoordCPUBindPolicy], nodeLabels[LabelKoordNUMATopologyPolicy],
		nodeLabels[LabelKoordNUMAAllocateStrategy])
	if err == nil {
		var set alloc.NodeSettings
		if set, _, err = KoordSettings(n.Koord, n.Settings.TopologyPolicy, labels); err == nil {
			return set, nil
		}
	}
	return alloc.NodeSettings{}, fmt.Errorf("%w: %w", ErrNode, err)
}

// NRTFields are what is read of one NodeResourceTopology object
// (FieldsOf).
type NRTFields struct {
	Zones []Zone
	// ZonesErr is the error reading Zones: only an error when the object
	// has no Koordinator detail.
	ZonesErr error
	Attrs    []Attribute
	// Policies are the object's topologyPolicies (v1alpha1).
	Policies []string
	// KoordAnn are the object's annotations when it carries Koordinator's
	// detail (AnnotationKoordCPUTopology), nil otherwise; only
	// KoordAnnotations are read of them.
	KoordAnn map[string]string
}

// Read reads what an object's fields o publish, as both the scheduler
// extender's store and ParseNRT judge it: the allocator settings of its attributes (with,
// absent the topologyManagerPolicy attribute, the topology policy of its
// topologyPolicies) and either Koordinator's description of the machine
// (koordErr when its annotations do not read: that fails the node) or,
// from its Node zones, the free CPUs per NUMA node. err is an object whose
// settings or zones do not read, or more than cpuset.MaxCPU+1 free CPUs:
// that fails the node too (NRTError). Koordinator's annotations decide the engine
// and options; its zones (capacity and allocatable only, or none) are not
// read.
func (o NRTFields) Read() (n NRTNode, koordErr, err error) {
	a, err := AllocatorFromAttributes(o.Attrs)
	if err != nil {
		return NRTNode{}, nil, err
	}
	n.Settings = a.Settings()
	if n.Settings.TopologyPolicy == "" && !hasAttribute(o.Attrs, AttrTopologyPolicy) {
		if n.Settings.TopologyPolicy, err = TopologyPolicyOfNRT(o.Policies); err != nil {
			return NRTNode{}, nil, err
		}
	}
	if o.KoordAnn != nil {
		n.Koord, koordErr = ParseKoord(o.KoordAnn)
		return n, koordErr, nil
	}
	if o.ZonesErr != nil {
		return NRTNode{}, nil, o.ZonesErr
	}
	if n.Free, err = FreeCPUs(o.Zones); err != nil {
		return NRTNode{}, nil, err
	}
	total := 0
	for _, f := range n.Free {
		total += f
	}
	if total > cpuset.MaxCPU+1 {
		return NRTNode{}, nil, fmt.Errorf("%w: %d free CPUs in all, more than %d", ErrZones, total, cpuset.MaxCPU+1)
	}
	return n, nil, nil
}

func hasAttribute(attrs []Attribute, name string) bool {
	for _, a := range attrs {
		if a.Name == name {
			return true
		}
	}
	return false
}

// FieldsOf decodes what is read of an object: its zones (an error
// about them kept for a node without Koordinator detail), attributes,
// topologyPolicies and Koordinator annotations (none when absent).
func FieldsOf(u *unstructured.Unstructured) (NRTFields, error) {
	var o NRTFields
	ann := u.GetAnnotations()
	if _, ok := ann[AnnotationKoordCPUTopology]; ok {
		o.KoordAnn = ann
	}
	o.Zones, o.ZonesErr = zonesOf(u)
	if raw, ok := u.Object["attributes"]; ok && raw != nil {
		al, ok := raw.([]any)
		if !ok {
			return o, fmt.Errorf("%w: attributes is not a list", ErrAllocator)
		}
		if len(al) > MaxAttributes {
			return o, fmt.Errorf("%w: more than %d attributes", ErrAllocator, MaxAttributes)
		}
		var a struct {
			Attributes []Attribute `json:"attributes"`
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(map[string]any{"attributes": al}, &a); err != nil {
			return o, fmt.Errorf("%w: attributes: %w", ErrAllocator, err)
		}
		o.Attrs = a.Attributes
	}
	if raw, ok := u.Object["topologyPolicies"]; ok && raw != nil {
		pl, ok := raw.([]any)
		if !ok {
			return o, fmt.Errorf("%w: topologyPolicies is not a list", ErrAllocator)
		}
		if len(pl) > MaxAttributes {
			return o, fmt.Errorf("%w: more than %d topologyPolicies", ErrAllocator, MaxAttributes)
		}
		for _, p := range pl {
			ps, ok := p.(string)
			if !ok {
				return o, fmt.Errorf("%w: topologyPolicies holds a %T, not a string", ErrAllocator, p)
			}
			o.Policies = append(o.Policies, ps)
		}
	}
	return o, nil
}

// zonesOf decodes an object's zones.
func zonesOf(u *unstructured.Unstructured) ([]Zone, error) {
	raw, ok := u.Object["zones"]
	if !ok || raw == nil {
		return nil, fmt.Errorf("%w: no zones", ErrZones)
	}
	list, ok := raw.([]any)
	if !ok {
		return nil, fmt.Errorf("%w: zones is not a list", ErrZones)
	}
	if len(list) > MaxZones {
		return nil, fmt.Errorf("%w: more than %d zones", ErrZones, MaxZones)
	}
	var o struct {
		Zones []Zone `json:"zones"`
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(map[string]any{"zones": list}, &o); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrZones, err)
	}
	return o.Zones, nil
}
