package nodecore

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/enforce"
	"github.com/corepin/corepin/qos"
	"github.com/corepin/corepin/runner"
	"github.com/corepin/corepin/store"
	"github.com/corepin/corepin/topology"
)

// Options configure Open.
type Options struct {
	// StatePath is the SQLite state file (created if missing).
	StatePath string
	// Topology is the machine; Alloc the node's settings (its
	// TopologyPolicy is given to requests that name none).
	Topology *topology.Topology
	Alloc    alloc.NodeSettings
	// Driver enforces the assignments. It must be a cgroup driver (one
	// implementing enforce.Lister), since workloads outlive the agent and
	// are found again by their groups.
	Driver enforce.Driver
	// Logger gets structured logs; nil discards them.
	Logger *slog.Logger
	// Observer, when not nil, is told of admissions, rejections,
	// reconcile actions, pools and offline CPUs (the agent's metrics).
	Observer Observer
	// LockWait is how long Open waits for another holder of the state
	// file (an agent, a local run) to let go; 0 fails at once with
	// ErrLocked.
	LockWait time.Duration
	// StopTimeout bounds how long Delete waits for a workload's
	// processes to leave its group after SIGKILL; 0 means 5s.
	StopTimeout time.Duration
	// RunGroups lists the groups of local runs' jobs (the groups `corepin
	// run`'s driver makes). With it, Sweep releases the reservations of
	// runs that died whose jobs have no process left; nil leaves them
	// to the next run that opens the state file.
	RunGroups GroupLister
	// CgroupRoot is the name of the agent's root group, the one Driver
	// makes its groups in (default DefaultCgroupRoot). No workload may
	// adopt a cgroup in it (nor in a run's root).
	CgroupRoot string
	// Online, when not nil, returns the CPUs online now; CheckOnline
	// (each sweep of a running agent) compares the workloads' CPUs with
	// it. OnlineFrom(os.DirFS("/")) reads the live machine's.
	Online func() (cpuset.CPUSet, error)
}

// Node is the owner of the workloads the agent runs: it holds the state
// file (and its lock), admits through Admit like every other door, and
// makes, adopts, releases and reconciles their enforcement groups. It
// also lists what the NRI plugin's containers and local runs' jobs hold
// in the same file (Refresh), so the shared pools it writes leave their
// CPUs out. It is safe for concurrent use; admissions and releases run
// one at a time.
//
// Each admission is decided by alloc on the assignments read inside the
// store's write transaction and committed (SQLite WAL, synchronous=NORMAL:
// durable against a killed process; see store's "Crash safety" for a
// power loss) before the group is made and Create returns; each release removes the
// group before the assignment. So a crash at any instant leaves either an
// assignment whose group is missing or empty (released by Reconcile) or a
// live group with its assignment (adopted): never a live group whose CPUs
// are free in the state.
type Node struct {
	mu     sync.Mutex
	db     *store.DB
	lock   *os.File
	topo   *topology.Topology
	cfg    alloc.NodeSettings
	drv    enforce.Driver
	lister enforce.Lister
	runs   GroupLister
	log    *slog.Logger
	obs    Observer
	stop   time.Duration
	closed bool
	opts   Options
	done   chan struct{}

	// wl mirrors the store's assignments with their live parts.
	wl map[string]*entry
	// st is the allocator state of wl; pools the pools last written to
	// the LS and BE groups.
	st    *alloc.State
	pools alloc.Pools
	// qos is the QoS controller's host, when StartQoS runs it.
	qos *qosHost
}

// entry is one admitted workload.
type entry struct {
	a   store.Assignment
	rec Record
	// cpus and mems are the exclusive CPUs of an LSE or LSR workload and
	// their NUMA nodes, typed: from the admission, or read once from the
	// state file (entryOf).
	cpus, mems cpuset.CPUSet
	group      enforce.Group
	cmd        *exec.Cmd // the process the agent started, while it is the parent
	// offline are the workload's CPUs that CheckOnline last found offline.
	offline cpuset.CPUSet
	// gone says its workload is gone but the state file still holds it
	// (forget could not release it); Sweep tries again.
	gone bool
}

// ErrLocked means another process holds the state file's lock.
var ErrLocked = errors.New("state file is locked by another corepin agent")

// Open opens (or creates) the state file, takes its lock, reconciles
// the state with the live groups (see Reconcile), and records its
// allocator configuration in the file (SharedConfig) for local runs. A state file that is not
// corepin's, is corrupt, or was written by a newer corepin is refused and
// left byte-identical (the store's ErrNotDB, ErrCorrupt, ErrForeign,
// ErrTooNew).
func Open(o Options) (*Node, error) {
	if o.Topology == nil || o.Driver == nil || o.StatePath == "" {
		return nil, fmt.Errorf("opening the agent: state path, topology and driver are required")
	}
	l, ok := o.Driver.(enforce.Lister)
	if !ok {
		return nil, fmt.Errorf("opening the agent: driver %s cannot list its groups; the agent needs cgroups (v1 or v2)", o.Driver.Name())
	}
	if _, err := alloc.NewState(o.Topology, o.Alloc); err != nil {
		return nil, fmt.Errorf("%w: allocator configuration (reserved cpus, policy, options): %v", ErrInvalid, err)
	}
	n := &Node{topo: o.Topology, cfg: o.Alloc, drv: o.Driver, lister: l, runs: o.RunGroups, log: o.Logger, obs: o.Observer,
		stop: o.StopTimeout, wl: map[string]*entry{}, opts: o}
	if n.log == nil {
		n.log = slog.New(slog.DiscardHandler)
	}
	if n.stop == 0 {
		n.stop = 5 * time.Second
	}
	if n.obs == nil {
		n.obs = noObserver{}
	}
	if err := CheckPlace("--state", o.StatePath, DefaultState); err != nil {
		return nil, err
	}
	lock, err := lockFile(o.StatePath+".lock", o.LockWait)
	if err != nil {
		return nil, err
	}
	n.lock = lock
	if n.db, err = OpenState(o.StatePath); err != nil {
		lock.Close()
		return nil, err
	}
	if err := n.ownPartitions(); err != nil {
		n.db.Close()
		lock.Close()
		return nil, err
	}
	if _, err := n.Reconcile(); err != nil {
		n.db.Close()
		lock.Close()
		return nil, err
	}
	// Recorded once the state loaded under this configuration: from now
	// on local runs place with it (the newest writer's wins; a daemon
	// refused above records nothing).
	// On a full disk the agent still starts (it adopts, lists and
	// refuses admissions with ErrDiskFull); runs, which can not reserve
	// on that disk either, keep the configuration recorded before.
	if err := RecordConfig(n.db, "agent", n.cfg); store.IsFull(err) {
		n.log.Warn("the state file's disk is full: the allocator configuration is not recorded for local runs", "err", err)
	} else if err != nil {
		n.db.Close()
		lock.Close()
		return nil, err
	}
	n.done = make(chan struct{})
	go n.reaper(n.done)
	return n, nil
}

// ownPartitions takes the CPUs of the node's own isolated partitions
// (load_balance false workloads an earlier agent made) out of the
// topology's isolated CPUs (withoutOwnPartitions).
func (n *Node) ownPartitions() error {
	if n.topo.Isolation().Partitions.IsEmpty() {
		return nil
	}
	as, err := n.db.Assignments()
	if err != nil {
		return err
	}
	_, recs, err := n.stateOf(as)
	if err != nil {
		return err
	}
	n.topo, err = withoutOwnPartitions(n.topo, recs, as)
	return err
}

// lockFile takes an exclusive flock on file, waiting up to wait.
func lockFile(file string, wait time.Duration) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return nil, fmt.Errorf("creating the state directory: %w", err)
	}
	f, err := os.OpenFile(file, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the state lock: %w", err)
	}
	deadline := time.Now().Add(wait)
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("locking %s: %w", file, ErrLocked)
		}
		return nil, fmt.Errorf("locking %s: %w", file, err)
	}
	return f, nil
}

// Close closes the state file and releases its lock. Workloads keep
// running in their groups; the next Open adopts them.
func (n *Node) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil
	}
	n.closed = true
	close(n.done)
	err := n.db.Close()
	n.lock.Close()
	return err
}

// Topology returns the machine the node places on.
func (n *Node) Topology() *topology.Topology { return n.topo }

// stateOf builds the allocator state holding as, and the records of each.
func (n *Node) stateOf(as []store.Assignment) (*alloc.State, map[string]Record, error) {
	return LoadState(n.topo, n.cfg, as)
}

// entryOf is the entry of a stored assignment a with its record rec.
func entryOf(a store.Assignment, rec Record) *entry {
	e := &entry{a: a, rec: rec}
	e.cpus, _ = cpuset.Parse(a.Cpuset)      // LoadState parsed it
	e.mems, _ = cpuset.Parse(rec.NUMANodes) // written by Admit
	return e
}

// Create admits s: the allocator places it on the assignments committed
// now, the store commits it, its group is made with its CPUs, and what
// runs in it is started or adopted. On any failure after the commit the
// admission is rolled back. Errors wrap ErrInvalid, ErrExists,
// ErrRejected (with the allocator's Rejection), or are failures of the
// system.
func (n *Node) Create(s Spec) (Held, error) {
	t0 := time.Now()
	var ph Phases
	w, err := n.create(s, &ph)
	n.obs.Admitted(time.Since(t0), err)
	if po, ok := n.obs.(PhaseObserver); ok {
		po.AdmissionPhases(ph)
	}
	if err != nil {
		n.log.Info("admission refused", "name", s.Name, "err", err)
	} else {
		n.log.Info("admitted", "name", s.Name, "qos", w.Assignment.QoS, "cpuset", w.CPUs.String(), "cpus", *s.CPUs)
	}
	return w, err
}

func (n *Node) create(s Spec, ph *Phases) (Held, error) {
	if err := s.Validate(); err != nil {
		return Held{}, err
	}
	req, err := Request(n.cfg, s)
	if err != nil {
		return Held{}, err
	}
	var cmdPath string
	switch {
	case s.Command != "":
		p, err := exec.LookPath(s.Command)
		if err != nil {
			return Held{}, fmt.Errorf("%w: workload %q: command %q: %v", ErrInvalid, s.Name, s.Command, err)
		}
		cmdPath = p
	}
	// No state of this node could admit more than its CPUs: 422, not the
	// 409 of a node that is full now. A BE quota above them would be
	// stored as asked and shown, though BE never gets more than its pool.
	if usable := n.topo.Allowed(); req.CPUs > usable.Size() || req.MilliCPUs > 1000*usable.Size() {
		return Held{}, fmt.Errorf("%w: workload %q asks for %v CPUs; this node has %d usable (%s)",
			ErrInvalid, s.Name, *s.CPUs, usable.Size(), usable)
	}

	n.mu.Lock()
	defer n.mu.Unlock()
	// Checked under n.mu: no admission in flight adopts the same process
	// or cgroup between this check and the move.
	switch {
	case s.PID != 0:
		if err := n.guard().CheckPID(s.Name, s.PID); err != nil {
			return Held{}, err
		}
	case s.Cgroup != "":
		if err := n.guard().CheckCgroup(s.Name, s.Cgroup); err != nil {
			return Held{}, err
		}
	}
	t0 := time.Now()
	ad, err := Admit(n.db, n.topo, n.cfg, Record{Spec: s}, cpuset.CPUSet{})
	ph.Commit = time.Since(t0)
	if err != nil {
		return Held{}, err
	}
	e := &entry{a: ad.Assignment, rec: ad.Record, mems: ad.Placement.NUMANodes}
	if q := ad.Placement.QoS; q == alloc.LSE || q == alloc.LSR {
		e.cpus = ad.Placement.CPUs
	}
	n.wl[s.Name] = e
	n.st = ad.State
	if err := n.enforce(e, cmdPath, ph); err != nil {
		n.log.Warn("rolling back admission", "name", s.Name, "err", err)
		if rerr := n.release(e, "rollback"); rerr != nil {
			err = errors.Join(err, rerr)
		}
		if errors.Is(err, fs_ErrProcess) {
			return Held{}, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		return Held{}, err
	}
	return n.held(e), nil
}

// guard is the adoption guard over n's roots and adopted cgroups.
// Callers hold n.mu.
func (n *Node) guard() Guard {
	g := Guard{Root: cmp.Or(n.opts.CgroupRoot, DefaultCgroupRoot), Adopted: map[string]string{}}
	for name, e := range n.wl {
		if e.rec.Cgroup != "" {
			g.Adopted[name] = e.rec.Cgroup
		}
	}
	return g
}

// fs_ErrProcess marks an adoption whose process or cgroup is not there.
var fs_ErrProcess = errors.New("nothing to adopt")

// resources are the group settings of e in the current state.
func (n *Node) resources(e *entry) enforce.Resources {
	pools := n.st.Pools()
	q := alloc.QoS(e.a.QoS)
	k := float64(e.rec.MilliCPUs) / 1000
	switch q {
	case alloc.LS:
		r := qos.ClassResources(q, k, pools.LS, cpuset.CPUSet{})
		if rt, _ := enforce.ParseRealTime(e.rec.Sched); !rt.IsZero() {
			r.RTShare = qos.RTShare(k, pools.LS.Size())
		}
		return r
	case alloc.BE:
		return n.bePlanned(qos.ClassResources(q, k, pools.BE, cpuset.CPUSet{}))
	default:
		r := qos.ClassResources(q, k, e.cpus, e.mems)
		r.NoLoadBalance = e.rec.NoLoadBalance()
		return r
	}
}

// enforce shrinks the shared pools if e took CPUs from them, then makes
// e's group and starts or adopts what runs in it, timing each step in ph.
func (n *Node) enforce(e *entry, cmdPath string, ph *Phases) error {
	t0 := time.Now()
	err := n.syncPools()
	t1 := time.Now()
	ph.Pools = t1.Sub(t0)
	if err != nil {
		return err
	}
	r := n.resources(e)
	s := e.rec.Spec
	if s.Cgroup != "" {
		defer func() { ph.Group = time.Since(t1) }()
		if e.group, err = n.lister.OpenExisting(s.Cgroup); err != nil {
			return fmt.Errorf("%w: %w", fs_ErrProcess, err)
		}
		return e.group.Update(r)
	}
	e.group, err = n.drv.Create(s.Name, r)
	t2 := time.Now()
	ph.Group = t2.Sub(t1)
	if err != nil {
		return err
	}
	defer func() { ph.Start = time.Since(t2) }()
	rt, _ := enforce.ParseRealTime(s.Sched)
	if s.PID != 0 {
		if err := e.group.AddProc(s.PID); err != nil {
			return fmt.Errorf("%w: %w", fs_ErrProcess, err)
		}
		if err := enforce.SetRealTime(s.PID, rt); err != nil {
			return fmt.Errorf("%w: %w", fs_ErrProcess, err)
		}
		return nil
	}
	cmd := exec.Command(cmdPath, s.Args...)
	cmd.Args[0] = s.Command
	cmd.Env = append(os.Environ(), runner.ThreadEnv(e.rec.Threads)...)
	cmd.Env = append(cmd.Env, "COREPIN_WORKLOAD="+s.Name, "COREPIN_CPUSET="+r.CPUs.String())
	// Its own process group: a signal to the agent's (a terminal's ^C)
	// does not reach workloads, which outlive the agent by design.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	start := func() error { return enforce.StartThread(e.group, cmd) }
	if !rt.IsZero() {
		// Through the shim, which takes the class once in the group.
		start = func() error { return enforce.StartRealTime(context.Background(), e.group, cmd, rt) }
	}
	if err := start(); err != nil {
		return fmt.Errorf("starting %s: %w", s.Command, err)
	}
	e.cmd = cmd
	return nil
}

// reaper releases the workloads whose command exited. One goroutine
// serves every child: it wakes on SIGCHLD and polls each child with
// wait4(WNOHANG), instead of one cmd.Wait per child, each of which would
// hold an OS thread blocked in wait4 (about 64 KiB of RSS per workload).
func (n *Node) reaper(done <-chan struct{}) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGCHLD)
	defer signal.Stop(ch)
	for {
		select {
		case <-done:
			return
		case <-ch:
			n.reapExited()
		}
	}
}

// reapExited reaps every exited child and releases its workload.
func (n *Node) reapExited() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return
	}
	for _, name := range slices.Sorted(maps.Keys(n.wl)) {
		e := n.wl[name]
		if e.cmd == nil || !reaped(e.cmd, syscall.WNOHANG) {
			continue
		}
		e.cmd = nil
		n.log.Info("workload exited", "name", name)
		if err := n.release(e, "exited"); err != nil {
			n.log.Warn("releasing an exited workload", "name", name, "err", err)
		}
	}
}

// reaped waits for cmd's process with wait4 and the given options and
// reports whether it is gone (reaped now, or earlier: ECHILD). It then
// releases the process's handle.
func reaped(cmd *exec.Cmd, opts int) bool {
	var ws syscall.WaitStatus
	for {
		pid, err := syscall.Wait4(cmd.Process.Pid, &ws, opts, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if pid == 0 || (err != nil && !errors.Is(err, syscall.ECHILD)) {
			return false
		}
		cmd.Process.Release()
		return true
	}
}

// syncPools writes the current LS and BE pools into the groups of the LS
// and BE workloads, when they changed since the last write.
func (n *Node) syncPools() error {
	p := n.st.Pools()
	if p.LS.Equals(n.pools.LS) && p.BE.Equals(n.pools.BE) {
		return nil
	}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(n.wl)) {
		e := n.wl[name]
		if e.group == nil || (e.a.QoS != string(alloc.LS) && e.a.QoS != string(alloc.BE)) {
			continue
		}
		if err := e.group.Update(n.resources(e)); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("resizing the shared pools: %w", err)
	}
	n.pools = p
	n.obs.Pools(p)
	return nil
}

// Delete stops workload name and releases its CPUs: its processes are
// killed and its group removed (an adopted cgroup gets every CPU of
// corepin's root back and is left in place), then the assignment is
// deleted.
func (n *Node) Delete(name string) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	e, ok := n.wl[name]
	if !ok {
		return fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	if e.rec.Owner != nil {
		return fmt.Errorf("%w: %q is job %s of a corepin run (pid %d); stop that run to release it", ErrInvalid, name, e.rec.Job, e.rec.Owner.PID)
	}
	if c := e.rec.Container; c != nil {
		return fmt.Errorf("%w: %q is container %s of pod %s, run by the container runtime; delete the pod to release it", ErrInvalid, name, c.Name, c.Pod)
	}
	// The delete is committed before any process is killed: on a full
	// disk nothing has changed and the workload keeps running; after a
	// crash the next start finishes it (reconcile).
	if err := n.markDeleting(e); err != nil {
		if store.IsFull(err) {
			return fmt.Errorf("deleting %q: %w (%s); it keeps running: free space there and retry (%v)",
				name, ErrDiskFull, filepath.Dir(n.db.Path()), err)
		}
		return fmt.Errorf("deleting %q: %w; it keeps running", name, err)
	}
	if err := n.release(e, "deleted"); err != nil {
		if store.IsFull(err) {
			return fmt.Errorf("deleting %q: its processes are stopped, but %w (%s): its CPUs stay held until the "+
				"state can be written; the agent retries at each sweep (%v)", name, ErrDiskFull, filepath.Dir(n.db.Path()), err)
		}
		return err
	}
	n.log.Info("deleted", "name", name)
	return nil
}

// markDeleting commits e's delete (record.Deleting) in the store. Callers
// hold n.mu.
func (n *Node) markDeleting(e *entry) error {
	if e.rec.Deleting {
		return nil
	}
	rec := e.rec
	rec.Deleting = true
	doc, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	a := e.a
	a.Request = doc
	gen, err := n.db.SaveAssignment(a)
	if err != nil {
		return err
	}
	e.a.Request, e.a.Generation, e.rec = doc, gen, rec
	return nil
}

// release stops e's processes, removes its group, deletes its assignment
// and grows the pools. Callers hold n.mu.
func (n *Node) release(e *entry, why string) error {
	if e.group != nil {
		if err := n.stopGroup(e); err != nil {
			return err
		}
	}
	if e.cmd != nil {
		reaped(e.cmd, 0) // killed with its group: collect the zombie
		e.cmd = nil
	}
	if err := n.db.DeleteAssignment(e.a.Name); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	delete(n.wl, e.a.Name)
	if err := n.st.Release(e.a.Name); err != nil && !errors.Is(err, alloc.ErrUnknownID) {
		return err
	}
	n.obs.Reconciled(why)
	return n.syncPools()
}

// stopGroup empties and removes e's group; for an adopted cgroup it gives
// the group every CPU back instead.
func (n *Node) stopGroup(e *entry) error {
	if e.rec.Cgroup != "" {
		if err := e.group.Update(enforce.Resources{}); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	deadline := time.Now().Add(n.stop)
	for {
		pids, err := enforce.Pids(e.group)
		if errors.Is(err, os.ErrNotExist) {
			return e.group.Remove() // gone already in one hierarchy
		}
		if err != nil {
			return err
		}
		for _, p := range pids {
			if p != os.Getpid() { // never the agent, whatever a group lists
				syscall.Kill(p, syscall.SIGKILL)
			}
		}
		err = enforce.RemoveWhenEmpty(e.group, 200*time.Millisecond)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("stopping workload %q: %w", e.a.Name, err)
		}
	}
}
