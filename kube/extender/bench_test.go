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
// call over HTTP handler plumbing (decode, place, encode) for 100 nodes
// publishing their full topology, each with its own assignments (so 100
// cached states), and reports the p99 of a call pair.
func BenchmarkFilterPrioritize100Nodes(b *testing.B) {
	var nodes []corev1.Node
	for i := range 100 {
		// A different CPU held on each node keeps 100 distinct states.
		nodes = append(nodes, topoNode(b, fmt.Sprintf("node-%03d", i), fmt.Sprintf(`[{"id":"x/held","cpuset":"%d","qos":"LSE"}]`, i%16)))
	}
	pod := guaranteedPod("enc", "4", map[string]string{AnnotationNUMAPolicy: "single-numa-node"}, nil)
	body := args(b, pod, nodes...)
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
