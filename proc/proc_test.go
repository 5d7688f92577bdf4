package proc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/enforce"
	"github.com/corepin/corepin/internal/testutil"
)

// TestMain lets the test binary serve as enforce.Start's shim and as the
// unprivileged child of TestAffinityPinnedAsNobody.
func TestMain(m *testing.M) {
	enforce.ShimMain()
	os.Exit(m.Run())
}

// realDriver returns this machine's cgroup driver under a root of the
// test's own, or skips saying why there is none.
func realDriver(t *testing.T) enforce.Driver {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipping: creating cgroups needs root")
	}
	d, err := enforce.Detect(enforce.WithRoot(fmt.Sprintf("corepin-test-proc-%d", os.Getpid())))
	if err != nil {
		t.Fatal(err)
	}
	if d.Name() == enforce.NameAffinity {
		t.Skipf("skipping: no writable cgroup: %q", d.Limitations())
	}
	t.Cleanup(func() {
		if r, ok := d.(enforce.RootRemover); ok {
			if err := r.RemoveRoot(); err != nil {
				t.Errorf("removing test root: %v", err)
			}
		}
	})
	return d
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i > 0 && i+2 < len(b) && b[i+2] != 'Z'
}

func TestStartWaitExit(t *testing.T) {
	tests := []struct {
		name   string
		argv   []string
		tail   int
		want   Exit
		stdout string
	}{
		{name: "success", argv: []string{"sh", "-c", "echo out; echo err >&2"},
			want: Exit{Code: 0, Stdout: "out\n", Stderr: "err\n"}, stdout: "out\n"},
		{name: "exit status", argv: []string{"sh", "-c", "exit 3"}, want: Exit{Code: 3}},
		{name: "signal", argv: []string{"sh", "-c", "kill -9 $$"}, want: Exit{Code: -1, Signal: "killed"}},
		{name: "tail is capped", argv: []string{"sh", "-c", "printf 0123456789"}, tail: 4,
			want: Exit{Stdout: "6789"}, stdout: "0123456789"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			p, err := Start(context.Background(), Spec{Argv: tc.argv, Stdout: &out, TailBytes: tc.tail})
			if err != nil {
				t.Fatal(err)
			}
			got, err := p.Wait()
			if err != nil {
				t.Fatalf("Wait() error = %v", err)
			}
			got.Result = tc.want.Result
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(cpuset.CPUSet.Equals)); diff != "" {
				t.Errorf("Wait() (-want +got):\n%s", diff)
			}
			if out.String() != tc.stdout {
				t.Errorf("Spec.Stdout got %q, want %q", out.String(), tc.stdout)
			}
		})
	}
}

// Input a process cannot run with is refused before anything starts.
func TestStartRefusesBadSpec(t *testing.T) {
	tests := []struct {
		name string
		spec Spec
		want error
	}{
		{name: "no argv", spec: Spec{}, want: ErrSpec},
		{name: "not in PATH", spec: Spec{Argv: []string{"corepin-no-such-program"}}, want: ErrNotFound},
		{name: "NUL in an argument", spec: Spec{Argv: []string{"true", "a\x00b"}}, want: ErrSpec},
		{name: "huge tail", spec: Spec{Argv: []string{"true"}, TailBytes: MaxTail + 1}, want: ErrSpec},
		{name: "driver without group", spec: Spec{Argv: []string{"true"}, Driver: noDriver{}}, want: ErrSpec},
		{name: "bad group name", spec: Spec{Argv: []string{"true"}, Driver: noDriver{}, Group: "../x"}, want: ErrSpec},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Start(context.Background(), tc.spec); !errors.Is(err, tc.want) {
				t.Errorf("Start() error = %v, want %v", err, tc.want)
			}
		})
	}
}

// noDriver fails the test if anything is created.
type noDriver struct{ enforce.Driver }

func (noDriver) Create(string, enforce.Resources) (enforce.Group, error) {
	panic("Create called for a spec that should have been refused")
}

// Issue 8 §3: a job that leaves a setsid daemon is not marked failed after
// 5 s and its group does not leak: Wait names the daemon, kills it and
// removes the group, promptly.
func TestWaitKillsSetsidLeftover(t *testing.T) {
	d := realDriver(t)
	p, err := Start(context.Background(), Spec{
		Argv: []string{"sh", "-c", `setsid sleep 1000 </dev/null >/dev/null 2>&1 & pid=$!
while [ "$(cat /proc/$pid/comm)" != sleep ]; do :; done; echo $pid`},
		Driver: d, Group: "leftover", Measure: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	got, err := p.Wait()
	if err != nil {
		t.Fatalf("Wait() error = %v", err)
	}
	if took := time.Since(begin); took > testutil.Patience { // the daemon sleeps 1000 s
		t.Errorf("Wait() took %v: it waited for the daemon instead of killing it", took)
	}
	daemon, _ := strconv.Atoi(strings.TrimSpace(got.Stdout))
	want := []Leftover{{PID: daemon, Comm: "sleep"}}
	if diff := cmp.Diff(want, got.Leftovers); diff != "" {
		t.Errorf("Leftovers (-want +got):\n%s", diff)
	}
	if got.Code != 0 {
		t.Errorf("Code = %d, want 0 (the leader succeeded)", got.Code)
	}
	// Killed and out of its group, the daemon may still be on its way out
	// (do_exit leaves the cgroup before the zombie state).
	testutil.Eventually(t, fmt.Sprintf("daemon %d exit", daemon), func() bool { return !alive(daemon) })
	if pids, err := p.Group().(enforce.ProcLister).Procs(); err == nil {
		t.Errorf("group still exists after Wait, holding %v", pids)
	}
}

// Without a group, what stays in the process group is named and killed.
func TestWaitKillsProcessGroupLeftover(t *testing.T) {
	// The leader waits until its child has exec'd sleep: before that the
	// child is a forked sh, and the leftover would rightly be named sh.
	p, err := Start(context.Background(), Spec{Argv: []string{"sh", "-c", `sleep 1000 >/dev/null & pid=$!
while [ "$(cat /proc/$pid/comm)" != sleep ]; do :; done; echo $pid`}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.Wait()
	if err != nil {
		t.Fatal(err)
	}
	child, _ := strconv.Atoi(strings.TrimSpace(got.Stdout))
	if diff := cmp.Diff([]Leftover{{PID: child, Comm: "sleep"}}, got.Leftovers); diff != "" {
		t.Errorf("Leftovers (-want +got):\n%s", diff)
	}
	testutil.Eventually(t, fmt.Sprintf("child %d exit", child), func() bool { return !alive(child) })
}

// Stop sends SIGTERM, and SIGKILL after the grace to a process that
// ignores it.
func TestStop(t *testing.T) {
	tests := []struct {
		name   string
		script string
		signal string
	}{
		{name: "exits on SIGTERM", script: "echo up; exec sleep 1000", signal: "terminated"},
		{name: "ignores SIGTERM", script: `trap "" TERM; echo up; while :; do sleep 1; done`, signal: "killed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			up := make(chan struct{})
			p, err := Start(context.Background(), Spec{Argv: []string{"sh", "-c", tc.script}, Stdout: closeOnWrite(up)})
			if err != nil {
				t.Fatal(err)
			}
			<-up
			got, err := p.Stop(200 * time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			if got.Signal != tc.signal || !got.Stopped {
				t.Errorf("Stop() = signal %q stopped %v, want %q true", got.Signal, got.Stopped, tc.signal)
			}
		})
	}
}

// closeOnWrite closes c at the first write.
type closeOnWrite chan struct{}

func (c closeOnWrite) Write(p []byte) (int, error) {
	select {
	case <-c:
	default:
		close(c)
	}
	return len(p), nil
}

// A cancelled context kills the process and its group's processes.
func TestCancelKills(t *testing.T) {
	d := realDriver(t)
	ctx, cancel := context.WithCancel(context.Background())
	up := make(chan struct{})
	p, err := Start(ctx, Spec{Argv: []string{"sh", "-c", "setsid sleep 1000 & echo up; sleep 1000"},
		Driver: d, Group: "cancel", Stdout: closeOnWrite(up)})
	if err != nil {
		t.Fatal(err)
	}
	<-up
	cancel()
	got, err := p.Wait()
	if err != nil {
		t.Fatalf("Wait() error = %v", err)
	}
	if got.Signal != "killed" || !got.Stopped {
		t.Errorf("Wait() = signal %q stopped %v, want killed true", got.Signal, got.Stopped)
	}
	for _, l := range got.Leftovers {
		testutil.Eventually(t, fmt.Sprintf("leftover %v exit", l), func() bool { return !alive(l.PID) })
	}
}

// Issue 9: a group's cpu.stat and pressure reach the measurement.
func TestMeasureGroupFiles(t *testing.T) {
	d := realDriver(t)
	p, err := Start(context.Background(), Spec{
		Argv:   []string{"sh", "-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done"},
		Driver: d, Group: "measured", Measure: true,
		Resources: enforce.Resources{Quota: 10 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if got.Result.Throttle.Periods == 0 {
		t.Errorf("Throttle.Periods = 0: the group's cpu.stat did not reach the result")
	}
	if got.Result.PSI == nil || got.PSIScope == "" {
		t.Errorf("PSI = %v scope %q, want a pressure delta with its scope", got.Result.PSI, got.PSIScope)
	}
	if got.Result.User+got.Result.Sys <= 0 || got.Result.Wall <= 0 {
		t.Errorf("Result = %+v, want CPU and wall time", got.Result)
	}
}

// Issue 8 §3: with the affinity driver (the fallback without cgroups, and
// the only one for a non-root user) a pinned job with memory nodes runs,
// as root and as nobody; issue 17 §2: also as nobody at a nice it may not
// lower, where the Weight's nice (200: below 0) is out of reach.
func TestAffinityPinned(t *testing.T) {
	if os.Getenv("COREPIN_TEST_NOBODY_CHILD") == "1" {
		runAffinityPinned(t)
		return
	}
	t.Run("as this user", runAffinityPinned)
	t.Run("as nobody", func(t *testing.T) {
		testutil.RunAsNobody(t, "TestAffinityPinned", "COREPIN_TEST_NOBODY_CHILD=1")
	})
	t.Run("as nobody, nicer", func(t *testing.T) {
		testutil.RunAsNobodyNicer(t, "TestAffinityPinned", "COREPIN_TEST_NOBODY_CHILD=1")
	})
}

func runAffinityPinned(t *testing.T) {
	d, err := enforce.NewAffinity()
	if err != nil {
		t.Fatal(err)
	}
	r := enforce.Resources{CPUs: cpuset.New(0), Mems: cpuset.New(0), Weight: 200}
	p, err := Start(context.Background(), Spec{Argv: []string{"sh", "-c", "grep Cpus_allowed_list /proc/self/status"},
		Driver: d, Group: "pinned", Resources: r})
	if err != nil {
		t.Fatalf("Start() as uid %d: %v", os.Geteuid(), err)
	}
	got, err := p.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if got.Code != 0 || !strings.Contains(got.Stdout, "\t0\n") {
		t.Errorf("pinned job as uid %d: code %d, output %q, want allowed list 0", os.Geteuid(), got.Code, got.Stdout)
	}
}
