package enforce

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/corepin/corepin/cpuset"
)

// takeLog returns the ops logged so far and empties the log.
func takeLog(log *[]string) []string {
	l := *log
	*log = nil
	return l
}

func TestV1FakeLifecycle(t *testing.T) {
	f := newFakeV1(t, v1CPUFiles)
	d, err := newV1(f.hierarchies(), testConfig("corepin"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"mkdir cpuset corepin",
		"mkdir cpu corepin",
		"mkdir cpuacct corepin",
		"write cpuset corepin/cpuset.cpus=0-3",
		"write cpuset corepin/cpuset.mems=0",
	}
	if diff := cmp.Diff(want, takeLog(&f.log)); diff != "" {
		t.Errorf("newV1 ops (-want +got):\n%s", diff)
	}
	if got := d.Limitations(); len(got) != 0 {
		t.Errorf("Limitations() = %q, want none", got)
	}

	g, err := d.Create("job-1", Resources{
		CPUs: cpuset.MustParse("2-3"), Quota: 200 * time.Millisecond,
		Period: 100 * time.Millisecond, Burst: 50 * time.Millisecond, Weight: 50,
	})
	if err != nil {
		t.Fatal(err)
	}
	dir := "corepin/run-100-5-job-1"
	want = []string{
		"mkdir cpuset " + dir,
		"mkdir cpu " + dir,
		"mkdir cpuacct " + dir,
		"write cpuset " + dir + "/cpuset.cpus=2-3",
		"write cpuset " + dir + "/cpuset.mems=0",
		"write cpu " + dir + "/cpu.cfs_burst_us=0",
		"write cpu " + dir + "/cpu.cfs_period_us=100000",
		"write cpu " + dir + "/cpu.cfs_quota_us=200000",
		"write cpu " + dir + "/cpu.cfs_burst_us=50000",
		"write cpu " + dir + "/cpu.idle=0",
		"write cpu " + dir + "/cpu.shares=512",
	}
	if diff := cmp.Diff(want, takeLog(&f.log)); diff != "" {
		t.Errorf("Create ops (-want +got):\n%s", diff)
	}
	// What the files hold afterwards.
	for _, c := range []struct {
		h          *fakeFS
		file, want string
	}{
		{f.cpuset, "cpuset.cpus", "2-3"}, {f.cpuset, "cpuset.mems", "0"},
		{f.cpu, "cpu.cfs_quota_us", "200000"}, {f.cpu, "cpu.cfs_period_us", "100000"},
		{f.cpu, "cpu.cfs_burst_us", "50000"}, {f.cpu, "cpu.shares", "512"}, {f.cpu, "cpu.idle", "0"},
	} {
		if got := c.h.readBack(t, dir+"/"+c.file); got != c.want {
			t.Errorf("%s %s = %q, want %q", c.h.name, c.file, got, c.want)
		}
	}

	if err := g.Update(Resources{Idle: true}); err != nil {
		t.Fatal(err)
	}
	want = []string{
		"write cpuset " + dir + "/cpuset.cpus=0-3",
		"write cpuset " + dir + "/cpuset.mems=0",
		"write cpu " + dir + "/cpu.cfs_burst_us=0",
		"write cpu " + dir + "/cpu.cfs_period_us=100000",
		"write cpu " + dir + "/cpu.cfs_quota_us=-1",
		"write cpu " + dir + "/cpu.idle=1",
	}
	if diff := cmp.Diff(want, takeLog(&f.log)); diff != "" {
		t.Errorf("Update ops (-want +got):\n%s", diff)
	}

	if err := g.AddProc(4242); err != nil {
		t.Fatal(err)
	}
	want = []string{
		"write cpuset " + dir + "/cgroup.procs=4242",
		"write cpu " + dir + "/cgroup.procs=4242",
		"write cpuacct " + dir + "/cgroup.procs=4242",
	}
	if diff := cmp.Diff(want, takeLog(&f.log)); diff != "" {
		t.Errorf("AddProc ops (-want +got):\n%s", diff)
	}

	os.WriteFile(filepath.Join(f.cpuacct.dir, dir, "cpuacct.usage"), []byte("1500000000\n"), 0o644)
	os.WriteFile(filepath.Join(f.cpuacct.dir, dir, "cpuacct.usage_user"), []byte("1000000000\n"), 0o644)
	os.WriteFile(filepath.Join(f.cpu.dir, dir, "cpu.stat"),
		[]byte("nr_periods 30\nnr_throttled 7\nthrottled_time 123000000\nnr_bursts 2\nburst_time 5000000\n"), 0o644)
	st, err := g.Stats()
	if err != nil {
		t.Fatal(err)
	}
	wantStats := Stats{Usage: 1500 * time.Millisecond, User: time.Second, NrPeriods: 30, NrThrottled: 7,
		ThrottledTime: 123 * time.Millisecond, NrBursts: 2, BurstTime: 5 * time.Millisecond}
	if diff := cmp.Diff(wantStats, st); diff != "" {
		t.Errorf("Stats() (-want +got):\n%s", diff)
	}

	if err := g.Remove(); err == nil {
		t.Error("Remove() with a process in the group = nil, want an error")
	}
	takeLog(&f.log)
	for _, h := range []*fakeFS{f.cpuset, f.cpu, f.cpuacct} { // the process exits
		os.WriteFile(filepath.Join(h.dir, dir, "cgroup.procs"), nil, 0o644)
	}
	if err := g.Remove(); err != nil {
		t.Fatal(err)
	}
	want = []string{"rmdir cpuacct " + dir, "rmdir cpu " + dir, "rmdir cpuset " + dir}
	if diff := cmp.Diff(want, takeLog(&f.log)); diff != "" {
		t.Errorf("Remove ops (-want +got):\n%s", diff)
	}
	for _, h := range []*fakeFS{f.cpuset, f.cpu, f.cpuacct} {
		if _, err := os.Stat(filepath.Join(h.dir, dir)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s %s after Remove: %v, want not exist", h.name, dir, err)
		}
	}
}

// A corepin root left by an earlier run keeps its CPUs: nothing is written.
func TestV1FakeExistingRoot(t *testing.T) {
	f := newFakeV1(t, v1CPUFiles)
	if _, err := newV1(f.hierarchies(), testConfig("corepin")); err != nil {
		t.Fatal(err)
	}
	if err := f.cpuset.write("corepin/cpuset.cpus", "1-2"); err != nil {
		t.Fatal(err)
	}
	takeLog(&f.log)
	if _, err := newV1(f.hierarchies(), testConfig("corepin")); err != nil {
		t.Fatal(err)
	}
	want := []string{"mkdir cpuset corepin", "mkdir cpu corepin", "mkdir cpuacct corepin"}
	if diff := cmp.Diff(want, takeLog(&f.log)); diff != "" {
		t.Errorf("second newV1 ops (-want +got):\n%s", diff)
	}
}

// An old kernel (no cpu.idle, no cpu.cfs_burst_us): idle falls back to
// cpu.shares=2, a burst is refused, and Limitations say so.
func TestV1FakeOldKernel(t *testing.T) {
	f := newFakeV1(t, without(v1CPUFiles, "cpu.idle", "cpu.cfs_burst_us"))
	d, err := newV1(f.hierarchies(), testConfig("corepin"))
	if err != nil {
		t.Fatal(err)
	}
	if l := strings.Join(d.Limitations(), "\n"); !strings.Contains(l, "cpu.idle") || !strings.Contains(l, "cpu.cfs_burst_us") {
		t.Errorf("Limitations() = %q, want cpu.idle and cpu.cfs_burst_us named", l)
	}
	takeLog(&f.log)
	if _, err := d.Create("b", Resources{Quota: 10 * time.Millisecond, Burst: time.Millisecond}); !errors.Is(err, ErrNotSupported) {
		t.Errorf("Create with burst = %v, want ErrNotSupported", err)
	}
	if got := takeLog(&f.log); len(got) != 0 {
		t.Errorf("refused Create did I/O: %q", got)
	}
	if _, err := d.Create("idle", Resources{Idle: true}); err != nil {
		t.Fatal(err)
	}
	if got := f.cpu.readBack(t, "corepin/run-100-5-idle/cpu.shares"); got != "2" {
		t.Errorf("cpu.shares of idle group = %q, want 2", got)
	}
}

func TestV1FakeCreateErrors(t *testing.T) {
	f := newFakeV1(t, v1CPUFiles)
	d, err := newV1(f.hierarchies(), testConfig("corepin"))
	if err != nil {
		t.Fatal(err)
	}
	takeLog(&f.log)
	for _, tc := range []struct {
		name string
		r    Resources
		err  error
	}{
		{name: "../escape", err: ErrInvalidName},
		{name: "cpus-outside-root", r: Resources{CPUs: cpuset.New(7)}, err: ErrInvalidResources},
		{name: "mems-outside-root", r: Resources{Mems: cpuset.New(1)}, err: ErrInvalidResources},
		{name: "weight-and-idle", r: Resources{Weight: 10, Idle: true}, err: ErrInvalidResources},
	} {
		if _, err := d.Create(tc.name, tc.r); !errors.Is(err, tc.err) {
			t.Errorf("Create(%q, %+v) = %v, want %v", tc.name, tc.r, err, tc.err)
		}
	}
	if got := takeLog(&f.log); len(got) != 0 {
		t.Errorf("refused Creates did I/O: %q", got)
	}

	// A failing write undoes the mkdirs.
	os.Remove(filepath.Join(f.cpu.dir, "corepin", "cpu.cfs_quota_us")) // probed already: looks like a vanished file
	d.feat.bandwidth = true
	f.cpu.seed = func(*fakeFS, string) map[string]string { return without(v1CPUFiles, "cpu.cfs_period_us") }
	if _, err := d.Create("half", Resources{}); !errors.Is(err, ErrNotSupported) {
		t.Errorf("Create with a missing file = %v, want ErrNotSupported", err)
	}
	for _, h := range []*fakeFS{f.cpuset, f.cpu, f.cpuacct} {
		if _, err := os.Stat(filepath.Join(h.dir, "corepin/run-100-5-half")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s group after failed Create: %v, want removed", h.name, err)
		}
	}

	f.cpu.seed = func(*fakeFS, string) map[string]string { return v1CPUFiles }
	if _, err := d.Create("dup", Resources{}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Create("dup", Resources{}); !errors.Is(err, os.ErrExist) {
		t.Errorf("second Create(dup) = %v, want ErrExist", err)
	}
}

func TestV1FakeCleanup(t *testing.T) {
	f := newFakeV1(t, v1CPUFiles)
	d, err := newV1(f.hierarchies(), testConfig("corepin"))
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []*fakeFS{f.cpuset, f.cpu, f.cpuacct} {
		for _, dn := range []string{
			"run-100-5-mine",    // ours, alive
			"run-101-9-live",    // another live corepin
			"run-102-9-dead",    // owner gone
			"run-100-4-reused",  // our pid, but an earlier process
			"run-103-9-busy",    // owner gone, a task left
			"somebody-elses",    // not corepin's
			"run-x-9-malformed", // not corepin's
		} {
			if err := h.mkdir("corepin/" + dn); err != nil {
				t.Fatal(err)
			}
		}
		h.write("corepin/run-103-9-busy/cgroup.procs", "777")
	}
	takeLog(&f.log)
	removed, err := d.Cleanup()
	if err == nil || !strings.Contains(err.Error(), "run-103-9-busy") || !strings.Contains(err.Error(), "777") {
		t.Errorf("Cleanup() error = %v, want the busy group and its pid named", err)
	}
	var want []string
	for _, h := range []*fakeFS{f.cpuset, f.cpu, f.cpuacct} {
		want = append(want, filepath.Join(h.dir, "corepin/run-100-4-reused"), filepath.Join(h.dir, "corepin/run-102-9-dead"))
	}
	if diff := cmp.Diff(want, removed); diff != "" {
		t.Errorf("Cleanup() removed (-want +got):\n%s", diff)
	}
	for _, op := range takeLog(&f.log) {
		if !strings.HasPrefix(op, "rmdir ") {
			t.Errorf("Cleanup did %q; it may only rmdir", op)
		}
	}
}

func TestV2FakeLifecycle(t *testing.T) {
	var log []string
	h := newFakeV2(t, &log, v2CPUFiles)
	d, err := newV2(h, testConfig("corepin"), v2Want)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"write v2 cgroup.subtree_control=+cpuset +cpu",
		"mkdir v2 corepin",
		"write v2 corepin/cgroup.subtree_control=+cpuset +cpu",
	}
	if diff := cmp.Diff(want, takeLog(&log)); diff != "" {
		t.Errorf("newV2 ops (-want +got):\n%s", diff)
	}
	if got := h.readBack(t, "cgroup.subtree_control"); got != "memory pids cpuset cpu" {
		t.Errorf("top cgroup.subtree_control = %q, want the old controllers kept", got)
	}

	g, err := d.Create("job-2", Resources{CPUs: cpuset.MustParse("1,3"), Quota: 150 * time.Millisecond,
		Burst: 20 * time.Millisecond, Weight: 300})
	if err != nil {
		t.Fatal(err)
	}
	dir := "corepin/run-100-5-job-2"
	want = []string{
		"mkdir v2 " + dir,
		"write v2 " + dir + "/cpuset.cpus=1,3",
		"write v2 " + dir + "/cpuset.mems=0",
		"write v2 " + dir + "/cpu.max.burst=0",
		"write v2 " + dir + "/cpu.max=150000 100000",
		"write v2 " + dir + "/cpu.max.burst=20000",
		"write v2 " + dir + "/cpu.idle=0",
		"write v2 " + dir + "/cpu.weight=300",
	}
	if diff := cmp.Diff(want, takeLog(&log)); diff != "" {
		t.Errorf("Create ops (-want +got):\n%s", diff)
	}
	if got := h.readBack(t, dir+"/cpu.max"); got != "150000 100000" {
		t.Errorf("cpu.max = %q, want %q", got, "150000 100000")
	}
	if _, ok := g.(cgroupDirOpener); !ok {
		t.Error("v2 group cannot be a CLONE_INTO_CGROUP target")
	}
	df, err := g.(cgroupDirOpener).OpenDir()
	if err != nil {
		t.Fatal(err)
	}
	df.Close()

	if err := g.AddProc(99); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"write v2 " + dir + "/cgroup.procs=99"}, takeLog(&log)); diff != "" {
		t.Errorf("AddProc ops (-want +got):\n%s", diff)
	}
	os.WriteFile(filepath.Join(h.dir, dir, "cpu.stat"), []byte("usage_usec 2500\nuser_usec 2000\nsystem_usec 500\n"+
		"core_sched.force_idle_usec 0\nnr_periods 4\nnr_throttled 1\nthrottled_usec 900\nnr_bursts 1\nburst_usec 30\n"), 0o644)
	st, err := g.Stats()
	if err != nil {
		t.Fatal(err)
	}
	wantStats := Stats{Usage: 2500 * time.Microsecond, User: 2 * time.Millisecond, System: 500 * time.Microsecond,
		NrPeriods: 4, NrThrottled: 1, ThrottledTime: 900 * time.Microsecond, NrBursts: 1, BurstTime: 30 * time.Microsecond}
	if diff := cmp.Diff(wantStats, st); diff != "" {
		t.Errorf("Stats() (-want +got):\n%s", diff)
	}
	os.WriteFile(filepath.Join(h.dir, dir, "cgroup.procs"), nil, 0o644)
	if err := g.Remove(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"rmdir v2 " + dir}, takeLog(&log)); diff != "" {
		t.Errorf("Remove ops (-want +got):\n%s", diff)
	}
}

// A v2 host whose root already delegates cpuset and cpu gets no
// subtree_control write at the top.
func TestV2FakeAlreadyEnabled(t *testing.T) {
	var log []string
	h := newFakeV2(t, &log, v2CPUFiles)
	h.rootFS.write(v2Subtree, "cpuset cpu memory")
	if _, err := newV2(h, testConfig("corepin"), v2Want); err != nil {
		t.Fatal(err)
	}
	want := []string{"mkdir v2 corepin", "write v2 corepin/cgroup.subtree_control=+cpuset +cpu"}
	if diff := cmp.Diff(want, takeLog(&log)); diff != "" {
		t.Errorf("newV2 ops (-want +got):\n%s", diff)
	}
}

// On a hybrid host the cgroup2 mount offers no cpu or cpuset: newV2 fails
// with ErrNotSupported and writes nothing.
func TestV2FakeNoControllers(t *testing.T) {
	var log []string
	h := newFakeV2(t, &log, v2CPUFiles)
	h.rootFS.write(v2Controllers, "hugetlb")
	_, err := newV2(h, testConfig("corepin"), v2Want)
	if !errors.Is(err, ErrNotSupported) || !strings.Contains(err.Error(), "cpuset, cpu") {
		t.Errorf("newV2 = %v, want ErrNotSupported naming cpuset, cpu", err)
	}
	if len(log) != 0 {
		t.Errorf("newV2 did I/O: %q", log)
	}
}

func TestV2FakeCleanup(t *testing.T) {
	var log []string
	h := newFakeV2(t, &log, v2CPUFiles)
	d, err := newV2(h, testConfig("corepin"), v2Want)
	if err != nil {
		t.Fatal(err)
	}
	for _, dn := range []string{"run-100-5-mine", "run-102-1-dead"} {
		if err := h.mkdir("corepin/" + dn); err != nil {
			t.Fatal(err)
		}
	}
	removed, err := d.Cleanup()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{filepath.Join(h.dir, "corepin/run-102-1-dead")}, removed); diff != "" {
		t.Errorf("Cleanup() removed (-want +got):\n%s", diff)
	}
}

// The writer cannot leave its mount, even through a symlink planted in the
// tree.
func TestRootFSConfined(t *testing.T) {
	outside := t.TempDir()
	dir := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(outside, "cpu.max"), nil, 0o644)
	h, err := openRootFS(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer h.r.Close()
	for _, p := range []string{"link/cpu.max", "../cpu.max", "/etc/passwd"} {
		if err := h.write(p, "1"); err == nil {
			t.Errorf("write(%q) = nil, want an escape error", p)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "cpu.max")); len(b) != 0 {
		t.Errorf("file outside the root was written: %q", b)
	}
}
