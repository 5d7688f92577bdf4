package agent

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestClientBoundsHostileAnswers (issue 17 §5): ctl printed an agent's raw
// escape sequences and 10 MB error lines. Whatever answers, an APIError's
// message is printable and bounded, and keeps the status.
func TestClientBoundsHostileAnswers(t *testing.T) {
	esc := "\x1b]0;pwned\x07\x1b[2J\x1b[31mred\u009b\x7f\xff"
	huge := strings.Repeat(esc+"x", 10<<20/len(esc))
	for _, tc := range []struct {
		name, body, ctype string
		status            int
	}{
		{name: "JSON error with escapes", status: 422, ctype: "application/json", body: fmt.Sprintf(`{"error":%q}`, esc+"bad name")},
		{name: "10 MB JSON error", status: 409, ctype: "application/json", body: `{"error":"` + strings.ReplaceAll(huge, "\x1b", `\u001b`) + `"}`},
		{name: "10 MB raw text", status: 500, ctype: "text/plain", body: huge},
		{name: "empty", status: 503, ctype: "text/plain"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", tc.ctype)
				w.WriteHeader(tc.status)
				w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			_, err := NewClient(srv.URL, "").List()
			var ae *APIError
			if !errors.As(err, &ae) || ae.Status != tc.status {
				t.Fatalf("List = %v, want an APIError with status %d", err, tc.status)
			}
			if len(ae.Message) > MaxErrorLen+64 || ae.Message == "" {
				t.Errorf("message is %d bytes, want 1 to about %d", len(ae.Message), MaxErrorLen)
			}
			for _, c := range []byte(ae.Message) {
				if c < 0x20 || c == 0x7f {
					t.Fatalf("message %.120q holds control byte %#x", ae.Message, c)
				}
			}
			if strings.Contains(ae.Message, "\u009b") || strings.ContainsRune(ae.Message, 0xfffd) && !strings.Contains(tc.body, "\ufffd") {
				t.Errorf("message %.120q holds a C1 control or a replaced byte", ae.Message)
			}
		})
	}
}

func TestPrintable(t *testing.T) {
	for _, tc := range []struct {
		in   string
		max  int
		want string
	}{
		{in: "plain name-1, ünïcode ✓", max: 100, want: "plain name-1, ünïcode ✓"},
		{in: "\x1b[31mred\x07", max: 100, want: `\x1b[31mred\x07`},
		{in: "a\nb\tc\rd", max: 100, want: `a\x0ab\x09c\x0dd`},
		{in: "csi\u009b1m del\x7f bad\xff", max: 100, want: `csi\u009b1m del\x7f bad\xff`},
		{in: strings.Repeat("a", 20), max: 8, want: strings.Repeat("a", 8) + "... (12 more bytes)"},
	} {
		if got := Printable(tc.in, tc.max); got != tc.want {
			t.Errorf("Printable(%q, %d) = %q, want %q", tc.in, tc.max, got, tc.want)
		}
	}
}

// TestClientTop: ctl top's rates come from two samples interval apart,
// only for workloads present in both, with the second sample's QoS status.
func TestClientTop(t *testing.T) {
	samples := []string{
		`{"usage":[{"name":"a","qos":"LSE","cpuset":"2-3","usage_s":10,"throttled_s":1,"pids":2},{"name":"gone","usage_s":5}]}`,
		`{"usage":[{"name":"a","qos":"LSE","cpuset":"2-3","usage_s":10.3,"throttled_s":1.05,"pids":3},{"name":"new","usage_s":1}],"qos":{"be_cpus":1.5}}`,
	}
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/usage" || calls >= len(samples) {
			http.Error(w, "unexpected call "+r.URL.Path, http.StatusTeapot)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(samples[calls]))
		calls++
	}))
	defer srv.Close()
	rows, q, err := NewClient(srv.URL, "").Top(200 * time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Name != "a" || rows[0].Pids != 3 || rows[0].Cpuset != "2-3" ||
		math.Abs(rows[0].CPUs-1.5) > 1e-9 || math.Abs(rows[0].ThrottledS-0.05) > 1e-9 {
		t.Errorf("Top rows = %+v, want only a: 1.5 CPUs used, 0.05 s throttled, 3 pids", rows)
	}
	if q == nil || calls != 2 {
		t.Errorf("Top: QoS %+v after %d calls; want the second sample's status, two calls", q, calls)
	}
}
