package nodestate

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/corepin/corepin/alloc"
)

// Labels an operator sets on a Koordinator node's Node object (not on its
// NodeResourceTopology) to change how koord-scheduler places CPUs there
// (apis/extension/numa_aware.go of github.com/koordinator-sh/koordinator;
// koord-scheduler resolves them in its NodeNUMAResource plugin).
// ParseKoordLabels reads them.
const (
	// LabelKoordCPUBindPolicy is the bind policy every CPU-bound pod on the
	// node must take: None (or empty: no constraint), FullPCPUsOnly (whole
	// physical cores, as the kubelet's full-pcpus-only) or SpreadByPCPUs
	// (one logical CPU per physical core first).
	LabelKoordCPUBindPolicy = "node.koordinator.sh/cpu-bind-policy"
	// LabelKoordNUMATopologyPolicy is the node's NUMA topology policy:
	// None, BestEffort, Restricted or SingleNUMANode. Set and not empty, it
	// replaces the kubelet's policy koordlet reports in topologyPolicies
	// for koord-scheduler.
	LabelKoordNUMATopologyPolicy = "node.koordinator.sh/numa-topology-policy"
	// LabelKoordNUMAAllocateStrategy is how koord-scheduler picks among
	// the NUMA nodes that could take a pod's CPUs on the node:
	// MostAllocated (the fullest that fits, its default), LeastAllocated
	// (the emptiest) or DistributeEvenly (split evenly).
	LabelKoordNUMAAllocateStrategy = "node.koordinator.sh/numa-allocate-strategy"
)

// KoordNUMAAllocateStrategies are the values of
// LabelKoordNUMAAllocateStrategy (an empty value is no label).
var KoordNUMAAllocateStrategies = []string{"MostAllocated", "LeastAllocated", "DistributeEvenly"}

// KoordCPUBindPolicies are the values of LabelKoordCPUBindPolicy
// koord-scheduler knows (an empty value is None).
var KoordCPUBindPolicies = []string{"None", "FullPCPUsOnly", "SpreadByPCPUs"}

// KoordNUMATopologyPolicies are the values of LabelKoordNUMATopologyPolicy
// (an empty value is no label).
var KoordNUMATopologyPolicies = []string{"None", "BestEffort", "Restricted", "SingleNUMANode"}

// ErrKoordLabel is wrapped by errors about Koordinator's node labels.
var ErrKoordLabel = errors.New("invalid Koordinator node label")

// KoordLabels is what a node's Koordinator labels ask, in corepin's
// vocabulary.
type KoordLabels struct {
	// Bind is the bind policy every exclusive request on the node takes:
	// alloc.BindFullPCPUs (FullPCPUsOnly), alloc.BindSpreadByPCPUs
	// (SpreadByPCPUs), or "" (no label, empty or None).
	Bind alloc.Bind
	// TopologyPolicy is the node's topology policy the label names, or ""
	// when the label is absent or empty (the kubelet's applies). None is
	// alloc.TopologyNone: it is set, and replaces the kubelet's.
	TopologyPolicy alloc.TopologyPolicy
	// NUMA is the NUMA strategy every exclusive request on the node
	// takes (LabelKoordNUMAAllocateStrategy), "" when the label is absent
	// or empty (koord-scheduler's default, MostAllocated, as corepin's).
	NUMA alloc.NUMAStrategy
}

// ParseKoordLabels reads the values of LabelKoordCPUBindPolicy (bind),
// LabelKoordNUMATopologyPolicy (numa) and LabelKoordNUMAAllocateStrategy
// (strategy), "" for an absent label, spelled exactly as Koordinator
// spells them. An unknown value is an error
// wrapping ErrKoordLabel that names the label and the values allowed
// (koord-scheduler would silently take an unknown bind policy for None).
func ParseKoordLabels(bind, numa, strategy string) (KoordLabels, error) {
	var l KoordLabels
	switch bind {
	case "", "None":
	case "FullPCPUsOnly":
		l.Bind = alloc.BindFullPCPUs
	case "SpreadByPCPUs":
		l.Bind = alloc.BindSpreadByPCPUs
	default:
		return KoordLabels{}, fmt.Errorf("%w: %s %q: want %s or empty", ErrKoordLabel, LabelKoordCPUBindPolicy, short(bind), strings.Join(KoordCPUBindPolicies, ", "))
	}
	if numa != "" {
		tp, ok := topologyPolicyNamed(numa)
		if !ok {
			return KoordLabels{}, fmt.Errorf("%w: %s %q: want %s or empty", ErrKoordLabel, LabelKoordNUMATopologyPolicy, short(numa), strings.Join(KoordNUMATopologyPolicies, ", "))
		}
		l.TopologyPolicy = tp
	}
	if strategy != "" {
		if !slices.Contains(KoordNUMAAllocateStrategies, strategy) {
			return KoordLabels{}, fmt.Errorf("%w: %s %q: want %s or empty", ErrKoordLabel, LabelKoordNUMAAllocateStrategy, short(strategy), strings.Join(KoordNUMAAllocateStrategies, ", "))
		}
		l.NUMA = alloc.NUMAStrategy(strategy) // Koordinator's names are alloc's
	}
	return l, nil
}
