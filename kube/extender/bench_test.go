package extender

import (
	"bytes"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/corepin/corepin/kube/nodestate"
)

// BenchmarkFilterPrioritize100Nodes times one /filter plus one /prioritize
// call through the handler (decode, place on every node, encode) for 100
// nodes, and reports the p50 and p99 of a call pair. "topology": each node
// publishes its full 16-CPU topology and its own assignments (100 cached
// states); "numa-free": the coarse fallback annotation; "nrt": no
// annotation, the same free CPUs per NUMA node from NodeResourceTopology
// objects (WithNRT);
// "topology-distinct-pods": as topology, but each pair is for another pod
// (64 in turn), as in a scheduling wave: the node view keeps verdicts by
// node state and request shape, not by pod, so the pods of one shape
// find them kept;
// "topology-settings": as topology, each node also publishing its
// allocator settings (corepin.io/allocator, default topology policy
// single-numa-node) and the pod naming no policy; "koord": no annotation,
// koordlet's NodeResourceTopology of an idle 16-CPU machine under either
// kubelet policy, each Node with 3 common labels, the pod naming no
// policy; "koord-labels": as koord, with Koordinator's cpu-bind-policy and
// numa-topology-policy labels in 24 combinations; "topology-bound-pods": as
// topology, each node naming its admitted pods (pod_uids) and two 2-CPU
// pods bound to each and not yet admitted there (WithPods, 200 pods).
func BenchmarkFilterPrioritize100Nodes(b *testing.B) {
	topo := make([]corev1.Node, 0, 100)
	coarse := make([]corev1.Node, 0, 100)
	for i := range 100 {
		// A different CPU held on each node keeps 100 distinct states.
		topo = append(topo, topoNode(b, fmt.Sprintf("node-%03d", i), fmt.Sprintf(`[{"id":"x/held","cpuset":"%d","qos":"LSE"}]`, i%16)))
		coarse = append(coarse, node(fmt.Sprintf("node-%03d", i), map[string]string{AnnotationNUMAFree: fmt.Sprintf("[%d,%d]", 4+i%5, 8-i%3)}))
	}
	pod := guaranteedPod("enc", "4", map[string]string{AnnotationNUMAPolicy: "single-numa-node"}, nil)
	for _, bc := range []struct {
		name  string
		nodes []corev1.Node
	}{{"topology", topo}, {"numa-free", coarse}} {
		b.Run(bc.name, func(b *testing.B) { benchCalls(b, New().Handler(), args(b, pod, bc.nodes...)) })
	}
	b.Run("nrt", func(b *testing.B) {
		store := NewNRTStore(100, nil)
		bare := make([]corev1.Node, 0, 100)
		for i := range 100 {
			name := fmt.Sprintf("node-%03d", i)
			bare = append(bare, node(name, nil))
			store.Set(name, nrtZones(4+i%5, 8-i%3))
		}
		benchCalls(b, New(WithNRT(store)).Handler(), args(b, pod, bare...))
	})
	b.Run("topology-settings", func(b *testing.B) {
		nodes := make([]corev1.Node, 0, len(topo))
		for _, n := range topo {
			ann := maps.Clone(n.Annotations)
			ann[AnnotationAllocator] = `{"policy":"corepin","options":["full-pcpus-only"],"topology_policy":"single-numa-node"}`
			nodes = append(nodes, node(n.Name, ann))
		}
		benchCalls(b, New().Handler(), args(b, guaranteedPod("enc", "4", nil, nil), nodes...))
	})
	for _, labels := range []bool{false, true} {
		name := "koord"
		if labels {
			name = "koord-labels"
		}
		b.Run(name, func(b *testing.B) {
			store := NewNRTStore(100, nil)
			bare := make([]corev1.Node, 0, 100)
			kubelet := []string{`{"policy":"none"}`, `{"policy":"static"}`}
			binds := []string{"FullPCPUsOnly", "SpreadByPCPUs", "None"}
			policies := []string{"SingleNUMANode", "Restricted", "None", "BestEffort"}
			for i := range 100 {
				name := fmt.Sprintf("node-%03d", i)
				o, err := nodestate.FieldsOf(koordLabelObject(b, name, kubelet[i%2], "None"))
				if err != nil {
					b.Fatal(err)
				}
				store.set(name, o)
				n := node(name, nil)
				n.Labels = map[string]string{"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "topology.kubernetes.io/zone": "z1"}
				if labels {
					n.Labels[nodestate.LabelKoordCPUBindPolicy] = binds[i%3]
					n.Labels[nodestate.LabelKoordNUMATopologyPolicy] = policies[i%4]
				}
				bare = append(bare, n)
			}
			benchCalls(b, New(WithNRT(store)).Handler(), args(b, guaranteedPod("enc", "4", nil, nil), bare...))
		})
	}
	b.Run("topology-bound-pods", func(b *testing.B) {
		pods := NewPodStore(1000, nil)
		nodes := make([]corev1.Node, 0, len(topo))
		for i, n := range topo {
			ann := maps.Clone(n.Annotations)
			ann[AnnotationAllocator] = `{"policy":"corepin","pod_uids":true}`
			nodes = append(nodes, node(n.Name, ann))
			for j := range 2 {
				pods.Set(boundPodOn(fmt.Sprintf("u-%d-%d", i, j), n.Name, "2"))
			}
		}
		benchCalls(b, New(WithPods(pods)).Handler(), args(b, pod, nodes...))
	})
	b.Run("topology-distinct-pods", func(b *testing.B) {
		var bodies [][]byte
		for i := range 64 {
			p := guaranteedPod(fmt.Sprintf("enc-%d", i), "4", map[string]string{AnnotationNUMAPolicy: "single-numa-node"}, nil)
			bodies = append(bodies, args(b, p, topo...))
		}
		benchCalls(b, New().Handler(), bodies...)
	})
}

// benchCalls times call pairs on bodies in turn.
func benchCalls(b *testing.B, h http.Handler, bodies ...[]byte) {
	call := func(path string, body []byte) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body)))
		if rec.Code != http.StatusOK {
			b.Fatalf("POST %s = %d", path, rec.Code)
		}
	}
	call("/filter", bodies[0]) // warm the cache, as a running extender is
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		body := bodies[i%len(bodies)]
		i++
		start := time.Now()
		call("/filter", body)
		call("/prioritize", body)
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-us/pair")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-us/call")
		b.ReportMetric(float64(len(bodies[0]))/1024, "body-KiB")
	}
}

// nrtZones are the Node zones of free CPUs per NUMA node.
func nrtZones(free ...int) []nodestate.Zone {
	var zs []nodestate.Zone
	for i, f := range free {
		zs = append(zs, nodestate.Zone{Name: fmt.Sprintf("node-%d", i), Type: "Node", Resources: []nodestate.Resource{{Name: "cpu", Available: fmt.Sprint(f)}}})
	}
	return zs
}
