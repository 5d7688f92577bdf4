package enforce

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The shim protocol works without root: a fake v1 group records the pid
// Start adds, and the command runs as that same pid, without the shim's
// variable or descriptors, with the caller's ExtraFiles in place.
func TestStartShimFake(t *testing.T) {
	f := newFakeV1(t, v1CPUFiles)
	d, err := newV1(f.hierarchies(), testConfig("corepin"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := d.Create("shim", Resources{})
	if err != nil {
		t.Fatal(err)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	cmd := exec.Command("sh", "-c", `echo $$; echo "${COREPIN_ENFORCE_SHIM-unset}"; `+
		`for fd in 4 5; do [ -e /proc/$$/fd/$fd ] && echo "fd $fd leaked"; done; echo extra >&3; true`)
	cmd.ExtraFiles = []*os.File{pw}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	wantArgs := append([]string(nil), cmd.Args...)
	if err := start(g, cmd, "", false); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("Wait() = %v; output %q", err, out.String())
	}
	pid := strconv.Itoa(cmd.Process.Pid)
	if want := pid + "\nunset\n"; out.String() != want {
		t.Errorf("child output = %q, want %q", out.String(), want)
	}
	if got := f.cpuset.readBack(t, "corepin/run-100-5-shim/cgroup.procs"); got != pid {
		t.Errorf("cpuset cgroup.procs = %q, want the child's pid %s", got, pid)
	}
	if b, _ := io.ReadAll(pr); string(b) != "extra\n" {
		t.Errorf("ExtraFiles[0] got %q, want %q", b, "extra\n")
	}
	if !slices.Equal(cmd.Args, wantArgs) || len(cmd.ExtraFiles) != 1 || cmd.Env != nil {
		t.Errorf("cmd changed: Args %q, %d ExtraFiles, Env %q", cmd.Args, len(cmd.ExtraFiles), cmd.Env)
	}
}

// A program that cannot be executed is Start's error, not a mysterious
// exit status.
func TestStartShimExecError(t *testing.T) {
	g := &affinityGroup{d: &affinityDriver{}, name: "x", plan: affinityPlan{}}
	g.plan.CPUs, _ = ownAffinity()
	cmd := &exec.Cmd{Path: "/nonexistent/prog", Args: []string{"prog"}}
	err := start(g, cmd, "", false)
	if err == nil || !strings.Contains(err.Error(), "exec /nonexistent/prog") {
		t.Errorf("Start() = %v, want the exec error", err)
	}
	if cmd.ProcessState == nil {
		t.Error("shim not waited for")
	}
}

type failingGroup struct{ Group }

func (failingGroup) AddProc(int) error { return errors.New("no room") }

// When the shim cannot be put in the group, the command never runs.
func TestStartShimAddProcError(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command("sh", "-c", "touch "+dir+"/ran")
	err := start(failingGroup{}, cmd, "", false)
	if err == nil || !strings.Contains(err.Error(), "no room") {
		t.Errorf("Start() = %v, want the AddProc error", err)
	}
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 126 {
		t.Errorf("shim state = %v, want exited 126", cmd.ProcessState)
	}
	if _, err := os.Stat(dir + "/ran"); err == nil {
		t.Error("the command ran although AddProc failed")
	}
}

func TestStartRefusesStartedOrBroken(t *testing.T) {
	cmd := exec.Command("/nonexistent-for-corepin")
	if err := Start(failingGroup{}, cmd); err == nil {
		t.Error("Start with a lookup error = nil")
	}
	cmd = exec.Command("true")
	cmd.Process = &os.Process{Pid: 1}
	if err := Start(failingGroup{}, cmd); err == nil {
		t.Error("Start of a started command = nil")
	}
}

func TestKernelAtLeast(t *testing.T) {
	for _, tc := range []struct {
		rel  string
		want bool
	}{{"6.18.44-fc-v657", true}, {"5.7.0", true}, {"5.6.19-arch1", false}, {"4.19.0-18-amd64", false},
		{"5.10", true}, {"garbage", false}, {"", false}} {
		if got := kernelAtLeast(tc.rel, 5, 7); got != tc.want {
			t.Errorf("kernelAtLeast(%q, 5, 7) = %v, want %v", tc.rel, got, tc.want)
		}
	}
}
