package sim

import (
	"testing"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/topology"
)

// TestReplayCPUsInNoNode replays on machines whose package 0 is in no NUMA
// node (issue 17 §1), with and without L3 caches: the scheduler's view
// keeps such CPUs apart from every node (no panic, no unit shared with a
// node's) and matches alloc's State.
func TestReplayCPUsInNoNode(t *testing.T) {
	base := topology.MustSynthetic(topology.Shape{Sockets: 2, NodesPerSocket: 1, L3PerNode: 1, CoresPerL3: 4, ThreadsPerCore: 2})
	for _, noL3 := range []bool{false, true} {
		cpus := base.CPUs()
		for i := range cpus {
			if cpus[i].Socket == 0 {
				cpus[i].NUMA = topology.None
			}
			if noL3 {
				cpus[i].L3 = topology.None
			}
		}
		topo, err := topology.New(cpus, map[topology.NodeID][]int{1: {10}})
		if err != nil {
			t.Fatal(err)
		}
		sh := newShape(topo, cpuset.CPUSet{})
		if sh.numNUMA != 2 {
			t.Errorf("noL3=%t: %d numa groups, want 2 (node 1 and the cpus in none)", noL3, sh.numNUMA)
		}
		for cpu := range topo.NoNodeCPUs().All() {
			for other := range topo.NodeCPUs(1).All() {
				if sh.numa[cpu] == sh.numa[other] || sh.unit[cpu] == sh.unit[other] || sh.numa[cpu] < 0 {
					t.Fatalf("noL3=%t: cpu %d (no node) shares numa %d / unit %d with cpu %d of node 1", noL3, cpu, sh.numa[cpu], sh.unit[cpu], other)
				}
			}
		}
		evs := mixedTrace(t, 300, 4*16)
		var arrivals []Event
		for _, ev := range evs {
			if ev.Op == Arrive {
				arrivals = append(arrivals, ev)
			}
		}
		cfg := Config{Topology: topo, Nodes: 4, TopologyPolicy: alloc.TopologySingleNUMANode, SampleEvery: 50}
		nodes, err := cfg.nodes()
		if err != nil {
			t.Fatal(err)
		}
		for _, run := range Runs(Scenarios(), []NodeChoice{FirstFit, BestFit}) {
			c, err := newCluster(cfg, nodes, map[*topology.Topology]*shape{topo: sh}, run)
			if err != nil {
				t.Fatal(err)
			}
			res, err := c.replay(arrivals[:len(arrivals)/2])
			if err != nil {
				t.Fatalf("%s: %v", run.Scenario.Name, err)
			}
			if res.Admitted == 0 {
				t.Fatalf("%s: nothing admitted", run.Scenario.Name)
			}
			for n, st := range c.states {
				checkViewMatches(t, n, c.shapes[n], &c.views[n], st)
			}
		}
	}
}
