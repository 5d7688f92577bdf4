package bench

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corepin/corepin/enforce"
	"github.com/corepin/corepin/nodecore"
	"github.com/corepin/corepin/proc"
	"github.com/corepin/corepin/topology"
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

// The scan policy holds SIS_UTIL off on the machine whose features file
// it opened, records the value found in the shared state file first, and
// gives it back at Teardown; where there is no features file it is left
// out with the reason, and nothing is opened.
func TestColocationScanPolicySwitchesAndRestores(t *testing.T) {
	t.Setenv(nodecore.EnvState, filepath.Join(t.TempDir(), "state.db"))
	none := &colocationExp{scanRoot: t.TempDir()}
	if why := none.openScan(); !strings.Contains(why, "features") || none.scan != nil {
		t.Errorf("without a features file: openScan = %q (scan %v), want the reason naming the features file and nothing opened", why, none.scan)
	}

	root := t.TempDir()
	file := filepath.Join(root, topology.SchedFeaturesFile)
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte("TTWU_QUEUE SIS_UTIL WA_IDLE\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := &colocationExp{scanRoot: root}
	if why := e.openScan(); why != "" {
		t.Fatalf("openScan on a writable features file: %s", why)
	}
	if _, err := e.scan.Hold(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(file); !strings.Contains(string(b), "NO_SIS_UTIL") {
		t.Errorf("while a scan point runs the features file says %q, want NO_SIS_UTIL", b)
	}
	if err := e.Teardown(nil); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(file); strings.Contains(string(b), "NO_SIS_UTIL") || !strings.Contains(string(b), "SIS_UTIL") {
		t.Errorf("after Teardown the features file says %q, want SIS_UTIL back on", b)
	}
}
