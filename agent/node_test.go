package agent

import (
	"bytes"
	"database/sql"
	"errors"
	"fmt"
	"github.com/corepin/corepin/nodecore"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	_ "modernc.org/sqlite"

	"github.com/corepin/corepin/enforce"
	"github.com/corepin/corepin/internal/testutil"
	"github.com/corepin/corepin/store"
)

func f64(v float64) *float64 { return &v }

// allowedList reads a process's Cpus_allowed_list.
func allowedList(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Cpus_allowed_list:"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("no Cpus_allowed_list for %d", pid)
	return ""
}

func TestAdmitPinsAndReleaseFrees(t *testing.T) {
	n, root := newNode(t)
	lse, err := n.Create(Spec{Name: "lse", QoS: "LSE", CPUs: f64(1), Command: "sleep", Args: []string{"600"}})
	if err != nil {
		t.Fatalf("Create(lse) = %v", err)
	}
	ls, err := n.Create(Spec{Name: "ls", CPUs: f64(0.5), Command: "sleep", Args: []string{"600"}})
	if err != nil {
		t.Fatalf("Create(ls) = %v", err)
	}
	if ls.QoS != "LS" {
		t.Errorf("fractional request got qos %s, want LS", ls.QoS)
	}
	if lse.Cpuset == "" || lse.Cpuset == ls.Cpuset {
		t.Errorf("lse cpuset %q, ls pool %q: want disjoint non-empty", lse.Cpuset, ls.Cpuset)
	}
	// The process the agent started runs on exactly its assignment.
	g := groupOf(t, n, "lse")
	pids, err := enforce.Pids(g)
	if err != nil || len(pids) != 1 {
		t.Fatalf("Pids(lse) = %v, %v; want one process", pids, err)
	}
	if got := allowedList(t, pids[0]); got != lse.Cpuset {
		t.Errorf("lse process Cpus_allowed_list = %s, want %s", got, lse.Cpuset)
	}
	checkConsistent(t, root, n.List())

	// Admitting the same name again is a conflict; a duplicate changes nothing.
	if _, err := n.Create(Spec{Name: "lse", CPUs: f64(1), Command: "sleep", Args: []string{"1"}}); !errors.Is(err, ErrExists) {
		t.Errorf("second Create(lse) = %v, want ErrExists", err)
	}
	// An exclusive CPU more would leave the LS workload nothing.
	if _, err := n.Create(Spec{Name: "more", QoS: "LSE", CPUs: f64(1), Command: "sleep", Args: []string{"1"}}); !errors.Is(err, ErrRejected) {
		t.Errorf("Create(more) = %v, want ErrRejected (LS pool)", err)
	}
	if err := n.Delete("lse"); err != nil {
		t.Fatalf("Delete(lse) = %v", err)
	}
	// Delete stops the process: it is gone, or a zombie until reaped.
	testutil.Eventually(t, fmt.Sprintf("lse's process %d exit after Delete", pids[0]), func() bool {
		st, err := procState(pids[0])
		return err != nil || st == 'Z'
	})
	ws := n.List()
	if len(ws) != 1 || ws[0].Name != "ls" {
		t.Fatalf("List after delete = %+v, want only ls", ws)
	}
	if want := n.Topology().Allowed().String(); ws[0].Cpuset != want {
		t.Errorf("LS pool after releasing lse = %s, want every CPU %s", ws[0].Cpuset, want)
	}
	checkConsistent(t, root, ws)
	if err := n.Delete("lse"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Delete(lse) again = %v, want ErrNotFound", err)
	}
}

func TestExitedCommandIsReleased(t *testing.T) {
	n, root := newNode(t)
	if _, err := n.Create(Spec{Name: "short", CPUs: f64(1), Command: "true"}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the exited command released (List empty)", func() bool { return len(n.List()) == 0 })
	checkConsistent(t, root, nil)
}

// Reconcile at start: a live workload is adopted, one whose process died
// is released, an assignment without a group is released, an empty group
// is removed, and a live group without an assignment is admitted for the
// CPUs it holds. The state file then holds what List shows, no more.
func TestReconcileAtStart(t *testing.T) {
	requireCgroups(t)
	root := testRoot(t)
	state := filepath.Join(t.TempDir(), "state.db")
	n, err := openNode(t, root, state)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []Spec{
		{Name: "live", QoS: "LSE", CPUs: f64(1), Command: "sleep", Args: []string{"600"}},
		{Name: "dies", CPUs: f64(0.2), Command: "sleep", Args: []string{"600"}},
	} {
		if _, err := n.Create(s); err != nil {
			t.Fatalf("Create(%s) = %v", s.Name, err)
		}
	}
	dies := groupOf(t, n, "dies")
	diePids, _ := enforce.Pids(dies)
	n.Close() // as if the agent were killed: workloads keep running
	for _, p := range diePids {
		syscall.Kill(p, syscall.SIGKILL)
	}
	// A committed assignment whose group was never made (killed between
	// commit and mkdir).
	db, err := store.Open(state)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.SaveAssignment(store.Assignment{Name: "nogroup", QoS: "LS", Cpuset: "", Request: []byte(`{"name":"nogroup","cpus":0.1,"milli_cpus":100,"threads":1}`)}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	// An empty group and a live group that the state does not know.
	drv, err := enforce.Detect(enforce.WithRoot(root))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := drv.Create("empty", enforce.Resources{}); err != nil {
		t.Fatal(err)
	}
	stray, err := drv.Create("stray", enforce.Resources{})
	if err != nil {
		t.Fatal(err)
	}
	sleeper := startSleep(t)
	if err := stray.AddProc(sleeper); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the killed processes leave group dies", func() bool {
		pids, err := enforce.Pids(dies)
		return err == nil && len(pids) == 0
	})

	n2, err := openNode(t, root, state)
	if err != nil {
		t.Fatalf("reopening: %v", err)
	}
	defer n2.Close()
	got := map[string]string{}
	for _, w := range n2.List() {
		got[w.Name] = w.QoS + "/" + w.Source
	}
	want := map[string]string{"live": "LSE/command", "stray": "BE/adopted"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("workloads after reconcile (-want +got):\n%s", d)
	}
	checkConsistent(t, root, n2.List())
	checkStored(t, state, n2.List())
	rep, err := n2.Reconcile()
	if err != nil || rep[nodecore.ActGone]+rep[nodecore.ActRemoved]+rep[nodecore.ActOrphan] != 0 {
		t.Errorf("a second Reconcile = %v, %v; want only adoptions", rep, err)
	}
	checkStored(t, state, n2.List())
}

// startSleep starts a sleep that is not the agent's child and is killed
// when t ends.
func startSleep(t *testing.T) int {
	t.Helper()
	p, err := os.StartProcess("/bin/sleep", []string{"sleep", "600"}, &os.ProcAttr{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Kill(); p.Wait() })
	go p.Wait()
	return p.Pid
}

func TestOpenRefusesBadStateAndLeavesItByteIdentical(t *testing.T) {
	requireCgroups(t)
	root := testRoot(t)
	execSQL := func(t *testing.T, file, stmt string) {
		sdb, err := sql.Open("sqlite", file)
		if err != nil {
			t.Fatal(err)
		}
		defer sdb.Close()
		if _, err := sdb.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	ours := func(t *testing.T, file string) {
		db, err := store.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.SaveAssignment(store.Assignment{Name: "a", QoS: "BE", Request: []byte(`{"name":"a"}`)}); err != nil {
			t.Fatal(err)
		}
		db.Close()
		execSQL(t, file, "PRAGMA journal_mode=DELETE") // one file, no WAL beside it
	}
	newer := func(t *testing.T, file string) {
		ours(t, file)
		execSQL(t, file, "PRAGMA user_version=999")
	}
	foreign := func(t *testing.T, file string) { execSQL(t, file, "CREATE TABLE customers (id INTEGER)") }
	corrupt := func(t *testing.T, file string) {
		ours(t, file) // a valid corepin file...
		b, _ := os.ReadFile(file)
		b = b[:len(b)/2] // ...torn in half, its pages scrambled
		for i := 100; i < len(b) && i < 4096; i++ {
			b[i] ^= 0x5a
		}
		os.WriteFile(file, b, 0o600)
	}
	notDB := func(t *testing.T, file string) { os.WriteFile(file, []byte("assignments: none\n"), 0o600) }
	for _, tc := range []struct {
		name string
		make func(*testing.T, string)
		want error
	}{
		{name: "not a database", make: notDB, want: store.ErrNotDB},
		{name: "foreign", make: foreign, want: store.ErrForeign},
		{name: "newer", make: newer, want: store.ErrTooNew},
		{name: "corrupt", make: corrupt, want: store.ErrCorrupt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "state.db")
			tc.make(t, file)
			before, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			n, err := openNode(t, root, file)
			if err == nil {
				n.Close()
				t.Fatalf("Open succeeded on a %s state file", tc.name)
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("Open = %v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), "left unchanged") && tc.want != nil {
				t.Errorf("error %q does not say the file was left unchanged", err)
			}
			after, _ := os.ReadFile(file)
			if !bytes.Equal(before, after) {
				t.Errorf("the %s state file changed (%d -> %d bytes)", tc.name, len(before), len(after))
			}
		})
	}
}

func TestOneHolderPerStateFile(t *testing.T) {
	requireCgroups(t)
	root := testRoot(t)
	state := filepath.Join(t.TempDir(), "state.db")
	n, err := openNode(t, root, state)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if n2, err := openNode(t, root, state); !errors.Is(err, ErrLocked) {
		if n2 != nil {
			n2.Close()
		}
		t.Fatalf("second Open = %v, want ErrLocked", err)
	}
	// With LockWait, a second holder (a local run) waits for the first
	// to let go, then sees what it admitted.
	if _, err := n.Create(Spec{Name: "first", CPUs: f64(0.1), Command: "sleep", Args: []string{"600"}}); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(100 * time.Millisecond)
		n.Close()
	}()
	n2, err := openNode(t, root, state, func(o *Options) { o.LockWait = testutil.Patience })
	if err != nil {
		t.Fatalf("Open with LockWait = %v", err)
	}
	defer n2.Close()
	if ws := n2.List(); len(ws) != 1 || ws[0].Name != "first" {
		t.Errorf("the waiting holder sees %+v, want the first holder's workload", ws)
	}
}

// An adopted process that exits is released by the next Sweep, and its
// group removed; a live one is kept.
func TestSweepReleasesExitedAdoptedProcess(t *testing.T) {
	n, root := newNode(t)
	gone, kept := startSleep(t), startSleep(t)
	for name, pid := range map[string]int{"gone": gone, "kept": kept} {
		w, err := n.Create(Spec{Name: name, CPUs: f64(0.2), PID: pid})
		if err != nil {
			t.Fatalf("Create(%s) = %v", name, err)
		}
		if got := allowedList(t, pid); got != w.Cpuset {
			t.Errorf("adopted %s runs on %s, want %s", name, got, w.Cpuset)
		}
	}
	syscall.Kill(gone, syscall.SIGKILL)
	var released []string
	var err error
	testutil.Eventually(t, "Sweep release the killed adopted process", func() bool {
		if released, err = n.Sweep(); err != nil {
			t.Fatal(err)
		}
		return len(released) > 0
	})
	if d := cmp.Diff([]string{"gone"}, released); d != "" {
		t.Errorf("Sweep released (-want +got):\n%s", d)
	}
	checkConsistent(t, root, n.List())
}

// A started command gets thread-pool variables sized to its CPUs, and the
// topology view shows its CPUs taken from the free ones of their node.
func TestCommandGetsThreadEnvAndTopologyShowsIt(t *testing.T) {
	n, _ := newNode(t)
	out := filepath.Join(t.TempDir(), "env")
	w, err := n.Create(Spec{Name: "env", QoS: "LSE", CPUs: f64(1), Command: "sh",
		Args: []string{"-c", `echo "$OMP_NUM_THREADS $GOMAXPROCS $COREPIN_CPUSET" > ` + out + `; exec sleep 600`}})
	if err != nil {
		t.Fatal(err)
	}
	var got []byte
	testutil.Eventually(t, "the command write "+out, func() bool {
		got, _ = os.ReadFile(out)
		return len(got) > 0
	})
	if want := "1 1 " + w.Cpuset + "\n"; string(got) != want {
		t.Errorf("command saw %q, want %q", got, want)
	}
	v := n.View()
	if v.Pools.LSE != w.Cpuset {
		t.Errorf("LSE pool = %q, want %q", v.Pools.LSE, w.Cpuset)
	}
	for node, free := range v.FreeByNUMA {
		if strings.Contains(","+free+",", ","+w.Cpuset+",") {
			t.Errorf("node %s lists cpu %s as free while env holds it (free %q)", node, w.Cpuset, free)
		}
	}
	if len(v.Workloads) != 1 || len(v.Machine.CPUs) != n.Topology().Online().Size() {
		t.Errorf("view has %d workloads and %d cpus", len(v.Workloads), len(v.Machine.CPUs))
	}
}

// containerCgroup makes a cgroup v1 group by hand beside root (a
// container's, as a runtime makes it: every CPU) with a sleeping process
// in it, removed when t ends; it returns the group's name below the
// mounts, its directories (cpuset first) and the process. It skips where
// the machine is not cgroup v1.
func containerCgroup(t *testing.T, root string) (string, []string, int) {
	t.Helper()
	if cpusetMount() != "/sys/fs/cgroup/cpuset" {
		t.Skip("skipping: the container cgroup is made by hand on cgroup v1 here")
	}
	ctr := root + "-ctr"
	var dirs []string
	for _, h := range []string{"cpuset", "cpu", "cpuacct"} {
		d := filepath.Join("/sys/fs/cgroup", h, ctr)
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, d)
	}
	all, _ := os.ReadFile("/sys/fs/cgroup/cpuset/cpuset.cpus")
	mems, _ := os.ReadFile("/sys/fs/cgroup/cpuset/cpuset.mems")
	os.WriteFile(filepath.Join(dirs[0], "cpuset.cpus"), all, 0)
	os.WriteFile(filepath.Join(dirs[0], "cpuset.mems"), mems, 0)
	pid := startSleep(t)
	for _, d := range dirs {
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		syscall.Kill(pid, syscall.SIGKILL)
		for _, d := range dirs {
			rmdirWhenEmpty(t, d)
		}
	})
	return ctr, dirs, pid
}

// Adopting an existing cgroup (a container's): its cpuset becomes the
// assignment; on delete it gets every CPU back and stays in place with its
// process, which the agent did not start and does not kill.
func TestAdoptExistingCgroupV1(t *testing.T) {
	n, root := newNode(t)
	ctr, dirs, pid := containerCgroup(t, root)
	w, err := n.Create(Spec{Name: "ctr", QoS: "LSE", CPUs: f64(1), Cgroup: "/" + ctr})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(filepath.Join(dirs[0], "cpuset.cpus"))
	if strings.TrimSpace(string(got)) != w.Cpuset || allowedList(t, pid) != w.Cpuset {
		t.Errorf("container cgroup cpuset %q, its process on %s; want %s", got, allowedList(t, pid), w.Cpuset)
	}
	if err := n.Delete("ctr"); err != nil {
		t.Fatal(err)
	}
	got, _ = os.ReadFile(filepath.Join(dirs[0], "cpuset.cpus"))
	if want := n.Topology().Allowed().String(); strings.TrimSpace(string(got)) != want {
		t.Errorf("after delete the container cgroup has cpus %q, want all of %s back", got, want)
	}
	if syscall.Kill(pid, 0) != nil {
		t.Error("deleting an adopted cgroup killed its process")
	}
}
