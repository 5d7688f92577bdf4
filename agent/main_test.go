package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/corepin/corepin/store"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/enforce"
	"github.com/corepin/corepin/internal/testutil"
	"github.com/corepin/corepin/topology"
)

// childEnv, when set, makes the test binary run as an agent (a real child
// process the crash test can SIGKILL): its value is "SOCKET STATE ROOT".
const childEnv = "COREPIN_AGENT_TEST_CHILD"

func TestMain(m *testing.M) {
	// The test binary is its own shim for enforce.Start on cgroup v1.
	enforce.ShimMain()
	if v := os.Getenv(childEnv); v != "" {
		os.Exit(runChild(v))
	}
	os.Exit(m.Run())
}

func runChild(v string) int {
	f := strings.Fields(v)
	if len(f) != 3 {
		fmt.Fprintln(os.Stderr, "bad", childEnv)
		return 2
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer cancel()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	err := Run(ctx, Config{Socket: f[0], State: f[1], CgroupRoot: f[2], ReconcileInterval: time.Second}, log, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		return 1
	}
	return 0
}

// requireCgroups skips t unless it runs as root on a machine with a cgroup
// v1 cpuset hierarchy or a cgroup v2 mount.
func requireCgroups(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipping: the agent's groups need root")
	}
	if cpusetMount() == "" {
		t.Skip("skipping: no cgroup v1 cpuset or cgroup v2 mount at /sys/fs/cgroup")
	}
}

// cpusetMount is where the hierarchy holding cpuset.cpus is mounted.
func cpusetMount() string {
	if _, err := os.Stat("/sys/fs/cgroup/cpuset/cgroup.procs"); err == nil {
		return "/sys/fs/cgroup/cpuset"
	}
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return "/sys/fs/cgroup"
	}
	return ""
}

var rootSeq atomic.Int64

// testRoot returns a fresh agent cgroup root name; when t ends it kills
// what is left in it and removes its groups and itself everywhere.
func testRoot(t testing.TB) string {
	t.Helper()
	root := fmt.Sprintf("corepin-agent-test-%d-%d", os.Getpid(), rootSeq.Add(1))
	t.Cleanup(func() { removeRoot(t, root) })
	return root
}

func removeRoot(t testing.TB, root string) {
	dirs, _ := filepath.Glob("/sys/fs/cgroup/*/" + root)
	if d := "/sys/fs/cgroup/" + root; exists(d) {
		dirs = append(dirs, d)
	}
	for _, dir := range dirs {
		es, _ := os.ReadDir(dir)
		for _, e := range es {
			if !e.IsDir() {
				continue
			}
			g := filepath.Join(dir, e.Name())
			testutil.EventuallyNil(t, "the killed processes of "+g+" leave it, and it removed", func() error {
				for _, p := range readPids(g) {
					syscall.Kill(p, syscall.SIGKILL)
				}
				return rmdir(g)
			})
		}
		if err := syscall.Rmdir(dir); err != nil && !errors.Is(err, syscall.ENOENT) {
			t.Errorf("cleaning up %s: %v", dir, err)
		}
	}
}

// rmdir removes the cgroup directory dir; one already gone is no error.
func rmdir(dir string) error {
	if err := syscall.Rmdir(dir); err != nil && !errors.Is(err, syscall.ENOENT) {
		return err
	}
	return nil
}

// rmdirWhenEmpty removes the cgroup directory dir once the processes
// killed in it have left (until then rmdir fails with EBUSY).
func rmdirWhenEmpty(t testing.TB, dir string) {
	t.Helper()
	testutil.EventuallyNil(t, "the killed processes leave "+dir+", and it removed", func() error { return rmdir(dir) })
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

func readPids(dir string) []int {
	b, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if p, err := strconv.Atoi(f); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// liveGroup is one group directory under an agent root, as the kernel
// shows it.
type liveGroup struct {
	CPUs string
	Pids int
}

// liveGroups reads the groups under root from cgroupfs, by workload name.
func liveGroups(t testing.TB, root string) map[string][]liveGroup {
	t.Helper()
	dir := filepath.Join(cpusetMount(), root)
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("reading %s: %v", dir, err)
	}
	out := map[string][]liveGroup{}
	for _, e := range es {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "run-") {
			continue
		}
		parts := strings.SplitN(e.Name(), "-", 4)
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "cpuset.cpus"))
		if err != nil {
			t.Fatalf("reading cpuset.cpus: %v", err)
		}
		out[parts[3]] = append(out[parts[3]], liveGroup{CPUs: strings.TrimSpace(string(b)), Pids: len(readPids(filepath.Join(dir, e.Name())))})
	}
	return out
}

// openNode opens a Node on state with the live topology and a v1/v2 driver
// under root; with changes made to its options.
func openNode(t testing.TB, root, state string, with ...func(*Options)) (*Node, error) {
	t.Helper()
	topo, err := topology.Discover(os.DirFS("/"))
	if err != nil {
		t.Fatal(err)
	}
	drv, err := enforce.Detect(enforce.WithRoot(root))
	if err != nil {
		t.Fatal(err)
	}
	o := Options{StatePath: state, Topology: topo, Driver: drv, StopTimeout: 2 * time.Second, CgroupRoot: root}
	for _, f := range with {
		f(&o)
	}
	return Open(o)
}

// checkConsistent asserts that ws (the agent's view) equals the live
// groups under root, and that no CPU is held by two exclusive workloads.
func checkConsistent(t testing.TB, root string, ws []Workload) {
	t.Helper()
	live := liveGroups(t, root)
	var held cpuset.CPUSet
	for _, w := range ws {
		gs := live[w.Name]
		delete(live, w.Name)
		if len(gs) != 1 {
			t.Errorf("workload %s has %d live groups, want 1", w.Name, len(gs))
			continue
		}
		if gs[0].Pids == 0 {
			t.Errorf("workload %s: its group has no processes", w.Name)
		}
		if gs[0].CPUs != w.Cpuset {
			t.Errorf("workload %s: group cpuset.cpus = %q, state says %q", w.Name, gs[0].CPUs, w.Cpuset)
		}
		if w.QoS == "LSE" || w.QoS == "LSR" {
			set := cpuset.MustParse(w.Cpuset)
			if set.Intersects(held) {
				t.Errorf("workload %s: cpus %s are also held by another exclusive workload (held: %s)", w.Name, set, held)
			}
			held = held.Union(set)
		}
	}
	for name, gs := range live {
		t.Errorf("live group(s) of %s without a workload in the state: %+v", name, gs)
	}
}

// checkStored asserts that the state file holds exactly the workloads ws
// (the agent's view) shows, each at its generation: a reconcile that
// drops a workload from the view must release it in the file too (issue
// 27 §2).
func checkStored(t testing.TB, state string, ws []Workload) {
	t.Helper()
	db, err := store.Open(state)
	if err != nil {
		t.Fatalf("opening the state file: %v", err)
	}
	defer db.Close()
	as, err := db.Assignments()
	if err != nil {
		t.Fatalf("reading the assignments: %v", err)
	}
	stored, listed := map[string]string{}, map[string]string{}
	for _, a := range as {
		stored[a.Name] = fmt.Sprintf("%s generation %d", a.QoS, a.Generation)
	}
	for _, w := range ws {
		listed[w.Name] = fmt.Sprintf("%s generation %d", w.QoS, w.Generation)
	}
	if d := cmp.Diff(stored, listed); d != "" {
		t.Errorf("the state file and the agent's list disagree (-stored +listed):\n%s", d)
	}
}

// newNode opens a Node on a fresh state file under a fresh cgroup root
// (skipping without cgroups) and closes it when t ends.
func newNode(t testing.TB, with ...func(*Options)) (*Node, string) {
	t.Helper()
	requireCgroups(t)
	root := testRoot(t)
	n, err := openNode(t, root, filepath.Join(t.TempDir(), "state.db"), with...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n, root
}

// serve serves s on a unix socket in a temporary directory until t ends,
// and returns the socket's path.
func serve(t testing.TB, s *Server) string {
	t.Helper()
	socket := filepath.Join(t.TempDir(), "agent.sock")
	ln, err := ListenUnix(socket)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve = %v", err)
		}
	})
	return socket
}

// selfCgroups is this process's /proc/self/cgroup, to see it unchanged.
func selfCgroups() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	return string(b), err
}

// procState is the state letter of process pid (/proc/PID/stat field 3).
func procState(pid int) (byte, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0, fmt.Errorf("/proc/%d/stat: no state after the name", pid)
	}
	return b[i+2], nil
}

// groupOf is workload name's enforcement group.
func groupOf(t testing.TB, n *Node, name string) enforce.Group {
	t.Helper()
	h, err := n.Node.Get(name)
	if err != nil || h.Group == nil {
		t.Fatalf("workload %s: %v, group %v", name, err, h.Group)
	}
	return h.Group
}

// assignmentsIn opens the state file at state beside its holders and
// returns its assignments and the store, closed when t ends.
func assignmentsIn(t testing.TB, state string) ([]store.Assignment, *store.DB) {
	t.Helper()
	db, err := store.Open(state)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	as, err := db.Assignments()
	if err != nil {
		t.Fatal(err)
	}
	return as, db
}
