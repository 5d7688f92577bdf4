package sim

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/topology"
)

// TestReplayUnlikeNodes replays over a cluster of two unlike machines, the
// larger with 6 of its 8 CPUs held before the trace: a 4-CPU job fits only
// the smaller node, a second finds no capacity anywhere.
func TestReplayUnlikeNodes(t *testing.T) {
	big := topology.MustSynthetic(topology.Shape{Sockets: 1, NodesPerSocket: 1, L3PerNode: 1, CoresPerL3: 4, ThreadsPerCore: 2})
	small := topology.MustSynthetic(topology.Shape{Sockets: 1, NodesPerSocket: 1, L3PerNode: 1, CoresPerL3: 2, ThreadsPerCore: 2})
	cfg := Config{Cluster: []Node{
		{Name: "big", Topology: big, Held: []alloc.Assignment{
			{ID: "ns/db", QoS: alloc.LSE, CPUs: cpuset.New(0, 1, 2, 3, 4, 5)},
			{ID: "ns/web", QoS: alloc.LS, MilliCPUs: 500},
		}},
		{Name: "small", Topology: small},
	}}
	req := alloc.Request{QoS: alloc.LSE, CPUs: 4}
	a, b := req, req
	a.ID, b.ID = "a", "b"
	evs := []Event{{T: 0, Op: Arrive, ID: "a", Request: a}, {T: 1, Op: Arrive, ID: "b", Request: b}, {T: 2, Op: Depart, ID: "a"}, {T: 2, Op: Depart, ID: "b"}}
	scen, err := ParseScenario("corepin")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Replay(evs, cfg, Runs([]Scenario{scen}, []NodeChoice{FirstFit, BestFit}))
	if err != nil {
		t.Fatalf("Replay() error = %v", err)
	}
	type got struct {
		Nodes, CPUs, HeldCPUs, NodeCPUs int
		Admitted, Rejected              []int
		Capacity                        []int
	}
	g := got{Nodes: rep.Nodes, CPUs: rep.CPUs, HeldCPUs: rep.HeldCPUs, NodeCPUs: rep.NodeCPUs}
	for _, r := range rep.Results {
		g.Admitted = append(g.Admitted, r.Admitted)
		g.Rejected = append(g.Rejected, r.Rejected)
		g.Capacity = append(g.Capacity, r.RejectedBy["capacity"])
	}
	want := got{Nodes: 2, CPUs: 12, HeldCPUs: 6, NodeCPUs: 0, Admitted: []int{1, 1}, Rejected: []int{1, 1}, Capacity: []int{1, 1}}
	if diff := cmp.Diff(want, g); diff != "" {
		t.Errorf("replay over unlike nodes (-want +got):\n%s", diff)
	}
	if !strings.Contains(rep.Topology, "1 x "+big.Summary()) || !strings.Contains(rep.Topology, "1 x "+small.Summary()) {
		t.Errorf("Topology = %q, want each machine with its count", rep.Topology)
	}
	// The views start in step with the states holding the held CPUs.
	nodes, err := cfg.nodes()
	if err != nil {
		t.Fatal(err)
	}
	c, err := newCluster(cfg, nodes, map[*topology.Topology]*shape{big: newShape(big, cpuset.CPUSet{}), small: newShape(small, cpuset.CPUSet{})}, Runs([]Scenario{scen}, []NodeChoice{FirstFit})[0])
	if err != nil {
		t.Fatal(err)
	}
	for n, st := range c.states {
		checkViewMatches(t, n, c.shapes[n], &c.views[n], st)
	}
	if c.views[0].free != 2 || c.views[0].lsMilli != 500 {
		t.Errorf("big node's view: %d free CPUs, %d LS millicpus; want 2 and 500", c.views[0].free, c.views[0].lsMilli)
	}
}

func TestReplayRefusesBadCluster(t *testing.T) {
	topo := topology.MustSynthetic(topology.Shape{Sockets: 1, NodesPerSocket: 1, L3PerNode: 1, CoresPerL3: 2, ThreadsPerCore: 2})
	scen, err := ParseScenario("corepin")
	if err != nil {
		t.Fatal(err)
	}
	runs := Runs([]Scenario{scen}, []NodeChoice{BestFit})
	tests := []struct {
		name string
		cfg  Config
		msg  string
	}{
		{name: "both forms", cfg: Config{Topology: topo, Nodes: 1, Cluster: []Node{{Name: "a", Topology: topo}}}, msg: "not both"},
		{name: "no topology", cfg: Config{Cluster: []Node{{Name: "a"}}}, msg: "node 0 (a) has no topology"},
		{name: "held outside the machine", cfg: Config{Cluster: []Node{{Name: "a", Topology: topo, Held: []alloc.Assignment{{ID: "x", QoS: alloc.LSE, CPUs: cpuset.New(9)}}}}}, msg: "node a"},
		{name: "held twice", cfg: Config{Cluster: []Node{{Name: "a", Topology: topo, Held: []alloc.Assignment{{ID: "x", QoS: alloc.LSE, CPUs: cpuset.New(1)}, {ID: "y", QoS: alloc.LSE, CPUs: cpuset.New(1)}}}}}, msg: "held y"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Replay(nil, tc.cfg, runs)
			if !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("Replay() error = %v, want ErrBadConfig containing %q", err, tc.msg)
			}
		})
	}
}

func TestConfigCapacity(t *testing.T) {
	topo := topology.MustSynthetic(smtTwoNUMA)
	all := topo.Allowed().Size()
	res := cpuset.New(0, 1)
	if got := (Config{Topology: topo, Nodes: 3, Reserved: res}).Capacity(); got != 3*(all-2) {
		t.Errorf("3 copies, 2 reserved: capacity %d, want %d", got, 3*(all-2))
	}
	cluster := []Node{{Name: "a", Topology: topo}, {Name: "b", Topology: topo}}
	if got := (Config{Cluster: cluster, Reserved: res}).Capacity(); got != 2*(all-2) {
		t.Errorf("a cluster of 2, 2 reserved: capacity %d, want %d", got, 2*(all-2))
	}
	if got := (Config{}).Capacity(); got != 0 {
		t.Errorf("no machine: capacity %d, want 0", got)
	}
}
