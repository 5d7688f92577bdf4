package enforce

import (
	"bytes"
	"context"
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
	if err := start(context.Background(), g, cmd, "", false); err != nil {
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
	err := start(context.Background(), g, cmd, "", false)
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
	err := start(context.Background(), failingGroup{}, cmd, "", false)
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

// Issue 8 §3: the shim runs with its own minimal environment (a job's
// GOMAXPROCS=100000 once made it grow to tens of GB and never exec), and
// the command still gets the whole environment it was given.
func TestStartShimEnvironment(t *testing.T) {
	g := &affinityGroup{d: &affinityDriver{}, name: "x"}
	g.plan.CPUs, _ = ownAffinity()
	cmd := exec.Command("sh", "-c", `echo "$GOMAXPROCS $KEEP ${COREPIN_ENFORCE_SHIM-unset}"`)
	cmd.Env = []string{"GOMAXPROCS=100000", "KEEP=a b", shimEnv + "=3,4", "PATH=" + os.Getenv("PATH")}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := start(context.Background(), g, cmd, "", false); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("Wait() = %v; output %q", err, out.String())
	}
	if got, want := out.String(), "100000 a b unset\n"; got != want {
		t.Errorf("command saw %q, want %q", got, want)
	}
}

// cancelGroup cancels a context when the shim is added: the cancellation
// lands before the release.
type cancelGroup struct {
	Group
	cancel context.CancelFunc
	pid    int
}

func (c *cancelGroup) AddProc(pid int) error {
	c.pid = pid
	c.cancel()
	return nil
}

// Issue 8 §3: cancelling the context kills a shim that has not exec'd.
func TestStartShimCancelKills(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	g := &cancelGroup{cancel: cancel}
	dir := t.TempDir()
	cmd := exec.Command("sh", "-c", "touch "+dir+"/ran")
	err := start(ctx, g, cmd, "", false)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("start() = %v, want context.Canceled", err)
	}
	if cmd.ProcessState == nil || cmd.ProcessState.Success() {
		t.Errorf("shim state = %v, want killed and reaped", cmd.ProcessState)
	}
	if _, err := os.Stat(dir + "/ran"); err == nil {
		t.Error("the command ran although the start was cancelled")
	}
}

// Issue 8 §3: COREPIN_ENFORCE_SHIM in the environment once turned every
// corepin command into a broken shim. A variable alone never makes a shim:
// the child runs the test binary's normal path and lists the tests.
func TestShimNotTriggeredByEnvironment(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.list", "TestShimNotTriggeredByEnvironment")
	cmd.Env = append(os.Environ(), shimEnv+"=3,4")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "TestShimNotTriggeredByEnvironment") {
		t.Errorf("test binary with %s set: err %v, output %q", shimEnv, err, out)
	}
	// Spoofing argv[0] with descriptors that are not pipes is no shim
	// either: ShimMain returns (a shim would exit the test binary).
	f, err := os.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fd := strconv.Itoa(int(f.Fd()))
	saved := os.Args
	t.Cleanup(func() { os.Args = saved })
	os.Args = []string{shimArg0, fd + "," + fd, "/bin/true", "true"}
	ShimMain()
}
