package cli

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/corepin/corepin/loadgen"
)

func cpuServer(t *testing.T, cost time.Duration) string {
	t.Helper()
	s, err := loadgen.NewCPUService(loadgen.WithCost(cost))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv.URL + "/"
}

func TestLoadJSON(t *testing.T) {
	url := cpuServer(t, time.Millisecond)
	var out, errb strings.Builder
	code := Main([]string{"load", "--url", url, "--rate", "40", "--duration", "500ms", "--connections", "2", "-o", "json"}, strings.NewReader(""), &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(out.String()), &got); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out.String())
	}
	for _, k := range []string{"p50_ms", "p90_ms", "p99_ms", "p99_9_ms", "max_ms", "mean_ms", "achieved_rps", "target_rps", "requests", "errors", "timeouts", "late_sends", "cdf"} {
		if _, ok := got[k]; !ok {
			t.Errorf("JSON lacks %q: %s", k, out.String())
		}
	}
	if got["tool"] != "openloop" || got["target_rps"] != 40.0 || got["errors"] != 0.0 {
		t.Errorf("tool %v target_rps %v errors %v, want openloop 40 0", got["tool"], got["target_rps"], got["errors"])
	}
}

func TestLoadText(t *testing.T) {
	url := cpuServer(t, 0)
	var out, errb strings.Builder
	if code := Main([]string{"load", "--url", url, "--rate", "40", "--duration", "250ms"}, strings.NewReader(""), &out, &errb); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
	for _, want := range []string{"open loop, target 40 req/s", "p99 ", "p99.9 ", "Requests ", "Errors     0", "Late sends"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestLoadWrk(t *testing.T) {
	if !loadgen.WrkAvailable() {
		t.Skip("wrk not on PATH: install the Debian package wrk to run this test")
	}
	url := cpuServer(t, time.Millisecond)
	var out, errb strings.Builder
	if code := Main([]string{"load", "--wrk", "--url", url, "--duration", "1s", "--connections", "2"}, strings.NewReader(""), &out, &errb); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
	if !strings.Contains(out.String(), "closed loop (wrk)") {
		t.Errorf("output does not say wrk is closed loop:\n%s", out.String())
	}
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
	}{
		{name: "no url", args: []string{"load"}, code: 2},
		{name: "zero rate", args: []string{"load", "--url", "http://127.0.0.1:1/", "--rate", "0"}, code: 2},
		{name: "bad url", args: []string{"load", "--url", "127.0.0.1:1"}, code: 2},
		{name: "zero connections", args: []string{"load", "--url", "http://127.0.0.1:1/", "--connections", "0"}, code: 2},
		{name: "rate with wrk", args: []string{"load", "--wrk", "--url", "http://127.0.0.1:1/", "--rate", "10"}, code: 2},
		{name: "wrk threads over connections", args: []string{"load", "--wrk", "--url", "http://127.0.0.1:1/", "--threads", "3", "--connections", "2"}, code: 2},
		{name: "closed port", args: []string{"load", "--url", "http://127.0.0.1:1/", "--rate", "20", "--duration", "100ms"}, code: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb strings.Builder
			if code := Main(tc.args, strings.NewReader(""), &out, &errb); code != tc.code {
				t.Errorf("Main(%q) = %d, want %d (stderr %q)", tc.args, code, tc.code, errb.String())
			}
		})
	}
}
