package nodeview

import (
	"fmt"
	"runtime"
	rtmetrics "runtime/metrics"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/internal/testutil"
	"github.com/corepin/corepin/topology"
)

// heapAfterGC is the bytes of live heap objects, after a collection, the
// cleanups it queued (alloc drops the index of a topology gone) and a
// collection of what they let go.
func heapAfterGC(t *testing.T) int64 {
	t.Helper()
	runtime.GC()
	s := []rtmetrics.Sample{{Name: "/gc/cleanups/queued:cleanups"}, {Name: "/gc/cleanups/executed:cleanups"}}
	testutil.Eventually(t, "the queued cleanups run", func() bool {
		rtmetrics.Read(s)
		return s[1].Value.Uint64() >= s[0].Value.Uint64()
	})
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// TestBytesEstimate: the weight the view gives its decoded node states
// and entries (View.bytes: published.weigh, node.weigh) is at least the
// heap they hold, measured, for machines of 16 to 1024 CPUs published in
// full, each node a different machine, so WithMaxBytes is a bound of the
// view's memory; and for the largest, at most twice it.
func TestBytesEstimate(t *testing.T) {
	for _, shape := range []topology.Shape{
		{Sockets: 2, NodesPerSocket: 1, L3PerNode: 1, CoresPerL3: 4, ThreadsPerCore: 2},
		{Sockets: 2, NodesPerSocket: 2, L3PerNode: 2, CoresPerL3: 8, ThreadsPerCore: 2},
		{Sockets: 4, NodesPerSocket: 2, L3PerNode: 2, CoresPerL3: 32, ThreadsPerCore: 2},
	} {
		topo := topology.MustSynthetic(shape)
		t.Run(fmt.Sprintf("%d CPUs", topo.Present().Size()), func(t *testing.T) {
			const n = 16
			var nodes []*corev1.Node
			for i := range n {
				// Each node a different machine (its own isolated CPU):
				// nodes of one machine share its decoded topology and
				// index (kube/nodestate), which the weight counts for
				// each state, so the bound holds all the more there.
				m, err := topo.WithIsolation(topology.Isolation{Isolcpus: cpuset.New(i % topo.Present().Size())})
				if err != nil {
					t.Fatal(err)
				}
				st, err := alloc.NewState(m, alloc.NodeSettings{Reserved: cpuset.New(0)})
				if err != nil {
					t.Fatal(err)
				}
				if err := st.Assign(alloc.Assignment{ID: "x/held", QoS: alloc.LSE, CPUs: cpuset.New(1 + i%(topo.Present().Size()-1))}); err != nil {
					t.Fatal(err)
				}
				nodes = append(nodes, publish(t, baseNode(fmt.Sprintf("n%d", i)), st, alloc.TopologySingleNUMANode, map[string]string{}))
			}
			before := heapAfterGC(t)
			vw := New()
			for _, node := range nodes {
				vw.SetNode(node)
				if !vw.Known(node.Name) {
					t.Fatalf("%s not judged", node.Name)
				}
			}
			held := heapAfterGC(t) - before
			vw.mu.RLock()
			weight := vw.bytes
			vw.mu.RUnlock()
			runtime.KeepAlive(vw)
			runtime.KeepAlive(nodes) // their annotations are not what the view holds
			t.Logf("%d nodes hold %d bytes, weigh %d", n, held, weight)
			if weight < held {
				t.Errorf("%d nodes weigh %d bytes, less than the %d they hold", n, weight, held)
			}
			// The large machines fill the view: there the weight must
			// not keep it much emptier than its bound says.
			if topo.Present().Size() >= 1024 && weight > 2*held {
				t.Errorf("%d nodes weigh %d bytes, more than twice the %d they hold: the bound keeps too few", n, weight, held)
			}
		})
	}
}
