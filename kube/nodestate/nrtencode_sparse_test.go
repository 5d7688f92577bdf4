package nodestate

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/topology"
)

// A zone's costs come from the distance table by node, not by position: on
// nodes 1 and 3 (node 0 without a directory, issue 17) the costs were read
// past the row's end and dropped. CPUs in no NUMA node are in no zone.
func TestBuildCostsOnSparseNodes(t *testing.T) {
	base := topology.MustSynthetic(topology.Shape{Sockets: 3, NodesPerSocket: 1, L3PerNode: 1, CoresPerL3: 2, ThreadsPerCore: 1})
	cpus := base.CPUs()
	for i := range cpus {
		cpus[i].NUMA = []topology.NodeID{topology.None, 1, 3}[cpus[i].Socket]
	}
	topo, err := topology.New(cpus, map[topology.NodeID][]int{1: {10, 21}, 3: {21, 10}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := alloc.NewState(topo, alloc.NodeSettings{})
	if err != nil {
		t.Fatal(err)
	}
	got := BuildNRT("n1", topo, st.Pools(), "none")
	var names []string
	for _, z := range got.Zones {
		names = append(names, z.Name)
	}
	if d := cmp.Diff([]string{"node-1", "node-3"}, names); d != "" {
		t.Errorf("zones (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]Cost{{Name: "node-1", Value: 21}, {Name: "node-3", Value: 10}}, got.Zones[1].Costs); d != "" {
		t.Errorf("node-3 costs (-want +got):\n%s", d)
	}
}
