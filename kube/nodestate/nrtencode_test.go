package nodestate

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/topology"
)

func TestBuildCountsFreeCPUsPerNUMANode(t *testing.T) {
	topo, st := heldFourOnNodeZero(t)
	got := BuildNRT("n1", topo, st.Pools(), "single-numa-node")
	var avail []string
	for _, z := range got.Zones {
		avail = append(avail, z.Name+":"+z.Resources[0].Capacity+"/"+z.Resources[0].Allocatable+"/"+z.Resources[0].Available)
	}
	// One node gave 4 CPUs to the LSE workload; node 0 also keeps 2 reserved.
	want := map[string]bool{"node-0:8/6/2,node-1:8/8/8": true, "node-0:8/6/6,node-1:8/8/4": true}
	if !want[strings.Join(avail, ",")] {
		t.Errorf("zones capacity/allocatable/available = %v, want 4 CPUs taken on one node and 2 reserved on node 0", avail)
	}
	if diff := cmp.Diff([]Cost{{Name: "node-0", Value: 10}, {Name: "node-1", Value: int64(topology.MustSynthetic(twoNodes).Distance(0, 1))}}, got.Zones[0].Costs); diff != "" {
		t.Errorf("node-0 costs (-want +got):\n%s", diff)
	}
	if got.APIVersion != NRTAPIVersion || got.Kind != NRTKind || got.Metadata.Name != "n1" || got.Attributes[0].Value != "single-numa-node" {
		t.Errorf("object header %s %s %s %v", got.APIVersion, got.Kind, got.Metadata.Name, got.Attributes)
	}
}

// heldFourOnNodeZero is the twoNodes machine with CPUs 0 and 8 reserved
// and a 4-CPU single-numa-node LSE workload placed.
func heldFourOnNodeZero(t *testing.T) (*topology.Topology, *alloc.State) {
	t.Helper()
	topo := topology.MustSynthetic(twoNodes)
	st, err := alloc.NewState(topo, alloc.NodeSettings{Reserved: cpuset.New(0, 8)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Allocate(alloc.Request{ID: "a", CPUs: 4, QoS: alloc.LSE, TopologyPolicy: alloc.TopologySingleNUMANode}); err != nil {
		t.Fatal(err)
	}
	return topo, st
}
