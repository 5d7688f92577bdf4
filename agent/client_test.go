package agent

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
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
