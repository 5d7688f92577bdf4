package enforce

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corepin/corepin/cpuset"
)

func TestBalanceWrites(t *testing.T) {
	withBalance := allFeatures
	withBalance.balance = true
	two := cpuset.MustParse("2-3")
	for _, tc := range []struct {
		name   string
		writes func(Resources, rootSets, features) ([]Write, error)
		r      Resources
		f      features
		want   []Write
		err    error
	}{{
		name:   "v1: 0 after the sets",
		writes: v1Writes,
		r:      Resources{CPUs: two, NoLoadBalance: true},
		f:      withBalance,
		want: []Write{{"cpuset.cpus", "2-3"}, {"cpuset.mems", "0"}, {"cpuset.sched_load_balance", "0"}, {"cpu.cfs_burst_us", "0"},
			{"cpu.cfs_period_us", "100000"}, {"cpu.cfs_quota_us", "-1"}, {"cpu.idle", "0"}, {"cpu.shares", "1024"}},
	}, {
		name:   "v1: 1 (back to balanced) without it",
		writes: v1Writes,
		r:      Resources{CPUs: two},
		f:      withBalance,
		want: []Write{{"cpuset.cpus", "2-3"}, {"cpuset.mems", "0"}, {"cpuset.sched_load_balance", "1"}, {"cpu.cfs_burst_us", "0"},
			{"cpu.cfs_period_us", "100000"}, {"cpu.cfs_quota_us", "-1"}, {"cpu.idle", "0"}, {"cpu.shares", "1024"}},
	}, {
		name:   "v1: no flag file",
		writes: v1Writes,
		r:      Resources{CPUs: two, NoLoadBalance: true},
		f:      allFeatures,
		err:    ErrLoadBalance,
	}, {
		name:   "v2: the partition is not a write of the list",
		writes: v2Writes,
		r:      Resources{CPUs: two, NoLoadBalance: true},
		f:      withBalance,
		want: []Write{{"cpuset.cpus", "2-3"}, {"cpuset.mems", "0"}, {"cpu.max.burst", "0"},
			{"cpu.max", "max 100000"}, {"cpu.idle", "0"}, {"cpu.weight", "100"}},
	}, {
		name:   "v2: no partition file (Linux < 5.11)",
		writes: v2Writes,
		r:      Resources{CPUs: two, NoLoadBalance: true},
		f:      allFeatures,
		err:    ErrLoadBalance,
	}, {
		name:   "without CPUs",
		writes: v2Writes,
		r:      Resources{NoLoadBalance: true},
		f:      withBalance,
		err:    ErrInvalidResources,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.writes(tc.r, root0to3, tc.f)
			if !errors.Is(err, tc.err) {
				t.Fatalf("writes() error = %v, want %v", err, tc.err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("writes() (-want +got):\n%s", diff)
			}
		})
	}
}

// fakePartitions gives h's cgroups with a cpuset the partition files of
// Linux 6.12 (exclusive: cpuset.cpus.exclusive too) and emulates the
// kernel's rules for them: a child lists only CPUs no sibling lists, and
// "isolated" is valid where the group's exclusive CPUs are non-empty and
// listed by its parent (a remote partition) or, without
// cpuset.cpus.exclusive, never below a member.
func fakePartitions(t *testing.T, h *fakeFS, exclusive bool) {
	t.Helper()
	seed := h.seed
	h.seed = func(f *fakeFS, parent string) map[string]string {
		m := seed(f, parent)
		if _, ok := m["cpuset.cpus"]; ok {
			m[v2Partition] = partMember
			if exclusive {
				m[v2Exclusive] = ""
			}
		}
		return m
	}
	set := func(file string) cpuset.CPUSet {
		s, err := h.rootFS.read(file)
		if err != nil {
			return cpuset.CPUSet{}
		}
		return cpuset.MustParse(s)
	}
	h.kernel = func(f *fakeFS, file, value string) (string, error) {
		dir, parent := path.Dir(file), path.Dir(path.Dir(file))
		switch path.Base(file) {
		case v2Exclusive:
			want, err := cpuset.Parse(strings.TrimSpace(value))
			if err != nil {
				return "", err
			}
			sibs, _ := f.rootFS.subdirs(parent)
			for _, s := range sibs {
				if sd := path.Join(parent, s); sd != dir && !set(path.Join(sd, v2Exclusive)).Intersection(want).IsEmpty() {
					return "", fmt.Errorf("invalid argument")
				}
			}
		case v2Partition:
			if value != partIsolated {
				return value, nil
			}
			if !exclusive {
				return "isolated invalid (Parent is not a partition root)", nil
			}
			ex := set(path.Join(dir, v2Exclusive))
			if ex.IsEmpty() || !ex.IsSubsetOf(set(path.Join(parent, v2Exclusive))) {
				return "isolated invalid (Invalid cpu list in cpuset.cpus.exclusive)", nil
			}
		}
		return value, nil
	}
}

// writeFake writes (or creates) a file of fake hierarchy h, as a test's
// set-up, outside the log.
func writeFake(t *testing.T, h *fakeFS, file, value string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(h.dir, file), []byte(value), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A group asking for no load balancing is an isolated partition on a
// 6.12 kernel: corepin's root lists its CPUs, then the group; removal and
// an Update without it give them back.
func TestV2FakePartition(t *testing.T) {
	var log []string
	h := newFakeV2(t, &log, v2CPUFiles)
	fakePartitions(t, h, true)
	d, err := newV2(h, testConfig("corepin"), v2Want)
	if err != nil {
		t.Fatal(err)
	}
	if !d.feat.balance || !d.feat.exclusive || d.bal == nil {
		t.Fatalf("features = %+v, want balance and exclusive found", d.feat)
	}
	takeLog(&log)
	g, err := d.Create("lat", Resources{CPUs: cpuset.MustParse("2-3"), NoLoadBalance: true})
	if err != nil {
		t.Fatal(err)
	}
	dir := "corepin/run-100-5-lat"
	want := []string{
		"mkdir v2 " + dir,
		"write v2 " + dir + "/cpuset.cpus=2-3",
		"write v2 " + dir + "/cpuset.mems=0",
		"write v2 " + dir + "/cpu.max.burst=0",
		"write v2 " + dir + "/cpu.max=max 100000",
		"write v2 " + dir + "/cpu.idle=0",
		"write v2 " + dir + "/cpu.weight=100",
		"write v2 corepin/cpuset.cpus.exclusive=2-3",
		"write v2 " + dir + "/cpuset.cpus.exclusive=2-3",
		"write v2 " + dir + "/cpuset.cpus.partition=isolated",
	}
	if diff := cmp.Diff(want, takeLog(&log)); diff != "" {
		t.Errorf("Create ops (-want +got):\n%s", diff)
	}
	check := func(file, want string) {
		t.Helper()
		if got := h.readBack(t, file); got != want {
			t.Errorf("%s = %q, want %q", file, got, want)
		}
	}
	check(dir+"/cpuset.cpus.partition", "isolated")
	g2, err := d.Create("lat2", Resources{CPUs: cpuset.New(1), NoLoadBalance: true})
	if err != nil {
		t.Fatal(err)
	}
	check("corepin/cpuset.cpus.exclusive", "1-3")
	if err := g.Remove(); err != nil {
		t.Fatal(err)
	}
	check("corepin/cpuset.cpus.exclusive", "1")
	// The kernel takes a partition's CPUs out of its parent's effective
	// set; an Update of the partition still may name them.
	writeFake(t, h, "corepin/cpuset.cpus.effective", "0,2-3")
	if err := g2.Update(Resources{CPUs: cpuset.New(1), NoLoadBalance: true}); err != nil {
		t.Fatalf("Update of a partition whose CPUs left corepin root's effective set: %v", err)
	}
	if err := g2.Update(Resources{CPUs: cpuset.New(1)}); err != nil {
		t.Fatal(err)
	}
	check("corepin/run-100-5-lat2/cpuset.cpus.partition", "member")
	check("corepin/run-100-5-lat2/cpuset.cpus.exclusive", "")
	check("corepin/cpuset.cpus.exclusive", "")
}

// Where the kernel cannot form the partition, Create fails with the
// kernel's reason verbatim and leaves nothing: no group, no exclusive
// CPUs on corepin's root.
func TestV2FakePartitionRefused(t *testing.T) {
	for _, tc := range []struct {
		name      string
		exclusive bool
		other     string // CPUs a sibling of corepin's root lists exclusively
		want      string
	}{{
		name: "Linux 6.1: no cpuset.cpus.exclusive, corepin's root is no partition",
		want: `the kernel left cpuset.cpus.partition "isolated invalid (Parent is not a partition root)"; this kernel has no cpuset.cpus.exclusive`,
	}, {
		name:      "Linux 6.12: a sibling of corepin's root lists CPU 3 exclusively",
		exclusive: true,
		other:     "3",
		want:      "adding CPUs 2-3 to cpuset.cpus.exclusive of ",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var log []string
			h := newFakeV2(t, &log, v2CPUFiles)
			fakePartitions(t, h, tc.exclusive)
			if tc.other != "" {
				if err := h.rootFS.mkdir("other"); err != nil {
					t.Fatal(err)
				}
				writeFake(t, h, "other/"+v2Exclusive, tc.other)
			}
			d, err := newV2(h, testConfig("corepin"), v2Want)
			if err != nil {
				t.Fatal(err)
			}
			_, err = d.Create("lat", Resources{CPUs: cpuset.MustParse("2-3"), NoLoadBalance: true})
			if !errors.Is(err, ErrLoadBalance) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Create() error = %v, want %v saying %q", err, ErrLoadBalance, tc.want)
			}
			if ds, _ := h.rootFS.subdirs("corepin"); len(ds) != 0 {
				t.Errorf("groups left under corepin's root: %v", ds)
			}
			if tc.exclusive {
				if got := h.readBack(t, "corepin/"+v2Exclusive); got != "" {
					t.Errorf("corepin's root keeps %s %q after the refusal, want none", v2Exclusive, got)
				}
			}
		})
	}
}

// A dead run's group kept for its processes stops being a partition, and
// corepin's root stops listing its CPUs.
func TestV2FakeCleanupDissolvesPartition(t *testing.T) {
	var log []string
	h := newFakeV2(t, &log, v2CPUFiles)
	fakePartitions(t, h, true)
	d, err := newV2(h, testConfig("corepin"), v2Want)
	if err != nil {
		t.Fatal(err)
	}
	stale := "corepin/run-200-7-lat"
	if err := h.mkdir(stale); err != nil {
		t.Fatal(err)
	}
	for file, v := range map[string]string{"corepin/" + v2Exclusive: "2-3", stale + "/" + v2Exclusive: "2-3",
		stale + "/" + v2Partition: partIsolated, stale + "/cgroup.procs": "55"} {
		writeFake(t, h, file, v)
	}
	if _, err := d.Cleanup(); err == nil || !strings.Contains(err.Error(), "keeping stale group") {
		t.Fatalf("Cleanup() error = %v, want the stale group kept", err)
	}
	for file, want := range map[string]string{stale + "/" + v2Partition: partMember, stale + "/" + v2Exclusive: "", "corepin/" + v2Exclusive: ""} {
		if got := h.readBack(t, file); got != want {
			t.Errorf("after Cleanup %s = %q, want %q", file, got, want)
		}
	}
}

// fakeV1Balance is newFakeV1 with cpuset.sched_load_balance everywhere
// (root flag rootFlag), the root's CPUs 0-3 effective, and a sibling
// cpuset "system" of corepin's root with flag 1 on sysCPUs, and the
// driver on it.
func fakeV1Balance(t *testing.T, rootFlag, sysCPUs string) (*fakeV1, *cgDriver) {
	t.Helper()
	f := newFakeV1(t, v1CPUFiles)
	seed := f.cpuset.seed
	f.cpuset.seed = func(h *fakeFS, parent string) map[string]string {
		m := maps(seed(h, parent))
		m[v1LoadBalance] = "1"
		return m
	}
	for file, v := range map[string]string{v1LoadBalance: rootFlag, "cpuset.effective_cpus": "0-3"} {
		writeFake(t, f.cpuset, file, v)
	}
	if err := f.cpuset.mkdir("system"); err != nil {
		t.Fatal(err)
	}
	writeFake(t, f.cpuset, "system/cpuset.effective_cpus", sysCPUs)
	d, err := newV1(f.hierarchies(), testConfig("corepin"))
	if err != nil {
		t.Fatal(err)
	}
	return f, d
}

func TestV1FakeNoLoadBalance(t *testing.T) {
	two := cpuset.MustParse("2-3")
	t.Run("the root balances every CPU: refused, saying where to change what", func(t *testing.T) {
		f, d := fakeV1Balance(t, "1", "0-3")
		takeLog(&f.log)
		_, err := d.Create("lat", Resources{CPUs: two, NoLoadBalance: true})
		want := "cpuset.sched_load_balance 1, so the kernel balances its CPUs 0-3 as one scheduling domain (CPUs 2-3 of this group among them)"
		if !errors.Is(err, ErrLoadBalance) || !strings.Contains(err.Error(), "(the hierarchy's root) has "+want) ||
			!strings.Contains(err.Error(), "set cpuset.sched_load_balance to 0 there") {
			t.Fatalf("Create() error = %v, want the root named: %q", err, want)
		}
		if l := takeLog(&f.log); len(l) != 0 {
			t.Errorf("a refused Create did %q, want nothing", l)
		}
	})
	t.Run("a balanced cpuset beside corepin's root overlaps: refused, naming it", func(t *testing.T) {
		_, d := fakeV1Balance(t, "0", "0-3")
		_, err := d.Create("lat", Resources{CPUs: two, NoLoadBalance: true})
		if !errors.Is(err, ErrLoadBalance) || !strings.Contains(err.Error(), "/system has cpuset.sched_load_balance 1") {
			t.Fatalf("Create() error = %v, want cpuset system named", err)
		}
	})
	t.Run("every other balanced cpuset apart: corepin's root and the group 0", func(t *testing.T) {
		f, d := fakeV1Balance(t, "0", "0-1")
		g, err := d.Create("lat", Resources{CPUs: two, NoLoadBalance: true})
		if err != nil {
			t.Fatal(err)
		}
		for file, want := range map[string]string{"corepin/" + v1LoadBalance: "0", "corepin/run-100-5-lat/" + v1LoadBalance: "0"} {
			if got := f.cpuset.readBack(t, file); got != want {
				t.Errorf("%s = %q, want %q", file, got, want)
			}
		}
		if err := g.Update(Resources{CPUs: two}); err != nil {
			t.Fatal(err)
		}
		if got := f.cpuset.readBack(t, "corepin/run-100-5-lat/"+v1LoadBalance); got != "1" {
			t.Errorf("after an Update without it, the group's %s = %q, want 1", v1LoadBalance, got)
		}
	})
}

// On this machine's real cgroup v1 cpuset hierarchy, whose root balances
// every CPU (as systemd leaves it), no load balancing is refused with the
// reason, and nothing of the group stays.
func TestRealV1NoLoadBalanceRefused(t *testing.T) {
	d, m := realV1(t)
	if !d.feat.balance {
		t.Skipf("skipping: no %s in %s", v1LoadBalance, m.CPUSet)
	}
	if flag := readReal(t, filepath.Join(m.CPUSet, v1LoadBalance)); flag != "1" {
		t.Skipf("skipping: this machine's cpuset root has %s %s; the refusal needs it at 1", v1LoadBalance, flag)
	}
	cpus := highestCPU(t)
	_, err := d.Create("nolb", Resources{CPUs: cpus, NoLoadBalance: true})
	want := m.CPUSet + " (the hierarchy's root) has cpuset.sched_load_balance 1"
	if !errors.Is(err, ErrLoadBalance) || !strings.Contains(err.Error(), want) {
		t.Fatalf("Create() error = %v, want %q", err, want)
	}
	if ds, err := d.hs[0].subdirs(d.base); err != nil || len(ds) != 0 {
		t.Errorf("groups left under %s: %v (%v)", d.base, ds, err)
	}
	g, err := d.Create("lb", Resources{CPUs: cpus})
	if err != nil {
		t.Fatal(err)
	}
	if got := readReal(t, filepath.Join(m.CPUSet, g.(*cgGroup).dir, v1LoadBalance)); got != "1" {
		t.Errorf("a group without it has %s %q, want 1", v1LoadBalance, got)
	}
	if err := g.Remove(); err != nil {
		t.Fatal(err)
	}
}
