package nodecore

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"

	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/irq"
	"github.com/corepin/corepin/runner"
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
	pid, err := irq.Irqbalance(filepath.Join(root, "proc"))
	if err != nil || pid == 0 {
		return ""
	}
	return fmt.Sprintf("irqbalance runs (pid %d) and may move interrupts back onto the CPUs kept clear: corepin keeps them in %s (IRQBALANCE_BANNED_CPULIST); make it irqbalance's EnvironmentFile and restart irqbalance (docs/reference/irq.md)",
		pid, BannedFile(root))
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
