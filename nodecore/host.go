package nodecore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/enforce"
	"github.com/corepin/corepin/qos"
	"github.com/corepin/corepin/runner"
	"github.com/corepin/corepin/store"
	"github.com/corepin/corepin/topology"
	"github.com/corepin/corepin/wakescan"
)

// EnvState names the state file pinned runs share with each other and
// with the agent (default DefaultState).
const EnvState = "COREPIN_STATE"

// PlaceWait bounds how long a pinned job waits for CPUs that other runs
// or the agent hold.
const PlaceWait = 10 * time.Minute

// Drivers are the names HostOptions.Driver takes.
var Drivers = []string{"auto", enforce.NameV1, enforce.NameV2, enforce.NameAffinity}

// HostOptions say how SetUpHost prepares this machine for a batch of
// jobs (`corepin run`, `corepin bench`).
type HostOptions struct {
	// Driver is the enforcement: "auto" (enforce.Detect), cgroup-v1,
	// cgroup-v2 or affinity (Drivers).
	Driver string
	// BE sets a best-effort batch up: its groups under BERunRoot, that
	// root idle against everything else on the machine
	// (enforce.RootPrioritizer).
	BE bool
	// Check, when not nil, sees the detected driver before anything on
	// the host changes; its error stops the set-up (a mode the driver
	// cannot enforce).
	Check func(enforce.Driver) error
	// Placer sets up where pinned jobs take their CPUs: the state file
	// shared with other runs and the agent (a StatePlacer on State, else
	// DefaultState, else the user's own state file), or, only where none
	// can be written, the run's own allocator, said in a note.
	Placer bool
	// State is the shared state file ($COREPIN_STATE); "" picks one.
	State string
	// SuppressBE runs the QoS loop over the batch's jobs on the shared
	// pool (usage-driven suppression, Koordinator's budget), unless Agent
	// reports an agent running (it controls BE work then) or the driver
	// has no cgroups. Host.OnGroup is then the runner's hook.
	SuppressBE bool
	// Agent reports whether an agent runs, and where (nil: none runs).
	Agent func() (addr string, running bool)
	// Log gets what the set-up did and warns of (nil discards it).
	Log io.Writer
	// WakeScan full, for a BE batch, turns SIS_UTIL off in the scheduler's
	// features while the batch runs (package wakescan, recorded in the
	// shared state file first; the last BE user restores the value found).
	// Where it cannot, a note says why and nothing changes.
	WakeScan wakescan.Mode
	// SchedRoot is the machine whose features file WakeScan switches: ""
	// for this one; tests give a directory.
	SchedRoot string
	// IRQIsolate keeps movable device interrupts off each pinned job's
	// CPUs while it runs (package irq, recorded in the shared state file
	// first; restored when the job ends). Where /proc/irq cannot be
	// written, a note says why and the jobs run.
	IRQIsolate bool
	// IRQRoot is the machine whose interrupts IRQIsolate steers: "" for
	// this one; tests give a directory holding proc/irq.
	IRQRoot string
}

// Note is what a set-up has to say before the first job: a few words for
// one line, and its detail.
type Note struct {
	Short  string
	Detail []string
}

// Host is a machine set up for a batch: the driver, the CPUs unpinned
// jobs share, where pinned jobs take their CPUs and, with
// HostOptions.SuppressBE, the QoS loop.
type Host struct {
	Driver enforce.Driver
	// Pool is the CPUs unpinned jobs share: never an isolated or
	// nohz_full CPU (alloc.SharedCPUs; issue 18).
	Pool cpuset.CPUSet
	// Placer places pinned jobs (nil without HostOptions.Placer).
	Placer runner.Placer
	// Notes say what the driver cannot enforce here and where pinned CPUs
	// are shared, for the caller to print.
	Notes []Note
	// OnGroup is the runner's hook (runner.Runner.OnGroup) when the QoS
	// loop runs, else nil.
	OnGroup func(job int, g enforce.Group, live bool)
	qos     *batchQoS
	closers []func() error
}

// SetUpHost is the one host set-up of a batch: it detects the driver
// (under BERunRoot for a BE batch), lets o.Check refuse it, makes a BE
// batch's root idle, removes the groups of crashed runs, opens the
// shared placer and starts the QoS loop, as o asks. Close undoes what
// outlives the batch (the placer's state file, the loop). Errors opening
// the shared state wrap the store's sentinels or ErrInvalid.
func SetUpHost(ctx context.Context, t *topology.Topology, o HostOptions) (*Host, error) {
	log := o.Log
	if log == nil {
		log = io.Discard
	}
	var dopts []enforce.Option
	if o.BE {
		dopts = append(dopts, enforce.WithRoot(BERunRoot))
	}
	d, err := detectDriver(o.Driver, dopts...)
	if err != nil {
		return nil, err
	}
	if o.Check != nil {
		if err := o.Check(d); err != nil {
			return nil, err
		}
	}
	if rp, ok := d.(enforce.RootPrioritizer); ok && o.BE {
		if _, err := rp.SetRootIdle(); err != nil {
			return nil, fmt.Errorf("protecting latency-sensitive work from the BE batch: %w", err)
		}
	}
	if removed, err := d.Cleanup(); err != nil {
		fmt.Fprintf(log, "corepin: warning: cleaning up groups of earlier runs: %v\n", err)
	} else if len(removed) > 0 {
		fmt.Fprintf(log, "corepin: removed %d group(s) left by a crashed run\n", len(removed))
	}
	h := &Host{Driver: d, Pool: alloc.SharedCPUs(t)}
	if n, ok := driverNote(d); ok {
		h.Notes = append(h.Notes, n)
	}
	if o.Placer {
		if err := h.openPlacer(t, o.State); err != nil {
			return nil, err
		}
	}
	if o.WakeScan == wakescan.Full && o.BE {
		if err := h.holdWakeScan(o.State, o.SchedRoot, log); err != nil {
			h.Close()
			return nil, err
		}
	}
	if o.IRQIsolate && h.Placer != nil {
		if err := h.holdIRQs(o.State, o.IRQRoot, log); err != nil {
			h.Close()
			return nil, err
		}
	}
	if o.SuppressBE && d.Name() != enforce.NameAffinity {
		if addr, running := agentOf(o.Agent); running {
			fmt.Fprintf(log, "corepin: qos: an agent runs on %s; it controls BE work, this run does not\n", addr)
		} else {
			qctx, stop := context.WithCancel(ctx)
			h.closers = append(h.closers, func() error { stop(); return nil })
			h.qos = startBatchQoS(qctx, h.Pool, log)
			h.OnGroup = h.qos.onGroup
		}
	}
	return h, nil
}

// holdWakeScan holds the wake_scan switch for the batch, on the shared
// state file (SharedState, as the placer's) until Close; where the
// features file cannot be switched, or no state file can record it, a
// note says why and nothing changes.
func (h *Host) holdWakeScan(env, root string, log io.Writer) error {
	unchanged := func(short string, detail error) {
		h.Notes = append(h.Notes, Note{Short: "wake_scan full changes nothing: " + short,
			Detail: []string{"wake_scan full changes nothing; the batch runs as without it: " + detail.Error()}})
	}
	scan, db, path, err := OpenWakeScan(env, root, "run")
	if ue, ok := errors.AsType[*WakeScanUnavailable](err); ok {
		unchanged(ue.Short, ue.Err)
		return nil
	}
	if err != nil {
		return err
	}
	if _, err := scan.Hold(); err != nil {
		db.Close()
		unchanged("turning SIS_UTIL off failed", err)
		return nil
	}
	fmt.Fprintf(log, "corepin: wake_scan full: SIS_UTIL off while this BE batch runs (recorded in %s; the last BE user restores it)\n", path)
	h.closers = append(h.closers, func() error {
		act, err := scan.Release()
		if act == wakescan.Restored {
			fmt.Fprintf(log, "corepin: wake_scan: SIS_UTIL restored to the value found\n")
		}
		return errors.Join(err, db.Close())
	})
	return nil
}

// WakeScanUnavailable is OpenWakeScan's answer where the wake_scan switch
// cannot be held on this machine (nothing changed): Short for a one-line
// note, Err the detail.
type WakeScanUnavailable struct {
	Short string
	Err   error
}

func (e *WakeScanUnavailable) Error() string { return e.Err.Error() }
func (e *WakeScanUnavailable) Unwrap() error { return e.Err }

// OpenWakeScan opens a holder named name ("run", "bench") of the
// wake_scan switch of the machine whose "/" is root ("" is "/"), on the
// shared state file (SharedState with env as $COREPIN_STATE, as the
// placer's) that records the value found, so that whatever a crashed
// holder left is undone by the next. It holds nothing yet: the caller
// calls Hold, Release, and closes db. Where the features file cannot be
// switched or no state file can record the value, it returns a
// *WakeScanUnavailable; path is the state file's.
func OpenWakeScan(env, root, name string) (scan *wakescan.Scan, db *store.DB, path string, err error) {
	root = cmp.Or(root, "/")
	if err := wakescan.Probe(root); err != nil {
		short := err.Error()
		if pe, ok := errors.AsType[*wakescan.ProbeError](err); ok {
			short = pe.Short
		}
		return nil, nil, "", &WakeScanUnavailable{Short: short, Err: err}
	}
	path = SharedState(env, DefaultState, UserState())
	if path == "" {
		return nil, nil, "", &WakeScanUnavailable{Short: "no state file to record the value found in (set " + EnvState + ")",
			Err: fmt.Errorf("no writable state file to record the value found in (set %s)", EnvState)}
	}
	if db, err = OpenState(path); err != nil {
		return nil, nil, "", fmt.Errorf("opening the shared state %s: %w", path, err)
	}
	if scan, err = wakescan.New(db, wakescan.Options{Root: root, Name: name}); err != nil {
		db.Close()
		return nil, nil, "", &WakeScanUnavailable{Short: "turning SIS_UTIL off failed", Err: err}
	}
	return scan, db, path, nil
}

// OpenWakeFollower opens the wake_scan follower (wakescan.Follower) of a
// daemon (name: "agent", "nri") over a connection of its own to the state
// file at state, for the machine whose "/" is root; it undoes what a
// crashed holder left.
func OpenWakeFollower(state string, mode wakescan.Mode, root, name string, log *slog.Logger) (*wakescan.Follower, error) {
	db, err := OpenState(state)
	if err != nil {
		return nil, err
	}
	f, err := wakescan.OpenFollower(db, mode, root, name, log)
	if err != nil {
		db.Close()
		return nil, err
	}
	return f, nil
}

func agentOf(f func() (string, bool)) (string, bool) {
	if f == nil {
		return "", false
	}
	return f()
}

// Close stops the QoS loop and closes the shared state file; what the
// placer still holds stays held until a later run finds its owner dead.
func (h *Host) Close() error {
	var errs []error
	for _, c := range slices.Backward(h.closers) {
		errs = append(errs, c())
	}
	h.closers = nil
	return errors.Join(errs...)
}

// QoSSummary is one line of what the QoS loop did, "" when none ran.
func (h *Host) QoSSummary() string {
	if h.qos == nil {
		return ""
	}
	return h.qos.summary()
}

// detectDriver returns the driver name asks for; a cgroup driver this
// machine can not give is an error wrapping enforce.ErrUnusable that names
// the drivers it can (bad input: the caller asked for it).
func detectDriver(name string, opts ...enforce.Option) (enforce.Driver, error) {
	switch name {
	case "auto", "":
		return enforce.Detect(opts...)
	case enforce.NameAffinity, enforce.NameV1, enforce.NameV2:
		d, err := enforce.DetectNamed(name, opts...)
		if err != nil {
			return nil, fmt.Errorf("--driver %w", err)
		}
		return d, nil
	}
	return nil, fmt.Errorf("unknown --driver %q: use %s", name, strings.Join(Drivers, ", "))
}

// openPlacer sets h.Placer: a StatePlacer on the state file shared with
// other runs and the agent (issue 10 §2: no CPU held by two of them even
// with no agent running), or, only where no state file can be written at
// all, the run's own allocator, said in a note.
func (h *Host) openPlacer(t *topology.Topology, env string) error {
	path := SharedState(env, DefaultState, UserState())
	if path == "" || unix.Access(filepath.Dir(path), unix.W_OK) != nil {
		h.Notes = append(h.Notes, Note{Short: "CPUs not shared with other runs (set " + EnvState + ")",
			Detail: []string{fmt.Sprintf("no writable state file (%q): pinned CPUs are not shared with other runs or the agent (set %s)", path, EnvState)}})
		p, err := runner.NewAllocPlacer(t)
		h.Placer = p
		return err
	}
	lister, _ := h.Driver.(enforce.Lister)
	// The run's own view: the CPUs outside its cpuset cgroup are not its
	// to give. Where the agent or the NRI plugin opened the file, the
	// placer adds their node settings (recorded in it), so jobs never
	// land on CPUs the agent keeps for the system.
	cfg := alloc.NodeSettings{Reserved: t.Online().Difference(t.Allowed())}
	sp, err := OpenStatePlacer(path, t, cfg, PlaceWait, lister)
	if err != nil {
		return fmt.Errorf("opening the shared state %s: %w", path, err)
	}
	h.Placer = sp
	h.closers = append(h.closers, sp.Close)
	return nil
}

// SharedState returns the state file pinned runs share with each other
// and the agent: env ($COREPIN_STATE) if set; else system (the agent's
// state file), creating its directory if this user may; else user (a
// file under the user's own state directory, for runs without root),
// creating its directory. Only these default directories are ever
// created. It returns "" where none can be written.
func SharedState(env, system, user string) string {
	if env != "" {
		return env
	}
	for _, p := range []string{system, user} {
		if p == "" {
			continue
		}
		dir := filepath.Dir(p)
		if os.MkdirAll(dir, 0o755) == nil && unix.Access(dir, unix.W_OK) == nil {
			return p
		}
	}
	return ""
}

// UserState is the shared state file of a user who cannot write the
// agent's: $XDG_STATE_HOME/corepin/state.db (an absolute XDG_STATE_HOME
// only), else ~/.local/state/corepin/state.db.
func UserState() string {
	if d := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "corepin", "state.db")
	}
	home, err := os.UserHomeDir()
	if err != nil || !filepath.IsAbs(home) {
		return ""
	}
	return filepath.Join(home, ".local", "state", "corepin", "state.db")
}

// driverNote says what d cannot enforce here (its Limitations), in a few
// words: for the affinity driver, that it pins without cgroups and, where
// this user may not lower a nice, that jobs keep theirs; for a cgroup
// driver, the files it lacks.
func driverNote(d enforce.Driver) (Note, bool) {
	limits := d.Limitations()
	if len(limits) == 0 {
		return Note{}, false
	}
	if d.Name() != enforce.NameAffinity {
		var lacks []string
		for _, l := range limits {
			lacks = append(lacks, cutWords(l))
		}
		return Note{Short: d.Name() + ": " + strings.Join(lacks, ", "), Detail: limits}, true
	}
	short := "affinity driver"
	if strings.HasPrefix(limits[0], "no usable cgroup") {
		short = "no usable cgroup"
	}
	short += ": affinity only (no quota or stats)"
	if l, err := enforce.ProbeNice(); err == nil && l.Lowest > 19 {
		short += ", jobs keep this process's scheduling"
	} else if err == nil && l.Note() != "" {
		short += fmt.Sprintf(", jobs keep nice %d", l.Lowest)
	}
	return Note{Short: short, Detail: limits}, true
}

// cutWords is the head of a limitation, up to its first parenthesis or
// colon: "no cpu.idle (Linux < 5.15): ..." is "no cpu.idle".
func cutWords(s string) string {
	if i := strings.IndexAny(s, "(:"); i > 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}

// batchQoS is the QoS loop a BE batch runs over its own jobs when no
// agent does: usage-driven suppression (Koordinator's budget) of the
// batch's groups on the pool, against whatever else the machine runs. It
// knows no LS groups, so the interference signals (which need the LS
// threads) stay off; the agent runs the full controller. Pinned BE jobs
// keep their own CPUs: the loop runs only over jobs on the shared pool.
type batchQoS struct {
	loop *qos.Loop
	mu   sync.Mutex
	live map[int]enforce.Group
	acts map[string]int
	last qos.Report
}

// startBatchQoS starts the loop over pool until ctx ends.
func startBatchQoS(ctx context.Context, pool cpuset.CPUSet, log io.Writer) *batchQoS {
	q := &batchQoS{live: map[int]enforce.Group{}, acts: map[string]int{}}
	base := qos.ClassResources(alloc.BE, 0, cpuset.CPUSet{}, cpuset.CPUSet{})
	q.loop = &qos.Loop{Config: qos.Config{UsageOnly: true},
		Pools: func() alloc.Pools { return alloc.Pools{LS: pool} },
		BE: func() ([]enforce.Group, enforce.Resources) {
			q.mu.Lock()
			defer q.mu.Unlock()
			return slices.Collect(maps.Values(q.live)), base
		},
		LS: func() []qos.Member { return nil },
		Report: func(rep qos.Report) {
			q.mu.Lock()
			defer q.mu.Unlock()
			q.last = rep
			for _, a := range rep.Plan.Actions {
				q.acts[a]++
			}
		},
	}
	fmt.Fprintf(log, "corepin: qos: no agent runs: suppressing this BE batch on %s as the rest of the machine's load grows (threshold %.2f)\n",
		pool, qos.DefaultConfig().Threshold)
	go func() { _ = q.loop.Run(ctx) }()
	return q
}

// onGroup follows the batch's live groups (runner.Runner.OnGroup).
func (q *batchQoS) onGroup(job int, g enforce.Group, live bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if live {
		q.live[job] = g
	} else {
		delete(q.live, job)
	}
}

// summary is one line of what the loop did.
func (q *batchQoS) summary() string {
	q.mu.Lock()
	defer q.mu.Unlock()
	var acts []string
	for _, k := range slices.Sorted(maps.Keys(q.acts)) {
		acts = append(acts, fmt.Sprintf("%s=%d", k, q.acts[k]))
	}
	return fmt.Sprintf("corepin: qos: last BE cpuset %s (suppression %.0f%%); actions %s\n",
		q.last.Plan.CPUs, 100*q.last.Plan.Suppression, strings.Join(acts, " "))
}
