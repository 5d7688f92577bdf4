package agent

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/enforce"
	"github.com/corepin/corepin/internal/testutil"
	"github.com/corepin/corepin/nodecore"
	"github.com/corepin/corepin/runner"
	"github.com/corepin/corepin/store"
	"github.com/corepin/corepin/topology"
)

func liveTopology(t *testing.T) *topology.Topology {
	t.Helper()
	topo, err := topology.Discover(os.DirFS("/"))
	if err != nil {
		t.Fatal(err)
	}
	if topo.Allowed().Size() < 2 {
		t.Skipf("skipping: needs 2 CPUs, have %s", topo.Allowed())
	}
	return topo
}

// Two runs on one machine (two placers on one state file) never hold a
// CPU twice: the second waits for the first to release, or is refused.
func TestStatePlacerTwoRunsNeverShareACPU(t *testing.T) {
	topo := liveTopology(t)
	n := topo.Allowed().Size()
	state := filepath.Join(t.TempDir(), "state.db")
	a, err := nodecore.OpenStatePlacer(state, topo, alloc.NodeSettings{}, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := nodecore.OpenStatePlacer(state, topo, alloc.NodeSettings{}, testutil.Patience, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	pa, err := a.Place("job-0", n-1)
	if err != nil {
		t.Fatal(err)
	}
	pb, err := b.Place("job-0", 1)
	if err != nil {
		t.Fatal(err)
	}
	if pa.CPUs.Intersects(pb.CPUs) {
		t.Fatalf("run a holds %s and run b %s: shared", pa.CPUs, pb.CPUs)
	}
	// Every CPU is held: a refuses at once (no wait) ...
	if _, err := a.Place("job-1", 1); !errors.Is(err, ErrRejected) {
		t.Fatalf("a.Place on a full machine = %v, want ErrRejected", err)
	}
	// ... and b waits until a lets go, then gets a's CPUs.
	go func() {
		time.Sleep(100 * time.Millisecond)
		a.Release("job-0")
	}()
	pb2, err := b.Place("job-1", 1)
	if err != nil {
		t.Fatalf("b.Place while waiting = %v", err)
	}
	if !pb2.CPUs.IsSubsetOf(pa.CPUs) {
		t.Errorf("b got %s after a released %s", pb2.CPUs, pa.CPUs)
	}
	if err := a.Release("job-0"); !errors.Is(err, ErrNotFound) {
		t.Errorf("releasing twice = %v, want ErrNotFound", err)
	}
}

// listerOf is an enforce.Lister over fixed groups.
type listerOf []enforce.Listed

func (l listerOf) List() ([]enforce.Listed, error)            { return l, nil }
func (listerOf) Reopen(enforce.Listed) (enforce.Group, error) { return nil, errors.ErrUnsupported }
func (listerOf) OpenExisting(string) (enforce.Group, error)   { return nil, errors.ErrUnsupported }

// A crashed run's reservations are released at the next open, except
// those whose job group still has processes.
func TestStatePlacerReleasesDeadRunsButKeepsTheirLiveJobs(t *testing.T) {
	topo := liveTopology(t)
	state := filepath.Join(t.TempDir(), "state.db")
	// A run that has exited: a real process, reaped.
	dead := exec.Command("true")
	if err := dead.Start(); err != nil {
		t.Fatal(err)
	}
	o, err := nodecore.OwnerOf(dead.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	dead.Wait()
	db, err := store.Open(state)
	if err != nil {
		t.Fatal(err)
	}
	for i, job := range []string{"job-0", "job-1"} {
		rec := nodecore.Record{Spec: Spec{Name: job}, Owner: &o, Job: job}
		doc, _ := jsonOf(rec)
		if _, err := db.SaveAssignment(store.Assignment{Name: "dead-" + job, QoS: "LSE", Cpuset: []string{"0", "1"}[i], Request: doc}); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	live := listerOf{{Name: "job-1", OwnerPID: o.PID, Pids: []int{os.Getpid()}}}
	p, err := nodecore.OpenStatePlacer(state, topo, alloc.NodeSettings{}, 0, live)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if as, _ := assignmentsIn(t, state); len(as) != 1 || as[0].Name != "dead-job-1" {
		t.Errorf("after open: %+v, want only dead-job-1 (its job still runs)", as)
	}
}

// nodeBesideARun opens an agent's node on a state file in which a local
// run (a StatePlacer of this process) holds one CPU for its job-0; both
// close when the test ends. It returns the node, the run's placement and
// the state file.
func nodeBesideARun(t *testing.T) (*Node, runner.Placement, string) {
	t.Helper()
	requireCgroups(t)
	state := filepath.Join(t.TempDir(), "state.db")
	p, err := nodecore.OpenStatePlacer(state, liveTopology(t), alloc.NodeSettings{}, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	held, err := p.Place("job-0", 1)
	if err != nil {
		t.Fatal(err)
	}
	n, err := openNode(t, testRoot(t), state)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n, held, state
}

// An agent and a local run share the state: the agent never admits a CPU
// a run holds, shows the run's job, and refuses to delete it.
func TestAgentSeesRunReservations(t *testing.T) {
	n, held, _ := nodeBesideARun(t)
	w, err := n.Create(Spec{Name: "svc", QoS: "LSE", CPUs: f64(1), Command: "sleep", Args: []string{"600"}})
	if err != nil {
		t.Fatal(err)
	}
	if w.Cpuset == held.CPUs.String() {
		t.Fatalf("the agent admitted cpu %s, which run job-0 holds", w.Cpuset)
	}
	var run *Workload
	for _, x := range n.List() {
		if x.Source == "run" {
			run = &x
		}
	}
	if run == nil || run.Cpuset != held.CPUs.String() || run.PID != os.Getpid() {
		t.Fatalf("agent's view of the run's job = %+v, want cpuset %s of pid %d", run, held.CPUs, os.Getpid())
	}
	if err := n.Delete(run.Name); !errors.Is(err, ErrInvalid) {
		t.Errorf("agent Delete of a run's job = %v, want ErrInvalid", err)
	}
}

func jsonOf(v any) ([]byte, error) { return json.Marshal(v) }

// TestResizeOfARunsJobIsRefused (issue 27 §2.3): PATCH
// /v1/workloads/{name} on a local run's job is 422 saying its size is the
// run's --cpus, and changes nothing: not the agent's view, not the state
// file's row, not the CPUs the run holds.
func TestResizeOfARunsJobIsRefused(t *testing.T) {
	n, held, state := nodeBesideARun(t)
	cl := NewClient(serve(t, &Server{Node: n}), "")
	before, err := cl.List()
	if err != nil {
		t.Fatal(err)
	}
	var job string
	for _, w := range before {
		if w.Source == "run" {
			job = w.Name
		}
	}
	if job == "" {
		t.Fatalf("the agent lists %+v, want the run's job", before)
	}
	rows := func() []store.Assignment {
		t.Helper()
		db, err := store.Open(state)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		as, err := db.Assignments()
		if err != nil {
			t.Fatal(err)
		}
		return as
	}
	stored := rows()

	_, err = cl.Resize(job, 2)
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusUnprocessableEntity ||
		!strings.Contains(ae.Message, "of a corepin run") || !strings.Contains(ae.Message, "its size is the run's --cpus") {
		t.Errorf("PATCH %s {cpus: 2} = %v, want 422 saying its size is the run's --cpus", job, err)
	}
	after, err := cl.List()
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(before, after); d != "" {
		t.Errorf("the refused resize changed the agent's view (-before +after):\n%s", d)
	}
	if d := cmp.Diff(stored, rows()); d != "" {
		t.Errorf("the refused resize changed the state file (-before +after):\n%s", d)
	}
	for _, w := range after {
		if w.Name == job && w.Cpuset != held.CPUs.String() {
			t.Errorf("the run's job holds %s, want %s as placed", w.Cpuset, held.CPUs)
		}
	}
}
