package nodeview

import (
	"fmt"
	"math/rand/v2"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/kube/nodestate/nodestatetest"
)

// burstShapes are the requests of make bench-sched's burst, one of each
// shape: LSE in whole cores (2, 4, 8 CPUs), single-numa-node (2 to 12),
// LS (0.5 to 2 CPUs) and BE.
func burstShapes() []alloc.Request {
	var out []alloc.Request
	for _, cpus := range []int{2, 4, 8} {
		out = append(out, alloc.Request{ID: "default/p", QoS: alloc.LSE, CPUs: cpus, Bind: alloc.BindFullPCPUs})
	}
	for cpus := 2; cpus <= 12; cpus++ {
		out = append(out, alloc.Request{ID: "default/p", QoS: alloc.LSE, CPUs: cpus, TopologyPolicy: alloc.TopologySingleNUMANode})
	}
	for m := 500; m <= 2000; m += 500 {
		out = append(out, alloc.Request{ID: "default/p", QoS: alloc.LS, MilliCPUs: m})
	}
	return append(out, alloc.Request{ID: "default/p", QoS: alloc.BE})
}

// BenchmarkJudgeFresh judges make bench-sched's request shapes on 1000
// nodes of the fixture machines at random occupancy, each verdict anew
// (none kept on the entry), as the first pods of a burst on a large
// fleet find them: what a node's first verdict for a shape costs. One
// op is one verdict.
func BenchmarkJudgeFresh(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 6))
	topos := nodestatetest.FixtureMachines(b)
	vw := New()
	var names []string
	for i := range 1000 {
		topo := topos[i%len(topos)]
		st, err := alloc.NewState(topo, alloc.NodeSettings{})
		if err != nil {
			b.Fatal(err)
		}
		target := int(0.75 * rng.Float64() * float64(topo.Allowed().Size()))
		pods := map[string]string{}
		for k := 0; topo.Allowed().Size()-st.Pools().LS.Size() < target && k < 100; k++ {
			id := fmt.Sprintf("held/w%d", k)
			if _, err := st.Admit(alloc.Request{ID: id, QoS: alloc.LSE, CPUs: 1 + rng.IntN(8)}); err == nil {
				pods[id] = fmt.Sprintf("uid-%d-%d", i, k)
			}
		}
		name := fmt.Sprintf("n%04d", i)
		vw.SetNode(nodestatetest.Publish(b, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, st, "", pods))
		names = append(names, name)
	}
	shapes := burstShapes()
	keys := make([]Key, len(shapes))
	for i, r := range shapes {
		keys[i] = vw.Key(r)
	}
	entries := make([]*node, len(names))
	for i, name := range names {
		entries[i] = vw.get(name)
	}
	i := 0
	for b.Loop() {
		s := (i / len(entries)) % len(shapes)
		judgeAs(entries[i%len(entries)], shapes[s], nil, keys[s])
		i++
	}
}
