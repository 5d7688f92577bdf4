package nodestate

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/topology"
)

// Group, version and kind of the NodeResourceTopology objects a corepin
// node publishes (the CRD of kubernetes-sigs/noderesourcetopology-api that
// the topology-aware scheduler plugins read).
const (
	NRTAPIVersion = "topology.node.k8s.io/v1alpha2"
	NRTKind       = "NodeResourceTopology"
)

// NRTObject is a NodeResourceTopology, with the fields corepin fills
// (BuildNRTWith); FieldsOf reads it back.
type NRTObject struct {
	APIVersion string      `json:"apiVersion"`
	Kind       string      `json:"kind"`
	Metadata   Metadata    `json:"metadata"`
	Zones      []Zone      `json:"zones"`
	Attributes []Attribute `json:"attributes,omitempty"`
}

// Metadata names the object after its node.
type Metadata struct {
	Name string `json:"name"`
}

// Zone is one NUMA node.
type Zone struct {
	Name      string     `json:"name"`
	Type      string     `json:"type"`
	Costs     []Cost     `json:"costs,omitempty"`
	Resources []Resource `json:"resources,omitempty"`
}

// Cost is the NUMA distance to another zone.
type Cost struct {
	Name  string `json:"name"`
	Value int64  `json:"value"`
}

// Resource counts one resource of a zone (quantities as strings).
type Resource struct {
	Name        string `json:"name"`
	Capacity    string `json:"capacity"`
	Allocatable string `json:"allocatable"`
	Available   string `json:"available"`
}

// Attribute is a name/value pair.
type Attribute struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// ZoneName is the zone of NUMA node n, as the resource-topology-exporter
// names it.
func ZoneName(n topology.NodeID) string { return "node-" + strconv.Itoa(int(n)) }

// Attribute names of the object. The first two are those NFD's
// topology-updater publishes (and the topology-aware scheduler plugins
// read); the corepin ones carry what they do not define.
const (
	// AttrTopologyPolicy is the node's default topology policy: none,
	// best-effort, restricted or single-numa-node.
	AttrTopologyPolicy = "topologyManagerPolicy"
	// AttrTopologyScope is the Topology Manager's scope; corepin places
	// per container.
	AttrTopologyScope = "topologyManagerScope"
	// AttrPolicy is the node allocator's engine: corepin or kubelet.
	AttrPolicy = "corepin.io/policy"
	// AttrOptions are its kubelet static-policy options, comma-joined
	// (absent for none).
	AttrOptions = "corepin.io/options"
)

// BuildNRT is BuildNRTWith for settings of topology policy topologyPolicy
// alone: no corepin attributes.
func BuildNRT(node string, t *topology.Topology, p alloc.Pools, topologyPolicy string) NRTObject {
	return BuildNRTWith(node, t, p, Allocator{TopologyPolicy: topologyPolicy})
}

// BuildNRTWith is node's object for topology t under pools and the node
// allocator's settings s: per NUMA node with CPUs, capacity is its usable
// CPUs, allocatable those not reserved, and available those not held by an
// exclusive (LSE, LSR) workload either. s.TopologyPolicy ("" is none)
// becomes AttrTopologyPolicy; s.Policy, when set, AttrPolicy, and
// s.Options, when any, AttrOptions.
func BuildNRTWith(node string, t *topology.Topology, p alloc.Pools, s Allocator) NRTObject {
	o := NRTObject{APIVersion: NRTAPIVersion, Kind: NRTKind, Metadata: Metadata{Name: node}}
	topologyPolicy := s.TopologyPolicy
	if topologyPolicy == "" {
		topologyPolicy = string(alloc.TopologyNone)
	}
	o.Attributes = []Attribute{{Name: AttrTopologyPolicy, Value: topologyPolicy}, {Name: AttrTopologyScope, Value: "container"}}
	if s.Policy != "" {
		o.Attributes = append(o.Attributes, Attribute{Name: AttrPolicy, Value: s.Policy})
	}
	if len(s.Options) > 0 {
		o.Attributes = append(o.Attributes, Attribute{Name: AttrOptions, Value: strings.Join(s.Options, ",")})
	}
	dist := t.Distances()
	nodes := t.NodesWithCPUs()
	for _, n := range nodes {
		cpus := t.NodeCPUs(n).Intersection(t.Allowed())
		alloca := cpus.Difference(p.Reserved)
		avail := alloca.Difference(p.LSE).Difference(p.LSR)
		z := Zone{Name: ZoneName(n), Type: "Node", Resources: []Resource{{Name: "cpu",
			Capacity: strconv.Itoa(cpus.Size()), Allocatable: strconv.Itoa(alloca.Size()), Available: strconv.Itoa(avail.Size())}}}
		if _, ok := dist[n]; ok {
			// A row is in the order of Nodes, not indexed by node id
			// (sparse ids: nodes 1 and 3, or node 1 alone, issue 17).
			for _, m := range nodes {
				z.Costs = append(z.Costs, Cost{Name: ZoneName(m), Value: int64(t.Distance(n, m))})
			}
		}
		o.Zones = append(o.Zones, z)
	}
	return o
}

// Allocator is a node allocator's settings (AnnotationAllocator): what
// the extender needs besides the machine and its assignments to answer as
// the node will. Empty fields are omitted.
type Allocator struct {
	// Policy is the engine: corepin or kubelet ("" is corepin).
	Policy string `json:"policy,omitempty"`
	// Options are kubelet static-policy option names.
	Options []string `json:"options,omitempty"`
	// TopologyPolicy is the node's default topology policy (corepin nri
	// --config's topology_policy), given to pods that name none with
	// corepin.io/numa-policy; "" is none.
	TopologyPolicy string `json:"topology_policy,omitempty"`
	// PodUIDs says the node's AnnotationAssigned names the pod of every
	// container it holds CPUs for (plan.Assigned.PodUID): a pod bound to
	// the node whose UID no entry names has not been admitted there yet,
	// and the scheduler extender counts it as on its way.
	PodUIDs bool `json:"pod_uids,omitempty"`
}

// AllocatorOf is the wire form of node settings s: its engine (corepin
// when empty), options and default topology policy. Reserved CPUs are
// published as held (ReservedID); bind and NUMA strategy are not
// published (a corepin node forces neither).
func AllocatorOf(s alloc.NodeSettings) Allocator {
	return Allocator{Policy: string(cmp.Or(s.Policy, alloc.PolicyCorepin)), Options: slices.Clone(s.Options), TopologyPolicy: string(s.TopologyPolicy)}
}

// Settings are the node settings a carries: engine ("" stays empty,
// which alloc reads as corepin), options and default topology policy.
func (a Allocator) Settings() alloc.NodeSettings {
	return alloc.NodeSettings{Policy: alloc.Policy(a.Policy), Options: a.Options, TopologyPolicy: alloc.TopologyPolicy(a.TopologyPolicy)}
}

// Annotations are a node's corepin annotations as NodeAnnotations encodes
// them for a JSON merge patch of the Node: a value sets one, nil removes
// it (the patch's null).
type Annotations map[string]*string
