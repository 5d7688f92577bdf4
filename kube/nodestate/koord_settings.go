package nodestate

import (
	"fmt"
	"slices"

	"github.com/corepin/corepin/alloc"
)

// KoordDecided are the values of Koordinator's node labels that decided
// a node's bind policy and topology policy (KoordSettings), "" when none
// did: for the reasons of the refusals they cause.
type KoordDecided struct {
	Bind, TopologyPolicy string
}

// KoordSettings are the settings of a node koordlet describes (k, with
// default topology policy topologyPolicy) under its Node's Koordinator
// labels, as koord-scheduler applies them, and the labels that decided
// them (by): FullPCPUsOnly is also the
// option full-pcpus-only and every exclusive request's bind;
// SpreadByPCPUs, unless full-pcpus-only is set, the option
// distribute-cpus-across-cores and that bind; the NUMA strategy is every
// exclusive request's; the kubelet engine takes neither bind nor
// strategy (its options place); the label's topology policy replaces the
// object's, under the kubelet engine only when stricter (the kubelet
// still admits by its own). Options the kubelet's and the label's
// together make invalid are an error.
func KoordSettings(k *Koord, topologyPolicy alloc.TopologyPolicy, labels KoordLabels) (set alloc.NodeSettings, by KoordDecided, err error) {
	set = alloc.NodeSettings{Policy: k.Settings.Policy, Options: k.Settings.Options, NUMA: labels.NUMA, TopologyPolicy: topologyPolicy}
	switch hasFull := slices.Contains(set.Options, alloc.OptFullPCPUsOnly); {
	case labels.Bind == alloc.BindFullPCPUs:
		set.Bind, by.Bind = labels.Bind, "FullPCPUsOnly"
		if !hasFull {
			set.Options = withOption(set.Options, alloc.OptFullPCPUsOnly)
		}
	case labels.Bind == alloc.BindSpreadByPCPUs && !hasFull:
		set.Bind, by.Bind = labels.Bind, "SpreadByPCPUs"
		if !slices.Contains(set.Options, alloc.OptDistributeAcrossCores) {
			set.Options = withOption(set.Options, alloc.OptDistributeAcrossCores)
		}
	}
	if by.Bind != "" {
		if err := alloc.CheckOptions(set.Options); err != nil {
			return alloc.NodeSettings{}, KoordDecided{}, fmt.Errorf("label %s %s with the kubelet's options %v: %w", LabelKoordCPUBindPolicy, by.Bind, k.Settings.Options, err)
		}
	}
	kubelet := set.Policy == alloc.PolicyKubelet
	if kubelet {
		set.Bind, set.NUMA = "", ""
	}
	if l := labels.TopologyPolicy; l != "" && (!kubelet || strictness(l) > strictness(set.TopologyPolicy)) {
		set.TopologyPolicy, by.TopologyPolicy = l, koordPolicyName(l)
	}
	return set, by, nil
}

// withOption is opts and name, sorted, in a new slice.
func withOption(opts []string, name string) []string {
	out := append(slices.Clone(opts), name)
	slices.Sort(out)
	return out
}

// strictness orders topology policies by the alignment they demand: none
// (or "") none, best-effort prefers it, restricted refuses what
// best-effort would place unaligned, single-numa-node all that spans two
// NUMA nodes.
func strictness(p alloc.TopologyPolicy) int {
	switch p {
	case alloc.TopologyBestEffort:
		return 1
	case alloc.TopologyRestricted:
		return 2
	case alloc.TopologySingleNUMANode:
		return 3
	}
	return 0
}

// koordPolicyName is Koordinator's name of topology policy p.
func koordPolicyName(p alloc.TopologyPolicy) string {
	switch p {
	case alloc.TopologyBestEffort:
		return "BestEffort"
	case alloc.TopologyRestricted:
		return "Restricted"
	case alloc.TopologySingleNUMANode:
		return "SingleNUMANode"
	}
	return "None"
}
