package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/enforce"
	"github.com/corepin/corepin/internal/testutil"
	"github.com/corepin/corepin/proc"
)

func TestMain(m *testing.M) {
	enforce.ShimMain()
	os.Exit(m.Run())
}

func TestSpecNormalize(t *testing.T) {
	cmd := [][]string{{"true"}}
	tests := []struct {
		name     string
		spec     Spec
		wantQoS  QoS
		wantMode Mode
		wantErr  string
	}{
		{name: "pinned defaults to LSE", spec: Spec{Commands: cmd, Concurrency: 1, CPUs: 2}, wantQoS: LSE, wantMode: Pinned},
		{name: "quota defaults to LS", spec: Spec{Commands: cmd, Concurrency: 1, CPUs: 0.5, Mode: Quota}, wantQoS: LS, wantMode: Quota},
		// Issue 8 §3: --qos BE alone was exit 2 ("use --mode quota, ...").
		{name: "BE alone is unbounded", spec: Spec{Commands: cmd, Concurrency: 1, CPUs: 2, QoS: BE}, wantQoS: BE, wantMode: Unbounded},
		{name: "LS alone is quota", spec: Spec{Commands: cmd, Concurrency: 1, CPUs: 0.5, QoS: LS}, wantQoS: LS, wantMode: Quota},
		{name: "LSR alone is pinned", spec: Spec{Commands: cmd, Concurrency: 1, CPUs: 1, QoS: LSR}, wantQoS: LSR, wantMode: Pinned},
		{name: "BE with burst", spec: Spec{Commands: cmd, Concurrency: 1, CPUs: 1, QoS: BE, Mode: Burst}, wantQoS: BE, wantMode: Burst},
		{name: "LSE on quota says what to change", spec: Spec{Commands: cmd, Concurrency: 1, CPUs: 1, Mode: Quota, QoS: LSE}, wantErr: "qos LSE needs its own CPUs: use --mode pinned"},
		{name: "BE pinned says what to change", spec: Spec{Commands: cmd, Concurrency: 1, CPUs: 1, Mode: Pinned, QoS: BE}, wantErr: "drop --mode pinned"},
		{name: "unknown qos", spec: Spec{Commands: cmd, Concurrency: 1, CPUs: 1, QoS: "SYSTEM"}, wantErr: "unknown qos"},
		// Issue 8 §3: unbounded flags reached the jobs (and the shim).
		{name: "threads 100000", spec: Spec{Commands: cmd, Concurrency: 1, CPUs: 1, Threads: 100000, MachineCPUs: 4}, wantErr: "between 1 and 64"},
		{name: "threads at the cap", spec: Spec{Commands: cmd, Concurrency: 1, CPUs: 1, Threads: 64, MachineCPUs: 4}, wantQoS: LSE, wantMode: Pinned},
		{name: "cpus 1e9", spec: Spec{Commands: cmd, Concurrency: 1, CPUs: 1e9, Mode: Quota, MachineCPUs: 4}, wantErr: "use --cpus 4 or fewer"},
		{name: "pinned concurrency x cpus", spec: Spec{Commands: cmd, Concurrency: 3, CPUs: 2, MachineCPUs: 4}, wantErr: "use --concurrency 2 or fewer"},
		{name: "quota below the kernel minimum", spec: Spec{Commands: cmd, Concurrency: 1, CPUs: 0.001, Mode: Quota}, wantErr: "below the kernel's minimum"},
		{name: "nonexistent command", spec: Spec{Commands: [][]string{{"corepin-no-such-cmd"}}, Concurrency: 1, CPUs: 1}, wantErr: "install it or give its full path"},
		{name: "placeholder command not looked up", spec: Spec{Commands: [][]string{{"{cpuset}"}}, Concurrency: 1, CPUs: 1}, wantQoS: LSE, wantMode: Pinned},
		{name: "NUL in an argument", spec: Spec{Commands: [][]string{{"true", "a\x00"}}, Concurrency: 1, CPUs: 1}, wantErr: "NUL"},
		{name: "too many jobs", spec: Spec{Commands: make([][]string, MaxJobs+1), Concurrency: 1, CPUs: 1}, wantErr: "at most 100000"},
		{name: "fractional pinned", spec: Spec{Commands: cmd, Concurrency: 1, CPUs: 1.5, Mode: Pinned}, wantErr: "pinned jobs get whole CPUs, not 1.5: use --cpus 2"},
		{name: "LSE on quota", spec: Spec{Commands: cmd, Concurrency: 1, CPUs: 1, Mode: Quota, QoS: LSE}, wantErr: "use --mode pinned"},
		{name: "BE pinned", spec: Spec{Commands: cmd, Concurrency: 1, CPUs: 1, Mode: Pinned, QoS: BE}, wantErr: "shared pool"},
		{name: "no jobs", spec: Spec{Concurrency: 1, CPUs: 1}, wantErr: "no jobs"},
		{name: "zero cpus", spec: Spec{Commands: cmd, Concurrency: 1}, wantErr: "positive"},
		{name: "zero concurrency", spec: Spec{Commands: cmd, CPUs: 1}, wantErr: "between 1 and"},
		{name: "empty command", spec: Spec{Commands: [][]string{{}}, Concurrency: 1, CPUs: 1}, wantErr: "empty command"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.spec.Normalize()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, ErrSpec) {
					t.Fatalf("Normalize() error = %v, want ErrSpec containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.QoS != tc.wantQoS || got.Mode != tc.wantMode {
				t.Errorf("Normalize() = qos %s mode %s, want %s %s", got.QoS, got.Mode, tc.wantQoS, tc.wantMode)
			}
		})
	}
}

func TestExpandAndThreads(t *testing.T) {
	got := Expand([]string{"enc", "-threads", "{threads}", "out-{job}.mp4", "{cpuset}/{cpus}"}, 3, 1.5, "0-1", 2)
	want := []string{"enc", "-threads", "2", "out-3.mp4", "0-1/1.5"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("Expand = %q, want %q", got, want)
	}
	s := Spec{}
	if n := s.ThreadsFor(1.5); n != 2 {
		t.Errorf("ThreadsFor(1.5) = %d, want 2", n)
	}
	s.Threads = 8
	if n := s.ThreadsFor(2); n != 8 {
		t.Errorf("ThreadsFor with explicit threads = %d, want 8", n)
	}
	if _, err := ParseThreads("0"); err == nil {
		t.Errorf("ParseThreads(0) = nil error")
	}
}

func TestSummarize(t *testing.T) {
	rs := []JobResult{
		{row: row{Job: 0, WallS: 1, UserS: 1, CPUs: 1, Migrations: 2}},
		{row: row{Job: 1, WallS: 2, UserS: 1, CPUs: 1, ThrottledS: 0.5}},
		{row: row{Job: 2, WallS: 4, UserS: 2, CPUs: 1, ExitCode: 1}},
	}
	s := Summarize(rs, 6*time.Second)
	if s.Failed != 1 || s.WallP50S != 2 || s.WallMaxS != 4 || s.Migrations != 2 || s.ThrottledS != 0.5 {
		t.Errorf("Summarize = %+v", s)
	}
	if got, want := s.JobsPerMin, 20.0; got != want {
		t.Errorf("JobsPerMin = %v, want %v (2 good jobs in 6 s)", got, want)
	}
	if got := s.MeanEfficiency; got < 0.66 || got > 0.67 {
		t.Errorf("MeanEfficiency = %v, want (1+0.5+0.5)/3", got)
	}
}

func TestWorkloadRates(t *testing.T) {
	r := workloadReport([]byte("log line\n{\"workload\":\"transcode\",\"fps\":24.5,\"frames\":30}\n"))
	if r.FPS != 24.5 || r.Frames != 30 || r.OpsPerSec != 0 {
		t.Errorf("workloadReport = %+v", r)
	}
	if r := workloadReport([]byte("note\n{\n  \"workload\": \"spin\",\n  \"ops_per_s\": 12.5,\n  \"ops\": 7\n}\n")); r.OpsPerSec != 12.5 || r.Ops != 7 {
		t.Errorf("workloadReport(indented) = %+v", r)
	}
	if r := workloadReport([]byte("not json\n")); r != (rates{}) {
		t.Errorf("workloadReport(text) = %+v", r)
	}
}

// listPlacer hands out the lowest free CPUs; it stands in for the allocator
// so these tests exercise the runner alone.
type listPlacer struct {
	mu   sync.Mutex
	free cpuset.CPUSet
	held map[string]cpuset.CPUSet
}

func (p *listPlacer) Place(id string, n int) (Placement, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.free.Size() < n {
		return Placement{}, fmt.Errorf("%d cpus wanted, %d free", n, p.free.Size())
	}
	set := cpuset.New(p.free.List()[:n]...)
	p.free = p.free.Difference(set)
	p.held[id] = set
	return Placement{CPUs: set}, nil
}

func (p *listPlacer) Release(id string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.free = p.free.Union(p.held[id])
	delete(p.held, id)
	return nil
}

// realDriver returns the cgroup driver of this machine under a root unique
// to the test, or skips.
func realDriver(t *testing.T) (enforce.Driver, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root for real cgroups")
	}
	root := fmt.Sprintf("corepin-runtest-%d", os.Getpid())
	d, err := enforce.Detect(enforce.WithRoot(root))
	if err != nil {
		t.Skipf("no enforcement driver: %v", err)
	}
	if d.Name() == enforce.NameAffinity {
		t.Skipf("no writable cgroup: %v", d.Limitations())
	}
	t.Cleanup(func() {
		if rr, ok := d.(enforce.RootRemover); ok {
			if err := rr.RemoveRoot(); err != nil {
				t.Errorf("removing test root: %v", err)
			}
		}
	})
	return d, root
}

func online(t *testing.T) cpuset.CPUSet {
	t.Helper()
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		t.Skip("no /sys/devices/system/cpu/online")
	}
	return cpuset.MustParse(string(b))
}

const burn = `i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done`

// Two concurrent pinned jobs get different single CPUs, and their threads
// stay inside them.
func TestRunPinnedConfines(t *testing.T) {
	d, _ := realDriver(t)
	cpus := online(t)
	if cpus.Size() < 2 {
		t.Skip("needs 2 cpus")
	}
	p := &listPlacer{free: cpus, held: map[string]cpuset.CPUSet{}}
	r := &Runner{Driver: d, Placer: p, Pool: cpus, SampleInterval: 10 * time.Millisecond}
	spec := Spec{Commands: repeat([]string{"sh", "-c", "grep Cpus_allowed_list /proc/self/status; " + burn}, 4), Concurrency: 2, CPUs: 1, Mode: Pinned}
	res, err := r.Run(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 4 {
		t.Fatalf("%d results, want 4", len(res))
	}
	for _, j := range res {
		if j.ExitCode != 0 || j.Error != "" {
			t.Fatalf("job %d failed: %+v", j.Job, j)
		}
		set := cpuset.MustParse(j.Cpuset)
		if set.Size() != 1 {
			t.Errorf("job %d cpuset %q, want one cpu", j.Job, j.Cpuset)
		}
		if !strings.Contains(j.StdoutTail, "Cpus_allowed_list:\t"+j.Cpuset) {
			t.Errorf("job %d saw %q, want Cpus_allowed_list %s", j.Job, j.StdoutTail, j.Cpuset)
		}
		used := cpuset.MustParse(j.CPUsUsed)
		if used.IsEmpty() || !used.IsSubsetOf(set) {
			t.Errorf("job %d cpus_used %q not inside cpuset %q", j.Job, j.CPUsUsed, j.Cpuset)
		}
		if j.Threads != 1 || j.WallS <= 0 {
			t.Errorf("job %d threads %d wall %v", j.Job, j.Threads, j.WallS)
		}
	}
	// Jobs 0 and 1 ran together: different CPUs.
	if res[0].Cpuset == res[1].Cpuset {
		t.Errorf("concurrent jobs 0 and 1 share cpuset %s", res[0].Cpuset)
	}
	if p.free.Size() != cpus.Size() {
		t.Errorf("placer has %d free cpus after the batch, want %d (release)", p.free.Size(), cpus.Size())
	}
}

// Quota jobs share the pool and get throttled.
func TestRunQuotaThrottles(t *testing.T) {
	d, _ := realDriver(t)
	cpus := online(t)
	r := &Runner{Driver: d, Pool: cpus, Period: 10 * time.Millisecond}
	// Four busy processes under a quota of 0.1 CPU are throttled even on a
	// machine loaded by other work.
	b := "(i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done)"
	spec := Spec{Commands: repeat([]string{"sh", "-c", b + " & " + b + " & " + b + " & " + b + "; wait"}, 2), Concurrency: 2, CPUs: 0.1, Mode: Quota}
	res, err := r.Run(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range res {
		if j.ExitCode != 0 {
			t.Fatalf("job %d failed: %+v", j.Job, j)
		}
		if j.Cpuset != cpus.String() {
			t.Errorf("quota job %d cpuset %q, want the pool %q", j.Job, j.Cpuset, cpus)
		}
		if j.ThrottledPeriods == 0 || j.ThrottledS <= 0 || j.NrPeriods == 0 {
			t.Errorf("job %d not throttled: periods %d throttled %d (%v s)", j.Job, j.NrPeriods, j.ThrottledPeriods, j.ThrottledS)
		}
	}
}

// A failing job is recorded with its exit status and stderr tail.
func TestRunRecordsFailure(t *testing.T) {
	d, _ := realDriver(t)
	cpus := online(t)
	var got []JobResult
	r := &Runner{Driver: d, Pool: cpus, OnResult: func(j JobResult) error { got = append(got, j); return nil }}
	res, err := r.Run(context.Background(), Spec{Commands: [][]string{{"sh", "-c", "echo boom >&2; exit 3"}}, Concurrency: 1, CPUs: 1, Mode: Unbounded})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].ExitCode != 3 || !strings.Contains(res[0].StderrTail, "boom") {
		t.Errorf("result = %+v, want exit 3 and stderr boom", res[0])
	}
	if len(got) != 1 {
		t.Errorf("OnResult called %d times, want 1", len(got))
	}
}

// Stopping the batch kills every child, removes every group and releases
// every CPU; finished jobs are kept.
func TestRunCancelCleansUp(t *testing.T) {
	d, root := realDriver(t)
	cpus := online(t)
	p := &listPlacer{free: cpus, held: map[string]cpuset.CPUSet{}}
	pidDir := t.TempDir()
	r := &Runner{Driver: d, Placer: p, Pool: cpus}
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{}, 8)
	r.OnEvent = func(ev Event) {
		if ev.Kind == JobStarted {
			started <- struct{}{}
		}
	}
	// Each job forks a grandchild that would outlive a naive kill.
	cmd := []string{"sh", "-c", "sleep 30 & echo $! > " + pidDir + "/{job}.pid; echo $$ >> " + pidDir + "/{job}.pid; wait"}
	done := make(chan error, 1)
	var res []JobResult
	go func() {
		var err error
		res, err = r.Run(ctx, Spec{Commands: repeat(cmd, 6), Concurrency: 2, CPUs: 1, Mode: Pinned})
		done <- err
	}()
	for range 2 {
		select {
		case <-started:
		case <-time.After(testutil.Patience):
			t.Fatal("jobs did not start")
		}
	}
	// Both running jobs have written their own pid and their grandchild's.
	testutil.Eventually(t, "two pid files of two pids each in "+pidDir, func() bool {
		files, _ := filepath.Glob(filepath.Join(pidDir, "*.pid"))
		full := 0
		for _, f := range files {
			if b, _ := os.ReadFile(f); len(strings.Fields(string(b))) == 2 {
				full++
			}
		}
		return full == 2
	})
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Run error = %v, want context.Canceled", err)
		}
	case <-time.After(testutil.Patience):
		t.Fatal("Run did not return after cancel")
	}
	if len(res) != 2 {
		t.Errorf("%d results, want the 2 killed jobs", len(res))
	}
	for _, j := range res {
		if j.Signal == "" {
			t.Errorf("job %d: signal empty, want killed: %+v", j.Job, j)
		}
	}
	files, _ := filepath.Glob(filepath.Join(pidDir, "*.pid"))
	if len(files) == 0 {
		t.Fatal("no pid files: jobs never ran")
	}
	for _, f := range files {
		b, _ := os.ReadFile(f)
		for _, l := range strings.Fields(string(b)) {
			pid, _ := strconv.Atoi(l)
			if pid > 0 && syscall.Kill(pid, 0) == nil && !isZombie(pid) {
				t.Errorf("process %d from %s still alive", pid, f)
			}
		}
	}
	if p.free.Size() != cpus.Size() {
		t.Errorf("%d cpus free after cancel, want %d", p.free.Size(), cpus.Size())
	}
	for _, h := range []string{"cpuset", "cpu"} {
		dirs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", h, root, "*"))
		for _, dir := range dirs {
			if st, err := os.Stat(dir); err == nil && st.IsDir() {
				t.Errorf("group %s left behind", dir)
			}
		}
	}
}

func isZombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] == 'Z'
}

func repeat(argv []string, n int) [][]string {
	out := make([][]string, n)
	for i := range out {
		out[i] = argv
	}
	return out
}

var _ = exec.Command

func TestShellJoin(t *testing.T) {
	got := ShellJoin([]string{"sh", "-c", "echo it's {job}", "-threads", "{threads}", ""})
	want := `sh -c 'echo it'\''s {job}' -threads {threads} ''`
	if got != want {
		t.Errorf("ShellJoin = %s, want %s", got, want)
	}
}

// Issue 8 §3: a job that leaves a setsid daemon succeeded, says what it
// left, and neither the daemon nor the group outlives the job.
func TestRunKillsLeftovers(t *testing.T) {
	d, _ := realDriver(t)
	cpus := online(t)
	r := &Runner{Driver: d, Pool: cpus}
	script := `setsid sleep 1000 </dev/null >/dev/null 2>&1 & pid=$!
while [ "$(cat /proc/$pid/comm)" != sleep ]; do :; done; echo $pid`
	begin := time.Now()
	res, err := r.Run(context.Background(), Spec{Commands: [][]string{{"sh", "-c", script}}, Concurrency: 1, CPUs: 1, Mode: Unbounded})
	if err != nil {
		t.Fatal(err)
	}
	j := res[0]
	if j.ExitCode != 0 || j.Error != "" {
		t.Errorf("job = exit %d error %q, want a success", j.ExitCode, j.Error)
	}
	if took := time.Since(begin); took > testutil.Patience { // the daemon sleeps 1000 s
		t.Errorf("job took %v: the runner waited for the daemon", took)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(j.StdoutTail))
	if len(j.Leftovers) != 1 || j.Leftovers[0].PID != pid || j.Leftovers[0].Comm != "sleep" {
		t.Errorf("Leftovers = %v, want [%d (sleep)]", j.Leftovers, pid)
	}
	if !strings.Contains(j.StderrTail, fmt.Sprintf("%d (sleep)", pid)) {
		t.Errorf("stderr tail %q does not name the leftover", j.StderrTail)
	}
	// Killed and out of its group, the daemon may still be on its way out
	// (do_exit leaves the cgroup before the zombie state).
	testutil.Eventually(t, fmt.Sprintf("daemon %d exit", pid), func() bool {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		return err != nil || strings.Contains(string(b), ") Z")
	})
}

// Issue 9: the CPU pressure during a job reaches its result.
func TestRunRecordsPressure(t *testing.T) {
	if _, err := os.Stat("/proc/pressure/cpu"); err != nil {
		t.Skip("skipping: kernel without PSI")
	}
	d, _ := realDriver(t)
	r := &Runner{Driver: d, Pool: online(t)}
	res, err := r.Run(context.Background(), Spec{Commands: [][]string{{"true"}}, Concurrency: 1, CPUs: 1, Mode: Unbounded})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].PSISomeS == nil || res[0].PSIScope == "" {
		t.Errorf("result psi_some_s %v scope %q, want the pressure and its scope", res[0].PSISomeS, res[0].PSIScope)
	}
}

// The job object keeps every key of design.md's `corepin run -o json`
// contract, and its own extensions, with the record embedded.
func TestJobResultJSONContract(t *testing.T) {
	some := 0.25
	j := JobResult{row: row{Job: 1, Cpuset: "0-1", Mode: "pinned", StartedAt: time.Now(), WallS: 1.2, UserS: 2.3, SysS: 0.1, CPUsUsed: "0-1", Migrations: 3},
		FPS: 24, Frames: 30, PSISomeS: &some, PSIScope: "system", Leftovers: []proc.Leftover{{PID: 7, Comm: "sleep"}}}
	b, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"job", "cpuset", "mode", "wall_s", "user_s", "sys_s", "cpus_used", "migrations", "throttled_s", "exit_code",
		"cmd", "qos", "cpus", "threads", "max_rss_kb", "ctx_switches", "run_delay_s", "nr_periods", "throttled_periods", "started_at",
		"fps", "frames", "psi_some_s", "psi_scope", "leftovers"} {
		if _, ok := m[k]; !ok {
			t.Errorf("job object %s lacks %q", b, k)
		}
	}
	if _, ok := m["run_id"]; ok {
		t.Errorf("job object %s has a run_id outside the database", b)
	}
	if m["job"] != 1.0 || m["mode"] != "pinned" {
		t.Errorf("job object %s: job %v mode %v", b, m["job"], m["mode"])
	}
}

// Row is the database record of a job: its throughput in columns, what
// has no column in extra.
func TestJobResultRow(t *testing.T) {
	some, full := 0.5, 0.25
	j := JobResult{row: row{Job: 2, Cmd: "x"}, Error: "boom", FPS: 24, OpsPerSec: 0, PSISomeS: &some, PSIFullS: &full, PSIScope: "group",
		Leftovers: []proc.Leftover{{PID: 9, Comm: "d"}}}
	r := j.Row()
	if r.Job != 2 || r.FramesPerS == nil || *r.FramesPerS != 24 || r.OpsPerS != nil {
		t.Errorf("Row() = %+v", r)
	}
	var extra map[string]any
	if err := json.Unmarshal(r.Extra, &extra); err != nil {
		t.Fatalf("Row().Extra = %s: %v", r.Extra, err)
	}
	want := map[string]any{"error": "boom", "psi_some_s": 0.5, "psi_full_s": 0.25, "psi_scope": "group",
		"leftovers": []any{map[string]any{"pid": 9.0, "comm": "d"}}}
	if diff := cmp.Diff(want, extra); diff != "" {
		t.Errorf("Row().Extra (-want +got):\n%s", diff)
	}
	if (JobResult{}).Row().Extra != nil {
		t.Error("Row().Extra of a plain job is not empty")
	}
}

// TestRunOnGroup: each job's live group is reported once started and
// again once ended, so a QoS loop can follow the batch's groups.
func TestRunOnGroup(t *testing.T) {
	d, _ := realDriver(t)
	var mu sync.Mutex
	var events []string
	r := &Runner{Driver: d, Pool: online(t), OnGroup: func(job int, g enforce.Group, live bool) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, fmt.Sprintf("%d %s %v", job, g.Name(), live))
	}}
	if _, err := r.Run(context.Background(), Spec{Commands: [][]string{{"true"}}, Concurrency: 1, CPUs: 1, Mode: Unbounded, QoS: BE}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"0 job-0 true", "0 job-0 false"}, events); diff != "" {
		t.Errorf("OnGroup events (-want +got):\n%s", diff)
	}
}

// TestLeftoverNote (issue 27 §3.5): a job that left 1,000 processes was
// reported as "left 64 process(es) running, killed them" (the list's cap
// as the count). The note counts them all, says all were killed and that
// the list is the first ones.
func TestLeftoverNote(t *testing.T) {
	list := func(n int) []proc.Leftover {
		var ls []proc.Leftover
		for i := range n {
			ls = append(ls, proc.Leftover{PID: 100 + i, Comm: "sleep"})
		}
		return ls
	}
	for _, tc := range []struct {
		name  string
		count int
		ls    []proc.Leftover
		want  string
	}{
		{name: "one", count: 1, ls: list(1), want: "left 1 process running; killed it: 100 (sleep)"},
		{name: "two", count: 2, ls: list(2), want: "left 2 processes running; killed all of them: 100 (sleep), 101 (sleep)"},
		{name: "more than listed", count: 1000, ls: list(2), want: "left 1000 processes running; killed all of them (the first 2: 100 (sleep), 101 (sleep))"},
		{name: "count unknown", count: 0, ls: list(2), want: "left 2 processes running; killed all of them: 100 (sleep), 101 (sleep)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := LeftoverNote(tc.count, tc.ls); got != tc.want {
				t.Errorf("LeftoverNote(%d, %d listed) = %q, want %q", tc.count, len(tc.ls), got, tc.want)
			}
		})
	}
}
