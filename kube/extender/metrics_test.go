package extender

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestMetricsCountCallsAndNodes: /metrics reports each call by verb and
// status code, its duration, and /filter's nodes by result.
func TestMetricsCountCallsAndNodes(t *testing.T) {
	h := New().Handler()
	busy := topoNode(t, "busy", `[{"id":"a/x","cpuset":"0-2","qos":"LSE"},{"id":"a/y","cpuset":"4-6","qos":"LSE"}]`)
	free := topoNode(t, "free", "")
	for _, cpus := range []string{"6", "9"} {
		pod := guaranteedPod("p"+cpus, cpus, map[string]string{AnnotationNUMAPolicy: "single-numa-node"}, nil)
		filter(t, h, args(t, pod, busy, free))
	}
	prioritize(t, h, args(t, guaranteedPod("p", "2", nil, nil), busy, free))
	if code, _ := post(t, h, "/filter", []byte(`{"Pod":`)); code != http.StatusBadRequest {
		t.Fatalf("bad body: %d", code)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	// 6 CPUs: free kept, busy failed (preemption may help); 9 CPUs: both
	// unresolvable (no NUMA node of 9 CPUs).
	for _, want := range []string{
		`corepin_extender_filtered_nodes_total{result="kept"} 1`,
		`corepin_extender_filtered_nodes_total{result="failed"} 1`,
		`corepin_extender_filtered_nodes_total{result="unresolvable"} 2`,
		`corepin_extender_requests_total{code="200",verb="filter"} 2`,
		`corepin_extender_requests_total{code="400",verb="filter"} 1`,
		`corepin_extender_requests_total{code="200",verb="prioritize"} 1`,
		`corepin_extender_request_duration_seconds_count{verb="filter"} 3`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
