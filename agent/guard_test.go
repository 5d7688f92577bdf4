package agent

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/corepin/corepin/internal/testutil"
)

// groupDir returns the directory (under root, in the cpuset hierarchy) of
// workload name's group.
func groupDir(t testing.TB, root, name string) string {
	t.Helper()
	ds, _ := filepath.Glob(filepath.Join(cpusetMount(), root, "run-*-"+name))
	if len(ds) != 1 {
		t.Fatalf("groups of %s under %s: %v, want one", name, root, ds)
	}
	return ds[0]
}

// otherThread returns a thread id of this process other than its leader.
func otherThread(t testing.TB) int {
	t.Helper()
	es, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		if id, err := strconv.Atoi(e.Name()); err == nil && id != os.Getpid() {
			return id
		}
	}
	t.Skip("skipping: this process has a single thread")
	return 0
}

// zombie starts a child that exits at once and is not reaped until t ends.
func zombie(t testing.TB) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Wait() })
	pid := cmd.Process.Pid
	for deadline := time.Now().Add(testutil.Patience); ; {
		st, err := procState(pid)
		if err == nil && st == 'Z' {
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("child %d is not a zombie after %v (%+v, %v)", pid, testutil.Patience, st, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// foreignCgroup makes a cgroup outside corepin's roots in the cpuset, cpu
// and cpuacct hierarchies with a sleep in it (a container's, say), and
// removes both when t ends. It returns the cgroup path and the pid.
func foreignCgroup(t testing.TB) (string, int) {
	t.Helper()
	if cpusetMount() != "/sys/fs/cgroup/cpuset" {
		t.Skip("skipping: the foreign cgroup is made for cgroup v1")
	}
	name := fmt.Sprintf("cpt-foreign-%d-%d", os.Getpid(), rootSeq.Add(1))
	cmd := exec.Command("sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var dirs []string
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		for _, d := range dirs {
			rmdirWhenEmpty(t, d)
		}
	})
	for _, h := range []string{"cpuset", "cpu", "cpuacct"} {
		d := filepath.Join("/sys/fs/cgroup", h, name)
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, d)
		if h == "cpuset" {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/cpuset", f))
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(d, f), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return name, cmd.Process.Pid
}

// TestAdoptionRefusals (issue 17 §5): a pid or cgroup that corepin already
// runs is refused with 422 or 409, and nothing changes: not the state,
// not the live groups, not the workload whose process or group it names,
// not the agent's own cgroups.
func TestAdoptionRefusals(t *testing.T) {
	n, root := newNodeWithKeepers(t)
	lseDir := groupDir(t, root, "keep-lse")
	lsePids := readPids(lseDir)
	if len(lsePids) != 1 {
		t.Fatalf("keep-lse's group holds %v", lsePids)
	}
	before, liveBefore := n.List(), liveGroups(t, root)
	selfBefore, err := selfCgroups()
	if err != nil {
		t.Fatal(err)
	}
	ls := func(name string) Spec { return Spec{Name: name, QoS: "LS", CPUs: f64(0.2)} }
	withPID := func(s Spec, pid int) Spec { s.PID = pid; return s }
	withCg := func(s Spec, cg string) Spec { s.Cgroup = cg; return s }
	lseSpec := Spec{Name: "evil", QoS: "LSE", CPUs: f64(1)}
	beSpec := Spec{Name: "evil", QoS: "BE", CPUs: f64(0)}
	for _, tc := range []struct {
		name string
		spec Spec
		want int
	}{
		{name: "a thread of the agent", spec: withPID(ls("evil"), otherThread(t)), want: http.StatusUnprocessableEntity},
		{name: "the agent", spec: withPID(ls("evil"), os.Getpid()), want: http.StatusUnprocessableEntity},
		{name: "another workload's process", spec: withPID(ls("evil"), lsePids[0]), want: http.StatusConflict},
		{name: "a zombie", spec: withPID(ls("evil"), zombie(t)), want: http.StatusUnprocessableEntity},
		{name: "a kernel thread", spec: withPID(ls("evil"), 2), want: http.StatusUnprocessableEntity},
		{name: "another workload's group", spec: withCg(ls("evil"), root+"/"+filepath.Base(lseDir)), want: http.StatusUnprocessableEntity},
		{name: "the agent's root as BE", spec: withCg(beSpec, root), want: http.StatusUnprocessableEntity},
		{name: "the agent's root as LSE", spec: withCg(lseSpec, "/"+root+"/"), want: http.StatusUnprocessableEntity},
		{name: "a run's group", spec: withCg(ls("evil"), "corepin/run-1-2-job-0"), want: http.StatusUnprocessableEntity},
		{name: "the BE runs' root", spec: withCg(ls("evil"), "corepin-be"), want: http.StatusUnprocessableEntity},
		{name: "a group below the agent's root", spec: withCg(ls("evil"), root+"/x/../"+filepath.Base(lseDir)+"/sub"), want: http.StatusUnprocessableEntity},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := n.Create(tc.spec)
			if err == nil {
				n.Delete(w.Name) // so the next case starts from the same state
				t.Fatalf("Create(%+v) admitted %+v", tc.spec, w)
			}
			if got := statusOf(err); got != tc.want {
				t.Errorf("Create(%+v) = %v: status %d, want %d", tc.spec, err, got, tc.want)
			}
			if d := cmp.Diff(before, n.List()); d != "" {
				t.Errorf("state changed (-before +after):\n%s", d)
			}
			if d := cmp.Diff(liveBefore, liveGroups(t, root)); d != "" {
				t.Errorf("live groups changed (-before +after):\n%s", d)
			}
			if got := readPids(lseDir); !cmp.Equal(got, lsePids) {
				t.Errorf("keep-lse's group holds %v, want %v", got, lsePids)
			}
			if self, _ := selfCgroups(); !cmp.Equal(self, selfBefore) {
				t.Errorf("the agent moved: cgroups %v, were %v", self, selfBefore)
			}
		})
	}
}

// TestAdoptedCgroupIsTaken: a cgroup one workload adopted can not be
// adopted again, nor a cgroup inside it, nor its process; deleting the
// first lets another adopt it.
func TestAdoptedCgroupIsTaken(t *testing.T) {
	n, _ := newNode(t)
	cg, pid := foreignCgroup(t)
	if _, err := n.Create(Spec{Name: "box", QoS: "LS", CPUs: f64(0.5), Cgroup: cg}); err != nil {
		t.Fatal(err)
	}
	before := n.List()
	for _, s := range []Spec{
		{Name: "again", QoS: "LS", CPUs: f64(0.2), Cgroup: "/" + cg},
		{Name: "inner", QoS: "LS", CPUs: f64(0.2), Cgroup: cg + "/inner"},
		{Name: "its-pid", QoS: "LS", CPUs: f64(0.2), PID: pid},
	} {
		_, err := n.Create(s)
		if !errors.Is(err, ErrTaken) || statusOf(err) != http.StatusConflict {
			t.Errorf("Create(%+v) = %v, want ErrTaken (409)", s, err)
		}
	}
	if d := cmp.Diff(before, n.List()); d != "" {
		t.Errorf("state changed (-before +after):\n%s", d)
	}
	if b, _ := os.ReadFile(filepath.Join("/sys/fs/cgroup/cpu", cg, "cpu.cfs_quota_us")); strings.TrimSpace(string(b)) != "50000" {
		t.Errorf("box's quota = %q, want 50000 (0.5 CPU) as box set it", b)
	}
	if err := n.Delete("box"); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Create(Spec{Name: "again", QoS: "LS", CPUs: f64(0.2), Cgroup: cg}); err != nil {
		t.Errorf("adopting %s after its adopter was deleted: %v", cg, err)
	}
}

// TestSizesBeyondTheMachine (issue 17 §5): a request no state of this node
// could admit is 422 in every class (LS answered 409, and BE was admitted
// with 65,536 CPUs on a 2-CPU node), and admits nothing.
func TestSizesBeyondTheMachine(t *testing.T) {
	n, root := newNode(t)
	cpus := float64(n.Topology().Allowed().Size())
	before, liveBefore := n.List(), liveGroups(t, root)
	for _, s := range []Spec{
		{Name: "big", QoS: "LSE", CPUs: f64(cpus + 1), Command: "sleep", Args: []string{"600"}},
		{Name: "big", QoS: "LSR", CPUs: f64(cpus + 1), Command: "sleep", Args: []string{"600"}},
		{Name: "big", QoS: "LS", CPUs: f64(cpus + 0.5), Command: "sleep", Args: []string{"600"}},
		{Name: "big", CPUs: f64(cpus + 0.5), Command: "sleep", Args: []string{"600"}},
		{Name: "big", QoS: "BE", CPUs: f64(65536), Command: "sleep", Args: []string{"600"}},
		{Name: "big", QoS: "BE", CPUs: f64(cpus + 0.001), Command: "sleep", Args: []string{"600"}},
	} {
		w, err := n.Create(s)
		if err == nil {
			n.Delete(w.Name)
		}
		if statusOf(err) != http.StatusUnprocessableEntity || !strings.Contains(fmt.Sprint(err), "usable") {
			t.Errorf("Create(%s %v CPUs) = %v (status %d), want 422 naming the usable CPUs", s.QoS, *s.CPUs, err, statusOf(err))
		}
	}
	if d := cmp.Diff(before, n.List()); d != "" {
		t.Errorf("state changed (-before +after):\n%s", d)
	}
	if d := cmp.Diff(liveBefore, liveGroups(t, root)); d != "" {
		t.Errorf("live groups changed (-before +after):\n%s", d)
	}
	// The whole machine is still admissible as BE and LS.
	for _, s := range []Spec{
		{Name: "all-be", QoS: "BE", CPUs: f64(cpus), Command: "sleep", Args: []string{"600"}},
		{Name: "all-ls", QoS: "LS", CPUs: f64(cpus), Command: "sleep", Args: []string{"600"}},
	} {
		if _, err := n.Create(s); err != nil {
			t.Errorf("Create(%s %v CPUs) = %v, want admitted", s.QoS, *s.CPUs, err)
		}
	}
}
