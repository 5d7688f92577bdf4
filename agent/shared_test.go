package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/enforce"
	"github.com/corepin/corepin/enforce/enforcetest"
	"github.com/corepin/corepin/nodecore"
	"github.com/corepin/corepin/store"
	"github.com/corepin/corepin/topology"
)

// fourCPUs is a machine of 4 CPUs: two cores of two threads (siblings
// 0,2 and 1,3) on one NUMA node.
var fourCPUs = topology.Shape{Sockets: 1, NodesPerSocket: 1, L3PerNode: 1, CoresPerL3: 2, ThreadsPerCore: 2}

// fakeNode opens a Node on state with topology t and cfg, over enforcetest.NoGroups.
func fakeNode(t *testing.T, state string, topo *topology.Topology, o Options) *Node {
	t.Helper()
	o.StatePath, o.Topology, o.Driver = state, topo, enforcetest.NoGroups{}
	n, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// Issue 10, left for later (1): a pinned run took its CPUs with its own
// allocator configuration and ignored the agent's reserved_cpus, so it
// could be placed on CPU 0 that the agent keeps for the system.
func TestRunsPlaceWithTheAgentsReservedCPUs(t *testing.T) {
	topo := topology.MustSynthetic(fourCPUs)
	state := filepath.Join(t.TempDir(), "state.db")
	n := fakeNode(t, state, topo, Options{Alloc: alloc.NodeSettings{Reserved: cpuset.New(0)}})

	// A long wait: a request that can never fit must be refused at once,
	// not after it.
	p, err := nodecore.OpenStatePlacer(state, topo, alloc.NodeSettings{}, time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := p.Place("job-0", 4); !errors.Is(err, ErrRejected) {
		t.Fatalf("Place of 4 CPUs beside 1 reserved = %v, want ErrRejected", err)
	}
	got, err := p.Place("job-0", 3)
	if err != nil {
		t.Fatalf("Place of the 3 unreserved CPUs: %v", err)
	}
	if want := cpuset.New(1, 2, 3); !got.CPUs.Equals(want) {
		t.Errorf("Place(3) = %s, want %s (cpu 0 is the agent's)", got.CPUs, want)
	}
	q, err := nodecore.OpenStatePlacer(state, topo, alloc.NodeSettings{}, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	var rej alloc.Rejection
	if _, err := q.Place("job-0", 1); !errors.Is(err, ErrRejected) || !errors.As(err, &rej) {
		t.Errorf("Place of one more CPU = %v, want ErrRejected with the allocator's Rejection", err)
	}
	// The agent loads the run's reservation under its own configuration
	// (before, cpu 0 held by a run failed its load: "cpu 0 is reserved").
	if err := n.Refresh(); err != nil {
		t.Fatalf("agent Refresh with the run's job = %v", err)
	}
	var run []string
	for _, w := range n.List() {
		if w.Source == "run" {
			run = append(run, w.Cpuset)
		}
	}
	if !reflect.DeepEqual(run, []string{"1-3"}) {
		t.Errorf("agent shows the run's jobs on %q, want [1-3]", run)
	}
}

// Without a recorded configuration a run places as before; the newest
// daemon's record wins over an older one.
func TestStatePlacerFollowsTheNewestRecord(t *testing.T) {
	topo := topology.MustSynthetic(fourCPUs)
	place := func(t *testing.T, state string, cpus int) cpuset.CPUSet {
		t.Helper()
		p, err := nodecore.OpenStatePlacer(state, topo, alloc.NodeSettings{}, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		got, err := p.Place("job-0", cpus)
		if err != nil {
			t.Fatalf("Place(%d) = %v", cpus, err)
		}
		return got.CPUs
	}
	t.Run("none recorded", func(t *testing.T) {
		if got := place(t, filepath.Join(t.TempDir(), "state.db"), 4); got.Size() != 4 {
			t.Errorf("Place(4) on a file no daemon opened = %s, want every CPU", got)
		}
	})
	t.Run("nri after the agent", func(t *testing.T) {
		state := filepath.Join(t.TempDir(), "state.db")
		n := fakeNode(t, state, topo, Options{Alloc: alloc.NodeSettings{Reserved: cpuset.New(0)}})
		n.Close()
		c, err := nodecore.OpenContainers(state, topo, alloc.NodeSettings{Reserved: cpuset.New(3)})
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		if got, want := place(t, state, 3), cpuset.New(0, 1, 2); !got.Equals(want) {
			t.Errorf("Place(3) = %s, want %s: the plugin's reserved cpu 3 is the newest record", got, want)
		}
	})
}

// A recorded configuration that does not fit this machine, or that this
// corepin cannot read, is refused with the reason, before any placement.
func TestStatePlacerRefusesABadRecord(t *testing.T) {
	topo := topology.MustSynthetic(fourCPUs)
	for _, tc := range []struct{ name, doc, msg string }{
		{name: "unknown policy option", doc: `{"reserved_cpus":"0","policy_options":["no-such-option"],"writer":"agent","pid":1}`, msg: "cannot be used here"},
		{name: "unknown key", doc: `{"reserved_cpus":"0","cpu_kinds":"p","writer":"agent","pid":1}`, msg: "unknown field"},
		{name: "bad policy", doc: `{"reserved_cpus":"","policy":"gold","writer":"agent","pid":1}`, msg: "want corepin or kubelet"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state := filepath.Join(t.TempDir(), "state.db")
			db, err := store.Open(state)
			if err != nil {
				t.Fatal(err)
			}
			if err := db.SaveSetting(nodecore.SettingAlloc, json.RawMessage(tc.doc)); err != nil {
				t.Fatal(err)
			}
			db.Close()
			_, err = nodecore.OpenStatePlacer(state, topo, alloc.NodeSettings{}, 0, nil)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("nodecore.OpenStatePlacer = %v, want ErrInvalid saying %q", err, tc.msg)
			}
		})
	}
}

// FuzzParseSharedConfig: any recorded document is refused or reads back
// to itself once written again, and its reserved CPUs parse.
func FuzzParseSharedConfig(f *testing.F) {
	f.Add([]byte(`{"reserved_cpus":"0","policy":"kubelet","policy_options":["full-pcpus-only"],"topology_policy":"restricted","writer":"agent","pid":7}`))
	f.Add([]byte(`{"reserved_cpus":"","writer":"nri","pid":1}`))
	f.Add([]byte(`{"reserved_cpus":"0-3,8","extra":1}`))
	f.Add([]byte(`{"reserved_cpus":"0"} {}`))
	f.Add([]byte(`{"topology_policy":"numa"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := nodecore.ParseSharedConfig(b)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		if _, err := cpuset.Parse(c.ReservedCPUs); err != nil && c.ReservedCPUs != "" {
			t.Fatalf("accepted reserved_cpus %q: %v", c.ReservedCPUs, err)
		}
		again, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		c2, err := nodecore.ParseSharedConfig(again)
		if err != nil || !reflect.DeepEqual(c, c2) {
			t.Fatalf("%s read back as %+v (%v), want %+v", again, c2, err, c)
		}
	})
}

// countingLister lists fixed groups and counts the calls.
type countingLister struct {
	groups []enforce.Listed
	calls  atomic.Int64
}

func (l *countingLister) List() ([]enforce.Listed, error) { l.calls.Add(1); return l.groups, nil }

// deadOwner is the owner of a process that has exited: a pid and start
// time that no running process has.
func deadOwner(t *testing.T) nodecore.Owner {
	t.Helper()
	dead := exec.Command("true")
	if err := dead.Start(); err != nil {
		t.Fatal(err)
	}
	o, err := nodecore.OwnerOf(dead.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	dead.Wait()
	return o
}

// saveRunJob stores a reservation of run owner's job on cpus, as a
// nodecore.StatePlacer does.
func saveRunJob(t *testing.T, db *store.DB, name, job, cpus string, owner nodecore.Owner) {
	t.Helper()
	doc, err := json.Marshal(nodecore.Record{Spec: Spec{Name: name, QoS: "LSE"}, Excl: string(alloc.ExclusiveNone), Owner: &owner, Job: job})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.SaveAssignment(store.Assignment{Name: name, QoS: "LSE", Cpuset: cpus, Request: doc}); err != nil {
		t.Fatal(err)
	}
}

// Issue 10, left for later (2): a crashed run's reservations were
// released only by the next run, so a node running only the agent kept
// those CPUs forever. One tick of the agent now releases them, by the
// rule a run applies.
func TestAgentTickReleasesDeadRuns(t *testing.T) {
	topo := topology.MustSynthetic(fourCPUs)
	state := filepath.Join(t.TempDir(), "state.db")
	dead := deadOwner(t)
	self, err := nodecore.OwnerOf(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(state)
	if err != nil {
		t.Fatal(err)
	}
	saveRunJob(t, db, "dead-gone", "job-0", "0", dead)    // no group: released
	saveRunJob(t, db, "dead-running", "job-1", "1", dead) // its group has a process: kept
	saveRunJob(t, db, "dead-empty", "job-3", "2", dead)   // its group is empty: released
	saveRunJob(t, db, "live-owner", "job-2", "3", self)   // its owner runs: kept
	db.Close()
	runs := &countingLister{groups: []enforce.Listed{
		{Name: "job-1", OwnerPID: dead.PID, Pids: []int{os.Getpid()}},
		{Name: "job-3", OwnerPID: dead.PID},
		{Name: "job-2", OwnerPID: self.PID}, // empty, but its owner lives
	}}
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	m := NewMetrics()
	n := fakeNode(t, state, topo, Options{RunGroups: runs, Logger: log, Observer: m})

	sweep(n, log)

	var names []string
	for _, w := range n.List() {
		names = append(names, w.Name)
	}
	if want := []string{"dead-running", "live-owner"}; !reflect.DeepEqual(names, want) {
		t.Errorf("after one tick the agent holds %q, want %q", names, want)
	}
	db2, err := store.Open(state)
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	as, err := db2.Assignments()
	if err != nil {
		t.Fatal(err)
	}
	if len(as) != 2 || as[0].Name != "dead-running" || as[1].Name != "live-owner" {
		t.Errorf("state after one tick: %+v, want dead-running and live-owner", as)
	}
	for _, name := range []string{"dead-gone", "dead-empty"} {
		if !strings.Contains(logs.String(), `msg="released a dead run's reservation" name=`+name+" ") {
			t.Errorf("no log line for releasing %s; log:\n%s", name, logs.String())
		}
	}
	if got := counter(t, m, "corepin_agent_reconcile_actions_total", "action", nodecore.ActDeadRun); got != 2 {
		t.Errorf("corepin_agent_reconcile_actions_total{action=%q} = %v, want 2", nodecore.ActDeadRun, got)
	}
	// The freed CPUs are the agent's to give again.
	if st := n.Node.Pools(); !st.LSE.Equals(cpuset.New(1, 3)) {
		t.Errorf("agent's LSE pool after the tick = %s, want 1,3", st.LSE)
	}
}

// An agent whose runs' owners all live never lists the runs' groups.
func TestAgentTickReadsNoRunGroupsWhileOwnersLive(t *testing.T) {
	topo := topology.MustSynthetic(fourCPUs)
	state := filepath.Join(t.TempDir(), "state.db")
	self, err := nodecore.OwnerOf(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(state)
	if err != nil {
		t.Fatal(err)
	}
	saveRunJob(t, db, "live-owner", "job-0", "1", self)
	db.Close()
	runs := &countingLister{}
	n := fakeNode(t, state, topo, Options{RunGroups: runs})
	sweep(n, slog.New(slog.DiscardHandler))
	if c := runs.calls.Load(); c != 0 {
		t.Errorf("runs' groups listed %d times, want 0", c)
	}
	if ws := n.List(); len(ws) != 1 || ws[0].Name != "live-owner" {
		t.Errorf("agent holds %+v, want live-owner", ws)
	}
}

// counter is the value of the counter name{label="value"} in m.
func counter(t *testing.T, m *Metrics, name, label, value string) float64 {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, mm := range mf.GetMetric() {
			for _, lp := range mm.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					return mm.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
