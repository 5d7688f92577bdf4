package enforce

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/corepin/corepin/cpuset"
)

// Tests on this machine's real cgroups. They need root and a cgroup
// mount, and skip saying which is missing. Each uses its own corepin root
// (corepin-test-PID-N) and removes it, with its groups, when done.

var testRootSeq atomic.Int64

// testRoot returns a fresh root name and removes it, in every cgroup
// hierarchy mounted, when t ends.
func testRoot(t *testing.T) string {
	t.Helper()
	root := fmt.Sprintf("corepin-test-%d-%d", os.Getpid(), testRootSeq.Add(1))
	t.Cleanup(func() {
		ms, err := selfMounts()
		if err != nil {
			return
		}
		for _, m := range ms {
			if m.FSType != "cgroup" && m.FSType != "cgroup2" {
				continue
			}
			dir := filepath.Join(m.Point, root)
			es, _ := os.ReadDir(dir)
			for _, e := range es {
				if e.IsDir() {
					if err := syscall.Rmdir(filepath.Join(dir, e.Name())); err != nil {
						t.Errorf("cleaning up %s: %v", filepath.Join(dir, e.Name()), err)
					}
				}
			}
			if err := syscall.Rmdir(dir); err != nil && !errors.Is(err, syscall.ENOENT) {
				t.Errorf("cleaning up %s: %v", dir, err)
			}
		}
	})
	return root
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipping: creating cgroups needs root")
	}
}

// skipIfUnwritable skips when err says the cgroup file system refused us
// (read-only mount, no permission), and fails on anything else.
func skipIfUnwritable(t *testing.T, err error) {
	t.Helper()
	if errors.Is(err, syscall.EROFS) || errors.Is(err, fs.ErrPermission) {
		t.Skipf("skipping: cgroup hierarchy not writable: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// realV1 returns the cgroup v1 driver of this machine under a test root.
func realV1(t *testing.T) (*cgDriver, V1Mounts) {
	t.Helper()
	requireRoot(t)
	ms, err := selfMounts()
	if err != nil {
		t.Fatal(err)
	}
	v1, missing := findV1(ms)
	if len(missing) > 0 {
		t.Skipf("skipping: no cgroup v1 %s hierarchy mounted", strings.Join(missing, ", "))
	}
	d, err := NewV1(v1, WithRoot(testRoot(t)))
	skipIfUnwritable(t, err)
	return d.(*cgDriver), v1
}

// runIn starts script in g with Start and returns its output.
func runIn(t *testing.T, g Group, script string) (string, *exec.Cmd) {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := Start(g, cmd); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%q: %v; output %q", script, err, out.String())
	}
	return out.String(), cmd
}

// highestCPU is the highest CPU this process may run on: a set that
// differs from the default on any machine with two CPUs or more.
func highestCPU(t *testing.T) cpuset.CPUSet {
	t.Helper()
	own, err := ownAffinity()
	if err != nil {
		t.Fatal(err)
	}
	if own.Size() < 2 {
		t.Logf("only CPUs %s: confinement is not distinguishable from the default", own)
	}
	return cpuset.New(own.Max())
}

func readReal(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// The child is confined from its first instruction: its own
// /proc/self/status and /proc/self/cgroup, read by the command itself,
// show the group.
func TestRealV1Confine(t *testing.T) {
	d, m := realV1(t)
	cpus := highestCPU(t)
	g, err := d.Create("confine", Resources{CPUs: cpus})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := runIn(t, g, "grep Cpus_allowed_list /proc/self/status; grep -E ':(cpuset|cpu|cpuacct):' /proc/self/cgroup")
	if want := "Cpus_allowed_list:\t" + cpus.String() + "\n"; !strings.HasPrefix(out, want) {
		t.Errorf("child's status = %q, want %q", out, want)
	}
	dir := "/" + g.(*cgGroup).dir
	for _, c := range []string{"cpuset", "cpu", "cpuacct"} {
		if !strings.Contains(out, ":"+c+":"+dir+"\n") {
			t.Errorf("child's /proc/self/cgroup = %q, want %s in %s", out, c, dir)
		}
	}
	if err := g.Remove(); err != nil {
		t.Fatal(err)
	}
	for _, mp := range []string{m.CPUSet, m.CPU, m.CPUAcct} {
		if _, err := os.Stat(filepath.Join(mp, dir)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s after Remove: %v, want gone", filepath.Join(mp, dir), err)
		}
	}
}

// Quota, burst, weight and idle read back as written, and the write order
// holds on the real kernel: a quota below the old burst, and a weight
// after idle, are accepted.
func TestRealV1Settings(t *testing.T) {
	d, m := realV1(t)
	r := Resources{Quota: 50 * time.Millisecond, Weight: 200}
	if d.feat.burst {
		r.Burst = 10 * time.Millisecond
	}
	g, err := d.Create("settings", r)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(m.CPU, g.(*cgGroup).dir)
	check := func(file, want string) {
		t.Helper()
		if got := readReal(t, filepath.Join(dir, file)); got != want {
			t.Errorf("%s = %q, want %q", file, got, want)
		}
	}
	check("cpu.cfs_quota_us", "50000")
	check("cpu.cfs_period_us", "100000")
	check("cpu.shares", "2048")
	if d.feat.burst {
		check("cpu.cfs_burst_us", "10000")
	}
	if err := g.Update(Resources{Quota: 5 * time.Millisecond, Period: 20 * time.Millisecond}); err != nil {
		t.Fatalf("Update to a quota below the old burst: %v", err)
	}
	check("cpu.cfs_quota_us", "5000")
	check("cpu.cfs_period_us", "20000")
	if d.feat.idle {
		if err := g.Update(Resources{Idle: true}); err != nil {
			t.Fatal(err)
		}
		check("cpu.idle", "1")
		check("cpu.cfs_quota_us", "-1")
		if err := g.Update(Resources{Weight: 50}); err != nil {
			t.Fatalf("Update from idle to a weight: %v", err)
		}
		check("cpu.idle", "0")
		check("cpu.shares", "512")
	} else {
		t.Log("no cpu.idle on this kernel; idle ordering not checked")
	}
	if err := g.Remove(); err != nil {
		t.Fatal(err)
	}
}

// A CPU-bound child under a 10% quota is throttled, and Stats shows it.
func TestRealV1Stats(t *testing.T) {
	d, _ := realV1(t)
	quota := 10 * time.Millisecond
	g, err := d.Create("stats", Resources{CPUs: highestCPU(t), Quota: quota})
	if err != nil {
		t.Fatal(err)
	}
	runIn(t, g, "i=0; while [ $i -lt 30000 ]; do i=$((i+1)); done")
	st, err := g.Stats()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Stats() = %+v", st)
	if st.Usage <= 0 || st.NrPeriods == 0 {
		t.Errorf("Stats() = %+v, want usage and periods", st)
	}
	if st.Usage > 3*quota && st.NrThrottled == 0 {
		t.Errorf("used %v under a %v quota without throttling: %+v", st.Usage, quota, st)
	}
	if err := g.Remove(); err != nil {
		t.Fatal(err)
	}
}

// Groups of a dead owner are removed; the live owner's stay.
func TestRealV1Cleanup(t *testing.T) {
	d, m := realV1(t)
	g, err := d.Create("live", Resources{})
	if err != nil {
		t.Fatal(err)
	}
	// pid 1 is alive but did not start at tick 1<<40: an earlier owner.
	stale := dirName(owner{PID: 1, Start: 1 << 40}, "stale")
	var want []string
	for _, mp := range []string{m.CPUSet, m.CPU, m.CPUAcct} {
		p := filepath.Join(mp, d.base, stale)
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
		want = append(want, p)
	}
	removed, err := d.Cleanup()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(removed, "\n") != strings.Join(want, "\n") {
		t.Errorf("Cleanup() removed %q, want %q", removed, want)
	}
	if _, err := os.Stat(filepath.Join(m.CPUSet, g.(*cgGroup).dir)); err != nil {
		t.Errorf("live group after Cleanup: %v", err)
	}
	if err := g.Remove(); err != nil {
		t.Fatal(err)
	}
}

// Detect picks a driver on this machine and says why not the others.
func TestRealDetect(t *testing.T) {
	requireRoot(t)
	d, err := Detect(WithRoot(testRoot(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Detect() = %s, limitations %q", d.Name(), d.Limitations())
	if _, err := d.Cleanup(); err != nil {
		t.Error(err)
	}
}

// CLONE_INTO_CGROUP puts the child into a cgroup v2 group at creation.
// This fleet's cgroup2 mount has no controllers, so the test uses a
// driver that enables none; the mechanism is the same.
func TestRealV2CloneInto(t *testing.T) {
	requireRoot(t)
	if !cloneIntoCgroup() {
		t.Skip("skipping: kernel older than 5.7 has no CLONE_INTO_CGROUP")
	}
	ms, err := selfMounts()
	if err != nil {
		t.Fatal(err)
	}
	m, ok := findV2(ms)
	if !ok {
		t.Skip("skipping: no cgroup2 mount")
	}
	h, err := openRootFS(m.Point)
	if err != nil {
		t.Fatal(err)
	}
	d, err := newV2(h, newConfig([]Option{WithRoot(testRoot(t))}), nil)
	skipIfUnwritable(t, err)
	g, err := d.Create("clone", Resources{})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := runIn(t, g, "cat /proc/self/cgroup")
	if want := "0::/" + g.(v2Group).dir + "\n"; !strings.Contains(out, want) {
		t.Errorf("child's /proc/self/cgroup = %q, want %q", out, want)
	}
	if err := g.Remove(); err != nil {
		t.Fatal(err)
	}
}

// The affinity driver confines a child and lowers its priority before
// it runs; no root needed.
func TestRealAffinity(t *testing.T) {
	d, err := NewAffinity()
	if err != nil {
		t.Fatal(err)
	}
	cpus := highestCPU(t)
	const script = `grep Cpus_allowed_list /proc/self/status; set -- $(cat /proc/$$/stat); echo "nice=${19} policy=${41}"`
	g, err := d.Create("aff", Resources{CPUs: cpus, Weight: 10})
	if err != nil {
		t.Fatal(err)
	}
	// The children's nice depends on this process's (issue 17 §2): a
	// Weight of 10 is nice 10 where the caller may give that, and SCHED_IDLE
	// keeps the nice the child inherits.
	own, lowest := callerNice(t)
	out, _ := runIn(t, g, script)
	if want := "Cpus_allowed_list:\t" + cpus.String() + "\nnice=" + strconv.Itoa(max(10, lowest)) + " policy=0\n"; out != want {
		t.Errorf("child output = %q, want %q", out, want)
	}
	if err := g.Update(Resources{CPUs: cpus, Idle: true}); err != nil {
		t.Fatal(err)
	}
	g2, err := d.Create("idle", Resources{CPUs: cpus, Idle: true})
	if err != nil {
		t.Fatal(err)
	}
	out, _ = runIn(t, g2, script)
	if want := "Cpus_allowed_list:\t" + cpus.String() + "\nnice=" + strconv.Itoa(own) + " policy=5\n"; out != want {
		t.Errorf("idle child output = %q, want %q", out, want)
	}
	if _, err := g.Stats(); !errors.Is(err, ErrNotSupported) {
		t.Errorf("Stats() = %v, want ErrNotSupported", err)
	}
}

// Without any cgroup mount, Detect falls back to the affinity driver and
// says why first.
func TestDetectFallsBackToAffinity(t *testing.T) {
	mi := filepath.Join(t.TempDir(), "mountinfo")
	os.WriteFile(mi, []byte("22 1 0:21 / / rw,relatime - rootfs rootfs rw\n"), 0o644)
	d, err := Detect(WithMountinfo(mi))
	if err != nil {
		t.Fatal(err)
	}
	l := d.Limitations()
	if d.Name() != NameAffinity || len(l) == 0 ||
		l[0] != "no usable cgroup (cgroup v2: not mounted; cgroup v1: no cpuset, cpu hierarchy mounted)" {
		t.Errorf("Detect() = %s, limitations %q", d.Name(), l)
	}
}

// Issue 27 §3.5: asking for a cgroup driver the machine can not give says
// why and which drivers it can (auto and affinity always), wrapping
// ErrUnusable; affinity is always given.
func TestDetectNamedSaysWhatWorks(t *testing.T) {
	mi := filepath.Join(t.TempDir(), "mountinfo")
	if err := os.WriteFile(mi, []byte("22 1 0:21 / / rw,relatime - rootfs rootfs rw\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		NameV2: "cgroup-v2 is not usable here (cgroup v2: not mounted); drivers that work here: auto, affinity",
		NameV1: "cgroup-v1 is not usable here (cgroup v1: no cpuset, cpu hierarchy mounted); drivers that work here: auto, affinity",
	} {
		if d, err := DetectNamed(name, WithMountinfo(mi)); !errors.Is(err, ErrUnusable) || err.Error() != want {
			t.Errorf("DetectNamed(%s) = %v, %v; want %q", name, d, err, want)
		}
	}
	if d, err := DetectNamed(NameAffinity, WithMountinfo(mi)); err != nil || d.Name() != NameAffinity {
		t.Errorf("DetectNamed(affinity) = %v, %v; want the affinity driver", d, err)
	}
	if _, err := DetectNamed("cgroup-v3", WithMountinfo(mi)); err == nil || errors.Is(err, ErrUnusable) {
		t.Errorf("DetectNamed(cgroup-v3) = %v, want an unknown driver", err)
	}
}
