package sim

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/corepin/corepin/alloc"
)

// ErrBadConfig is wrapped by errors about a scenario, node choice or
// generator setting that can not work.
var ErrBadConfig = errors.New("invalid simulation config")

// Scenario is one node-level allocator setup: the engine every node runs,
// its kubelet options, and what the scheduler writes into each request.
type Scenario struct {
	Name    string
	Policy  alloc.Policy
	Options []string
	// NUMA, when set, replaces every request's NUMA strategy (Koordinator's
	// scheduler-wide NUMAAllocateStrategy).
	NUMA alloc.NUMAStrategy
	// Bind, when set, is the bind policy of requests that name none
	// (Koordinator's default cpu bind policy).
	Bind alloc.Bind
	// PerNode replays each node under its own settings (Node.Settings)
	// instead of Policy, Options, NUMA and Bind, which it leaves empty:
	// the as-deployed scenario.
	PerNode bool
}

// AsDeployed is the name of the scenario that replays each node under the
// settings it publishes (Node.Settings), a node without any under
// corepin's defaults. It is not among Scenarios: it means something only
// for a cluster whose nodes carry settings.
const AsDeployed = "as-deployed"

// configKey names what of s makes the allocator State: its engine and
// options (a run's nodes all keep Config.Reserved).
func configKey(s alloc.NodeSettings) string {
	return string(cmp.Or(s.Policy, alloc.PolicyCorepin)) + "\x00" + strings.Join(s.Options, "+")
}

// settingsKey names s among the settings of a cluster's nodes.
func settingsKey(s alloc.NodeSettings) string {
	return configKey(s) + "\x00" + string(cmp.Or(s.TopologyPolicy, alloc.TopologyNone)) + "\x00" + string(s.Bind) + "\x00" + string(s.NUMA)
}

// Named scenarios, in the order reports show them.
var namedScenarios = []Scenario{
	{Name: "kubelet-packed", Policy: alloc.PolicyKubelet},
	{Name: "kubelet-distributed", Policy: alloc.PolicyKubelet, Options: []string{alloc.OptDistributeAcrossNUMA}},
	{Name: "koord-most", Policy: alloc.PolicyCorepin, NUMA: alloc.MostAllocated, Bind: alloc.BindFullPCPUs},
	{Name: "koord-least", Policy: alloc.PolicyCorepin, NUMA: alloc.LeastAllocated, Bind: alloc.BindFullPCPUs},
	{Name: "corepin", Policy: alloc.PolicyCorepin},
}

// Scenarios returns the named scenarios: kubelet-packed (the kubelet static
// policy, no options), kubelet-distributed (with
// distribute-cpus-across-numa), koord-most and koord-least (Koordinator's
// NUMA strategies MostAllocated and LeastAllocated with bind FullPCPUs, on
// corepin's engine, which implements them) and corepin (corepin's own engine,
// requests as written).
func Scenarios() []Scenario {
	out := slices.Clone(namedScenarios)
	for i := range out {
		out[i].Options = slices.Clone(out[i].Options)
	}
	return out
}

// ScenarioNames lists the names ParseScenario knows.
func ScenarioNames() []string {
	var out []string
	for _, s := range namedScenarios {
		out = append(out, s.Name)
	}
	return out
}

// ParseScenario returns a named scenario, AsDeployed, or builds one from
// "kubelet:OPT+OPT" or "corepin:OPT+OPT" (an engine with kubelet option
// names, e.g. "kubelet:full-pcpus-only+align-by-socket").
func ParseScenario(name string) (Scenario, error) {
	if name == AsDeployed {
		return Scenario{Name: AsDeployed, PerNode: true}, nil
	}
	for _, s := range Scenarios() {
		if s.Name == name {
			return s, nil
		}
	}
	engine, opts, ok := strings.Cut(name, ":")
	if ok && (engine == string(alloc.PolicyKubelet) || engine == string(alloc.PolicyCorepin)) {
		s := Scenario{Name: name, Policy: alloc.Policy(engine)}
		if opts != "" {
			s.Options = strings.Split(opts, "+")
		}
		return s, nil
	}
	return Scenario{}, fmt.Errorf("%w: unknown scenario %q (known: %s, %s, or kubelet:OPTION+OPTION, corepin:OPTION+OPTION)",
		ErrBadConfig, name, strings.Join(ScenarioNames(), ", "), AsDeployed)
}

// apply returns r as this scenario's nodes see it: under the nodes'
// settings (alloc.NodeSettings.Apply: the kubelet engine drops bind,
// exclusive and NUMA strategy; a topology policy the request does not
// name is the nodes' one), then with the scenario's NUMA strategy and
// default bind. A named kubelet scenario models the stock kubelet, where
// a pod's bind, exclusive and NUMA strategy mean nothing, so they are
// dropped; the as-deployed scenario models corepin's nodes and refuses
// them on a kubelet-engine node, as the node does (cluster.admit).
func (s Scenario) apply(r alloc.Request, nodePolicy alloc.TopologyPolicy) alloc.Request {
	r = alloc.NodeSettings{Policy: s.Policy, TopologyPolicy: nodePolicy}.Apply(r)
	if s.Policy == alloc.PolicyKubelet {
		return r
	}
	if s.NUMA != "" {
		r.NUMA = s.NUMA
	}
	if s.Bind != "" && (r.Bind == "" || r.Bind == alloc.BindDefault) {
		r.Bind = s.Bind
	}
	return r
}

// NodeChoice is how the cluster scheduler picks a node for a request.
type NodeChoice string

// Node choices.
const (
	// FirstFit takes the first node, in order, whose uncommitted CPUs cover
	// the request, as kube-scheduler's resource fit does: it counts CPUs, not
	// where they are. The node's allocator then admits or rejects (kubelet's
	// TopologyAffinityError), and a rejected job is not retried elsewhere.
	FirstFit NodeChoice = "first-fit"
	// BestFit ranks nodes by free aligned capacity: nodes whose free CPUs
	// hold the request inside one L3 group first, then inside one NUMA node,
	// then anywhere; within a rank the tightest fit (fewest free CPUs in the
	// unit that holds it, then on the node). It tries nodes in that order
	// until one admits, as a central scheduler that sees each node's topology
	// does. BE work goes to the node with the most free CPUs.
	BestFit NodeChoice = "best-fit"
)

// ParseNodeChoice reads "first-fit", "best-fit" or "both".
func ParseNodeChoice(s string) ([]NodeChoice, error) {
	switch s {
	case string(FirstFit):
		return []NodeChoice{FirstFit}, nil
	case string(BestFit):
		return []NodeChoice{BestFit}, nil
	case "both":
		return []NodeChoice{FirstFit, BestFit}, nil
	}
	return nil, fmt.Errorf("%w: unknown node choice %q (want first-fit, best-fit or both)", ErrBadConfig, s)
}

// Run is one replay: a scenario with a node choice.
type Run struct {
	Scenario   Scenario
	NodeChoice NodeChoice
}

// Runs crosses scenarios with node choices, scenario-major.
func Runs(scenarios []Scenario, choices []NodeChoice) []Run {
	var out []Run
	for _, s := range scenarios {
		for _, c := range choices {
			out = append(out, Run{Scenario: s, NodeChoice: c})
		}
	}
	return out
}
