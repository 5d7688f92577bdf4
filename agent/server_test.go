package agent

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/corepin/corepin/internal/testutil"
)

// /metrics carries what issue 10 lists: per-workload CPU usage and
// throttling, pool sizes, the admission latency histogram, rejections by
// reason and reconcile actions.
func TestMetrics(t *testing.T) {
	m := NewMetrics()
	n, _ := newNode(t, func(o *Options) { o.Observer = m })
	cl := NewClient(serve(t, &Server{Node: n, Metrics: m}), "")
	if _, err := cl.Create(Spec{Name: "m-lse", QoS: "LSE", CPUs: f64(1), Command: "sleep", Args: []string{"600"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Create(Spec{Name: "m-lse", QoS: "LSE", CPUs: f64(1), Command: "sleep", Args: []string{"600"}}); err == nil {
		t.Fatal("a duplicate create succeeded")
	}
	if _, err := cl.Create(Spec{Name: "m-bad", QoS: "GOLD", CPUs: f64(1), Command: "sleep"}); err == nil {
		t.Fatal("an unknown qos was admitted")
	}
	if _, err := cl.Create(Spec{Name: "m-short", CPUs: f64(0.1), Command: "sleep", Args: []string{"600"}}); err != nil {
		t.Fatal(err)
	}
	if err := cl.Delete("m-short"); err != nil {
		t.Fatal(err)
	}
	resp, err := cl.hc.Get(cl.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	body := string(b)
	for _, want := range []string{
		`corepin_agent_admission_seconds_count 4`,
		`corepin_agent_rejections_total{reason="exists"} 1`,
		`corepin_agent_rejections_total{reason="invalid"} 1`,
		`corepin_agent_reconcile_actions_total{action="deleted"} 1`,
		`corepin_agent_pool_cpus{pool="lse"} 1`,
		`corepin_workload_cpu_seconds_total{qos="LSE",workload="m-lse"}`,
		`corepin_workload_throttled_seconds_total{qos="LSE",workload="m-lse"}`,
		`process_resident_memory_bytes`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// A TCP listener serves only requests with the bearer token.
func TestBearerToken(t *testing.T) {
	n, _ := newNode(t)
	const token = "0123456789abcdef-token"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go (&Server{Node: n, Token: token}).Serve(ctx, ln)
	addr := "http://" + ln.Addr().String()
	for _, tc := range []struct {
		name, token string
		wantCode    int
	}{
		{name: "no token", wantCode: http.StatusUnauthorized},
		{name: "wrong token", token: "0123456789abcdef-tokeN", wantCode: http.StatusUnauthorized},
		{name: "right token", token: token, wantCode: http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, addr+"/v1/workloads", nil)
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			c := &http.Client{Timeout: testutil.Patience}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.wantCode {
				t.Errorf("status %d, want %d", resp.StatusCode, tc.wantCode)
			}
		})
	}
	if _, err := NewClient(addr, token).List(); err != nil {
		t.Errorf("Client with the token: %v", err)
	}
}
