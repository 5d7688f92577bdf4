package qos

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/enforce"
	"github.com/corepin/corepin/measure"
)

// DefaultTick is the loop's period: short enough to take CPUs back from a
// batch within a few of a service's requests, long enough that reading
// every LS thread's schedstat stays below 1% of a CPU.
const DefaultTick = 200 * time.Millisecond

// MaxLSThreads bounds the LS threads read per tick; beyond it the run
// delay of the first MaxLSThreads is used.
const MaxLSThreads = 4096

// Member is one LS (or LSR, LSE) workload the loop watches.
type Member struct {
	Group enforce.Group
	// CPUs are an LSR member's bound CPUs, lent to BE while it is idle.
	CPUs cpuset.CPUSet
	LSR  bool
	// Resources are its settings, the base of a CFS burst grant.
	Resources enforce.Resources
}

// Loop reads signals through measure, decides with Decide and writes the
// plan through enforce, once per Tick. The zero values of the optional
// fields are usable; Pools, BE and LS are required.
type Loop struct {
	Config Config
	Tick   time.Duration
	// Proc is the procfs root (os.DirFS("/proc")).
	Proc fs.FS
	// Pools returns the node's pools now.
	Pools func() alloc.Pools
	// BE returns the BE groups to apply the plan to, and their base
	// settings (idle, weight); the plan sets cpuset and quota.
	BE func() ([]enforce.Group, enforce.Resources)
	// LS returns the LS workloads whose signals count.
	LS func() []Member
	// Slice, when set and the kernel takes it, is requested for every LS
	// thread each tick (EEVDF, sched_setattr): LS work wins the CPU sooner
	// after it wakes.
	Slice time.Duration
	// BESlice, likewise, for every BE thread: once picked (an idle
	// entity still gets a pick now and then, for its whole slice), BE
	// holds the CPU at most this long before LS gets it back.
	BESlice time.Duration
	// Burst grants CFS burst to throttled LS members with a quota.
	Burst bool
	// SystemPSI lets the system-wide /proc/pressure/cpu stand in for LS
	// groups without cpu.pressure (cgroup v1). Off by default: it counts
	// BE's own waiting tasks too, so under a saturating batch it reads
	// high whatever LS feels.
	SystemPSI bool
	// Report, when set, receives every tick's outcome.
	Report func(Report)

	mu    sync.Mutex
	state State
	prev  sample
	last  Report
}

// Report is one tick's outcome.
type Report struct {
	At      time.Time
	Signals Signals
	State   State
	Plan    Plan
	// Slice says what the slice lever did: "", "1ms", or why not.
	Slice string
	// Bursts counts LS members granted a burst this tick.
	Bursts int
	Err    error
}

// sample is one reading of the cumulative counters the signals derive
// from. Per-member counters are keyed by group name or pid, so a member
// that came or went between two samples adds nothing to a delta (its
// whole history would otherwise read as one tick's use or wait).
type sample struct {
	at        time.Time
	busy      time.Duration            // every CPU's busy time (/proc/stat)
	be        map[string]time.Duration // usage per BE group
	wait      map[int]time.Duration    // run delay per LS process
	periods   map[string]uint64        // CFS periods per LS group
	throttled map[string]uint64        // throttled periods per LS group
	psi       map[string]time.Duration // "some" stall total per source
	lsrBusy   map[string]time.Duration // usage per LSR member
}

func newSample() sample {
	return sample{at: time.Now(), be: map[string]time.Duration{}, wait: map[int]time.Duration{}, periods: map[string]uint64{},
		throttled: map[string]uint64{}, psi: map[string]time.Duration{}, lsrBusy: map[string]time.Duration{}}
}

// delta sums b[k]-a[k] over the keys in both samples whose counter did
// not go backwards.
func delta[K comparable, V ~int64 | ~uint64](a, b map[K]V) V {
	var sum V
	for k, vb := range b {
		if va, ok := a[k]; ok && vb >= va {
			sum += vb - va
		}
	}
	return sum
}

// signals returns what happened between a and b.
func signals(a, b sample, lsr []Member) Signals {
	wall := b.at.Sub(a.at)
	if wall <= 0 || a.at.IsZero() {
		return Signals{}
	}
	var s Signals
	if d := (b.busy - a.busy) - delta(a.be, b.be); d > 0 {
		s.LSUsage = d.Seconds() / wall.Seconds()
	}
	if d := delta(a.wait, b.wait); d > 0 {
		s.RunqWait = time.Duration(float64(d) / wall.Seconds())
	}
	if p := delta(a.periods, b.periods); p > 0 {
		s.Throttled = min(1, float64(delta(a.throttled, b.throttled))/float64(p))
	}
	if d := delta(a.psi, b.psi); d > 0 {
		s.PSI = min(100, 100*d.Seconds()/wall.Seconds())
	}
	var busy []int
	for _, m := range lsr {
		name := m.Group.Name()
		if used := b.lsrBusy[name] - a.lsrBusy[name]; used.Seconds()/wall.Seconds() > 0.05*float64(m.CPUs.Size()) {
			busy = append(busy, m.CPUs.List()...)
		}
	}
	s.LSRBusy = cpuset.New(busy...)
	return s
}

// read takes one sample. Errors of single members (a workload that just
// exited) are skipped; only the node's own counters are required.
func (l *Loop) read(be []enforce.Group, ls []Member) (sample, error) {
	s := newSample()
	busy, err := measure.ReadCPUBusy(l.Proc, cpuset.CPUSet{})
	if err != nil {
		return s, err
	}
	s.busy = busy
	for _, g := range be {
		if st, err := g.Stats(); err == nil {
			s.be[g.Name()] = st.Usage
		}
	}
	threads := 0
	for _, m := range ls {
		name := m.Group.Name()
		if st, err := m.Group.Stats(); err == nil {
			s.periods[name], s.throttled[name] = st.NrPeriods, st.NrThrottled
			if m.LSR {
				s.lsrBusy[name] = st.Usage
			}
		}
		if cf, ok := m.Group.(enforce.ControlFiler); ok {
			if p, err := measure.ReadPSI(cf.ControlFS(), "cpu.pressure"); err == nil {
				s.psi[name] = p.Some.Total
			}
		}
		pl, ok := m.Group.(enforce.ProcLister)
		if !ok {
			continue
		}
		pids, err := pl.Procs()
		if err != nil {
			continue
		}
		for _, pid := range pids {
			if threads >= MaxLSThreads {
				break
			}
			threads++
			if d, err := measure.RunDelay(l.Proc, pid); err == nil {
				s.wait[pid] = d
			}
		}
	}
	if len(s.psi) == 0 && l.SystemPSI {
		if p, err := measure.ReadPSI(l.Proc, measure.PSIFile); err == nil {
			s.psi["/"] = p.Some.Total
		}
	}
	return s, nil
}

// Step runs one tick: read, decide, apply. A failure to apply to one BE
// group does not stop the others; the errors are joined.
func (l *Loop) Step() Report {
	l.mu.Lock()
	defer l.mu.Unlock()
	cfg := l.Config.WithDefaults()
	if l.Proc == nil {
		l.Proc = os.DirFS("/proc")
	}
	be, base := l.BE()
	ls := l.LS()
	rep := Report{At: time.Now()}
	cur, err := l.read(be, ls)
	if err != nil {
		rep.Err = fmt.Errorf("reading signals: %w", err)
		l.last = rep
		return rep
	}
	var lsr []Member
	for _, m := range ls {
		if m.LSR {
			lsr = append(lsr, m)
		}
	}
	rep.Signals = signals(l.prev, cur, lsr)
	l.prev = cur
	st, plan, err := Decide(cfg, l.Pools(), l.state, rep.Signals)
	if err != nil {
		rep.Err = err
		l.last = rep
		return rep
	}
	l.state, rep.State, rep.Plan = st, st, plan
	var errs []error
	if len(be) > 0 {
		r := plan.Resources(base)
		for _, g := range be {
			if err := g.Update(r); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if l.Burst && rep.Signals.Throttled > 0 {
		for _, m := range ls {
			if r, ok := LSBurst(m.Resources, rep.Signals.Throttled); ok {
				if err := m.Group.Update(r); err == nil {
					rep.Bursts++
				}
			}
		}
	}
	var lsGroups []enforce.Group
	for _, m := range ls {
		lsGroups = append(lsGroups, m.Group)
	}
	rep.Slice = applySlice("ls", lsGroups, l.Slice)
	if b := applySlice("be", be, l.BESlice); b != "" {
		rep.Slice = strings.TrimPrefix(rep.Slice+", "+b, ", ")
	}
	rep.Err = errors.Join(errs...)
	l.last = rep
	return rep
}

// applySlice requests slice for every thread of groups where the kernel
// takes it, and says what it did ("ls 1ms", or why not; "" without a
// slice). A thread that exits meanwhile is skipped.
func applySlice(who string, groups []enforce.Group, slice time.Duration) string {
	if slice == 0 {
		return ""
	}
	if f := ProbeThreads(); f.Slice != Supported {
		return who + " slice " + f.Slice.String() + ": kernel default"
	}
	for _, g := range groups {
		if pl, ok := g.(enforce.ProcLister); ok {
			pids, _ := pl.Procs()
			for _, pid := range pids {
				_ = enforce.SetThreadSlice(pid, slice) // best effort: keeps SCHED_IDLE threads idle
			}
		}
	}
	return who + " " + slice.String()
}

// Last returns the latest tick's report.
func (l *Loop) Last() Report {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last
}

// Run ticks until ctx ends. It validates the config first.
func (l *Loop) Run(ctx context.Context) error {
	if err := l.Config.WithDefaults().Validate(); err != nil {
		return err
	}
	if l.Pools == nil || l.BE == nil || l.LS == nil {
		return fmt.Errorf("starting the qos loop: %w: Pools, BE and LS are required", ErrInvalidConfig)
	}
	tick := cmpOrDur(l.Tick, DefaultTick)
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		rep := l.Step()
		if l.Report != nil {
			l.Report(rep)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func cmpOrDur(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}
