package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestCtlResize: ctl resize sends PATCH /v1/workloads/NAME with the new
// size and prints the workload the agent answers (a table, or its JSON
// with -o json); the agent's refusal is bad input (exit 2), and a resize
// without --cpus is refused before any call.
func TestCtlResize(t *testing.T) {
	var calls []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		calls = append(calls, r.Method+" "+r.URL.Path+" "+string(b))
		w.Header().Set("Content-Type", "application/json")
		var body struct{ CPUs float64 }
		json.Unmarshal(b, &body)
		if body.CPUs > 4 {
			w.WriteHeader(http.StatusConflict)
			w.Write([]byte(`{"error":"rejected: capacity: growing \"enc-1\" from 2 to 8 CPUs needs 6 more"}`))
			return
		}
		w.Write([]byte(`{"name":"enc-1","qos":"LSE","cpuset":"0-1,8-9","cpus":4,"numa_nodes":"0","threads":4,"source":"command",
			"created_at":"2026-11-27T08:00:00Z","generation":2,"promised_cpuset":"0,8"}`))
	}))
	defer srv.Close()
	for _, tc := range []struct {
		name     string
		args     []string
		wantCode int
		wantOut  []string
		wantCall string
	}{{
		name:     "text",
		args:     []string{"resize", "enc-1", "--cpus", "4"},
		wantOut:  []string{"NAME", "enc-1", "0-1,8-9 (promised: 0,8)"},
		wantCall: `PATCH /v1/workloads/enc-1 {"cpus":4}`,
	}, {
		name:     "json",
		args:     []string{"resize", "enc-1", "--cpus", "4", "-o", "json"},
		wantOut:  []string{`"cpuset": "0-1,8-9"`, `"promised_cpuset": "0,8"`, `"generation": 2`},
		wantCall: `PATCH /v1/workloads/enc-1 {"cpus":4}`,
	}, {
		name:     "refused",
		args:     []string{"resize", "enc-1", "--cpus", "8"},
		wantCode: 2,
		wantCall: `PATCH /v1/workloads/enc-1 {"cpus":8}`,
	}, {
		name:     "no size",
		args:     []string{"resize", "enc-1"},
		wantCode: 2,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			calls = nil
			var out, errOut bytes.Buffer
			code := Main(append([]string{"ctl", "--socket", srv.URL}, tc.args...), strings.NewReader(""), &out, &errOut)
			if code != tc.wantCode {
				t.Fatalf("exit %d, want %d (stderr %q)", code, tc.wantCode, errOut.String())
			}
			for _, w := range tc.wantOut {
				if !strings.Contains(out.String(), w) {
					t.Errorf("stdout lacks %q:\n%s", w, out.String())
				}
			}
			if got := strings.Join(calls, "\n"); got != tc.wantCall {
				t.Errorf("calls = %q, want %q", got, tc.wantCall)
			}
		})
	}
}
