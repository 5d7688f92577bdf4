package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corepin/corepin/enforce"
	"github.com/corepin/corepin/experiment"
	"github.com/corepin/corepin/proc"
	"github.com/corepin/corepin/topology"
	"github.com/corepin/corepin/workload"
)

func init() { Register(func() Experiment { return &wakeupExp{} }) }

// wakeupRoutes are the BE routes of the wake-placement probe, in table
// order: no batch, SCHED_IDLE per thread, a cpu.idle group, corepin's
// idle BE parent, the lowest group weight.
var wakeupRoutes = []string{topology.RouteNone, topology.RouteSchedIdle, topology.RouteCPUIdle, topology.RouteIdleParent, topology.RouteWeight}

// wakeupAskedRoutes are measured only when a spec names them: layered
// places the batch and the service where corepin's scx_layered config
// matches them and leaves the scheduling to whatever is attached, so it
// is the fair class's idle parent route unless scx_layered runs.
var wakeupAskedRoutes = []string{topology.RouteLayered}

// wakeupLSGroup is the service's group of the layered route, under
// corepin's root (scx_layered's "ls" layer).
const wakeupLSGroup = "wake-ls"

var wakeupClasses = []string{workload.ClassNormal, workload.ClassRR, workload.ClassFIFO}

// Sizes that follow the machine: one batch thread per allowed CPU, and
// half the allowed CPUs (at least 2) as LS threads.
const (
	sizeCPUs = "cpus"
	sizeHalf = "half"
)

// wakeupThreadStart bounds the start of a batch's threads.
const wakeupThreadStart = time.Minute

// wakeupBatchLife bounds the batch of one point; the point stops it as
// soon as the probe ends.
const wakeupBatchLife = 10 * time.Minute

// wakeupSpec is the YAML-overridable spec of the wakeup experiment.
type wakeupSpec struct {
	Routes  []string `yaml:"routes" json:"routes"`
	Classes []string `yaml:"classes" json:"classes"`
	// BatchThreads are the batch sizes: counts or "cpus" (one per
	// allowed CPU); a partly busy machine stacks most.
	BatchThreads []string `yaml:"batch_threads" json:"batch_threads"`
	// LSThreads are how many LS threads wake together: counts or "half"
	// (half the allowed CPUs, at least 2).
	LSThreads []string      `yaml:"ls_threads" json:"ls_threads"`
	Period    time.Duration `yaml:"period" json:"period"`
	Burn      time.Duration `yaml:"burn" json:"burn"`
	Rounds    int           `yaml:"rounds" json:"rounds"`
	// Skipped is what this machine could not run and why, settled before
	// the run (Resolve) and recorded with it, so a rebuilt report says
	// the same.
	Skipped []Skip `yaml:"-" json:"skipped,omitempty"`
	// Inert are the routes an attached sched_ext scheduler leaves without
	// effect (topology.InertRoutes): measured, and said.
	Inert    []string `yaml:"-" json:"inert,omitempty"`
	resolved bool
}

// Skip is one route or class an experiment left out, and why.
type Skip struct {
	What   string `json:"what"`
	Reason string `json:"reason"`
}

type wakeupExp struct {
	spec wakeupSpec
	be   enforce.Driver // corepin's idle BE parent, for idle_parent
	// observe, when set (tests), sees the batch of every point once it
	// runs under its route, before the probe starts.
	observe func(route string, batch *proc.Process)
	// observeProbe, when set (tests), sees the probe of every point once
	// it started, in its group.
	observeProbe func(route string, probe *proc.Process)
}

func (e *wakeupExp) Name() string { return "wakeup" }
func (e *wakeupExp) Title() string {
	return "where the kernel wakes a service's threads beside a BE batch, per BE route and LS class"
}

func (e *wakeupExp) Spec(quick bool) any {
	e.spec = wakeupSpec{
		Routes:       slices.Clone(wakeupRoutes),
		Classes:      slices.Clone(wakeupClasses),
		BatchThreads: []string{"1", sizeCPUs},
		LSThreads:    []string{"2", sizeHalf},
		Period:       10 * time.Millisecond,
		Burn:         2 * time.Millisecond,
		Rounds:       300,
	}
	if quick {
		// fifo takes the real-time class's placement path, as rr does;
		// the full run measures it.
		e.spec.Classes = []string{workload.ClassNormal, workload.ClassRR}
		e.spec.Rounds = 25
	}
	return &e.spec
}

func (e *wakeupExp) CurrentSpec() any { return &e.spec }

func (e *wakeupExp) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: wakeup "+format, append([]any{experiment.ErrUsage}, args...)...)
	}
	for _, r := range e.spec.Routes {
		if !slices.Contains(wakeupRoutes, r) && !slices.Contains(wakeupAskedRoutes, r) {
			return bad("route %q: choose from %s", r, strings.Join(append(slices.Clone(wakeupRoutes), wakeupAskedRoutes...), ", "))
		}
	}
	for _, c := range e.spec.Classes {
		if !slices.Contains(wakeupClasses, c) {
			return bad("class %q: choose from %s", c, strings.Join(wakeupClasses, ", "))
		}
	}
	for _, s := range e.spec.BatchThreads {
		if _, err := wakeupSize(s, sizeCPUs, 4); err != nil {
			return bad("batch_threads: %v", err)
		}
	}
	for _, s := range e.spec.LSThreads {
		if _, err := wakeupSize(s, sizeHalf, 4); err != nil {
			return bad("ls_threads: %v", err)
		}
	}
	if len(e.spec.Routes) == 0 || len(e.spec.Classes) == 0 || len(e.spec.BatchThreads) == 0 || len(e.spec.LSThreads) == 0 {
		return bad("routes, classes, batch_threads and ls_threads: give at least one each")
	}
	o := workload.WakeupOptions{Threads: 1, Period: e.spec.Period, Burn: e.spec.Burn, Rounds: e.spec.Rounds, Class: workload.ClassNormal}
	if err := o.Validate(); err != nil {
		return bad("%v", err)
	}
	return nil
}

// wakeupSize resolves a size: a count of 1..MaxWakeupThreads or the
// machine-sized keyword word (cpus: one per CPU, half: half of them, at
// least 2).
func wakeupSize(s, word string, cpus int) (int, error) {
	if s == word {
		if word == sizeHalf {
			return max(2, cpus/2), nil
		}
		return cpus, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > workload.MaxWakeupThreads {
		return 0, fmt.Errorf("%q: want %s or a count of 1-%d", s, word, workload.MaxWakeupThreads)
	}
	return n, nil
}

// Resolve settles, once and before anything is recorded, what this
// machine cannot run: a real-time class without the right to it, a
// cgroup route without a writable cgroup. The answers go into the spec.
func (e *wakeupExp) Resolve(env *Env) {
	if e.spec.Routes == nil {
		e.Spec(env.Quick)
	}
	e.spec.Skipped, e.spec.Inert = nil, nil
	for _, c := range e.spec.Classes {
		if c == workload.ClassNormal {
			continue
		}
		if err := probeClass(c); err != nil {
			e.spec.Skipped = append(e.spec.Skipped, Skip{What: "ls_class " + c, Reason: classSkipReason(err)})
		}
	}
	for _, r := range e.spec.Routes {
		if err := e.probeRoute(env, r); err != nil {
			e.spec.Skipped = append(e.spec.Skipped, Skip{What: "be_route " + r, Reason: err.Error()})
		}
	}
	if s, err := topology.OpenScheduler("/"); err == nil {
		for _, r := range s.InertRoutes {
			if slices.Contains(e.spec.Routes, r) {
				e.spec.Inert = append(e.spec.Inert, r)
			}
		}
	}
	e.spec.resolved = true
}

// probeClass tries class on a thread of its own, which then ends.
func probeClass(class string) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the probed thread ends here
		errc <- workload.SetClass(class)
	}()
	return <-errc
}

func classSkipReason(err error) string {
	if errors.Is(err, unix.EPERM) {
		var lim unix.Rlimit
		rt := "unknown"
		if unix.Getrlimit(unix.RLIMIT_RTPRIO, &lim) == nil {
			rt = strconv.FormatUint(lim.Cur, 10)
		}
		return fmt.Sprintf("real-time priority 1 needs CAP_SYS_NICE (root) or RLIMIT_RTPRIO >= 1 (ulimit -r is %s here)", rt)
	}
	return err.Error()
}

// probeRoute says why route cannot run here, or nil. The cgroup routes
// make (and remove) a group with the route's settings.
func (e *wakeupExp) probeRoute(env *Env, route string) error {
	if route == topology.RouteNone || route == topology.RouteSchedIdle {
		return nil
	}
	if env.Driver == nil || env.Driver.Name() == enforce.NameAffinity {
		return errors.New("needs a writable cgroup (root); corepin runs without one here (affinity driver)")
	}
	if route == topology.RouteLayered && env.Driver.Name() != enforce.NameV2 {
		return fmt.Errorf("needs cgroup v2 (scx_layered matches a task's cgroup v2 path); corepin runs on %s here", env.Driver.Name())
	}
	d, res, err := e.routeGroup(env, route)
	if err != nil {
		return err
	}
	g, err := d.Create("wake-probe", res)
	if err != nil {
		return fmt.Errorf("making its group: %w", err)
	}
	if err := g.Remove(); err != nil || route != topology.RouteLayered {
		return err
	}
	if g, err = env.Driver.Create(wakeupLSGroup, enforce.Resources{}); err != nil {
		return fmt.Errorf("making the service's group: %w", err)
	}
	return g.Remove()
}

// routeGroup is where route puts the batch: its driver and settings.
// idle_parent is corepin's own BE layout (idleBERoot), as colocation's
// corepin policy runs it, and so is layered (the idle parent is the
// group scx_layered's "be" layer matches); weight is the lowest weight
// enforce writes (cpu.weight 1, the kubelet's BestEffort value; cgroup v1
// cpu.shares 10).
func (e *wakeupExp) routeGroup(env *Env, route string) (enforce.Driver, enforce.Resources, error) {
	switch route {
	case topology.RouteCPUIdle:
		return env.Driver, enforce.Resources{Idle: true}, nil
	case topology.RouteWeight:
		return env.Driver, enforce.Resources{Weight: 1}, nil
	case topology.RouteIdleParent, topology.RouteLayered:
		if e.be == nil {
			be, err := idleBERoot()
			if err != nil {
				return nil, enforce.Resources{}, err
			}
			e.be = be
		}
		return e.be, enforce.Resources{Idle: true}, nil
	}
	return nil, enforce.Resources{}, nil
}

func (e *wakeupExp) skipped(what string) bool {
	return slices.ContainsFunc(e.spec.Skipped, func(s Skip) bool { return s.What == what })
}

func (e *wakeupExp) Setup(_ context.Context, env *Env) error {
	if e.spec.Routes == nil {
		e.Spec(env.Quick)
	}
	if err := e.validate(); err != nil {
		return err
	}
	if env.Exe == "" {
		return errors.New("wakeup needs corepin's own binary (Env.Exe) to run the probe and the batch")
	}
	if !e.spec.resolved {
		e.Resolve(env)
	}
	return nil
}

func (e *wakeupExp) Teardown(*Env) error { return nil }

func (e *wakeupExp) Points(env *Env) []experiment.Point {
	if e.spec.Routes == nil {
		e.Spec(env.Quick)
	}
	cpus := allowedCPUs(env)
	sizes := func(ss []string, word string) []int {
		var out []int
		for _, s := range ss {
			if n, err := wakeupSize(s, word, cpus); err == nil && !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
		return out
	}
	var ps []experiment.Point
	for _, r := range e.spec.Routes {
		if e.skipped("be_route " + r) {
			continue
		}
		batches := sizes(e.spec.BatchThreads, sizeCPUs)
		if r == topology.RouteNone {
			batches = []int{0}
		}
		for _, c := range e.spec.Classes {
			if e.skipped("ls_class " + c) {
				continue
			}
			for _, b := range batches {
				for _, n := range sizes(e.spec.LSThreads, sizeHalf) {
					ps = append(ps, experiment.P("be_route", r, "ls_class", c, "batch_threads", b, "ls_threads", n))
				}
			}
		}
	}
	return ps
}

func (e *wakeupExp) Run(ctx context.Context, env *Env, p experiment.Point) (experiment.Metrics, error) {
	route, class := p.Get("be_route"), p.Get("ls_class")
	nb, err1 := strconv.Atoi(p.Get("batch_threads"))
	nls, err2 := strconv.Atoi(p.Get("ls_threads"))
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("reading point %s: %w", p.Label(), err)
	}
	var batch *proc.Process
	if route != topology.RouteNone {
		b, err := e.startBatch(ctx, env, route, nb)
		if b != nil {
			defer b.stop(env)
		}
		if err != nil {
			return nil, err
		}
		batch = b.p
		if e.observe != nil {
			e.observe(route, batch)
		}
	}
	spec := proc.Spec{Argv: append([]string{env.Exe}, workload.WakeupArgs(workload.WakeupOptions{Threads: nls,
		Period: e.spec.Period, Burn: e.spec.Burn, Rounds: e.spec.Rounds, Class: class})...), TailBytes: proc.MaxTail}
	// The probe runs where corepin bench runs, in no group of its own: a
	// real-time class cannot run in a fresh cgroup-v1 cpu group (its
	// cpu.rt_runtime_us is 0 under RT_GROUP_SCHED), and every class is
	// measured from the same place. So the batch's group meets the
	// service's tasks where corepin's root meets the bench's own group:
	// cpu_idle (a group inside corepin's root) is ranked there as that
	// root is, which is what idle_parent changes. The layered route is
	// the exception: its service runs in a group under corepin's root, the
	// group scx_layered's "ls" layer matches.
	if route == topology.RouteLayered {
		spec.Driver, spec.Group = env.Driver, wakeupLSGroup
	}
	var batchBefore time.Duration
	if batch != nil {
		batchBefore, _ = procCPU(batch.Pid())
	}
	ls, err := proc.Start(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("starting the probe: %w", err)
	}
	if e.observeProbe != nil {
		e.observeProbe(route, ls)
	}
	x, err := ls.Wait()
	if err != nil {
		return nil, fmt.Errorf("the probe: %w", err)
	}
	if x.Code != 0 {
		return nil, fmt.Errorf("the probe: exit %d%s: %s", x.Code, signalNote(x.Signal), strings.TrimSpace(x.Stderr))
	}
	m := experiment.Metrics{}
	if batch != nil {
		after, err := procCPU(batch.Pid())
		if err != nil {
			return nil, fmt.Errorf("reading the batch's CPU time: %w", err)
		}
		m["batch_cpus"] = (after - batchBefore).Seconds() / x.Result.Wall.Seconds()
		m["be_share_of_idle"] = beShareOfIdle(after-batchBefore, x.Result.User+x.Result.Sys, x.Result.Wall, allowedCPUs(env))
	}
	var res workload.WakeupResult
	if err := json.Unmarshal([]byte(x.Stdout), &res); err != nil {
		return nil, fmt.Errorf("reading the probe's result: %w", err)
	}
	cpus := allCPUs(env)
	r := analyzeWakeRounds(res, cpus)
	m["stacked_pct"] = r.StackedPct
	m["runq_wait_p50_us"] = r.WaitP50US
	m["runq_wait_p99_us"] = r.WaitP99US
	m["rounds"] = float64(r.Rounds)
	m["ls_cpus"] = float64(res.CPUNS) / float64(max(res.WallNS, 1))
	return m, nil
}

// wakeBatch is one point's batch and the groups it was put in.
type wakeBatch struct {
	p     *proc.Process
	route string
	g     enforce.Group
}

// startBatch starts the batch of route: one spin process of n threads,
// started as plain work and, once its threads exist, put under the route:
// every thread in SCHED_IDLE, or the process moved into the route's
// group. Starting it plain keeps a machine whose CPUs are busy from
// starving the batch's start. The returned batch is set whenever a
// process started, so the caller stops it on error too.
func (e *wakeupExp) startBatch(ctx context.Context, env *Env, route string, n int) (*wakeBatch, error) {
	p, err := proc.Start(ctx, proc.Spec{Argv: append([]string{env.Exe}, workload.SpinArgs(wakeupBatchLife, strconv.Itoa(n))...)})
	if err != nil {
		return nil, fmt.Errorf("starting the batch: %w", err)
	}
	b := &wakeBatch{p: p, route: route}
	// The spinning threads (and the runtime's) exist within
	// milliseconds; wait for them so the route reaches every one. The
	// bound is for a batch that never starts them: a 16-vCPU machine
	// under qemu's software emulation, every vCPU spinning, took over
	// 5 s (make e2e-vm's 2 sockets x 4 cores x SMT2).
	if err := waitThreads(ctx, p, n+1, wakeupThreadStart); err != nil {
		return b, err
	}
	if route == topology.RouteSchedIdle {
		if err := enforce.SetThreadSched(p.Pid(), enforce.ThreadSched{Idle: true}); err != nil {
			return b, fmt.Errorf("setting SCHED_IDLE on the batch: %w", err)
		}
		return b, nil
	}
	d, res, err := e.routeGroup(env, route)
	if err != nil {
		return b, err
	}
	if b.g, err = d.Create("wake-batch", res); err != nil {
		return b, fmt.Errorf("making the batch's group: %w", err)
	}
	if err := b.g.AddProc(p.Pid()); err != nil {
		return b, fmt.Errorf("moving the batch into %s: %w", b.g.Name(), err)
	}
	return b, nil
}

// stop ends the batch at once: it first takes the batch off its route (a
// starved batch would take long to run its exit), then SIGKILLs it (it has
// nothing to save) and removes its groups.
func (b *wakeBatch) stop(env *Env) {
	var out enforce.Group
	switch {
	case b.route == topology.RouteSchedIdle:
		_ = enforce.SetThreadSched(b.p.Pid(), enforce.ThreadSched{})
	case b.g != nil:
		if g, err := env.Driver.Create("wake-batch-end", enforce.Resources{}); err == nil {
			out = g
			_ = out.AddProc(b.p.Pid())
		}
	}
	_, _ = b.p.Stop(0)
	for _, g := range []enforce.Group{b.g, out} {
		if g != nil {
			_ = enforce.RemoveWhenEmpty(g, 5*time.Second)
		}
	}
}

// waitThreads polls until process p has at least n threads.
func waitThreads(ctx context.Context, p *proc.Process, n int, timeout time.Duration) error {
	dir := fmt.Sprintf("/proc/%d/task", p.Pid())
	deadline := time.Now().Add(timeout)
	for {
		es, err := os.ReadDir(dir)
		if err == nil && len(es) >= n {
			return nil
		}
		select {
		case <-p.Done():
			return fmt.Errorf("the batch ended before it ran: %v", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the batch did not start %d threads within %v", n, timeout)
		}
	}
}
