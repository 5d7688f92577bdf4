package bench

import (
	"context"
	"net"
	"os"
	"path/filepath"
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
