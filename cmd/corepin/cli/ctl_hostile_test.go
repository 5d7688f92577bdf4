package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestCtlPrintsNoAgentEscapes (issue 17 §5): ctl printed whatever the
// agent sent, terminal escapes and 10 MB error lines included. Against a
// hostile agent its text output holds no control character but the
// newlines it writes itself, and an error is one bounded line.
func TestCtlPrintsNoAgentEscapes(t *testing.T) {
	esc := "\x1b]0;pwned\x07\x1b[2J\u009b31m"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/v1/workloads":
			fmt.Fprintf(w, `{"workloads":[{"name":%s,"qos":%s,"cpuset":%s,"source":%s,"numa_nodes":%s}]}`,
				js(esc+"name"), js(esc), js(esc+strings.Repeat("0,", 1000)), js(esc), js(esc))
		default:
			w.WriteHeader(http.StatusUnprocessableEntity)
			fmt.Fprintf(w, `{"error":%s}`, js(esc+strings.Repeat("long "+esc, 1<<20)))
		}
	}))
	defer srv.Close()
	for _, tc := range []struct {
		args     []string
		wantCode int
	}{
		{args: []string{"ctl", "--socket", srv.URL, "list"}, wantCode: 0},
		{args: []string{"ctl", "--socket", srv.URL, "get", "x"}, wantCode: 2},
		{args: []string{"ctl", "--socket", srv.URL, "resize", "x", "--cpus", "2"}, wantCode: 2},
		{args: []string{"ctl", "--socket", srv.URL, "create", "x", "--cpus", "1", "--", "sleep", "1"}, wantCode: 2},
	} {
		var out, errOut bytes.Buffer
		code := Main(tc.args, strings.NewReader(""), &out, &errOut)
		if code != tc.wantCode {
			t.Errorf("%v: exit %d, want %d (stderr %.200q)", tc.args, code, tc.wantCode, errOut.String())
		}
		for name, b := range map[string][]byte{"stdout": out.Bytes(), "stderr": errOut.Bytes()} {
			if i := bytes.IndexFunc(b, func(r rune) bool { return (r < 0x20 && r != '\n') || r == 0x7f || (r >= 0x80 && r < 0xa0) }); i >= 0 {
				t.Errorf("%v: %s holds a control character at %d: %.80q", tc.args, name, i, b[max(0, i-20):])
			}
			if len(b) > 4<<10 {
				t.Errorf("%v: %s is %d bytes, want a bounded answer", tc.args, name, len(b))
			}
		}
		if tc.wantCode != 0 && strings.Count(errOut.String(), "\n") != 1 {
			t.Errorf("%v: stderr is %d lines, want one", tc.args, strings.Count(errOut.String(), "\n"))
		}
	}
}

// js is s as a JSON string, escapes and all.
func js(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
