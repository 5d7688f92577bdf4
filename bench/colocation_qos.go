package bench

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/enforce"
	"github.com/corepin/corepin/experiment"
	"github.com/corepin/corepin/proc"
	"github.com/corepin/corepin/qos"
)

// The QoS controller's mechanisms as colocation policies (issue 11). Each
// runs the batch as BE under the idle corepin-be root, like polCorepin,
// and adds one mechanism of package qos, so the table compares them with
// the plain idle batch side by side.
const (
	polSuppressCpuset = "suppress-cpuset" // Koordinator's budget, applied as a cpuset shrink
	polSuppressQuota  = "suppress-quota"  // the same budget as a CFS quota on BE
	polInterference   = "interference"    // AIMD on the service's run-queue wait and throttling
	polSlice          = "slice"           // a 1 ms EEVDF slice for the service's threads (Linux 6.12+)
	polBESlice        = "be-slice"        // a 0.1 ms EEVDF slice for the batch's threads: a pick of the idle batch ends sooner
	polThreadIdle     = "sched-idle"      // SCHED_IDLE on every batch thread, no cpu.idle
	polQoS            = "qos"             // the full controller: budget, interference and slice
)

// qosPolicies are the policies that run the controller's loop or levers.
var qosPolicies = []string{polSuppressCpuset, polSuppressQuota, polInterference, polSlice, polBESlice, polThreadIdle, polQoS}

// qosTick is the loop's period in the experiment: a tenth of a second
// takes CPUs back within a few requests of the built-in service.
const qosTick = 100 * time.Millisecond

// qosSlice is the slice requested for the service's threads, qosBESlice
// the one for the batch's (the kernel's minimum).
const (
	qosSlice   = time.Millisecond
	qosBESlice = enforce.MinSlice
)

// qosSetup is what a controller policy runs for one point: a loop
// config (nil for a lever-only policy), a slice, per-thread SCHED_IDLE.
type qosSetup struct {
	loop           *qos.Config
	slice, beSlice time.Duration
	threadIdle     bool
}

// qosSetupFor returns the controller setup of policy, or false for a
// policy that runs none.
func qosSetupFor(policy string) (qosSetup, bool) {
	switch policy {
	case polSuppressCpuset:
		return qosSetup{loop: &qos.Config{Mechanism: qos.Cpuset, UsageOnly: true}}, true
	case polSuppressQuota:
		return qosSetup{loop: &qos.Config{Mechanism: qos.Quota, UsageOnly: true}}, true
	case polInterference:
		return qosSetup{loop: &qos.Config{Mechanism: qos.Cpuset, InterferenceOnly: true}}, true
	case polSlice:
		return qosSetup{slice: qosSlice}, true
	case polBESlice:
		return qosSetup{beSlice: qosBESlice}, true
	case polThreadIdle:
		return qosSetup{threadIdle: true}, true
	case polQoS:
		return qosSetup{loop: &qos.Config{Mechanism: qos.Cpuset}, slice: qosSlice, beSlice: qosBESlice}, true
	}
	return qosSetup{}, false
}

// sliceAll requests slice for every thread of every process in the
// service's group (nginx's workers as well as its master).
func sliceAll(svc *proc.Process, slice time.Duration) error {
	pids := []int{svc.Pid()}
	if pl, ok := svc.Group().(enforce.ProcLister); ok {
		if ps, err := pl.Procs(); err == nil && len(ps) > 0 {
			pids = ps
		}
	}
	for _, pid := range pids {
		if err := enforce.SetThreadSlice(pid, slice); err != nil {
			return err
		}
	}
	return nil
}

// qosRun is a controller running for one point, with what it did.
type qosRun struct {
	mu    sync.Mutex
	ticks int
	level float64 // summed over ticks
	acts  map[string]int
	slice string
}

// startQoS applies policy's levers to the running service and batch and
// starts its loop until ctx ends. It returns nil for other policies. The
// batch's threads get SCHED_IDLE here (sched-idle), after they started:
// the spin workload creates its threads at once.
func startQoS(ctx context.Context, policy string, work cpuset.CPUSet, svc *proc.Process, batch []*proc.Process,
	bg enforce.Group, batchRes enforce.Resources) (*qosRun, error) {
	s, ok := qosSetupFor(policy)
	if !ok {
		return nil, nil
	}
	q := &qosRun{acts: map[string]int{}}
	if s.threadIdle {
		for _, p := range batch {
			if err := enforce.SetThreadSched(p.Pid(), enforce.ThreadSched{Idle: true}); err != nil {
				return nil, fmt.Errorf("setting SCHED_IDLE on the batch: %w", err)
			}
		}
	}
	if s.slice != 0 || s.beSlice != 0 {
		var err error
		if f := qos.ProbeThreads(); f.Slice != qos.Supported {
			err = fmt.Errorf("slice %s", f.Slice)
		}
		if err == nil && s.slice != 0 && svc != nil {
			err = sliceAll(svc, s.slice)
		}
		for _, p := range batch {
			if err == nil && s.beSlice != 0 {
				err = enforce.SetThreadSlice(p.Pid(), s.beSlice)
			}
		}
		q.slice = "applied"
		if err != nil {
			q.slice = "none (" + err.Error() + ")"
		}
	}
	if s.loop == nil {
		return q, nil
	}
	var ls []qos.Member
	if svc != nil && svc.Group() != nil {
		ls = []qos.Member{{Group: svc.Group()}}
	}
	l := &qos.Loop{Config: *s.loop, Tick: qosTick, Proc: os.DirFS("/proc"), Slice: s.slice, BESlice: s.beSlice,
		Pools: func() alloc.Pools { return alloc.Pools{LS: work} },
		BE:    func() ([]enforce.Group, enforce.Resources) { return []enforce.Group{bg}, batchRes },
		LS:    func() []qos.Member { return ls },
		Report: func(r qos.Report) {
			q.mu.Lock()
			defer q.mu.Unlock()
			if r.Err == nil {
				q.ticks++
				q.level += r.State.Level
			}
			for _, a := range r.Plan.Actions {
				q.acts[a]++
			}
		},
	}
	if err := l.Config.WithDefaults().Validate(); err != nil {
		return nil, err
	}
	go func() { _ = l.Run(ctx) }()
	return q, nil
}

// metrics adds what the controller did to m: its mean BE allowance in
// CPUs, its shrinks, grows and backoffs per second, and whether the
// slice was applied.
func (q *qosRun) metrics(m experiment.Metrics, elapsed float64) {
	if q == nil {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.ticks > 0 {
		m["qos_be_cpus"] = q.level / float64(q.ticks)
	}
	for _, k := range []string{qos.ActShrink, qos.ActGrow, qos.ActBackoff} {
		m["qos_"+k+"s_per_s"] = float64(q.acts[k]) / math.Max(elapsed, 1e-9)
	}
	if q.slice != "" {
		m["qos_slice_applied"] = 0
		if !strings.HasPrefix(q.slice, "none") {
			m["qos_slice_applied"] = 1
		}
	}
}

// qosTable is the bench report's line per controller policy: what the
// controller did while the table above measured it.
func qosTable(svc string, pts []experiment.PointResult) (Table, bool) {
	t := Table{Title: "Colocation controller actions: " + svc + " (medians of repeats)",
		Columns: []string{"policy", "BE CPUs (mean)", "shrinks/s", "grows/s", "backoffs/s", "slice"}}
	for _, p := range pts {
		pol := p.Point.Get("policy")
		if !slices.Contains(qosPolicies, pol) {
			continue
		}
		slice := NotApplicable
		if v := p.Median("qos_slice_applied"); !math.IsNaN(v) {
			slice = map[bool]string{true: "taken", false: "not taken"}[v >= 0.5]
		}
		t.Rows = append(t.Rows, []string{pol, fmtF(p.Median("qos_be_cpus")), fmtF(p.Median("qos_shrinks_per_s")),
			fmtF(p.Median("qos_grows_per_s")), fmtF(p.Median("qos_backoffs_per_s")), slice})
	}
	t.Note = "BE CPUs: the controller's mean allowance (cpuset size or quota in CPUs); a lever-only policy has none"
	return t, len(t.Rows) > 0
}

func fmtF(v float64) string { return cell("%.2f", v) }
