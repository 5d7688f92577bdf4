package kubetest

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"
)

func TestNotableDropsRoutineLogLines(t *testing.T) {
	out := `{"level":"warn","ts":"x","msg":"it isn't recommended to use default name"}
I1123 05:13:03.392405 1 server.go:1] serving
W1123 05:13:03.392405 1 server.go:2] deprecated flag
{"level":"error","ts":"x","msg":"setting up serving failed"}
E1123 05:13:04.000000 1 server.go:3] unable to bind
panic: boom
{"level":"info","msg":"closed"}
`
	got := Notable(out, 12)
	want := `{"level":"error","ts":"x","msg":"setting up serving failed"}
E1123 05:13:04.000000 1 server.go:3] unable to bind
panic: boom`
	if got != want {
		t.Fatalf("Notable kept:\n%s\nwant:\n%s", got, want)
	}
	if got := Notable(out, 1); got != "panic: boom" {
		t.Fatalf("Notable(out, 1) = %q, want the last notable line only", got)
	}
}

// A server whose port was taken before it bound is started again on
// fresh ports; one that answers ok is returned with its ports.
func TestStartServingRetriesATakenPort(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }))
	defer srv.Close()
	var tried [][]int
	p, ports := StartServing(t, 2, 10*time.Second, func(ports []int) (*Proc, string, string) {
		tried = append(tried, ports)
		p := &Proc{Name: "server", Log: &LogBuf{}, Done: make(chan struct{})}
		if len(tried) == 1 {
			fmt.Fprintf(p.Log, "listen tcp 127.0.0.1:%d: bind: address already in use\n", ports[0])
			close(p.Done)
		}
		return p, srv.URL, ""
	})
	if len(tried) != 2 || len(ports) != 2 || p.Log.String() != "" || !slices.Equal(ports, tried[1]) {
		t.Errorf("tried %v, returned %v (log %q): want a second start on fresh ports, returned", tried, ports, p.Log.String())
	}
}
