package nodestate

import (
	"strings"
	"testing"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/topology"
)

// A machine whose topology document passes MaxAnnotationBytes publishes
// the free CPUs per NUMA node only.
func TestNodeAnnotationsFallBackToNUMAFree(t *testing.T) {
	big := topology.MustSynthetic(topology.Shape{Sockets: 8, NodesPerSocket: 2, L3PerNode: 2, CoresPerL3: 48, ThreadsPerCore: 2})
	st, err := alloc.NewState(big, alloc.NodeSettings{Reserved: cpuset.New(0)})
	if err != nil {
		t.Fatal(err)
	}
	ann, coarse, err := NodeAnnotations(st, "", nil)
	if err != nil || !coarse {
		t.Fatalf("NodeAnnotations on %d CPUs: coarse %v, %v; want the fallback", len(big.CPUs()), coarse, err)
	}
	if ann[AnnotationTopology] != nil || ann[AnnotationAssigned] != nil || ann[AnnotationNUMAFree] == nil {
		t.Fatalf("fallback annotations %v: want numa-free set, topology and assigned removed", ann)
	}
	if got, want := *ann[AnnotationNUMAFree], "[191"+strings.Repeat(",192", 15)+"]"; got != want {
		t.Errorf("%s = %s, want %s (CPU 0 reserved)", AnnotationNUMAFree, got, want)
	}
}

// twoNodes is a machine of two NUMA nodes, one per socket, of 4 cores of
// 2 threads each.
var twoNodes = topology.Shape{Sockets: 2, NodesPerSocket: 1, L3PerNode: 1, CoresPerL3: 4, ThreadsPerCore: 2}
