package measure

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/corepin/corepin/cpuset"
)

// childEnv makes the test binary a workload instead of a test run:
// "THREADS:BUSY:IDLE:TOTAL" starts THREADS goroutines, each locked to its
// own OS thread, that spin for BUSY and sleep for IDLE until TOTAL has
// passed. The child prints "ready" once its threads run.
const childEnv = "MEASURE_TEST_CHILD"

// noRaceSleep stops a child built with -race from sleeping a second at exit
// (the race runtime's atexit_sleep_ms).
const noRaceSleep = "GORACE=atexit_sleep_ms=0"

func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		os.Exit(child(spec))
	}
	os.Exit(m.Run())
}

func child(spec string) int {
	var threads int
	var busy, idle, total time.Duration
	f := strings.Split(spec, ":")
	if len(f) != 4 {
		fmt.Fprintf(os.Stderr, "bad %s=%q\n", childEnv, spec)
		return 2
	}
	fmt.Sscan(f[0], &threads)
	busy, _ = time.ParseDuration(f[1])
	idle, _ = time.ParseDuration(f[2])
	total, _ = time.ParseDuration(f[3])
	end := time.Now().Add(total)
	done := make(chan struct{})
	for range threads {
		go func() {
			runtime.LockOSThread()
			for time.Now().Before(end) {
				for t := time.Now().Add(busy); time.Now().Before(t); {
				}
				time.Sleep(idle)
			}
			done <- struct{}{}
		}()
	}
	fmt.Println("ready")
	for range threads {
		<-done
	}
	return 0
}

// startChild starts the test binary as a workload (see childEnv), through
// prefix (such as taskset) when given, and returns once it printed "ready".
func startChild(t testing.TB, spec string, prefix ...string) *exec.Cmd {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	args := append(prefix, self)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), childEnv+"="+spec, "GOMAXPROCS=2", noRaceSleep)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("child said %q, %v; want ready", line, err)
	}
	return cmd
}

func onlineCPUs(t testing.TB) cpuset.CPUSet {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		t.Skipf("no CPU list: %v", err)
	}
	s, err := cpuset.Parse(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func needProc(t testing.TB) {
	if _, err := os.Stat("/proc/self/task"); err != nil {
		t.Skipf("no procfs: %v", err)
	}
}

func TestWatchRealChild(t *testing.T) {
	needProc(t)
	// Wall counts from before the child starts: the child's 500 ms begin
	// before it says ready, so counting from Watch could fall short.
	begin := time.Now()
	cmd := startChild(t, "2:5ms:1ms:500ms")
	j, err := Watch(cmd, WithInterval(20*time.Millisecond), WithStart(begin))
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	r, err := j.Wait()
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	t.Logf("result: %+v", r)
	if r.CPUsUsed.IsEmpty() || !r.CPUsUsed.IsSubsetOf(onlineCPUs(t)) {
		t.Errorf("CPUsUsed = %q, want a non-empty subset of online %q", r.CPUsUsed, onlineCPUs(t))
	}
	// The Go runtime adds threads of its own to the two workers.
	if r.Threads < 3 {
		t.Errorf("Threads = %d, want >= 3", r.Threads)
	}
	if r.Samples < 2 {
		t.Errorf("Samples = %d, want >= 2", r.Samples)
	}
	if r.Wall < 500*time.Millisecond {
		t.Errorf("Wall = %v, want >= 500ms (the child spins that long)", r.Wall)
	}
	if r.User <= 0 || r.MaxRSSKB <= 0 {
		t.Errorf("User = %v, MaxRSSKB = %d, want both > 0", r.User, r.MaxRSSKB)
	}
	if r.Migrations < 0 || r.VoluntarySwitches < 0 || r.InvoluntarySwitches < 0 || r.RunDelay < 0 ||
		r.CtxSwitches != r.VoluntarySwitches+r.InvoluntarySwitches || r.CtxSwitches == 0 {
		t.Errorf("counters = %d migrations, %d+%d=%d switches, %v delay", r.Migrations, r.VoluntarySwitches, r.InvoluntarySwitches, r.CtxSwitches, r.RunDelay)
	}
	if _, err := os.Stat("/proc/" + PSIFile); err == nil && r.PSI == nil {
		t.Errorf("PSI = nil, but /proc/%s exists", PSIFile)
	}
}

// Successive snapshots of a live tree never decrease.
func TestSamplerMonotonic(t *testing.T) {
	needProc(t)
	cmd := startChild(t, "3:2ms:2ms:400ms")
	s := NewSampler(os.DirFS("/proc"), cmd.Process.Pid, 5*time.Millisecond)
	s.Start()
	var prev Sample
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	for running := true; running; {
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("child: %v", err)
			}
			running = false
		case <-time.After(7 * time.Millisecond):
		}
		cur := s.Snapshot()
		if cur.Migrations < prev.Migrations || cur.VoluntarySwitches < prev.VoluntarySwitches ||
			cur.InvoluntarySwitches < prev.InvoluntarySwitches || cur.RunTime < prev.RunTime ||
			cur.RunDelay < prev.RunDelay || cur.Timeslices < prev.Timeslices || cur.Threads < prev.Threads ||
			cur.Samples < prev.Samples || !prev.CPUsUsed.IsSubsetOf(cur.CPUsUsed) {
			t.Fatalf("snapshot went backwards:\nprev %+v\ncur  %+v", prev, cur)
		}
		prev = cur
	}
	got, err := s.Stop()
	if err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if got.Samples < 2 || got.Threads < 4 || got.RunTime <= 0 {
		t.Errorf("Stop = %+v, want >= 2 samples, >= 4 threads, RunTime > 0", got)
	}
}

// A shell that starts two workloads: the sampler finds all three processes
// by their ppid (or children files where the kernel has them).
func TestWatchProcessTree(t *testing.T) {
	needProc(t)
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(sh, "-c", `"$0" & "$0"; wait`, self)
	cmd.Env = append(os.Environ(), childEnv+"=1:1ms:1ms:300ms", "GOMAXPROCS=1", noRaceSleep)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	j, err := Watch(cmd, WithInterval(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	r, err := j.Wait()
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if r.Processes != 3 || r.Threads < 7 {
		t.Errorf("Processes = %d, Threads = %d; want 3 processes (sh and two Go programs), >= 7 threads", r.Processes, r.Threads)
	}
	// The children's CPU time is in the shell's rusage (it reaped them),
	// and the sampler saw part of it on their threads: rusage, exact up to
	// rounding, is at least what was sampled.
	if r.RunTime <= 0 || r.User+r.Sys < r.RunTime*9/10 {
		t.Errorf("User+Sys = %v, sampled RunTime = %v; want rusage to cover the sampled children", r.User+r.Sys, r.RunTime)
	}
}

// A child confined to CPU 0 by taskset is seen on CPU 0 only.
func TestWatchPinned(t *testing.T) {
	needProc(t)
	taskset, err := exec.LookPath("taskset")
	if err != nil {
		t.Skip("no taskset")
	}
	var self unix.CPUSet
	if err := unix.SchedGetaffinity(0, &self); err != nil || !self.IsSet(0) {
		t.Skipf("CPU 0 not in this process's affinity (%v)", err)
	}
	cmd := startChild(t, "2:3ms:1ms:300ms", taskset, "-c", "0")
	// Sampling starts after "ready", when taskset has long since exec'd.
	j, err := Watch(cmd, WithInterval(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	r, err := j.Wait()
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if want := cpuset.New(0); !r.CPUsUsed.Equals(want) {
		t.Errorf("CPUsUsed = %q, want %q", r.CPUsUsed, want)
	}
	if r.Samples < 2 {
		t.Errorf("Samples = %d, want >= 2", r.Samples)
	}
}

func TestWatchExitCode(t *testing.T) {
	needProc(t)
	cmd := exec.Command("/bin/sh", "-c", "exit 3")
	if err := cmd.Start(); err != nil {
		t.Skip(err)
	}
	j, err := Watch(cmd)
	if err != nil {
		t.Fatal(err)
	}
	_, err = j.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Errorf("Wait error = %v, want exit status 3", err)
	}
	if _, err := Watch(exec.Command("true")); err == nil {
		t.Error("Watch of an unstarted command: no error")
	}
}

// Throttle and PSI deltas come from the files Watch is pointed at.
func TestWatchCgroupFiles(t *testing.T) {
	needProc(t)
	cg := fstest.MapFS{
		"job/cpu.stat":     {Data: []byte("nr_periods 4\nnr_throttled 1\nthrottled_time 5000\n")},
		"job/cpu.pressure": {Data: []byte("some avg10=0.00 avg60=0.00 avg300=0.00 total=10\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=3\n")},
	}
	cmd := exec.Command("/bin/sh", "-c", "true")
	if err := cmd.Start(); err != nil {
		t.Skip(err)
	}
	j, err := Watch(cmd, WithCPUStat(cg, "job/cpu.stat"), WithPressure(cg, "job/cpu.pressure"))
	if err != nil {
		t.Fatal(err)
	}
	cg["job/cpu.stat"] = &fstest.MapFile{Data: []byte("nr_periods 10\nnr_throttled 3\nthrottled_time 9000\n")}
	cg["job/cpu.pressure"] = &fstest.MapFile{Data: []byte("some avg10=0.00 avg60=0.00 avg300=0.00 total=25\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=4\n")}
	r, err := j.Wait()
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if want := (ThrottleDelta{Periods: 6, ThrottledPeriods: 2, ThrottledTime: 4000}); r.Throttle != want {
		t.Errorf("Throttle = %+v, want %+v", r.Throttle, want)
	}
	if want := (PSIDelta{Some: 15 * time.Microsecond, Full: time.Microsecond, HasFull: true}); r.PSI == nil || *r.PSI != want {
		t.Errorf("PSI = %+v, want %+v", r.PSI, want)
	}

	// A cgroup without PSI gives a nil PSI, not an error.
	cmd = exec.Command("/bin/sh", "-c", "true")
	if err := cmd.Start(); err != nil {
		t.Skip(err)
	}
	j, err = Watch(cmd, WithPressure(fstest.MapFS{}, "cpu.pressure"))
	if err != nil {
		t.Fatal(err)
	}
	if r, err = j.Wait(); err != nil || r.PSI != nil {
		t.Errorf("Wait = PSI %+v, %v; want nil PSI, no error", r.PSI, err)
	}
}

func TestResultJSON(t *testing.T) {
	r := Result{
		Wall: 1200 * time.Millisecond, User: 2300 * time.Millisecond, Sys: 100 * time.Millisecond, MaxRSSKB: 4096,
		CPUsUsed: cpuset.New(0, 1, 5), Migrations: 3, CtxSwitches: 30, VoluntarySwitches: 20, InvoluntarySwitches: 10,
		RunTime: 2 * time.Second, RunDelay: 15 * time.Millisecond, Threads: 4, Processes: 2, Samples: 12,
		Throttle: ThrottleDelta{Periods: 10, ThrottledPeriods: 2, ThrottledTime: 30 * time.Millisecond},
		PSI:      &PSIDelta{Some: time.Millisecond},
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"wall_s":1.2,"user_s":2.3,"sys_s":0.1,"max_rss_kb":4096,"cpus_used":"0-1,5","migrations":3,` +
		`"ctx_switches":30,"voluntary_switches":20,"involuntary_switches":10,"run_time_s":2,"run_delay_s":0.015,"threads":4,"processes":2,"samples":12,` +
		`"throttle":{"periods":10,"throttled_periods":2,"throttled_s":0.03,"bursts":0,"burst_s":0},"psi":{"some_s":0.001}}`
	if string(b) != want {
		t.Errorf("json.Marshal = %s\nwant           %s", b, want)
	}
	var back Result
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(r, back, cmpSets); diff != "" {
		t.Errorf("round trip mismatch (-want +got):\n%s", diff)
	}
}

func TestSetRusage(t *testing.T) {
	var r Result
	if err := r.SetRusage(nil); err == nil {
		t.Error("SetRusage(nil): no error")
	}
	cmd := exec.Command("/bin/sh", "-c", "true")
	if err := cmd.Run(); err != nil {
		t.Skip(err)
	}
	if err := r.SetRusage(cmd.ProcessState); err != nil {
		t.Fatalf("SetRusage: %v", err)
	}
	if r.MaxRSSKB <= 0 {
		t.Errorf("MaxRSSKB = %d, want > 0", r.MaxRSSKB)
	}
}

var _ fs.FS = errFS{}
