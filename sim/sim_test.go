package sim

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/internal/testutil"
	"github.com/corepin/corepin/topology"
)

// 2 sockets x 2 nodes x 2 L3 x 4 cores x 2 threads: 64 CPUs, 8 per L3.
var simShape = topology.Shape{Sockets: 2, NodesPerSocket: 2, L3PerNode: 2, CoresPerL3: 4, ThreadsPerCore: 2}

func mustTrace(t *testing.T, s string) []Event {
	t.Helper()
	evs, err := ReadTrace(strings.NewReader(s))
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func mixedTrace(t *testing.T, jobs int, capacity int) []Event {
	t.Helper()
	evs, err := Mixed(GenConfig{Jobs: jobs, Seed: 5, Capacity: capacity, Utilization: 0.9, MeanDuration: 20})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func zeroTimings(rep *Report) {
	rep.WallSeconds = 0
	for i := range rep.Results {
		rep.Results[i].Timing = Timing{}
	}
}

func TestReplayDeterministic(t *testing.T) {
	topo := topology.MustSynthetic(simShape)
	evs := mixedTrace(t, 1500, 8*64)
	runs := Runs(Scenarios(), []NodeChoice{FirstFit, BestFit})
	var outs []string
	for _, par := range []int{1, 3, 1} {
		rep, err := Replay(evs, Config{Topology: topo, Nodes: 8, TopologyPolicy: alloc.TopologySingleNUMANode, Parallel: par}, runs)
		if err != nil {
			t.Fatal(err)
		}
		zeroTimings(&rep)
		b, err := json.Marshal(rep)
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, string(b))
	}
	for i := 1; i < len(outs); i++ {
		if d := cmp.Diff(outs[0], outs[i]); d != "" {
			t.Errorf("replay %d differs from replay 0:\n%s", i, d)
		}
	}
}

// TestDepartRestoresNodes replays a trace in which every job departs and
// checks that each node is exactly a fresh one again, in alloc's State and in
// the scheduler's view; half way (nothing departed) the view matches the
// State.
func TestDepartRestoresNodes(t *testing.T) {
	topo := topology.MustSynthetic(simShape)
	evs := mixedTrace(t, 1200, 6*64)
	var arrivals []Event
	for _, ev := range evs {
		if ev.Op == Arrive {
			arrivals = append(arrivals, ev)
		}
	}
	cfg := Config{Topology: topo, Nodes: 6, Reserved: cpuset.New(0, 32), TopologyPolicy: alloc.TopologyRestricted, SampleEvery: 100}
	sh := newShape(topo, cfg.Reserved)
	nodes, err := cfg.nodes()
	if err != nil {
		t.Fatal(err)
	}
	for _, run := range Runs(Scenarios(), []NodeChoice{FirstFit, BestFit}) {
		t.Run(run.Scenario.Name+"/"+string(run.NodeChoice), func(t *testing.T) {
			fresh, err := alloc.NewState(topo, alloc.NodeSettings{Policy: run.Scenario.Policy, Options: run.Scenario.Options, Reserved: cfg.Reserved})
			if err != nil {
				t.Fatal(err)
			}
			c, err := newCluster(cfg, nodes, map[*topology.Topology]*shape{topo: sh}, run)
			if err != nil {
				t.Fatal(err)
			}
			res, err := c.replay(arrivals[:len(arrivals)/3])
			if err != nil {
				t.Fatal(err)
			}
			if res.Admitted == 0 {
				t.Fatal("nothing admitted")
			}
			for n, st := range c.states {
				checkViewMatches(t, n, c.shapes[n], &c.views[n], st)
			}
			c, err = newCluster(cfg, nodes, map[*topology.Topology]*shape{topo: sh}, run)
			if err != nil {
				t.Fatal(err)
			}
			res, err = c.replay(evs)
			if err != nil {
				t.Fatal(err)
			}
			if res.Admitted+res.Rejected != len(arrivals) {
				t.Errorf("admitted %d + rejected %d != %d arrivals", res.Admitted, res.Rejected, len(arrivals))
			}
			if len(c.where) != 0 {
				t.Errorf("%d jobs still placed after every depart", len(c.where))
			}
			for n, st := range c.states {
				if a := st.Assignments(); len(a) != 0 {
					t.Errorf("node %d: %d assignments left: %v", n, len(a), a)
				}
				if d := cmp.Diff(fresh.Fragmentation(), st.Fragmentation()); d != "" {
					t.Errorf("node %d: fragmentation differs from a fresh node (-fresh +got):\n%s", n, d)
				}
				if d := cmp.Diff(fresh.Pools(), st.Pools(), cmp.Comparer(cpuset.CPUSet.Equals)); d != "" {
					t.Errorf("node %d: pools differ from a fresh node (-fresh +got):\n%s", n, d)
				}
				if d := cmp.Diff(sh.fresh, c.views[n], cmp.AllowUnexported(view{})); d != "" {
					t.Errorf("node %d: view differs from a fresh node (-fresh +got):\n%s", n, d)
				}
			}
			last := res.Fragmentation.Series[len(res.Fragmentation.Series)-1]
			if last.ExclusiveCPUs != 0 || last.LSCPUs != 0 || last.Running != 0 {
				t.Errorf("last sample %+v: want nothing held", last)
			}
		})
	}
}

func checkViewMatches(t *testing.T, n int, sh *shape, v *view, st *alloc.State) {
	t.Helper()
	wholeCores := 0
	for k, f := range v.freeCore {
		if f == sh.coreSize[k] {
			wholeCores++
		}
	}
	if f := st.Fragmentation(); wholeCores != f.FreeCores {
		t.Errorf("node %d: view has %d whole free cores, State %d", n, wholeCores, f.FreeCores)
	}
	p := st.Pools()
	held := p.LSE.Size() + p.LSR.Size()
	if want := sh.fresh.free - held; v.free != want {
		t.Errorf("node %d: view has %d free CPUs, State %d (%d held exclusively)", n, v.free, want, held)
	}
}

// twoNUMA is a node with 2 NUMA nodes of 2 single-thread cores.
var twoNUMA = topology.Shape{Sockets: 1, NodesPerSocket: 2, L3PerNode: 1, CoresPerL3: 2, ThreadsPerCore: 1}

// fragmentingTrace leaves node 0 with one free CPU on each NUMA node
// (whether the node packs a-d as a,b | c,d or spreads them as a,c | b,d), then
// asks for 2 CPUs on one node: first fit sends it to node 0, which refuses
// it under single-numa-node though node 1 is empty; best fit sends it to
// node 1.
const fragmentingTrace = `{"t": 0, "op": "arrive", "id": "a", "request": {"cpus": 1}}
{"t": 1, "op": "arrive", "id": "b", "request": {"cpus": 1}}
{"t": 2, "op": "arrive", "id": "c", "request": {"cpus": 1}}
{"t": 3, "op": "arrive", "id": "d", "request": {"cpus": 1}}
{"t": 4, "op": "depart", "id": "a"}
{"t": 5, "op": "depart", "id": "d"}
{"t": 6, "op": "arrive", "id": "e", "request": {"cpus": 2, "topology_policy": "single-numa-node"}}
`

func TestAvoidableRejection(t *testing.T) {
	topo := topology.MustSynthetic(twoNUMA)
	evs := mustTrace(t, fragmentingTrace)
	for _, s := range Scenarios() {
		t.Run(s.Name, func(t *testing.T) {
			if s.Bind == alloc.BindFullPCPUs {
				s.Bind = "" // 1-CPU jobs on single-thread cores are whole cores anyway
			}
			rep, err := Replay(evs, Config{Topology: topo, Nodes: 2}, Runs([]Scenario{s}, []NodeChoice{FirstFit, BestFit}))
			if err != nil {
				t.Fatal(err)
			}
			ff, bf := rep.Results[0], rep.Results[1]
			if ff.Admitted != 4 || ff.Rejected != 1 || ff.Avoidable != 1 || ff.RejectedBy["single-numa-node"] != 1 {
				t.Errorf("first fit: admitted %d rejected %d avoidable %d by %v, want 4 1 1 by single-numa-node",
					ff.Admitted, ff.Rejected, ff.Avoidable, ff.RejectedBy)
			}
			if bf.Admitted != 5 || bf.Rejected != 0 || bf.Alignment.NUMANodes.Max != 1 {
				t.Errorf("best fit: admitted %d rejected %d, NUMA max %d, want 5 0 1", bf.Admitted, bf.Rejected, bf.Alignment.NUMANodes.Max)
			}
		})
	}
}

func TestCapacityRejectionIsUnavoidable(t *testing.T) {
	topo := topology.MustSynthetic(twoNUMA)
	evs := mustTrace(t, `{"t": 0, "op": "arrive", "id": "a", "request": {"cpus": 4}}
{"t": 0, "op": "arrive", "id": "b", "request": {"cpus": 3}}
{"t": 0, "op": "arrive", "id": "c", "request": {"cpus": 2}}
{"t": 1, "op": "arrive", "id": "ls", "request": {"cpus": 1.5}}
{"t": 2, "op": "arrive", "id": "be", "request": {"cpus": 8, "qos": "BE"}}
`)
	rep, err := Replay(evs, Config{Topology: topo, Nodes: 2}, Runs([]Scenario{{Name: "corepin"}}, []NodeChoice{FirstFit, BestFit}))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Results {
		// a fills node 0, b takes 3 of node 1, c and the 1.5-CPU LS quota do
		// not fit; BE goes where a CPU is free.
		if r.Admitted != 3 || r.Rejected != 2 || r.Avoidable != 0 || r.RejectedBy["capacity"] != 2 {
			t.Errorf("%s: admitted %d rejected %d avoidable %d by %v, want 3 2 0 by capacity", r.NodeChoice, r.Admitted, r.Rejected, r.Avoidable, r.RejectedBy)
		}
	}
}

func TestReplayErrors(t *testing.T) {
	topo := topology.MustSynthetic(twoNUMA)
	evs := mustTrace(t, `{"t": 0, "op": "arrive", "id": "a", "request": {"cpus": 1}}`)
	ok := Runs(Scenarios(), []NodeChoice{FirstFit})
	tests := []struct {
		name string
		evs  []Event
		cfg  Config
		runs []Run
		want error
	}{
		{name: "no nodes", evs: evs, cfg: Config{Topology: topo}, runs: ok, want: ErrBadConfig},
		{name: "no topology", evs: evs, cfg: Config{Nodes: 1}, runs: ok, want: ErrBadConfig},
		{name: "nodes past the cap", evs: evs, cfg: Config{Topology: topo, Nodes: MaxNodes + 1}, runs: ok, want: ErrBadConfig},
		{name: "no runs", evs: evs, cfg: Config{Topology: topo, Nodes: 1}, want: ErrBadConfig},
		{name: "unknown node choice", evs: evs, cfg: Config{Topology: topo, Nodes: 1}, runs: []Run{{Scenario: Scenarios()[0], NodeChoice: "random"}}, want: ErrBadConfig},
		{name: "options kubelet refuses together", evs: evs, cfg: Config{Topology: topo, Nodes: 1},
			runs: []Run{{Scenario: Scenario{Name: "x", Policy: alloc.PolicyKubelet, Options: []string{alloc.OptFullPCPUsOnly, alloc.OptDistributeAcrossCores}}, NodeChoice: BestFit}}, want: alloc.ErrInvalid},
		{name: "unordered events", evs: []Event{{T: 1, Op: Arrive, ID: "a", Request: alloc.Request{ID: "a", CPUs: 1}}, {T: 0, Op: Depart, ID: "a"}},
			cfg: Config{Topology: topo, Nodes: 1}, runs: ok, want: ErrBadTrace},
	}
	// Issue 8 §3: a node id past 65535 panicked simulate. The model now
	// refuses such a machine before anything can place on it.
	if _, err := topology.New([]topology.CPU{{ID: 0, Online: true, Allowed: true, NUMA: 70000, L3: -1}}, nil); !errors.Is(err, topology.ErrInvalid) {
		t.Errorf("topology.New with numa 70000: error %v, want topology.ErrInvalid", err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Replay(tc.evs, tc.cfg, tc.runs); !errors.Is(err, tc.want) {
				t.Errorf("Replay error = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestParseScenario(t *testing.T) {
	for _, name := range ScenarioNames() {
		s, err := ParseScenario(name)
		if err != nil || s.Name != name {
			t.Errorf("ParseScenario(%q) = %+v, %v", name, s, err)
		}
	}
	s, err := ParseScenario("kubelet:full-pcpus-only+align-by-socket")
	if want := (Scenario{Name: "kubelet:full-pcpus-only+align-by-socket", Policy: alloc.PolicyKubelet, Options: []string{"full-pcpus-only", "align-by-socket"}}); err != nil || !cmp.Equal(s, want) {
		t.Errorf("ParseScenario(kubelet:...) = %+v, %v; want %+v", s, err, want)
	}
	if _, err := ParseScenario("volcano"); !errors.Is(err, ErrBadConfig) {
		t.Errorf("ParseScenario(volcano) error = %v, want ErrBadConfig", err)
	}
}

func TestStat(t *testing.T) {
	xs := make([]int, 200)
	xs[0], xs[1], xs[2] = 4, 3, 2 // the top 1.5%: p99 is the 198th value
	if got, want := stat(xs), (Stat{Mean: 0.045, P99: 2, Max: 4}); got != want {
		t.Errorf("stat = %+v, want %+v", got, want)
	}
	if got := stat(nil); got != (Stat{}) {
		t.Errorf("stat(nil) = %+v, want zero", got)
	}
}

// TestMustShowReduced is the must-show at a fifth of the size: all
// five scenarios, both node choices, a generated farm trace of 2000 jobs over
// 100 nodes of a real machine. It logs the wall time; it does not assert one.
func TestMustShowReduced(t *testing.T) {
	topo, err := topology.Discover(testutil.SysfsFromTarBz2(t, "64amd64-4s2n4ca2co"), topology.WithoutCgroup())
	if err != nil {
		t.Fatal(err)
	}
	const nodes, jobs = 100, 2000
	evs, err := Farm(GenConfig{Jobs: jobs, Seed: 1, Capacity: nodes * topo.Allowed().Size()})
	if err != nil {
		t.Fatal(err)
	}
	runs := Runs(Scenarios(), []NodeChoice{FirstFit, BestFit})
	rep, err := Replay(evs, Config{Topology: topo, Nodes: nodes, TopologyPolicy: alloc.TopologySingleNUMANode, Parallel: 2}, runs)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d runs of %d jobs over %d nodes: wall %.2f s", len(runs), jobs, nodes, rep.WallSeconds)
	if len(rep.Results) != 10 {
		t.Fatalf("%d results, want 10", len(rep.Results))
	}
	for _, r := range rep.Results {
		t.Logf("%-20s %-9s admitted %5d rejected %5d avoidable %5d numa %.2f/%d  %.0f decisions/s",
			r.Scenario, r.NodeChoice, r.Admitted, r.Rejected, r.Avoidable, r.Alignment.NUMANodes.Mean, r.Alignment.NUMANodes.P99, r.Timing.DecisionsPerSecond)
		if r.Admitted+r.Rejected != jobs {
			t.Errorf("%s/%s: admitted %d + rejected %d != %d", r.Scenario, r.NodeChoice, r.Admitted, r.Rejected, jobs)
		}
		if r.NodeChoice == BestFit && r.Avoidable != 0 {
			t.Errorf("%s/best-fit: %d avoidable rejections, want 0", r.Scenario, r.Avoidable)
		}
		if r.Alignment.NUMANodes.Max > 1 {
			t.Errorf("%s/%s: a placement spans %d NUMA nodes under single-numa-node", r.Scenario, r.NodeChoice, r.Alignment.NUMANodes.Max)
		}
		if len(r.Fragmentation.Series) < 100 {
			t.Errorf("%s/%s: %d fragmentation samples, want about 200", r.Scenario, r.NodeChoice, len(r.Fragmentation.Series))
		}
	}
}

// TestBestFitFallsBack: the best-ranked node refuses (both its NUMA nodes
// already hold a NUMANodeLevel-exclusive workload), so best fit tries the
// next node, while first fit's single try is an avoidable rejection.
func TestBestFitFallsBack(t *testing.T) {
	topo := topology.MustSynthetic(twoNUMA)
	evs := mustTrace(t, `{"t": 0, "op": "arrive", "id": "x", "request": {"cpus": 1, "exclusive": "NUMANodeLevel"}}
{"t": 1, "op": "arrive", "id": "y", "request": {"cpus": 1, "exclusive": "NUMANodeLevel"}}
{"t": 2, "op": "arrive", "id": "z", "request": {"cpus": 1, "exclusive": "NUMANodeLevel"}}
`)
	rep, err := Replay(evs, Config{Topology: topo, Nodes: 2}, Runs([]Scenario{{Name: "corepin"}}, []NodeChoice{FirstFit, BestFit}))
	if err != nil {
		t.Fatal(err)
	}
	ff, bf := rep.Results[0], rep.Results[1]
	if ff.Admitted != 2 || ff.Rejected != 1 || ff.Avoidable != 1 {
		t.Errorf("first fit: admitted %d rejected %d avoidable %d by %v, want 2 1 1", ff.Admitted, ff.Rejected, ff.Avoidable, ff.RejectedBy)
	}
	if bf.Admitted != 3 || bf.Rejected != 0 {
		t.Errorf("best fit: admitted %d rejected %d by %v, want 3 0", bf.Admitted, bf.Rejected, bf.RejectedBy)
	}
}

// TestExclusiveWorkNeverStarvesTheSharedPools: a node admits exclusive
// work as a corepin node does (alloc.State.GuardPools), so an LSE job that
// would leave a running BE job no CPU at all is refused there, "BE pool",
// and the next node takes it. (LS quota is already capacity in the
// nodes' views: an LSE job that would leave the LS pool short is refused
// as "capacity".)
func TestExclusiveWorkNeverStarvesTheSharedPools(t *testing.T) {
	topo := topology.MustSynthetic(twoNUMA) // 4 single-thread CPUs
	evs := mustTrace(t, `{"t": 0, "op": "arrive", "id": "be", "request": {"cpus": 1, "qos": "BE"}}
{"t": 1, "op": "arrive", "id": "a", "request": {"cpus": 4}}
`)
	for _, nodes := range []int{1, 2} {
		rep, err := Replay(evs, Config{Topology: topo, Nodes: nodes, TopologyPolicy: alloc.TopologyNone}, Runs([]Scenario{{Name: "corepin"}}, []NodeChoice{FirstFit, BestFit}))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rep.Results {
			// First fit sends a to the BE job's node, which refuses it, and
			// does not retry (as kube-scheduler's own fit would not): an
			// avoidable rejection when another node was empty. Best fit
			// falls back to the other node.
			wantAdmitted, wantBy, wantAvoidable := 1, map[string]int{"BE pool": 1}, 0
			if nodes == 2 && r.NodeChoice == BestFit {
				wantAdmitted, wantBy = 2, map[string]int{}
			} else if nodes == 2 {
				wantAvoidable = 1
			}
			if r.Admitted != wantAdmitted || len(r.RejectedBy) != len(wantBy) || r.RejectedBy["BE pool"] != wantBy["BE pool"] || r.Avoidable != wantAvoidable {
				t.Errorf("%d nodes, %s: admitted %d, rejected by %v, avoidable %d; want %d admitted, rejected by %v, avoidable %d",
					nodes, r.NodeChoice, r.Admitted, r.RejectedBy, r.Avoidable, wantAdmitted, wantBy, wantAvoidable)
			}
		}
	}
}
