package nodestatetest

import (
	"fmt"
	"math/rand/v2"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/internal/testutil"
	"github.com/corepin/corepin/kube/nodestate"
	"github.com/corepin/corepin/topology"
)

// FixtureMachines are the topologies of the sysfs fixtures
// (testutil.Fixtures: the real machines, the 2x64x2 8-NUMA one among
// them), for tests and benchmarks of node states on real machines.
func FixtureMachines(tb testing.TB) []*topology.Topology {
	tb.Helper()
	var out []*topology.Topology
	for _, name := range testutil.Fixtures(tb) {
		topo, err := topology.Discover(testutil.SysfsFromTarBz2(tb, name), topology.WithoutCgroup())
		if err != nil {
			tb.Fatalf("fixture %s: %v", name, err)
		}
		out = append(out, topo)
	}
	return out
}

// SmallState is a node's own state on a small machine: 2 NUMA nodes of 2
// two-thread cores (8 CPUs), nothing held, default settings.
func SmallState(tb testing.TB) *alloc.State {
	tb.Helper()
	topo, err := topology.Synthetic(topology.Shape{Sockets: 1, NodesPerSocket: 2, L3PerNode: 1, CoresPerL3: 2, ThreadsPerCore: 2})
	if err != nil {
		tb.Fatal(err)
	}
	st, err := alloc.NewState(topo, alloc.NodeSettings{})
	if err != nil {
		tb.Fatal(err)
	}
	return st
}

// BusyNodes are n nodes (named n00000, n00001, ...) cycling through the
// machines topos, each holding exclusive workloads of 1 to 8 CPUs drawn
// from rng up to a random share (0 to 75%) of its CPUs, published as a
// corepin node publishes them (Publish, each workload naming a pod UID):
// a fleet at random occupancy, for benchmarks of the scheduler side.
func BusyNodes(tb testing.TB, n int, rng *rand.Rand, topos ...*topology.Topology) []*corev1.Node {
	tb.Helper()
	out := make([]*corev1.Node, n)
	for i := range out {
		topo := topos[i%len(topos)]
		st, err := alloc.NewState(topo, alloc.NodeSettings{})
		if err != nil {
			tb.Fatal(err)
		}
		target := int(0.75 * rng.Float64() * float64(topo.Allowed().Size()))
		pods := map[string]string{}
		for k := 0; topo.Allowed().Size()-st.Pools().LS.Size() < target && k < 100; k++ {
			id := fmt.Sprintf("held/w%d", k)
			if _, err := st.Admit(alloc.Request{ID: id, QoS: alloc.LSE, CPUs: 1 + rng.IntN(8)}); err == nil {
				pods[id] = fmt.Sprintf("uid-%d-%d", i, k)
			}
		}
		out[i] = Publish(tb, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%05d", i)}}, st, "", pods)
	}
	return out
}

// Publish is a copy of node carrying, as its only annotations, what its
// NRI plugin publishes for st (nodestate.NodeAnnotations): the pod UID of
// each assignment (pods, by assignment id; nil: a plugin naming no pods),
// topology policy policy by default.
func Publish(tb testing.TB, node *corev1.Node, st *alloc.State, policy alloc.TopologyPolicy, pods map[string]string) *corev1.Node {
	tb.Helper()
	ann, coarse, err := nodestate.NodeAnnotations(st, policy, pods)
	if err != nil || coarse {
		tb.Fatalf("NodeAnnotations: coarse %v, %v", coarse, err)
	}
	node = node.DeepCopy()
	node.Annotations = map[string]string{}
	for k, v := range ann {
		if v != nil {
			node.Annotations[k] = *v
		}
	}
	return node
}

// NRTAt is NRT at resource version rv.
func NRTAt(tb testing.TB, node, rv string, free ...int) *unstructured.Unstructured {
	tb.Helper()
	u := NRT(tb, node, free...)
	u.SetResourceVersion(rv)
	return u
}
