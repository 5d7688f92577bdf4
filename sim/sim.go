package sim

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/topology"
)

// Bounds on what one replay may ask for, so that a typo (--nodes 1e9)
// fails at once with the cap in the message instead of exhausting memory.
// A node costs a few kilobytes per run (its allocator state and view), an
// event about a hundred bytes.
const (
	// MaxNodes is the most nodes a cluster may have.
	MaxNodes = 10_000
	// MaxJobs is the most jobs a generated trace may have.
	MaxJobs = 1_000_000
	// MaxEvents is the most events a trace may have (an arrive and a
	// depart per job).
	MaxEvents = 2 * MaxJobs
)

// Config is the cluster a trace is replayed on: Nodes copies of Topology,
// or the nodes of Cluster.
type Config struct {
	// Topology is every node's machine.
	Topology *topology.Topology
	// Nodes is the number of nodes (at least 1).
	Nodes int
	// Cluster is the nodes of a cluster of unlike machines, some CPUs
	// already held, in the order nodes are tried; when given, Topology and
	// Nodes are not (ErrBadConfig otherwise).
	Cluster []Node
	// Reserved are the CPUs each node keeps for the system.
	Reserved cpuset.CPUSet
	// TopologyPolicy is the nodes' Topology Manager policy, given to requests
	// that name none; empty means none.
	TopologyPolicy alloc.TopologyPolicy
	// SampleEvery takes a fragmentation sample after every SampleEvery
	// events (and after the last); 0 means about 200 samples.
	SampleEvery int
	// Parallel is how many runs replay at once; 0 or 1 means one at a time.
	// Runs never share state, so the results do not depend on it, only the
	// timings do.
	Parallel int
}

// Capacity is how many CPUs the cluster of c can hand out: each node's
// allowed CPUs less c.Reserved (a generated trace is sized to it).
func (c Config) Capacity() int {
	if len(c.Cluster) > 0 {
		n := 0
		for _, node := range c.Cluster {
			n += node.Topology.Allowed().Difference(c.Reserved).Size()
		}
		return n
	}
	if c.Topology == nil {
		return 0
	}
	return c.Nodes * c.Topology.Allowed().Difference(c.Reserved).Size()
}

// Node is one node of Config.Cluster.
type Node struct {
	Name     string
	Topology *topology.Topology
	// Held are the workloads on the node before the trace starts (an
	// exclusive set, an LS quota); they hold their CPUs throughout.
	Held []alloc.Assignment
	// Settings are the allocator settings the node publishes, nil when it
	// publishes none. Only a PerNode scenario (AsDeployed) reads them; it
	// replays a node without them under corepin's engine, no options and
	// Config.TopologyPolicy. Their Reserved and ReservedCount are not
	// read: every node keeps Config.Reserved.
	Settings *alloc.NodeSettings
}

// settingsOf is the allocator settings node n runs under in run, with
// the reserved CPUs cfg.Reserved: the scenario's engine and options, or
// under a PerNode scenario the node's own (published reports whether the
// node published them).
func (cfg Config) settingsOf(run Run, n Node) (set alloc.NodeSettings, published bool) {
	s := run.Scenario
	switch {
	case !s.PerNode:
		set = alloc.NodeSettings{Policy: s.Policy, Options: s.Options}
	case n.Settings == nil:
		set = alloc.NodeSettings{Policy: alloc.PolicyCorepin, TopologyPolicy: cfg.TopologyPolicy}
	default:
		set, published = *n.Settings, true
		set.Policy = cmp.Or(set.Policy, alloc.PolicyCorepin)
	}
	set.Reserved, set.ReservedCount = cfg.Reserved, 0
	return set, published
}

// Report is the outcome of replaying one trace under several runs.
type Report struct {
	Nodes int `json:"nodes"`
	// Topology is the nodes' machine, or for a Cluster of unlike machines
	// each machine with its count ("2 x A; 1 x B").
	Topology string `json:"topology"`
	// NodeCPUs is the schedulable CPUs per node (0 when nodes differ);
	// CPUs is all nodes' together, before any CPUs held at the start.
	NodeCPUs int `json:"node_cpus"`
	CPUs     int `json:"cpus"`
	// HeldCPUs are the CPUs held exclusively before the trace starts (a
	// Cluster's Held), over all nodes.
	HeldCPUs       int    `json:"held_cpus"`
	TopologyPolicy string `json:"topology_policy"`
	Jobs           int    `json:"jobs"`
	Events         int    `json:"events"`
	// SpanSeconds is the trace's own time from first to last event.
	SpanSeconds float64  `json:"span_seconds"`
	SampleEvery int      `json:"sample_every"`
	Results     []Result `json:"scenarios"`
	// WallSeconds is the wall time of all runs together.
	WallSeconds float64 `json:"wall_seconds"`
}

// Result is what one run did. Policy and Options are the scenario's engine
// and kubelet options; under AsDeployed, the engine the nodes share (else
// "mixed") and the options every node has.
type Result struct {
	Scenario   string       `json:"scenario"`
	NodeChoice NodeChoice   `json:"node_choice"`
	Policy     alloc.Policy `json:"policy"`
	Options    []string     `json:"options"`
	NUMA       string       `json:"numa,omitempty"`
	Bind       string       `json:"bind,omitempty"`
	Admitted   int          `json:"admitted"`
	Rejected   int          `json:"rejected"`
	// Avoidable counts rejections some other node could have admitted at
	// that moment (checked only under first fit; best fit tries every node
	// that fits before it rejects, so none of its rejections is avoidable).
	Avoidable int `json:"avoidable_rejections"`
	// RejectedBy counts rejections by the rule that refused them: "capacity"
	// when no node had the CPUs, else the node allocator's constraint.
	RejectedBy    map[string]int `json:"rejected_by"`
	Alignment     Alignment      `json:"alignment"`
	Fragmentation Fragmentation  `json:"fragmentation"`
	Timing        Timing         `json:"timing"`
	// NodeSettings are, under AsDeployed only, the distinct settings the
	// nodes ran under, each with how many nodes, in the order nodes are
	// tried.
	NodeSettings []NodeSettingsCount `json:"node_settings,omitempty"`
}

// NodeSettingsCount is one allocator setup of an AsDeployed run and how
// many nodes ran under it. Published is false for the nodes that publish
// no settings, replayed under corepin's defaults.
type NodeSettingsCount struct {
	SettingsDoc
	Published bool `json:"published"`
	Nodes     int  `json:"nodes"`
}

// SettingsDoc is a node's alloc.NodeSettings as reports show them
// (SettingsDocOf): every field but the reserved CPUs, which are the
// run's (Config.Reserved).
type SettingsDoc struct {
	Policy         alloc.Policy         `json:"policy"`
	Options        []string             `json:"options"`
	TopologyPolicy alloc.TopologyPolicy `json:"topology_policy"`
	Bind           alloc.Bind           `json:"bind,omitempty"`
	NUMA           alloc.NUMAStrategy   `json:"numa,omitempty"`
}

// SettingsDocOf is s as reports show it: its engine (corepin when empty),
// its options (an empty list for none), its topology policy (none when
// empty), its bind and NUMA strategy.
func SettingsDocOf(s alloc.NodeSettings) SettingsDoc {
	return SettingsDoc{Policy: cmp.Or(s.Policy, alloc.PolicyCorepin), Options: append([]string{}, s.Options...),
		TopologyPolicy: cmp.Or(s.TopologyPolicy, alloc.TopologyNone), Bind: s.Bind, NUMA: s.NUMA}
}

// Alignment summarises the exclusive (LSE, LSR) placements: how many NUMA
// nodes, L3 groups and sockets each spans and how many of its cores it
// shares with another workload or the reserved CPUs.
type Alignment struct {
	Placements  int  `json:"placements"`
	NUMANodes   Stat `json:"numa_nodes"`
	L3Groups    Stat `json:"l3_groups"`
	Sockets     Stat `json:"sockets"`
	SharedCores Stat `json:"shared_cores"`
}

// Stat is the mean, 99th percentile (nearest rank) and maximum of a count.
type Stat struct {
	Mean float64 `json:"mean"`
	P99  int     `json:"p99"`
	Max  int     `json:"max"`
}

// Fragmentation is the free whole units over time, summed over the nodes.
type Fragmentation struct {
	Mean   Sample   `json:"mean"`
	Series []Sample `json:"series"`
}

// Sample is the cluster after an event: free whole cores, L3 groups and NUMA
// nodes (all CPUs free for an exclusive placement), CPUs held by exclusive
// sets, LS quota committed, and jobs running.
type Sample struct {
	Event         int     `json:"event"`
	T             float64 `json:"t"`
	FreeCores     float64 `json:"free_cores"`
	FreeL3Groups  float64 `json:"free_l3_groups"`
	FreeNUMANodes float64 `json:"free_numa_nodes"`
	ExclusiveCPUs float64 `json:"exclusive_cpus"`
	LSCPUs        float64 `json:"ls_cpus"`
	Running       float64 `json:"running"`
}

// Timing is the wall clock of a run. DecideSeconds is the time spent
// choosing a node and allocating on it for each arrival (not releases,
// the avoidable-rejection probes or sampling); DecisionsPerSecond is
// arrivals over it.
type Timing struct {
	WallSeconds        float64 `json:"wall_seconds"`
	DecideSeconds      float64 `json:"decide_seconds"`
	DecisionsPerSecond float64 `json:"decisions_per_second"`
}

// Replay replays evs on cfg's cluster once per run. The trace is checked with
// Validate first. Results come in the order of runs and, timings aside, are
// the same for the same input. A request no node could ever take as written
// (alloc.ErrInvalid, e.g. a kubelet option pair it refuses) fails the replay
// with the event's line.
func Replay(evs []Event, cfg Config, runs []Run) (Report, error) {
	nodes, err := cfg.nodes()
	if err != nil {
		return Report{}, err
	}
	if len(evs) > MaxEvents {
		return Report{}, fmt.Errorf("%w: %d events (want at most %d)", ErrBadConfig, len(evs), MaxEvents)
	}
	if len(runs) == 0 {
		return Report{}, fmt.Errorf("%w: no scenarios to run", ErrBadConfig)
	}
	if err := Validate(evs); err != nil {
		return Report{}, err
	}
	if cfg.SampleEvery <= 0 {
		cfg.SampleEvery = max(1, (len(evs)+199)/200)
	}
	for _, r := range runs {
		if r.NodeChoice != FirstFit && r.NodeChoice != BestFit {
			return Report{}, fmt.Errorf("%w: unknown node choice %q", ErrBadConfig, r.NodeChoice)
		}
	}
	// One shape per distinct machine; unlike nodes are validated per run
	// (newCluster), where their held CPUs are assigned.
	shapes := map[*topology.Topology]*shape{}
	var order []*topology.Topology
	count := map[*topology.Topology]int{}
	rep := Report{Nodes: len(nodes), TopologyPolicy: string(cfg.TopologyPolicy),
		Events: len(evs), SampleEvery: cfg.SampleEvery, Results: make([]Result, len(runs))}
	checked := map[machineSettings]bool{}
	for _, n := range nodes {
		for _, r := range runs {
			set, _ := cfg.settingsOf(r, n)
			k := machineSettings{n.Topology, configKey(set)}
			if checked[k] {
				continue
			}
			checked[k] = true
			if _, err := alloc.NewState(n.Topology, set); err != nil {
				return Report{}, fmt.Errorf("%w: node %s: scenario %s: %w", ErrBadConfig, n.Name, r.Scenario.Name, err)
			}
		}
		if _, ok := shapes[n.Topology]; !ok {
			shapes[n.Topology] = newShape(n.Topology, cfg.Reserved)
			order = append(order, n.Topology)
		}
		count[n.Topology]++
		rep.CPUs += shapes[n.Topology].fresh.free
	}
	if len(order) == 1 {
		rep.Topology, rep.NodeCPUs = order[0].Summary(), shapes[order[0]].fresh.free
	} else {
		var parts []string
		for _, t := range order {
			parts = append(parts, fmt.Sprintf("%d x %s", count[t], t.Summary()))
		}
		rep.Topology = strings.Join(parts, "; ")
	}
	if rep.TopologyPolicy == "" {
		rep.TopologyPolicy = string(alloc.TopologyNone)
	}
	for _, ev := range evs {
		if ev.Op == Arrive {
			rep.Jobs++
		}
	}
	if len(evs) > 0 {
		rep.SpanSeconds = evs[len(evs)-1].T - evs[0].T
	}
	start := time.Now()
	errs := make([]error, len(runs))
	par := max(1, cfg.Parallel)
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(par, len(runs)) {
		wg.Go(func() {
			for i := range next {
				c, err := newCluster(cfg, nodes, shapes, runs[i])
				if err == nil {
					rep.Results[i], err = c.replay(evs)
				}
				errs[i] = err
			}
		})
	}
	for i := range runs {
		next <- i
	}
	close(next)
	wg.Wait()
	rep.WallSeconds = time.Since(start).Seconds()
	if err := errors.Join(errs...); err != nil {
		return Report{}, err
	}
	for _, n := range nodes {
		for _, a := range n.Held {
			if a.QoS == alloc.LSE || a.QoS == alloc.LSR || a.QoS == "" {
				rep.HeldCPUs += a.CPUs.Size()
			}
		}
	}
	return rep, nil
}

// nodes returns the cluster's nodes: cfg.Cluster, or cfg.Nodes copies of
// cfg.Topology sharing it.
func (cfg Config) nodes() ([]Node, error) {
	if len(cfg.Cluster) > 0 {
		if cfg.Topology != nil || cfg.Nodes != 0 {
			return nil, fmt.Errorf("%w: give either a cluster's nodes or a topology and a node count, not both", ErrBadConfig)
		}
		if len(cfg.Cluster) > MaxNodes {
			return nil, fmt.Errorf("%w: %d nodes (want 1 to %d)", ErrBadConfig, len(cfg.Cluster), MaxNodes)
		}
		for i, n := range cfg.Cluster {
			if n.Topology == nil {
				return nil, fmt.Errorf("%w: node %d (%s) has no topology", ErrBadConfig, i, n.Name)
			}
		}
		return cfg.Cluster, nil
	}
	if cfg.Topology == nil {
		return nil, fmt.Errorf("%w: no topology", ErrBadConfig)
	}
	if cfg.Nodes < 1 || cfg.Nodes > MaxNodes {
		return nil, fmt.Errorf("%w: %d nodes (want 1 to %d)", ErrBadConfig, cfg.Nodes, MaxNodes)
	}
	nodes := make([]Node, cfg.Nodes)
	for i := range nodes {
		nodes[i] = Node{Name: fmt.Sprintf("node-%d", i), Topology: cfg.Topology}
	}
	return nodes, nil
}

// machineSettings keys an allocator State: one machine under one
// engine and options (configKey).
type machineSettings struct {
	topo *topology.Topology
	set  string
}

// cluster is one run's nodes and the jobs placed on them.
type cluster struct {
	cfg    Config
	shapes []*shape // by node
	run    Run
	states []*alloc.State
	views  []view
	where  map[string]placed
	whole  bool // every exclusive request takes whole cores (full-pcpus-only)
	scores []score
	// sets are, under a PerNode scenario, each node's settings (nil
	// otherwise), wholeAt whether each node takes whole cores for every
	// exclusive request, and counts the distinct settings.
	sets    []alloc.NodeSettings
	wholeAt []bool
	counts  []NodeSettingsCount
}

type placed struct {
	node  int
	qos   alloc.QoS
	cpus  cpuset.CPUSet
	milli int
}

func newCluster(cfg Config, nodes []Node, shapes map[*topology.Topology]*shape, run Run) (*cluster, error) {
	c := &cluster{cfg: cfg, where: map[string]placed{}, run: run,
		whole: slices.Contains(run.Scenario.Options, alloc.OptFullPCPUsOnly)}
	// One State built per machine and settings, the rest cloned: clones
	// share its topology index.
	empty := map[machineSettings]*alloc.State{}
	counted := map[string]int{}
	for _, n := range nodes {
		sh := shapes[n.Topology]
		set, published := cfg.settingsOf(run, n)
		if run.Scenario.PerNode {
			c.sets = append(c.sets, set)
			c.wholeAt = append(c.wholeAt, slices.Contains(set.Options, alloc.OptFullPCPUsOnly))
			k := fmt.Sprint(published, "\x00", settingsKey(set))
			if i, ok := counted[k]; ok {
				c.counts[i].Nodes++
			} else {
				counted[k] = len(c.counts)
				c.counts = append(c.counts, NodeSettingsCount{SettingsDoc: SettingsDocOf(set), Published: published, Nodes: 1})
			}
		}
		key := machineSettings{n.Topology, configKey(set)}
		st, ok := empty[key]
		if !ok {
			var err error
			st, err = alloc.NewState(n.Topology, set)
			if err != nil {
				return nil, fmt.Errorf("%w: node %s: scenario %s: %w", ErrBadConfig, n.Name, run.Scenario.Name, err)
			}
			empty[key] = st
		}
		st = st.Clone()
		v := sh.fresh.clone()
		for _, a := range n.Held {
			if err := st.Assign(a); err != nil {
				return nil, fmt.Errorf("%w: node %s: scenario %s: held %s: %w", ErrBadConfig, n.Name, run.Scenario.Name, a.ID, err)
			}
			switch a.QoS {
			case alloc.LSE, alloc.LSR, "":
				v.change(sh, a.CPUs, -1)
			case alloc.LS:
				v.lsMilli += a.MilliCPUs
			}
		}
		c.states = append(c.states, st)
		c.views = append(c.views, v)
		c.shapes = append(c.shapes, sh)
	}
	return c, nil
}

// replay runs the trace and measures it.
func (c *cluster) replay(evs []Event) (Result, error) {
	s := c.run.Scenario
	res := Result{Scenario: s.Name, NodeChoice: c.run.NodeChoice, Policy: s.Policy, Options: slices.Clone(s.Options),
		NUMA: string(s.NUMA), Bind: string(s.Bind), RejectedBy: map[string]int{}}
	if res.Options == nil {
		res.Options = []string{}
	}
	if s.PerNode {
		res.Policy, res.Options, res.NodeSettings = c.common()
	}
	if res.Policy == "" {
		res.Policy = alloc.PolicyCorepin
	}
	var numa, l3, sockets, shared []int
	var decide time.Duration
	arrivals := 0
	start := time.Now()
	for i, ev := range evs {
		switch ev.Op {
		case Arrive:
			arrivals++
			// Under a PerNode scenario each node applies its own
			// settings when it is tried (at).
			r := ev.Request
			if !s.PerNode {
				r = s.apply(r, c.cfg.TopologyPolicy)
			}
			t0 := time.Now()
			node, p, err := c.decide(&r)
			decide += time.Since(t0)
			var rej alloc.Rejection
			switch {
			case err == nil:
				res.Admitted++
				c.hold(node, &r, p)
				if r.QoS == alloc.LSE || r.QoS == alloc.LSR {
					numa = append(numa, p.Quality.NUMANodes)
					l3 = append(l3, p.Quality.L3Groups)
					sockets = append(sockets, p.Quality.Sockets)
					shared = append(shared, p.Quality.SharedCores)
				}
			case errors.As(err, &rej):
				res.Rejected++
				res.RejectedBy[rej.Constraint]++
				if node >= 0 && c.run.NodeChoice == FirstFit {
					ok, err := c.admittedElsewhere(&r, node)
					if err != nil {
						return Result{}, eventError(ev, i, err)
					}
					if ok {
						res.Avoidable++
					}
				}
			default:
				return Result{}, eventError(ev, i, fmt.Errorf("scenario %s: %w", s.Name, err))
			}
		case Depart:
			if err := c.release(ev.ID); err != nil {
				return Result{}, eventError(ev, i, fmt.Errorf("scenario %s: releasing: %w", s.Name, err))
			}
		}
		if (i+1)%c.cfg.SampleEvery == 0 || i == len(evs)-1 {
			res.Fragmentation.Series = append(res.Fragmentation.Series, c.sample(i+1, ev.T))
		}
	}
	wall := time.Since(start)
	res.Alignment = Alignment{Placements: len(numa), NUMANodes: stat(numa), L3Groups: stat(l3), Sockets: stat(sockets), SharedCores: stat(shared)}
	res.Fragmentation.Mean = meanSample(res.Fragmentation.Series)
	if res.Fragmentation.Series == nil {
		res.Fragmentation.Series = []Sample{}
	}
	res.Timing = Timing{WallSeconds: wall.Seconds(), DecideSeconds: decide.Seconds()}
	if decide > 0 {
		res.Timing.DecisionsPerSecond = float64(arrivals) / decide.Seconds()
	}
	return res, nil
}

func eventError(ev Event, i int, err error) error {
	return fmt.Errorf("%s of %q: %w", ev.Op, ev.ID, &LineError{Line: ev.Line, Index: i, Reason: err.Error()})
}

// decide picks a node and allocates there. It returns the node tried (-1 if
// none fit) and the allocation's result; a rejection is an alloc.Rejection.
func (c *cluster) decide(r *alloc.Request) (int, alloc.Placement, error) {
	if c.run.NodeChoice == FirstFit {
		for n := range c.views {
			if c.views[n].fits(r) {
				p, err := c.admit(n, r)
				return n, p, err
			}
		}
		return -1, alloc.Placement{}, c.noCapacity(r)
	}
	c.scores = c.scores[:0]
	best := -1
	for n := range c.views {
		if !c.views[n].fits(r) {
			continue
		}
		sc := c.views[n].score(r, c.wholeOn(n, r), n)
		c.scores = append(c.scores, sc)
		if best < 0 || sc.compare(c.scores[best]) < 0 {
			best = len(c.scores) - 1
		}
		if sc.perfect(r) {
			break // no later node can rank higher; the rest are scored if this one refuses
		}
	}
	if best < 0 {
		return -1, alloc.Placement{}, c.noCapacity(r)
	}
	first := c.scores[best]
	p, err := c.admit(first.node, r)
	if !errors.Is(err, alloc.ErrRejected) {
		return first.node, p, err
	}
	// The best node refused: try the others in rank order.
	for n := c.scores[len(c.scores)-1].node + 1; n < len(c.views); n++ {
		if c.views[n].fits(r) {
			c.scores = append(c.scores, c.views[n].score(r, c.wholeOn(n, r), n))
		}
	}
	slices.SortFunc(c.scores, score.compare)
	firstErr := err
	for _, sc := range c.scores[1:] {
		p, err := c.admit(sc.node, r)
		if !errors.Is(err, alloc.ErrRejected) {
			return sc.node, p, err
		}
	}
	return first.node, alloc.Placement{}, firstErr
}

// admit places r on node n as the node admits it: under a PerNode
// scenario with the node's settings put on it by alloc.NodeSettings.On,
// the rule the node's own admission and the scheduler answer by (the
// kubelet engine refuses a bind, exclusive or NUMA strategy, counted as
// a rejection whose constraint is alloc.ErrNoStrategy's text), else as
// the scenario made it.
func (c *cluster) admit(n int, r *alloc.Request) (alloc.Placement, error) {
	req := *r
	if c.sets != nil {
		var err error
		if req, err = c.sets[n].On(req); errors.Is(err, alloc.ErrNoStrategy) {
			return alloc.Placement{}, alloc.Rejection{Constraint: alloc.ErrNoStrategy.Error(), Reason: "the node runs the kubelet engine"}
		} else if err != nil {
			return alloc.Placement{}, err
		}
	}
	return c.states[n].Admit(req)
}

// wholeOn reports whether r takes whole cores on node n: the node's
// full-pcpus-only, or bind FullPCPUs as the node sees r.
func (c *cluster) wholeOn(n int, r *alloc.Request) bool {
	if c.sets == nil {
		return c.whole || r.Bind == alloc.BindFullPCPUs
	}
	return c.wholeAt[n] || c.sets[n].Apply(*r).Bind == alloc.BindFullPCPUs
}

// common is what a PerNode run's result says of its engine and options:
// the nodes' engine when they share one, else "mixed"; the options every
// node has; and the distinct settings with their node counts.
func (c *cluster) common() (alloc.Policy, []string, []NodeSettingsCount) {
	policy := c.sets[0].Policy
	opts := slices.Clone(c.sets[0].Options)
	for _, set := range c.sets[1:] {
		if set.Policy != policy {
			policy = "mixed"
		}
		opts = slices.DeleteFunc(opts, func(o string) bool { return !slices.Contains(set.Options, o) })
	}
	counts := make([]NodeSettingsCount, len(c.counts))
	copy(counts, c.counts)
	return policy, append([]string{}, opts...), counts
}

func (c *cluster) noCapacity(r *alloc.Request) error {
	need := float64(r.CPUs)
	if r.QoS == alloc.LS || r.QoS == alloc.BE {
		need = float64(r.MilliCPUs) / 1000
	}
	return alloc.Rejection{Constraint: "capacity", Reason: fmt.Sprintf("no node has %v uncommitted CPUs", need)}
}

// admittedElsewhere reports whether a node other than skip would have
// admitted r: it allocates and at once releases, which leaves each State as
// it was.
func (c *cluster) admittedElsewhere(r *alloc.Request, skip int) (bool, error) {
	for n := range c.views {
		if n == skip || !c.views[n].fits(r) {
			continue
		}
		_, err := c.admit(n, r)
		if errors.Is(err, alloc.ErrRejected) {
			continue
		}
		if err != nil {
			return false, err
		}
		return true, c.states[n].Release(r.ID)
	}
	return false, nil
}

func (c *cluster) hold(node int, r *alloc.Request, p alloc.Placement) {
	pl := placed{node: node, qos: r.QoS}
	switch r.QoS {
	case alloc.LSE, alloc.LSR:
		pl.cpus = p.CPUs
		c.views[node].change(c.shapes[node], p.CPUs, -1)
	case alloc.LS:
		pl.milli = p.MilliCPUs
		c.views[node].lsMilli += p.MilliCPUs
	}
	c.where[r.ID] = pl
}

// release frees a departing job; a job that was rejected holds nothing.
func (c *cluster) release(id string) error {
	pl, ok := c.where[id]
	if !ok {
		return nil
	}
	delete(c.where, id)
	if err := c.states[pl.node].Release(id); err != nil {
		return err
	}
	switch pl.qos {
	case alloc.LSE, alloc.LSR:
		c.views[pl.node].change(c.shapes[pl.node], pl.cpus, +1)
	case alloc.LS:
		c.views[pl.node].lsMilli -= pl.milli
	}
	return nil
}

func (c *cluster) sample(event int, t float64) Sample {
	s := Sample{Event: event, T: t, Running: float64(len(c.where))}
	for n, st := range c.states {
		f := st.Fragmentation()
		s.FreeCores += float64(f.FreeCores)
		s.FreeL3Groups += float64(f.FreeL3Groups)
		s.FreeNUMANodes += float64(f.FreeNUMANodes)
		s.ExclusiveCPUs += float64(c.shapes[n].fresh.free - c.views[n].free)
		s.LSCPUs += float64(c.views[n].lsMilli) / 1000
	}
	return s
}

func meanSample(xs []Sample) Sample {
	var m Sample
	if len(xs) == 0 {
		return m
	}
	for _, x := range xs {
		m.FreeCores += x.FreeCores
		m.FreeL3Groups += x.FreeL3Groups
		m.FreeNUMANodes += x.FreeNUMANodes
		m.ExclusiveCPUs += x.ExclusiveCPUs
		m.LSCPUs += x.LSCPUs
		m.Running += x.Running
	}
	k := float64(len(xs))
	m.FreeCores = round3(m.FreeCores / k)
	m.FreeL3Groups = round3(m.FreeL3Groups / k)
	m.FreeNUMANodes = round3(m.FreeNUMANodes / k)
	m.ExclusiveCPUs = round3(m.ExclusiveCPUs / k)
	m.LSCPUs = round3(m.LSCPUs / k)
	m.Running = round3(m.Running / k)
	return m
}

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }

// stat summarises counts: mean, nearest-rank 99th percentile, maximum.
func stat(xs []int) Stat {
	if len(xs) == 0 {
		return Stat{}
	}
	// Counts are small: a histogram sorts them in O(n).
	hist := map[int]int{}
	sum := 0
	for _, x := range xs {
		hist[x]++
		sum += x
	}
	keys := slices.Sorted(maps.Keys(hist))
	rank := int(math.Ceil(0.99 * float64(len(xs))))
	p99, seen := keys[len(keys)-1], 0
	for _, k := range keys {
		seen += hist[k]
		if seen >= rank {
			p99 = k
			break
		}
	}
	return Stat{Mean: round3(float64(sum) / float64(len(xs))), P99: p99, Max: keys[len(keys)-1]}
}
