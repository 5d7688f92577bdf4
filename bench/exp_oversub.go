package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/corepin/corepin/enforce"
	"github.com/corepin/corepin/experiment"
	"github.com/corepin/corepin/netbench"
)

// Kinds of process the oversubscription experiment runs.
const (
	// OversubLoopback is ping-pong pairs over the loopback interface of
	// corepin's own network namespace.
	OversubLoopback = "pingpong-loopback"
	// OversubVeth is ping-pong pairs whose server runs in one network
	// namespace and client in another, joined by a veth pair: the path
	// between two containers on one host.
	OversubVeth = "pingpong-veth"
	// OversubCompute is compute-only processes (fixed integer work).
	OversubCompute = "compute"
)

var oversubKinds = []string{OversubLoopback, OversubVeth, OversubCompute}

// oversubSpec is the YAML-overridable spec of the oversubscription
// experiment.
type oversubSpec struct {
	// ProcsPerCPU are the oversubscription levels: processes per allowed CPU.
	ProcsPerCPU []int `yaml:"procs_per_cpu" json:"procs_per_cpu"`
	// Kinds are the process kinds measured (oversubKinds).
	Kinds []string `yaml:"kinds" json:"kinds"`
	// PointSeconds is the target length of one point. The work is
	// calibrated at setup so that the 1-process-per-CPU point takes this
	// long; every point does the same total work.
	PointSeconds float64 `yaml:"point_seconds" json:"point_seconds"`
	// Messages is the round trips per pair at 1 process per CPU (0:
	// calibrate); at k processes per CPU each pair does Messages/k.
	Messages int64 `yaml:"messages" json:"messages"`
	// Ops is the compute ops per process at 1 process per CPU (0:
	// calibrate); at k processes per CPU each process does Ops/k.
	Ops int64 `yaml:"ops" json:"ops"`
	// Size is the ping-pong message size in bytes.
	Size int `yaml:"size" json:"size"`
	// Placements are where each ping-pong pair's two ranks run: "os" (the
	// scheduler decides), "together" (both pinned to one CPU) or "apart"
	// (pinned to two CPUs half the machine apart). Compute processes are
	// always left to the scheduler.
	Placements []string `yaml:"placements" json:"placements"`
}

// Ping-pong pair placements.
const (
	PlaceOS       = "os"
	PlaceTogether = "together"
	PlaceApart    = "apart"
)

var oversubPlacements = []string{PlaceOS, PlaceTogether, PlaceApart}

// oversubExp runs communication-heavy process pairs and compute-only
// processes at 1 to 4 processes per CPU: the HPC containers studies'
// oversubscription experiment.
type oversubExp struct {
	spec oversubSpec
	// cpus is the number of CPUs corepin may use.
	cpus int
	veth *netbench.VethPair
	// vethSkip says why pingpong-veth is not measured ("" if it is).
	vethSkip string
	// work is the work per unit (pair or compute process) at 1 process
	// per CPU, by kind.
	work map[string]int64
	// pin pins ranks to one CPU each (sched_setaffinity, as taskset did),
	// through proc.
	pin enforce.Driver
}

func init() { Register(func() Experiment { return newOversubExp() }) }

func newOversubExp() *oversubExp {
	e := &oversubExp{}
	e.Spec(false)
	return e
}

func (e *oversubExp) Name() string { return "oversubscription" }
func (e *oversubExp) Title() string {
	return "communication-heavy process pairs vs compute-only processes, 1-4 per CPU"
}

// Spec returns the defaults: 1-4 processes per CPU and 3 s points, or for
// quick runs 1, 2 and 4 per CPU and ~1.2 s points (9 points x 5 repeats,
// about 70 s with setup).
func (e *oversubExp) Spec(quick bool) any {
	e.spec = oversubSpec{
		ProcsPerCPU:  []int{1, 2, 3, 4},
		Kinds:        slices.Clone(oversubKinds),
		PointSeconds: 3,
		Size:         netbench.DefaultSize,
		Placements:   slices.Clone(oversubPlacements),
	}
	if quick {
		e.spec.ProcsPerCPU = []int{1, 2, 4}
		e.spec.PointSeconds = 1.2
	}
	return &e.spec
}

func (e *oversubExp) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: oversubscription: "+format, append([]any{experiment.ErrUsage}, args...)...)
	}
	if len(e.spec.ProcsPerCPU) == 0 || len(e.spec.Kinds) == 0 {
		return bad("procs_per_cpu and kinds must not be empty")
	}
	for _, k := range e.spec.ProcsPerCPU {
		if k < 1 {
			return bad("procs_per_cpu %d: want >= 1", k)
		}
	}
	for _, k := range e.spec.Kinds {
		if !slices.Contains(oversubKinds, k) {
			return bad("unknown kind %q: choose from %s", k, strings.Join(oversubKinds, ", "))
		}
	}
	for _, p := range e.spec.Placements {
		if !slices.Contains(oversubPlacements, p) {
			return bad("unknown placement %q: choose from %s", p, strings.Join(oversubPlacements, ", "))
		}
	}
	if e.spec.PointSeconds <= 0 || e.spec.Messages < 0 || e.spec.Ops < 0 || e.spec.Size < 1 {
		return bad("point_seconds, size must be > 0 and messages, ops >= 0")
	}
	return nil
}

// Setup checks the spec, creates the veth pair when pingpong-veth is asked
// for (skipping that kind, with the reason, where it cannot be made), and
// calibrates the work of every kind.
func (e *oversubExp) Setup(ctx context.Context, env *Env) error {
	if err := e.validate(); err != nil {
		return err
	}
	if env.Exe == "" {
		return errors.New("oversubscription needs corepin's own binary (Env.Exe) to launch ranks")
	}
	e.cpus = allowedCPUs(env)
	e.work = map[string]int64{}
	if pin, err := enforce.NewAffinity(); err == nil {
		e.pin = pin
	} else {
		env.Logf("oversubscription: pairs are not pinned: %v", err)
	}
	e.vethSkip = ""
	if slices.Contains(e.spec.Kinds, OversubVeth) {
		if removed, err := netbench.RemoveStale(ctx); err == nil && len(removed) > 0 {
			env.Logf("oversubscription: removed stale namespaces %s", strings.Join(removed, ", "))
		}
		v, err := netbench.NewVethPair(ctx, "ov")
		if err != nil {
			e.vethSkip = err.Error()
			env.Logf("oversubscription: skipping %s: %v", OversubVeth, err)
		} else {
			e.veth = v
		}
	}
	for _, kind := range e.kinds() {
		w, err := e.calibrate(ctx, env, kind)
		if err != nil {
			if kind == OversubVeth {
				e.vethSkip = fmt.Sprintf("calibrating failed: %v", err)
				env.Logf("oversubscription: skipping %s: %v", OversubVeth, err)
				e.closeVeth(env)
				continue
			}
			e.closeVeth(env)
			return fmt.Errorf("calibrating %s: %w", kind, err)
		}
		e.work[kind] = w
		env.Logf("oversubscription: %s: %d %s per %s at 1 process per CPU", kind, w, unitWork(kind), unitName(kind))
	}
	return nil
}

// Teardown removes the veth pair and its namespaces.
func (e *oversubExp) Teardown(env *Env) error { return e.closeVeth(env) }

func (e *oversubExp) closeVeth(env *Env) error {
	if e.veth == nil {
		return nil
	}
	err := e.veth.Close()
	e.veth = nil
	return err
}

// kinds returns the kinds this run measures, in spec order.
func (e *oversubExp) kinds() []string {
	var out []string
	for _, k := range e.spec.Kinds {
		if k == OversubVeth && e.veth == nil {
			continue
		}
		out = append(out, k)
	}
	return out
}

func allowedCPUs(env *Env) int {
	if env.Topo != nil {
		if n := env.Topo.Allowed().Size(); n > 0 {
			return n
		}
	}
	return runtime.NumCPU()
}

// oversubProcs is the number of processes of a point: k per CPU; ping-pong
// runs whole pairs (at least one).
func oversubProcs(kind string, k, cpus int) int {
	n := k * cpus
	if kind == OversubCompute {
		return n
	}
	return 2 * max(1, n/2)
}

func (e *oversubExp) Points(env *Env) []experiment.Point {
	cpus := e.cpus
	if cpus == 0 {
		cpus = allowedCPUs(env)
	}
	var ps []experiment.Point
	for _, kind := range e.kinds() {
		for _, k := range e.spec.ProcsPerCPU {
			for _, pl := range e.placements(env, kind, cpus) {
				ps = append(ps, experiment.P("kind", kind, "procs_per_cpu", k, "procs", oversubProcs(kind, k, cpus), "placement", pl))
			}
		}
	}
	return ps
}

// placements are the pair placements measured for kind: compute and
// machines where pinning can't be done (one CPU, no topology, no affinity
// driver)
// get "os" only.
func (e *oversubExp) placements(env *Env, kind string, cpus int) []string {
	if kind == OversubCompute || cpus < 2 || env.Topo == nil {
		return []string{PlaceOS}
	}
	if e.pin == nil {
		return []string{PlaceOS}
	}
	out := slices.Clone(e.spec.Placements)
	if len(out) == 0 {
		out = []string{PlaceOS}
	}
	return out
}

// Run launches the point's processes all at once (after a start barrier)
// and measures the slowest one's wall time and the aggregate throughput.
func (e *oversubExp) Run(ctx context.Context, env *Env, p experiment.Point) (experiment.Metrics, error) {
	kind := p.Get("kind")
	k, err := strconv.Atoi(p.Get("procs_per_cpu"))
	if err != nil || k < 1 {
		return nil, fmt.Errorf("point %s: bad procs_per_cpu", p.Label())
	}
	procs, err := strconv.Atoi(p.Get("procs"))
	if err != nil || procs < 1 {
		return nil, fmt.Errorf("point %s: bad procs", p.Label())
	}
	w, ok := e.work[kind]
	if !ok {
		return nil, fmt.Errorf("point %s: kind not set up", p.Label())
	}
	timeout := 30*time.Second + time.Duration(30*e.spec.PointSeconds*float64(time.Second))
	return e.runGroup(ctx, env, kind, p.Get("placement"), procs, max(1, w/int64(k)), timeout)
}

// calibrate returns the work per unit that makes the 1-process-per-CPU
// point of kind last PointSeconds, or the spec's fixed work.
func (e *oversubExp) calibrate(ctx context.Context, env *Env, kind string) (int64, error) {
	fixed, w := e.spec.Ops, int64(20000)
	if kind != OversubCompute {
		fixed, w = e.spec.Messages, 1000
	}
	procs := oversubProcs(kind, 1, e.cpus)
	// Even a fixed work is run once: it checks the kind works here.
	if fixed > 0 {
		_, err := e.runGroup(ctx, env, kind, PlaceOS, procs, min(fixed, w), time.Minute)
		return fixed, err
	}
	target := min(0.3, e.spec.PointSeconds/2)
	for range 6 {
		m, err := e.runGroup(ctx, env, kind, PlaceOS, procs, w, time.Minute)
		if err != nil {
			return 0, err
		}
		wall := m["wall_s"]
		if wall >= target {
			return max(1, int64(float64(w)*e.spec.PointSeconds/wall)), nil
		}
		w = int64(float64(w) * min(20, 1.5*target/max(wall, 1e-6)))
	}
	return 0, errors.New("work did not reach the calibration time")
}

func unitName(kind string) string {
	if kind == OversubCompute {
		return "process"
	}
	return "pair"
}

func unitWork(kind string) string {
	if kind == OversubCompute {
		return "ops"
	}
	return "round trips"
}

// CurrentSpec returns the spec as configured.
func (e *oversubExp) CurrentSpec() any { return &e.spec }
