package jobs

import (
	"testing"

	"github.com/corepin/corepin/sim"
	"github.com/corepin/corepin/topology"
)

// TestTraceReplays turns a concurrency sweep into a trace and replays it:
// on the node type it was sized for every pod is admitted; on a node of
// half the CPUs the pinned points that need more are refused.
func TestTraceReplays(t *testing.T) {
	spec := []byte("concurrency:\n  cpus: [2]\n  concurrency: [1, 4, 8]\n  modes: [pinned, quota]\n")
	s, err := Plan(Options{Experiments: catalog, Sweep: "concurrency", Spec: spec, Quick: true, Node: node16(), Repeats: 2})
	if err != nil {
		t.Fatal(err)
	}
	evs := s.Trace()
	if err := sim.Validate(evs); err != nil {
		t.Fatalf("Validate() error = %v", err)
	}
	pods := 0
	for _, j := range s.Jobs {
		pods += j.Pods
	}
	if got := len(evs); got != 2*pods {
		t.Fatalf("%d events, want %d (an arrive and a depart per pod)", got, 2*pods)
	}
	corepin, err := sim.ParseScenario("corepin")
	if err != nil {
		t.Fatal(err)
	}
	runs := sim.Runs([]sim.Scenario{corepin}, []sim.NodeChoice{"best-fit"})
	tests := []struct {
		name     string
		node     *topology.Topology
		rejected int
	}{
		{name: "sized node", node: node16(), rejected: 0},
		// 8 CPUs: pinned 8 x 2 CPUs (both repeats) cannot all be placed;
		// quota (LS) pods share the pool up to its 8 CPUs, so 8 x 2 of
		// quota are refused in half as well.
		{name: "half node", node: topology.MustSynthetic(topology.Shape{Sockets: 1, NodesPerSocket: 1, L3PerNode: 1, CoresPerL3: 4, ThreadsPerCore: 2}), rejected: 2 * (4 + 4)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := sim.Replay(evs, sim.Config{Topology: tc.node, Nodes: 1}, runs)
			if err != nil {
				t.Fatalf("Replay() error = %v", err)
			}
			r := rep.Results[0]
			if r.Admitted+r.Rejected != pods || r.Rejected != tc.rejected {
				t.Errorf("admitted %d, rejected %d (by %v); want %d rejected of %d", r.Admitted, r.Rejected, r.RejectedBy, tc.rejected, pods)
			}
		})
	}
}
