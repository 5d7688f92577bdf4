package bench

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corepin/corepin/enforce"
	"github.com/corepin/corepin/proc"
)

// Issue 8 §3: the cpu service's address was read by polling a bytes.Buffer
// that os/exec filled from another goroutine, a data race. This test runs
// under -race with a stand-in service that prints its address late, after
// the first polls, so the old code raced on every run.
func TestStartServiceCPUReadsAddressWithoutRace(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dir := t.TempDir()
	exe := filepath.Join(dir, "fake-corepin")
	script := "#!/bin/sh\nsleep 0.2\necho '{\"listen\":\"" + ln.Addr().String() + "\"}'\necho more output\nexec sleep 30\n"
	if err := os.WriteFile(exe, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	d, err := enforce.NewAffinity()
	if err != nil {
		t.Fatal(err)
	}
	e := &colocationExp{}
	e.Spec(true)
	pt, url, err := e.startService(context.Background(), &Env{Exe: exe, Dir: dir}, svcCPU,
		proc.Spec{Driver: d, Group: "colo-race-test"})
	if pt.p != nil {
		t.Cleanup(func() { stopAll([]party{pt}, nil) })
	}
	if err != nil {
		t.Fatalf("startService: %v", err)
	}
	if want := "http://" + ln.Addr().String() + "/"; url != want {
		t.Errorf("startService URL = %q, want %q", url, want)
	}
}

func TestFirstLine(t *testing.T) {
	tests := []struct {
		name    string
		input   string
		want    string
		wantErr string
	}{
		{name: "line", input: "{\"listen\":\"x\"}\nrest\n", want: "{\"listen\":\"x\"}"},
		{name: "no newline", input: "partial", wantErr: "ended before its first line"},
		{name: "empty", input: "", wantErr: "ended before its first line"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			go func() { w.WriteString(tc.input); w.Close() }()
			got, err := firstLine(r, 5e9)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("firstLine(%q) error = %v, want %q", tc.input, err, tc.wantErr)
				}
				return
			}
			if err != nil || string(got) != tc.want {
				t.Errorf("firstLine(%q) = %q, %v, want %q", tc.input, got, err, tc.want)
			}
		})
	}
}

func TestFirstLineTimesOut(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := firstLine(r, 1e6); err == nil || !strings.Contains(err.Error(), "no line of output") {
		t.Errorf("firstLine on a silent writer: error = %v, want a timeout", err)
	}
}
