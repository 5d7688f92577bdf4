package kubetest

import "testing"

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
