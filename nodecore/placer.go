package nodecore

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/enforce"
	"github.com/corepin/corepin/measure"
	"github.com/corepin/corepin/runner"
	"github.com/corepin/corepin/store"
	"github.com/corepin/corepin/topology"
)

// Owner is the process holding a reservation: its pid and its start time
// (clock ticks after boot, /proc/PID/stat field 22), which tell it apart
// from a later process that reuses the pid.
type Owner struct {
	PID   int    `json:"pid"`
	Start uint64 `json:"start"`
}

// OwnerOf reads pid's start time.
func OwnerOf(pid int) (Owner, error) {
	st, err := measure.ReadTaskStat("/proc", pid)
	if err != nil {
		return Owner{}, err
	}
	return Owner{PID: pid, Start: st.StartTime}, nil
}

// alive reports whether o still runs.
func (o Owner) alive() bool {
	cur, err := OwnerOf(o.PID)
	if errors.Is(err, os.ErrNotExist) {
		return false
	}
	return err != nil || cur == o // unreadable counts as alive: keep the CPUs
}

// StatePlacer is a runner.Placer over the agent's state file, for a
// `corepin run` on a machine with or without a running agent: each pinned
// job's CPUs are admitted in the same SQLite transaction as the agent's
// own admissions (store.Admit, BEGIN IMMEDIATE: a host-wide lock), so two
// runs, or a run and the agent, never hand out one CPU twice. A job that
// finds no CPUs free waits for them up to Wait, then fails with the
// allocator's Rejection. Each reservation names its owner (this process);
// OpenStatePlacer (and a running agent's sweep) releases those of dead
// owners whose job groups are empty, so a crashed run's surviving jobs
// keep their CPUs while they live. Where a daemon recorded its allocator
// configuration in the state file (SharedConfig), jobs are placed with
// it: never on the agent's reserved CPUs.
type StatePlacer struct {
	db    *store.DB
	topo  *topology.Topology
	cfg   alloc.NodeSettings
	self  Owner
	tpc   int
	wait  time.Duration
	seq   int64 // tells apart placers of one process
	mu    sync.Mutex
	names map[string]string // job id -> reservation name
}

var placerSeq atomic.Int64

var _ runner.Placer = (*StatePlacer)(nil)

// OpenStatePlacer opens the state file at path. cfg is the run's own
// allocator configuration (its reserved CPUs: those outside its cpuset
// cgroup); where a daemon recorded its configuration in the file
// (SharedConfig), each placement uses that one, with cfg's reserved CPUs
// added. live, if not nil, lists the runner's groups (its driver), to keep
// the reservations of a crashed run's jobs that still run.
func OpenStatePlacer(path string, t *topology.Topology, cfg alloc.NodeSettings, wait time.Duration, live enforce.Lister) (*StatePlacer, error) {
	self, err := OwnerOf(os.Getpid())
	if err != nil {
		return nil, fmt.Errorf("reading own start time: %w", err)
	}
	if _, err := alloc.NewState(t, cfg); err != nil {
		return nil, fmt.Errorf("%w: allocator configuration: %v", ErrInvalid, err)
	}
	db, err := OpenState(path)
	if err != nil {
		return nil, err
	}
	p := &StatePlacer{db: db, topo: t, cfg: cfg, self: self, tpc: max(1, t.ThreadsPerCore()), wait: wait, names: map[string]string{}, seq: placerSeq.Add(1)}
	if _, err := p.config(); err != nil {
		db.Close()
		return nil, err
	}
	if _, err := ReleaseDeadRuns(db, live); err != nil {
		db.Close()
		return nil, err
	}
	return p, nil
}

// config is the node settings a placement uses now: the ones recorded in
// the state file by the newest daemon that opened it, if any, else the
// run's own; a run's default topology policy is best-effort where none is
// recorded. They are read before each admission's transaction, so a
// daemon recording new settings in between takes effect at the next
// placement; nothing already placed moves.
func (p *StatePlacer) config() (alloc.NodeSettings, error) {
	rc, ok, err := RecordedConfig(p.db)
	if err != nil || !ok {
		cfg := p.cfg
		cfg.TopologyPolicy = cmp.Or(cfg.TopologyPolicy, alloc.TopologyBestEffort)
		return cfg, err
	}
	cfg, err := rc.On(p.topo, p.cfg)
	if err != nil {
		return alloc.NodeSettings{}, fmt.Errorf("placing on %s: %w", p.db.Path(), err)
	}
	cfg.TopologyPolicy = cmp.Or(cfg.TopologyPolicy, alloc.TopologyBestEffort)
	return cfg, nil
}

// GroupLister lists enforcement groups; every enforce.Lister is one.
type GroupLister interface {
	List() ([]enforce.Listed, error)
}

// ReleaseDeadRuns deletes from db the reservations of `corepin run`s
// (StatePlacer) whose owner died and whose job group, listed by live, has
// no process left, and returns them. The check and the deletion are one
// write transaction, so no placement interleaves. live nil means the runs
// have no groups to look at (the affinity driver): every reservation of a
// dead owner is released. live is listed only when some owner is dead, so
// a node without crashed runs reads no cgroup for it. A run that opens the
// state file (OpenStatePlacer) and the agent's periodic sweep both call it.
func ReleaseDeadRuns(db *store.DB, live GroupLister) ([]store.Assignment, error) {
	return db.ReleaseAssignments(func(cur []store.Assignment) ([]string, error) {
		var dead []string
		jobs := map[string]string{} // name -> owner pid/job
		for _, a := range cur {
			var rec Record
			if json.Unmarshal(a.Request, &rec) != nil || rec.Owner == nil || rec.Owner.alive() {
				continue
			}
			dead = append(dead, a.Name)
			jobs[a.Name] = strconv.Itoa(rec.Owner.PID) + "/" + rec.Job
		}
		if len(dead) == 0 || live == nil {
			return dead, nil
		}
		ls, err := live.List()
		if err != nil {
			return nil, fmt.Errorf("listing the groups of runs' jobs: %w", err)
		}
		running := map[string]bool{}
		for _, l := range ls {
			if len(l.Pids) > 0 {
				running[strconv.Itoa(l.OwnerPID)+"/"+l.Name] = true
			}
		}
		return slices.DeleteFunc(dead, func(name string) bool { return running[jobs[name]] }), nil
	})
}

// Close closes the state file. Reservations not released stay held
// until a later OpenStatePlacer finds their owner dead.
func (p *StatePlacer) Close() error { return p.db.Close() }

// Place admits n exclusive CPUs for job id, waiting for CPUs up to the
// placer's Wait.
func (p *StatePlacer) Place(id string, n int) (runner.Placement, error) {
	name := fmt.Sprintf("run%d.%d-%s", p.self.PID, p.seq, id)
	cpus := float64(n)
	spec := Spec{Name: name, QoS: string(alloc.LSE), CPUs: &cpus}
	if n%p.tpc == 0 {
		spec.Bind = string(alloc.BindFullPCPUs)
	}
	rec := Record{Spec: spec, Owner: &p.self, Job: id}
	deadline := time.Now().Add(p.wait)
	for wait := 5 * time.Millisecond; ; wait = min(2*wait, 200*time.Millisecond) {
		cfg, err := p.config()
		if err != nil {
			return runner.Placement{}, err
		}
		ad, err := Admit(p.db, p.topo, cfg, rec, cpuset.CPUSet{})
		if err == nil {
			p.mu.Lock()
			p.names[id] = name
			p.mu.Unlock()
			return runner.Placement{CPUs: ad.Placement.CPUs, Mems: ad.Placement.NUMANodes}, nil
		}
		if !errors.Is(err, alloc.ErrRejected) || time.Now().After(deadline) || neverFits(p.topo, cfg, spec) {
			return runner.Placement{}, err
		}
		time.Sleep(wait)
	}
}

// neverFits reports whether cfg refuses s even on an empty machine (it
// asks for more CPUs than the reserved ones leave): waiting for other
// holders to let go cannot help then.
func neverFits(t *topology.Topology, cfg alloc.NodeSettings, s Spec) bool {
	st, err := alloc.NewState(t, cfg)
	if err != nil {
		return true
	}
	req, err := Request(cfg, s)
	if err != nil {
		return true
	}
	_, err = st.Allocate(req)
	return errors.Is(err, alloc.ErrRejected)
}

// Release gives job id's CPUs back.
func (p *StatePlacer) Release(id string) error {
	p.mu.Lock()
	name, ok := p.names[id]
	delete(p.names, id)
	p.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w: job %q holds no cpus", ErrNotFound, id)
	}
	return p.db.DeleteAssignment(name)
}
