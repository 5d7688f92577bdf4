package nrt

import (
	"cmp"
	"slices"

	"github.com/corepin/corepin/alloc"
)

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
