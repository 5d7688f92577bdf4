package extender

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// BenchmarkFilterPrioritize100Nodes times one /filter plus one /prioritize
// call through the handler (decode, place on every node, encode) for 100
// nodes, and reports the p99 of a call pair. "topology": each node
// publishes its full 16-CPU topology and its own assignments (100 cached
// states); "numa-free": the coarse fallback annotation.
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
		b.Run(bc.name, func(b *testing.B) { benchCalls(b, args(b, pod, bc.nodes...)) })
	}
}

func benchCalls(b *testing.B, body []byte) {
	h := New().Handler()
	call := func(path string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body)))
		if rec.Code != http.StatusOK {
			b.Fatalf("POST %s = %d", path, rec.Code)
		}
	}
	call("/filter") // warm the cache, as a running extender is
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		call("/filter")
		call("/prioritize")
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-us/call")
		b.ReportMetric(float64(len(body))/1024, "body-KiB")
	}
}
