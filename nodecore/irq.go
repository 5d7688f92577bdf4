package nodecore

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"

	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/irq"
	"github.com/corepin/corepin/runner"
	"github.com/corepin/corepin/store"
)

// BannedFile is where corepin keeps irqbalance's banned CPUs on the
// machine whose "/" is root (irq.DefaultBannedFile on this one).
func BannedFile(root string) string {
	if root == "" {
		root = "/"
	}
	return filepath.Join(root, irq.DefaultBannedFile)
}

// IrqbalanceNote says, where irqbalance runs on the machine whose "/" is
// root, how corepin coexists with it; "" where it does not run.
func IrqbalanceNote(root string) string {
	if root == "" {
		root = "/"
	}
	return irqbalanceNote(filepath.Join(root, "proc"), BannedFile(root))
}

// irqbalanceNote is IrqbalanceNote for the processes under proc, with
// the banned CPUs kept in banned.
func irqbalanceNote(proc, banned string) string {
	pid, err := irq.Irqbalance(proc)
	if err != nil || pid == 0 {
		return ""
	}
	return fmt.Sprintf("irqbalance runs (pid %d) and may move interrupts back onto the CPUs kept clear: corepin keeps them in %s (IRQBALANCE_BANNED_CPULIST); make it irqbalance's EnvironmentFile and restart irqbalance (docs/reference/irq.md)",
		pid, banned)
}

// IRQFollower keeps the CPUs a front door's workloads ask to keep clear
// of movable device interrupts (package irq, one holder: the agent's
// workloads, the NRI plugin's containers) over a connection of its own to
// the state file: each Sync makes what it holds exactly the CPUs given,
// and undoes what holders that died left (a crashed agent's or plugin's
// workloads that are gone, a killed run's jobs). Where /proc/irq cannot
// be written, OpenIRQFollower says so once in the log and the follower
// steers nothing. Errors of a Sync are logged, each once until another
// is seen; the interrupts left where they are, each once.
type IRQFollower struct {
	db    *store.DB
	steer *irq.Steer // nil: interrupts cannot be steered here
	log   *slog.Logger

	mu      sync.Mutex
	lastErr string
	said    map[int]bool
}

// OpenIRQFollower opens a follower on the state file at state, steering
// as holder o (o.Root's interrupts; o.Proc's processes, where irqbalance
// is looked for too).
func OpenIRQFollower(state string, o irq.Options, log *slog.Logger) (*IRQFollower, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f := &IRQFollower{log: log, said: map[int]bool{}}
	if err := irq.Probe(o.Root); err != nil {
		log.Info("irq_isolate workloads keep the interrupts where they are on this machine", "why", err.Error())
		return f, nil
	}
	db, err := OpenState(state)
	if err != nil {
		return nil, err
	}
	steer, err := irq.New(db, o)
	if err != nil {
		db.Close()
		return nil, err
	}
	f.db, f.steer = db, steer
	if o.Proc == "" {
		o.Proc = "/proc"
	}
	if n := irqbalanceNote(o.Proc, o.BannedFile); n != "" {
		log.Warn("irq_isolate: " + n)
	}
	return f, nil
}

// Sync keeps the CPUs of held (a workload's id -> its CPUs) clear, and
// only those; it returns the error it logged.
func (f *IRQFollower) Sync(held map[string]cpuset.CPUSet) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.steer == nil {
		return nil
	}
	rep, err := f.steer.Sync(held)
	if err != nil {
		if msg := err.Error(); msg != f.lastErr {
			f.lastErr = msg
			f.log.Warn("irq_isolate", "err", msg)
		}
		return err
	}
	f.lastErr = ""
	if len(rep.Moved)+len(rep.Restored) > 0 {
		f.log.Info("irq_isolate: interrupts steered", "kept_clear", rep.Kept.String(), "moved", fmt.Sprint(rep.Moved), "restored", fmt.Sprint(rep.Restored))
	}
	var left []int
	for _, r := range rep.Refused {
		if !f.said[r.IRQ] {
			f.said[r.IRQ] = true
			left = append(left, r.IRQ)
		}
	}
	var stuck []int
	for _, n := range rep.Stuck {
		if !f.said[n] {
			f.said[n] = true
			stuck = append(stuck, n)
		}
	}
	if len(left)+len(stuck) > 0 {
		f.log.Info("irq_isolate: interrupts left where they are", "refused_by_kernel", fmt.Sprint(left), "only_on_kept_clear_cpus", fmt.Sprint(stuck))
	}
	if len(rep.Yielded) > 0 {
		f.log.Info("irq_isolate: interrupts another writer (irqbalance?) moved off the kept CPUs, left to it", "irqs", fmt.Sprint(rep.Yielded))
	}
	return nil
}

// Close gives every interrupt back (the affinities found, less what
// other live holders keep clear) and closes the state file.
func (f *IRQFollower) Close() error {
	f.Sync(nil)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.db == nil {
		return nil
	}
	return f.db.Close()
}

// holdIRQs wraps h.Placer so that each pinned job's CPUs are kept clear of
// movable interrupts while it holds them (package irq, on the shared
// state file); where /proc/irq cannot be written, or no state file can
// record the affinities found, a note says why and nothing changes.
func (h *Host) holdIRQs(env, root string, log io.Writer) error {
	if root == "" {
		root = "/"
	}
	unchanged := func(short string, detail error) {
		h.Notes = append(h.Notes, Note{Short: "irq-isolate changes nothing: " + short,
			Detail: []string{"irq-isolate changes nothing; the jobs run with the interrupts where they are: " + detail.Error()}})
	}
	if err := irq.Probe(root); err != nil {
		short := err.Error()
		if pe, ok := errors.AsType[*irq.ProbeError](err); ok {
			short = pe.Short
		}
		unchanged(short, err)
		return nil
	}
	path := SharedState(env, DefaultState, UserState())
	if path == "" {
		unchanged("no state file to record the affinities in (set "+EnvState+")",
			fmt.Errorf("no writable state file to record the interrupts' affinities in (set %s)", EnvState))
		return nil
	}
	db, err := OpenState(path)
	if err != nil {
		return fmt.Errorf("opening the shared state %s: %w", path, err)
	}
	steer, err := irq.New(db, irq.Options{Root: root, Name: "run", BannedFile: BannedFile(root)})
	if err == nil {
		_, err = steer.Recover() // what a killed run left
	}
	if err != nil {
		db.Close()
		unchanged("reading the interrupts failed", err)
		return nil
	}
	if n := IrqbalanceNote(root); n != "" {
		fmt.Fprintf(log, "corepin: irq-isolate: %s\n", n)
	}
	fmt.Fprintf(log, "corepin: irq-isolate: each pinned job's CPUs kept clear of movable interrupts while it runs (the affinities found recorded in %s)\n", path)
	h.Placer = &irqPlacer{Placer: h.Placer, steer: steer, log: log, said: map[int]bool{}}
	h.closers = append(h.closers, db.Close)
	return nil
}

// irqPlacer is a placer whose placements keep interrupts off their CPUs.
type irqPlacer struct {
	runner.Placer
	steer *irq.Steer
	log   io.Writer

	mu   sync.Mutex
	said map[int]bool // interrupts already reported as left where they are
}

// Place places id, then moves the interrupts off its CPUs. A failure to
// move them is said and the job runs.
func (p *irqPlacer) Place(id string, cpus int) (runner.Placement, error) {
	pl, err := p.Placer.Place(id, cpus)
	if err != nil || pl.CPUs.IsEmpty() {
		return pl, err
	}
	rep, err := p.steer.Hold(id, pl.CPUs)
	p.report(id, pl.CPUs, rep, err)
	return pl, nil
}

// Release gives the interrupts back, then releases id's CPUs.
func (p *irqPlacer) Release(id string) error {
	_, err := p.steer.Release(id)
	if err != nil {
		err = fmt.Errorf("restoring interrupts: %w", err)
	}
	return errors.Join(err, p.Placer.Release(id))
}

// report says what a hold could not do, each interrupt once per run.
func (p *irqPlacer) report(id string, cpus cpuset.CPUSet, rep irq.Report, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		fmt.Fprintf(p.log, "corepin: irq-isolate: %s on %s runs with the interrupts where they are: %v\n", id, cpus, err)
		return
	}
	var refused, stuck []string
	for _, r := range rep.Refused {
		if !p.said[r.IRQ] {
			p.said[r.IRQ] = true
			refused = append(refused, fmt.Sprint(r.IRQ))
		}
	}
	for _, n := range rep.Stuck {
		if !p.said[n] {
			p.said[n] = true
			stuck = append(stuck, fmt.Sprint(n))
		}
	}
	if len(refused)+len(stuck) == 0 {
		return
	}
	var parts []string
	if len(refused) > 0 {
		parts = append(parts, "the kernel would not move irq "+strings.Join(refused, ",")+" (per-CPU or managed)")
	}
	if len(stuck) > 0 {
		parts = append(parts, "irq "+strings.Join(stuck, ",")+" may run only on CPUs kept clear")
	}
	fmt.Fprintf(p.log, "corepin: irq-isolate: left where they are: %s\n", strings.Join(parts, "; "))
}
