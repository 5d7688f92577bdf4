package enforce

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corepin/corepin/internal/testutil"
)

func TestParseRealTime(t *testing.T) {
	for _, c := range []struct {
		in, want string
		bad      bool
	}{
		{in: "", want: RTNormal}, {in: "normal", want: RTNormal}, {in: "rr", want: RTRR}, {in: "fifo", want: RTFIFO},
		{in: "RR", bad: true}, {in: "deadline", bad: true}, {in: "idle", bad: true}, {in: "rr:5", bad: true},
	} {
		rt, err := ParseRealTime(c.in)
		if c.bad {
			if !errors.Is(err, ErrInvalidResources) || !strings.Contains(err.Error(), "use normal, rr or fifo") {
				t.Errorf("ParseRealTime(%q) = %v, want an error naming the choices", c.in, err)
			}
			continue
		}
		if err != nil || rt.String() != c.want {
			t.Errorf("ParseRealTime(%q) = %v, %v; want %s", c.in, rt, err, c.want)
		}
	}
}

func TestRTShareValidate(t *testing.T) {
	for _, r := range []Resources{{RTShare: -0.1}, {RTShare: 0.96}, {RTShare: 0.5, Idle: true}} {
		if err := r.Validate(); !errors.Is(err, ErrInvalidResources) {
			t.Errorf("%+v: Validate = %v, want ErrInvalidResources", r, err)
		}
	}
	if err := (Resources{RTShare: MaxRTShare}).Validate(); err != nil {
		t.Errorf("RTShare %g: %v", MaxRTShare, err)
	}
}

// The real-time route on this machine's cgroup v1 with real-time group
// scheduling: a group's share is written and corepin's root grows to hold
// the shares under it; a share beyond what real-time tasks may have in
// all is refused and creates nothing; a command started in the class
// runs in it, and so do the processes it forks; without a share the
// kernel refuses the class; and a real-time task that spins is throttled
// to its group's share.
func TestRealV1RealTime(t *testing.T) {
	d, m := realV1(t)
	if !d.feat.rt {
		t.Skip("skipping: no cpu.rt_runtime_us (a kernel without CONFIG_RT_GROUP_SCHED)")
	}
	if err := CheckRealTime(RealTime{Policy: RTRR}); err != nil {
		t.Skipf("skipping: %v", err)
	}
	read := func(dir, file string) string { return readReal(t, filepath.Join(m.CPU, dir, file)) }
	g1, err := d.Create("rt1", Resources{RTShare: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	defer g1.Remove()
	if got := read(g1.(*cgGroup).dir, v1RTRuntime); got != "100000" {
		t.Errorf("group rt1: %s = %s, want 100000", v1RTRuntime, got)
	}
	g2, err := d.Create("rt2", Resources{RTShare: 0.2})
	if err != nil {
		t.Fatal(err)
	}
	defer g2.Remove()
	if got, _ := strconv.Atoi(read(d.base, v1RTRuntime)); got < 300000 {
		t.Errorf("corepin's root holds %d us of real-time time per second under groups of 0.1 and 0.2, want at least 300000", got)
	}
	if g, err := d.Create("rt3", Resources{RTShare: 0.7}); err == nil || !errors.Is(err, ErrInvalidResources) {
		if g != nil {
			g.Remove()
		}
		t.Errorf("a third group of 0.7 beside 0.1 and 0.2: %v, want refused (1.0 of each CPU)", err)
	} else if _, err := os.Stat(filepath.Join(m.CPU, d.base, dirName(d.self, "rt3"))); err == nil {
		t.Errorf("the refused group rt3 was left behind")
	}

	// In the class, and inherited by a forked process.
	cmd := exec.Command("sh", "-c", "sleep 30 & echo $!; wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out := &lockedBuilder{}
	cmd.Stdout = out
	if err := StartRealTime(t.Context(), g1, cmd, RealTime{Policy: RTRR}); err != nil {
		t.Fatal(err)
	}
	defer func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() }()
	var child int
	for deadline := time.Now().Add(time.Minute); child == 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		child, _ = strconv.Atoi(strings.TrimSpace(out.String()))
	}
	for _, pid := range []int{cmd.Process.Pid, child} {
		if c, err := TaskClass(pid); err != nil || c != RTRR {
			t.Errorf("pid %d: class %q (%v), want rr", pid, c, err)
		}
	}
	if !strings.Contains(readReal(t, filepath.Join(m.CPU, g1.(*cgGroup).dir, "cgroup.procs")), strconv.Itoa(cmd.Process.Pid)) {
		t.Errorf("pid %d is not in its group", cmd.Process.Pid)
	}

	// No share: the kernel refuses a real-time task in the group.
	g0, err := d.Create("rt0", Resources{})
	if err != nil {
		t.Fatal(err)
	}
	defer g0.Remove()
	if err := StartRealTime(t.Context(), g0, exec.Command("true"), RealTime{Policy: RTFIFO}); err == nil || !strings.Contains(err.Error(), "taking the real-time class fifo") {
		t.Errorf("fifo in a group without a real-time share: %v, want the kernel's refusal", err)
	}

	// Throttled: real-time tasks spinning on every CPU get at most the
	// share on each (0.2) (one spinner per CPU: a kernel with RT_RUNTIME_SHARE
	// would lend a lone spinner the other CPUs' unused time).
	rs, err := d.roots()
	if err != nil {
		t.Fatal(err)
	}
	cpus := rs.cpus.Size()
	spin := exec.Command("sh", "-c", "i=0; while [ $i -lt "+strconv.Itoa(cpus)+" ]; do (while :; do :; done) & i=$((i+1)); done; wait")
	spin.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := StartRealTime(t.Context(), g2, spin, RealTime{Policy: RTFIFO}); err != nil {
		t.Fatal(err)
	}
	defer func() { syscall.Kill(-spin.Process.Pid, syscall.SIGKILL); spin.Wait() }()
	before, _ := g2.Stats()
	begin := time.Now()
	time.Sleep(time.Second) // the measured window
	after, _ := g2.Stats()
	wall := time.Since(begin)
	used := after.Usage - before.Usage
	// The window touches at most wall/period+1 periods, each giving the
	// group 0.2 of a period on each CPU; unthrottled they would use all
	// of wall on each.
	bound := time.Duration(float64(wall+rtPeriod) * 0.2 * float64(cpus) * 1.05)
	if used > bound+50*time.Millisecond {
		t.Errorf("%d fifo tasks spinning under a share of 0.2 used %v of %v on %d CPUs, want at most %v", cpus, used, wall, cpus, bound)
	}
	t.Logf("%d fifo tasks spinning under a share of 0.2 used %v of %v on %d CPUs", cpus, used, wall, cpus)

	// Once its groups are gone, corepin's root gives their shares back.
	syscall.Kill(-spin.Process.Pid, syscall.SIGKILL)
	spin.Wait()
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	cmd.Wait()
	for _, g := range []Group{g0, g1, g2} {
		if err := g.Remove(); err != nil {
			t.Fatal(err)
		}
	}
	if got := read(d.base, v1RTRuntime); got != "0" {
		t.Errorf("corepin's root holds %s us of real-time time per second once its groups are removed, want 0", got)
	}
}

// lockedBuilder is a strings.Builder a command's output goroutine writes
// while the test reads it.
type lockedBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuilder) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuilder) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// As a user without CAP_SYS_NICE and with `ulimit -r` 0, the real-time
// route is refused before anything starts, saying what to change; as
// root it is allowed (the kernel's throttling is on here).
func TestCheckRealTimeAsNobody(t *testing.T) {
	rr := RealTime{Policy: RTRR}
	if os.Getenv("COREPIN_TEST_RT_NOBODY") != "" {
		var lim unix.Rlimit
		if err := unix.Getrlimit(unix.RLIMIT_RTPRIO, &lim); err != nil || lim.Cur > 0 {
			t.Skipf("skipping: ulimit -r is %d here", lim.Cur)
		}
		err := CheckRealTime(rr)
		if !errors.Is(err, ErrRealTime) || !strings.Contains(err.Error(), "needs CAP_SYS_NICE (root) or a real-time priority limit of at least 1 (ulimit -r is 0 here)") {
			t.Fatalf("CheckRealTime as uid %d = %v, want the missing right named", os.Geteuid(), err)
		}
		if err := CheckRealTime(RealTime{}); err != nil {
			t.Fatalf("CheckRealTime(normal) = %v", err)
		}
		return
	}
	requireRoot(t)
	if b, err := os.ReadFile(rtRuntimeFile); err == nil && strings.TrimSpace(string(b)) == "-1" {
		t.Skip("skipping: the kernel's real-time throttling is off here")
	}
	if err := CheckRealTime(rr); err != nil {
		t.Fatalf("CheckRealTime as root = %v", err)
	}
	testutil.RunAsNobody(t, "TestCheckRealTimeAsNobody", "COREPIN_TEST_RT_NOBODY=1")
}

// MakeRTRoom on a kubelet's v1 cpu hierarchy (files on a temporary
// directory): the pod, QoS and kubepods groups, which hold no real-time
// share, grow to the container's plus their other children's; a share
// that would not fit under the kernel's 95% is refused and changes
// nothing; a hierarchy without cpu.rt_runtime_us is left alone.
func TestMakeRTRoom(t *testing.T) {
	mount := t.TempDir()
	group := func(dir, runtime string) {
		t.Helper()
		d := filepath.Join(mount, dir)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for f, v := range map[string]string{v1RTRuntime: runtime, v1RTPeriod: "1000000"} {
			if err := os.WriteFile(filepath.Join(d, f), []byte(v), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	group(".", "950000")
	group("kubepods", "0")
	group("kubepods/burstable", "0")
	group("kubepods/burstable/podA", "0")
	group("kubepods/burstable/podB", "100000")
	group("kubepods/burstable/podB/c1", "100000")
	read := func(dir string) string { return readReal(t, filepath.Join(mount, dir, v1RTRuntime)) }

	grouped, err := MakeRTRoom(mount, "/kubepods/burstable/podA/c1", 0.25)
	if err != nil || !grouped {
		t.Fatalf("MakeRTRoom = %v, %v", grouped, err)
	}
	for dir, want := range map[string]string{"kubepods/burstable/podA": "250000", "kubepods/burstable": "350000", "kubepods": "350000", "kubepods/burstable/podB": "100000"} {
		if got := read(dir); got != want {
			t.Errorf("%s: %s = %s, want %s", dir, v1RTRuntime, got, want)
		}
	}
	if _, err := MakeRTRoom(mount, "/kubepods/burstable/podA/c2", 0.9); !errors.Is(err, ErrInvalidResources) {
		t.Errorf("a share past 95%% in all: %v, want ErrInvalidResources", err)
	}
	for dir, want := range map[string]string{"kubepods/burstable/podA": "250000", "kubepods": "350000"} {
		if got := read(dir); got != want {
			t.Errorf("a refused share changed %s to %s", dir, got)
		}
	}
	for _, bad := range []string{"kubepods/x", "/kubepods/../x", "/"} {
		if _, err := MakeRTRoom(mount, bad, 0.1); !errors.Is(err, ErrInvalidResources) {
			t.Errorf("MakeRTRoom(%q) = %v, want ErrInvalidResources", bad, err)
		}
	}
	if grouped, err := MakeRTRoom(t.TempDir(), "/kubepods/p/c", 0.1); grouped || err != nil {
		t.Errorf("no real-time group scheduling: %v, %v; want false, nil", grouped, err)
	}
}
