package nodestate

import (
	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/plan"
)

// Judged is a node's published state as a scheduler judges pods on it:
// the allocator state the node's own plugin would place on, built once per
// change of what the node publishes and shared read-only (a decision
// places on State.Clone). The scheduler extender (kube/extender) and the
// scheduler plugin (scheduler/plugin) build it here, from the same
// decoders, so the two cannot read a node differently.
type Judged struct {
	// State is the node's state before any placement; nil when the node
	// has no free CPU at all (a stand-in machine of zero CPUs): every
	// exclusive request fails there.
	State *alloc.State
	// Free is the number of CPUs an exclusive request could still take.
	Free int
	// Empty is the node with nothing held but its reserved CPUs
	// (ReservedID): what a request refused on State would meet if every
	// pod there were preempted. Nil when the source does not say what is
	// held (AnnotationNUMAFree, a NodeResourceTopology's zones).
	Empty *alloc.State
	// Settings are the node settings pods are judged under
	// (alloc.NodeSettings.Apply): the node's default topology policy and,
	// from Koordinator's node labels, the bind policy and NUMA strategy
	// of every exclusive request.
	Settings alloc.NodeSettings
	// BindLabel and PolicyLabel are the values of the Koordinator labels
	// that decided Settings.Bind and Settings.TopologyPolicy ("" when none
	// did), for the reasons of the refusals they cause.
	BindLabel, PolicyLabel string
	// Admitted is the set of pod UIDs AnnotationAssigned names, nil unless
	// AnnotationAllocator says the entries name their pods
	// (nodestate.Allocator.PodUIDs): the pods the node has admitted.
	Admitted map[string]struct{}
}

// JudgeTopology builds the state of a node publishing its topology and
// assignments (DecodeTopology), through the same plan document `corepin
// plan` places on. With settings (pub.HasSettings), the ReservedID entries
// become the document's reserved CPUs, as they are the node allocator's:
// the kubelet engine counts their cores as taken under full-pcpus-only,
// and strict-cpu-reservation keeps them out of the shared pool. Without,
// the state is the one a scheduler unaware of settings built. Errors wrap
// ErrNode and name the annotation at fault.
func JudgeTopology(pub Published) (Judged, error) {
	t, list, set := pub.Topology, pub.Assigned, pub.Settings
	doc := plan.Document{Assigned: list}
	if pub.HasSettings {
		// The machine-dependent checks of the settings (align-by-socket
		// on fewer NUMA nodes than sockets), named as the settings' fault.
		if _, err := alloc.NewState(t, set); err != nil {
			return Judged{}, nodeErr("%s: %v", AnnotationAllocator, err)
		}
		doc.Policy, doc.Options = string(set.Policy), set.Options
		var err error
		if doc.Reserved, doc.Assigned, err = splitReserved(list); err != nil {
			return Judged{}, nodeErr("%s: %v", AnnotationAssigned, err)
		}
	}
	p, err := doc.PlaceOn(t)
	if err != nil {
		return Judged{}, nodeErr("%s: %v", AnnotationAssigned, err)
	}
	var reserved []plan.Assigned
	for _, a := range doc.Assigned {
		if a.ID == plan.ReservedID {
			reserved = append(reserved, a)
		}
	}
	doc.Assigned = reserved
	empty, err := doc.PlaceOn(t)
	if err != nil {
		return Judged{}, nodeErr("%s: %v", AnnotationAssigned, err)
	}
	var admitted map[string]struct{}
	if pub.PodUIDs {
		admitted = make(map[string]struct{}, len(list))
		for _, a := range list {
			if a.PodUID != "" {
				admitted[a.PodUID] = struct{}{}
			}
		}
	}
	return Judged{State: p.State, Free: p.State.Pools().LS.Size(), Empty: empty.State, Settings: set, Admitted: admitted}, nil
}

// splitReserved separates the ReservedID entries of list: their CPUs as a
// reserved set in Linux list form, and the other entries.
func splitReserved(list []plan.Assigned) (string, []plan.Assigned, error) {
	var reserved cpuset.Builder
	rest := make([]plan.Assigned, 0, len(list))
	for _, a := range list {
		if a.ID != plan.ReservedID {
			rest = append(rest, a)
			continue
		}
		as, err := a.Assignment()
		if err != nil {
			return "", nil, err
		}
		reserved.AddSet(as.CPUs)
	}
	return reserved.Result().String(), rest, nil
}

// JudgeFree builds the stand-in machine of free CPUs per NUMA node
// (AnnotationNUMAFree, or a NodeResourceTopology's zones) under the node's
// settings set (its reserved CPUs are not read): node i has free[i]
// single-thread cores, its own L3 and its own socket. The caller has
// checked that the counts are non-negative and at most cpuset.MaxCPU+1 in
// all, and set's names; what names the source in errors, which wrap
// ErrNode. The state has no Empty counterpart: the source does not say
// what is held; no CPU at all is a Judged without State.
func JudgeFree(free []int, what string, set alloc.NodeSettings) (Judged, error) {
	t, err := StandInTopology(free)
	if err != nil {
		return Judged{}, nodeErr("%s: %v", what, err)
	}
	if t == nil {
		return Judged{Settings: set}, nil
	}
	judged := set
	set.Reserved, set.ReservedCount = cpuset.CPUSet{}, 0
	st, err := alloc.NewState(t, set)
	if err != nil {
		return Judged{}, nodeErr("%s: %v", what, err)
	}
	return Judged{State: st, Free: t.Allowed().Size(), Settings: judged}, nil
}

// JudgeKoord builds the state of a node Koordinator describes (k) through
// the same plan document a corepin node's annotations make
// (JudgeTopology): k's machine under its engine and options with its
// reserved CPUs, holding k's held CPUs; its Empty state holds nothing but
// the reserved CPUs. topologyPolicy is the default topology policy its
// NodeResourceTopology gives; labels are its Node's Koordinator labels,
// applied as koord-scheduler applies them (KoordSettings):
//   - bind FullPCPUs (FullPCPUsOnly) is the kubelet option full-pcpus-only
//     (koord-scheduler takes the two for one) and, under corepin's engine,
//     every exclusive request's bind; SpreadByPCPUs is the option
//     distribute-cpus-across-cores (the kubelet engine's spread) and, under
//     corepin's engine, every exclusive request's bind, unless the
//     kubelet's full-pcpus-only is set, which koord-scheduler puts first.
//     Options the engine can not combine fail the node.
//   - a topology policy replaces topologyPolicy (koord-scheduler puts the
//     label first), except under the kubelet engine (static policy): the
//     kubelet still admits the pod by its own policy, so the stricter of
//     the two holds.
func JudgeKoord(k *Koord, topologyPolicy alloc.TopologyPolicy, labels KoordLabels) (Judged, error) {
	settings, by, err := KoordSettings(k, topologyPolicy, labels)
	if err != nil {
		return Judged{}, nodeErr("%v", err)
	}
	doc := plan.Document{Reserved: k.Reserved.String(), Policy: string(k.Settings.Policy), Options: settings.Options}
	empty, err := doc.PlaceOn(k.Topology)
	if err != nil {
		return Judged{}, nodeErr("NodeResourceTopology annotations %s, %s: %v", AnnotationKoordCPUTopology, AnnotationKoordKubeletPolicy, err)
	}
	doc.Assigned = make([]plan.Assigned, 0, len(k.Held))
	for _, a := range k.Held {
		doc.Assigned = append(doc.Assigned, plan.Assigned{ID: a.ID, CPUSet: a.CPUs.String(), QoS: string(a.QoS)})
	}
	p, err := doc.PlaceOn(k.Topology)
	if err != nil {
		return Judged{}, nodeErr("NodeResourceTopology annotations %s, %s: %v", AnnotationKoordPodCPUAllocs, AnnotationKoordCPUSharedPools, err)
	}
	return Judged{State: p.State, Free: p.State.Pools().LS.Size(), Empty: empty.State, Settings: settings,
		BindLabel: by.Bind, PolicyLabel: by.TopologyPolicy}, nil
}
