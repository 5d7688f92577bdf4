package nodeview

import (
	"math/rand/v2"
	"testing"

	corev1 "k8s.io/api/core/v1"

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
	vw := New()
	var names []string
	for _, n := range nodestatetest.BusyNodes(b, 1000, rand.New(rand.NewPCG(5, 6)), nodestatetest.FixtureMachines(b)...) {
		vw.SetNode(n)
		names = append(names, n.Name)
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

// BenchmarkCandidates asks which of 1000 nodes of the fixture machines at
// random occupancy may take each of make bench-sched's request shapes in
// turn (View.Candidates), as PreFilter does for a pod that needs aligned
// CPUs, half the nodes holding the shape's verdict already: what the scan
// costs per node (ns/node). One op is one scan.
func BenchmarkCandidates(b *testing.B) {
	vw := New()
	nodes := nodestatetest.BusyNodes(b, 1000, rand.New(rand.NewPCG(5, 6)), nodestatetest.FixtureMachines(b)...)
	for _, n := range nodes {
		vw.SetNode(n)
	}
	shapes := burstShapes()
	keys := make([]Key, len(shapes))
	for i, r := range shapes {
		keys[i] = vw.Key(r)
		for _, n := range nodes[:len(nodes)/2] {
			vw.JudgeNode(n, r, nil, keys[i])
		}
	}
	i, kept := 0, 0
	for b.Loop() {
		s := i % len(shapes)
		vw.Candidates(shapes[s], nil, keys[s], len(nodes), func(i int) *corev1.Node { return nodes[i] },
			func(int) bool { kept++; return true })
		i++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(i*len(nodes)), "ns/node")
	b.ReportMetric(float64(kept)/float64(i*len(nodes)), "kept/node")
}
