package bench

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

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
		return fmt.Errorf("%w: oversubscription: "+format, append([]any{ErrUsage}, args...)...)
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

func (e *oversubExp) Points(env *Env) []Point {
	cpus := e.cpus
	if cpus == 0 {
		cpus = allowedCPUs(env)
	}
	var ps []Point
	for _, kind := range e.kinds() {
		for _, k := range e.spec.ProcsPerCPU {
			for _, pl := range e.placements(env, kind, cpus) {
				ps = append(ps, P("kind", kind, "procs_per_cpu", k, "procs", oversubProcs(kind, k, cpus), "placement", pl))
			}
		}
	}
	return ps
}

// placements are the pair placements measured for kind: compute and
// machines where pinning can't be done (one CPU, no topology, no taskset)
// get "os" only.
func (e *oversubExp) placements(env *Env, kind string, cpus int) []string {
	if kind == OversubCompute || cpus < 2 || env.Topo == nil {
		return []string{PlaceOS}
	}
	if _, err := exec.LookPath("taskset"); err != nil {
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
func (e *oversubExp) Run(ctx context.Context, env *Env, p Point) (Metrics, error) {
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

// ovProc is one launched rank process.
type ovProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	out    *bufio.Reader
	stderr *lockedBuffer
	once   sync.Once
	err    error
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() < 4096 {
		l.b.Write(p[:min(len(p), 4096-l.b.Len())])
	}
	return len(p), nil
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.TrimSpace(l.b.String())
}

func startProc(ctx context.Context, argv []string) (*ovProc, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	// One OS thread runs Go code: a rank is single-threaded, and idle Ps
	// would spin looking for work on CPUs the other ranks need.
	cmd.Env = append(os.Environ(), "GOMAXPROCS=1")
	cmd.WaitDelay = 2 * time.Second
	p := &ovProc{cmd: cmd, stderr: &lockedBuffer{}}
	cmd.Stderr = p.stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", argv[0], err)
	}
	p.stdin, p.out = stdin, bufio.NewReader(stdout)
	return p, nil
}

// line reads the next JSON line of p into v.
func (p *ovProc) line(v any) error {
	s, err := p.out.ReadString('\n')
	if err != nil {
		werr := p.wait()
		return fmt.Errorf("%s: no output (%v, exit: %v): %s", strings.Join(p.cmd.Args, " "), err, werr, p.stderr.String())
	}
	if err := json.Unmarshal([]byte(s), v); err != nil {
		return fmt.Errorf("parsing output %q: %w", strings.TrimSpace(s), err)
	}
	return nil
}

func (p *ovProc) wait() error {
	p.once.Do(func() { p.err = p.cmd.Wait() })
	return p.err
}

func (p *ovProc) stop() {
	if p.cmd.ProcessState == nil {
		_ = p.cmd.Process.Kill()
	}
	_ = p.wait()
}

// runGroup runs procs processes of kind, each unit doing work, and returns
// the point's metrics.
func (e *oversubExp) runGroup(ctx context.Context, env *Env, kind, placement string, procs int, work int64, timeout time.Duration) (m Metrics, err error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var all, units []*ovProc
	defer func() {
		for _, p := range all {
			p.stop()
		}
	}()
	launch := func(argv []string) (*ovProc, error) {
		p, err := startProc(ctx, argv)
		if err != nil {
			return nil, err
		}
		all = append(all, p)
		return p, nil
	}
	exe := env.Exe
	switch kind {
	case OversubCompute:
		for range procs {
			p, err := launch([]string{exe, "pingpong", "compute", "--ops", strconv.FormatInt(work, 10), "--wait-stdin", "-o", "json"})
			if err != nil {
				return nil, err
			}
			units = append(units, p)
		}
	case OversubLoopback, OversubVeth:
		listen, srvWrap, cliWrap := "127.0.0.1:0", noWrap, noWrap
		if kind == OversubVeth {
			if e.veth == nil {
				return nil, errors.New("no veth pair")
			}
			listen = netbench.VethAddrA.String() + ":0"
			nsa, nsb := e.veth.NSA, e.veth.NSB
			srvWrap = func(a []string) []string { return netbench.Exec(nsa, a...) }
			cliWrap = func(a []string) []string { return netbench.Exec(nsb, a...) }
		}
		var cpuList []int // pinning targets; none for the os placement
		if placement != PlaceOS && placement != "" && env.Topo != nil {
			cpuList = env.Topo.Allowed().List()
		}
		for i := range procs / 2 {
			srvCPU, cliCPU := pairCPUs(cpuList, i, placement)
			srv, err := launch(srvWrap(pinned(srvCPU, []string{exe, "pingpong", "server", "--listen", listen, "--conns", "1", "-o", "json"})))
			if err != nil {
				return nil, err
			}
			var ready struct {
				Listen string `json:"listen"`
			}
			if err := srv.line(&ready); err != nil {
				return nil, fmt.Errorf("starting echo server: %w", err)
			}
			cli, err := launch(cliWrap(pinned(cliCPU, []string{exe, "pingpong", "client", "--connect", ready.Listen,
				"--messages", strconv.FormatInt(work, 10), "--size", strconv.Itoa(e.spec.Size), "--wait-stdin", "-o", "json"})))
			if err != nil {
				return nil, err
			}
			units = append(units, cli)
		}
	default:
		return nil, fmt.Errorf("unknown kind %q", kind)
	}
	// Start barrier: every unit is connected and waiting, then all go.
	for _, u := range units {
		var r struct {
			Ready bool `json:"ready"`
		}
		if err := u.line(&r); err != nil {
			return nil, err
		}
	}
	// The point's wall time runs from releasing the barrier to the last
	// result: it includes the time a released process waits for a CPU,
	// which the processes' own timers (started once they run) miss.
	busy0, busyErr := cpuBusy(env)
	t0 := time.Now()
	for _, u := range units {
		_, _ = io.WriteString(u.stdin, "go\n")
		_ = u.stdin.Close()
	}
	type result struct {
		RoundTrips int64   `json:"round_trips"`
		Ops        int64   `json:"ops"`
		RTTP50US   float64 `json:"rtt_p50_us"`
		RTTP99US   float64 `json:"rtt_p99_us"`
	}
	var total float64
	var p50s, p99s []float64
	for _, u := range units {
		var r result
		if err := u.line(&r); err != nil {
			return nil, err
		}
		total += float64(r.RoundTrips + r.Ops)
		p50s = append(p50s, r.RTTP50US)
		p99s = append(p99s, r.RTTP99US)
	}
	wall := time.Since(t0).Seconds()
	var ours float64
	for _, p := range all {
		if err := p.wait(); err != nil {
			return nil, fmt.Errorf("%s: %w: %s", strings.Join(p.cmd.Args, " "), err, p.stderr.String())
		}
		ours += (p.cmd.ProcessState.UserTime() + p.cmd.ProcessState.SystemTime()).Seconds()
	}
	busy1, busyErr1 := cpuBusy(env)
	m = Metrics{
		"wall_s":    wall,
		"ops_per_s": total / wall,
		// Per unit (compute process or ping-pong pair) over the whole
		// point, so it is the aggregate's share, never more than a
		// unit got.
		"per_proc_ops_per_s": total / wall / float64(len(units)),
	}
	// Busy time of the allowed CPUs that was not ours (other work on a
	// shared machine): it biases every ratio, so it is recorded. The
	// window is a little longer than wall (it includes the exits).
	if busyErr == nil && busyErr1 == nil {
		m["other_cpu_frac"] = max(0, busy1-busy0-ours) / (wall * float64(allowedCPUs(env)))
	}
	if kind != OversubCompute {
		m["rtt_p50_us"] = Median(p50s)
		m["rtt_p99_us"] = slices.Max(p99s)
	}
	return m, nil
}

func noWrap(a []string) []string { return a }

// pairCPUs returns the CPUs pair i's server and client are pinned to (-1:
// not pinned): together on one CPU, or apart, half the CPU list away (on a
// usual machine another core, L3 or socket).
func pairCPUs(cpus []int, i int, placement string) (int, int) {
	n := len(cpus)
	switch {
	case n == 0 || placement == PlaceOS || placement == "":
		return -1, -1
	case placement == PlaceTogether:
		return cpus[i%n], cpus[i%n]
	default:
		return cpus[i%n], cpus[(i%n+n/2)%n]
	}
}

// pinned prefixes argv with taskset to run it on cpu (util-linux), or
// returns it unchanged for cpu < 0.
func pinned(cpu int, argv []string) []string {
	if cpu < 0 {
		return argv
	}
	return append([]string{"taskset", "-c", strconv.Itoa(cpu)}, argv...)
}

// clockTicks is USER_HZ, the unit of /proc/stat: 100 on every Linux
// architecture corepin supports (proc(5)).
const clockTicks = 100

// cpuBusy returns the busy seconds (user, nice, system, irq, softirq,
// steal) of corepin's allowed CPUs since boot, from /proc/stat (proc(5)).
func cpuBusy(env *Env) (float64, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	var ticks uint64
	found := false
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) < 9 || !strings.HasPrefix(f[0], "cpu") || f[0] == "cpu" {
			continue
		}
		cpu, err := strconv.Atoi(f[0][3:])
		if err != nil {
			continue
		}
		if env.Topo != nil && !env.Topo.Allowed().IsEmpty() && !env.Topo.Allowed().Contains(cpu) {
			continue
		}
		for _, i := range []int{1, 2, 3, 6, 7, 8} {
			v, err := strconv.ParseUint(f[i], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parsing /proc/stat %s: %w", f[0], err)
			}
			ticks += v
		}
		found = true
	}
	if !found {
		return 0, errors.New("no per-CPU lines in /proc/stat")
	}
	return float64(ticks) / clockTicks, nil
}

// ratio is a within-run ratio of a point to its baseline: of the medians,
// with the min and max of the ratios of repeats paired by round.
type ratio struct {
	med, lo, hi float64
	ok          bool
}

func ratioOf(pr, base PointResult, metric string) ratio {
	num, den := pr.Median(metric), base.Median(metric)
	if math.IsNaN(num) || math.IsNaN(den) || den == 0 {
		return ratio{}
	}
	r := ratio{med: num / den, lo: math.Inf(1), hi: math.Inf(-1), ok: true}
	a, b := pr.Values(metric), base.Values(metric)
	for i := range min(len(a), len(b)) {
		if b[i] != 0 {
			r.lo, r.hi = min(r.lo, a[i]/b[i]), max(r.hi, a[i]/b[i])
		}
	}
	if math.IsInf(r.lo, 0) {
		r.lo, r.hi = r.med, r.med
	}
	return r
}

func (r ratio) String() string {
	if !r.ok {
		return "-"
	}
	return fmt.Sprintf("%.2f (%.2f-%.2f)", r.med, r.lo, r.hi)
}

// oversubData indexes measured points by kind and procs per CPU.
type oversubData struct {
	kinds []string
	ks    []int
	at    map[string]map[int]PointResult
}

func indexOversub(order []string, pts []PointResult) oversubData {
	d := oversubData{at: map[string]map[int]PointResult{}}
	for _, pr := range pts {
		if len(pr.Repeats) == 0 {
			continue
		}
		if pl := pr.Point.Get("placement"); pl != "" && pl != PlaceOS {
			continue // placement comparisons have their own table
		}
		k, err := strconv.Atoi(pr.Point.Get("procs_per_cpu"))
		if err != nil {
			continue
		}
		kind := pr.Point.Get("kind")
		if d.at[kind] == nil {
			d.at[kind] = map[int]PointResult{}
			d.kinds = append(d.kinds, kind)
		}
		d.at[kind][k] = pr
		if !slices.Contains(d.ks, k) {
			d.ks = append(d.ks, k)
		}
	}
	slices.Sort(d.ks)
	rank := func(kind string) int {
		if i := slices.Index(order, kind); i >= 0 {
			return i
		}
		return len(order)
	}
	slices.SortStableFunc(d.kinds, func(a, b string) int { return cmp.Compare(rank(a), rank(b)) })
	return d
}

// base is the baseline point of kind: 1 process per CPU, else the lowest
// level measured.
func (d oversubData) base(kind string) (int, PointResult, bool) {
	for _, k := range d.ks {
		if pr, ok := d.at[kind][k]; ok {
			return k, pr, true
		}
	}
	return 0, PointResult{}, false
}

func (d oversubData) rel(kind string, k int, metric string) ratio {
	_, base, ok := d.base(kind)
	pr, ok2 := d.at[kind][k]
	if !ok || !ok2 {
		return ratio{}
	}
	return ratioOf(pr, base, metric)
}

func (e *oversubExp) Analyze(_ *Env, pts []PointResult) Analysis {
	d := indexOversub(e.spec.Kinds, pts)
	var a Analysis
	if len(d.kinds) == 0 {
		a.Recommendation = "No point was measured: nothing to conclude."
		return a
	}
	header := []string{"kind"}
	for _, k := range d.ks {
		header = append(header, fmt.Sprintf("%d/CPU", k))
	}
	note := ""
	if slices.Contains(e.spec.Kinds, OversubVeth) && d.at[OversubVeth] == nil {
		if e.vethSkip != "" {
			note = fmt.Sprintf("%s not measured: %s", OversubVeth, e.vethSkip)
		} else {
			note = fmt.Sprintf("%s not measured in this run (it needs root and iproute2's ip)", OversubVeth)
		}
	}
	per := Table{Title: "Throughput per process relative to 1 process per CPU, median (min-max of paired repeats); fair share = 1/k",
		Columns: header, Note: note}
	agg := Table{Title: "Aggregate throughput relative to 1 process per CPU (1.00: oversubscription costs nothing)", Columns: header}
	lineChart := Chart{Kind: ChartLine, Title: "Throughput per process vs oversubscription (relative to 1 process per CPU)",
		XLabel: "processes per CPU", YLabel: "relative throughput per process"}
	aggChart := Chart{Kind: ChartLine, Title: "Aggregate throughput vs oversubscription (relative to 1 process per CPU)",
		XLabel: "processes per CPU", YLabel: "relative aggregate throughput"}
	box := Chart{Kind: ChartBox, Title: "Wall time of the slowest process per point", XLabel: "processes per CPU", YLabel: "wall_s"}
	for _, k := range d.ks {
		box.XLabels = append(box.XLabels, strconv.Itoa(k))
	}
	fair := []string{"fair share"}
	fairS := Series{Name: "fair share (1/k)"}
	for _, k := range d.ks {
		fair = append(fair, fmt.Sprintf("%.2f", 1/float64(k)))
		fairS.X, fairS.Y = append(fairS.X, float64(k)), append(fairS.Y, 1/float64(k))
	}
	for _, kind := range d.kinds {
		baseK, _, _ := d.base(kind)
		prow, arow := []string{kind}, []string{kind}
		ps, as := Series{Name: kind}, Series{Name: kind}
		bs := Series{Name: kind}
		for _, k := range d.ks {
			rp, ra := d.rel(kind, k, "per_proc_ops_per_s"), d.rel(kind, k, "ops_per_s")
			prow, arow = append(prow, rp.String()), append(arow, ra.String())
			if rp.ok {
				ps.X, ps.Y = append(ps.X, float64(k)), append(ps.Y, rp.med)
			}
			if ra.ok {
				as.X, as.Y = append(as.X, float64(k)), append(as.Y, ra.med)
			}
			bs.Values = append(bs.Values, d.at[kind][k].Values("wall_s"))
		}
		if baseK != 1 {
			prow[0] += fmt.Sprintf(" (vs %d/CPU)", baseK)
			arow[0] += fmt.Sprintf(" (vs %d/CPU)", baseK)
		}
		per.Rows, agg.Rows = append(per.Rows, prow), append(agg.Rows, arow)
		lineChart.Series = append(lineChart.Series, ps)
		aggChart.Series = append(aggChart.Series, as)
		box.Series = append(box.Series, bs)
	}
	per.Rows = append(per.Rows, fair)
	lineChart.Series = append(lineChart.Series, fairS)

	detail := Table{Title: "Points: median (min-max)", Columns: []string{"kind", "procs/CPU", "procs", "wall_s",
		"ops/s (aggregate)", "ops/s per process", "rtt p50 µs", "rtt p99 µs"}}
	for _, kind := range d.kinds {
		for _, k := range d.ks {
			pr, ok := d.at[kind][k]
			if !ok {
				continue
			}
			detail.Rows = append(detail.Rows, []string{kind, strconv.Itoa(k), pr.Point.Get("procs"),
				medSpread(pr, "wall_s", "%.3f"), medSpread(pr, "ops_per_s", "%.0f"),
				medSpread(pr, "per_proc_ops_per_s", "%.0f"), medSpread(pr, "rtt_p50_us", "%.1f"), medSpread(pr, "rtt_p99_us", "%.1f")})
		}
	}
	detail.Note = "ping-pong ops are round trips and a process is a pair; rtt p99 is the worst pair's"
	var other []float64
	busyWarn := ""
	for _, pr := range pts {
		other = append(other, pr.Values("other_cpu_frac")...)
	}
	if med := Median(other); med > 0.05 {
		warn := fmt.Sprintf("other work used %.0f%% of the CPUs during the points (median; max %.0f%%): more processes win a bigger share of a busy machine, so ratios here overstate what oversubscription gives; rerun on an idle machine",
			100*med, 100*slices.Max(other))
		per.Note = strings.TrimPrefix(per.Note+"; "+warn, "; ")
		busyWarn = " Caution: " + warn + "."
	}
	a.Tables = []Table{per, agg}
	if t, ok := d.vethTable(); ok {
		a.Tables = append(a.Tables, t)
	}
	a.Tables = append(a.Tables, detail)
	a.Charts = []Chart{lineChart, aggChart, box}
	a.Recommendation = d.recommend() + busyWarn
	if t, c, rec, ok := placementAnalysis(pts); ok {
		a.Tables = append(a.Tables, t)
		a.Charts = append(a.Charts, c)
		a.Recommendation += " " + rec
	}
	return a
}

// placementAnalysis compares, for each ping-pong kind and level, pairs
// pinned together on one CPU and apart on two with the scheduler's own
// placement, in the same run.
func placementAnalysis(pts []PointResult) (Table, Chart, string, bool) {
	type key struct {
		kind  string
		k     int
		place string
	}
	at := map[key]PointResult{}
	var rows []key
	for _, pr := range pts {
		pl := pr.Point.Get("placement")
		k, err := strconv.Atoi(pr.Point.Get("procs_per_cpu"))
		if err != nil || pl == "" || len(pr.Repeats) == 0 {
			continue
		}
		kk := key{pr.Point.Get("kind"), k, pl}
		at[kk] = pr
		if pl == PlaceOS && kk.kind != OversubCompute {
			rows = append(rows, kk)
		}
	}
	slices.SortFunc(rows, func(a, b key) int { return cmp.Or(cmp.Compare(a.kind, b.kind), cmp.Compare(a.k, b.k)) })
	t := Table{Title: "Ping-pong pair placement: round trips per second relative to the scheduler's placement (os), median (min-max); rtt p99 in µs",
		Columns: []string{"kind", "procs/CPU", "together (1 CPU)", "apart (2 CPUs)", "p99 os", "p99 together", "p99 apart"}}
	chart := Chart{Kind: ChartBar, Title: "Ping-pong pairs pinned together or apart, relative to the scheduler's placement",
		XLabel: "kind, processes per CPU", YLabel: "round trips/s vs os"}
	together, apart := Series{Name: PlaceTogether}, Series{Name: PlaceApart}
	var rec string
	for _, r := range rows {
		os := at[r]
		tg, okT := at[key{r.kind, r.k, PlaceTogether}]
		ap, okA := at[key{r.kind, r.k, PlaceApart}]
		if !okT && !okA {
			continue
		}
		rt, ra := ratio{}, ratio{}
		if okT {
			rt = ratioOf(tg, os, "ops_per_s")
		}
		if okA {
			ra = ratioOf(ap, os, "ops_per_s")
		}
		p99 := func(pr PointResult, ok bool) string {
			if !ok {
				return "-"
			}
			return fmt.Sprintf("%.0f", pr.Median("rtt_p99_us"))
		}
		t.Rows = append(t.Rows, []string{r.kind, strconv.Itoa(r.k), rt.String(), ra.String(), p99(os, true), p99(tg, okT), p99(ap, okA)})
		chart.XLabels = append(chart.XLabels, fmt.Sprintf("%s %d/CPU", strings.TrimPrefix(r.kind, "pingpong-"), r.k))
		together.Y, apart.Y = append(together.Y, nanIfNot(rt)), append(apart.Y, nanIfNot(ra))
		if rec == "" && okT && okA && rt.ok && ra.ok {
			rec = fmt.Sprintf("Placement matters: at %d per CPU, %s pairs pinned to one CPU ran %.2fx the round trips of pairs pinned apart (%.2fx and %.2fx the scheduler's own placement).",
				r.k, r.kind, rt.med/ra.med, rt.med, ra.med)
		}
	}
	if len(t.Rows) == 0 {
		return Table{}, Chart{}, "", false
	}
	chart.Series = []Series{together, apart}
	return t, chart, rec, true
}

func nanIfNot(r ratio) float64 {
	if !r.ok {
		return math.NaN()
	}
	return r.med
}

// vethTable compares veth to loopback ping-pong at every level, repeats
// paired by round.
func (d oversubData) vethTable() (Table, bool) {
	if d.at[OversubVeth] == nil || d.at[OversubLoopback] == nil {
		return Table{}, false
	}
	t := Table{Title: "veth between two namespaces (container networking) vs loopback, same run",
		Columns: []string{"procs/CPU", "round trips/s ratio", "rtt p50 ratio", "rtt p99 ratio"}}
	for _, k := range d.ks {
		v, ok1 := d.at[OversubVeth][k]
		l, ok2 := d.at[OversubLoopback][k]
		if !ok1 || !ok2 {
			continue
		}
		t.Rows = append(t.Rows, []string{strconv.Itoa(k), ratioOf(v, l, "ops_per_s").String(),
			ratioOf(v, l, "rtt_p50_us").String(), ratioOf(v, l, "rtt_p99_us").String()})
	}
	return t, len(t.Rows) > 0
}

func medSpread(pr PointResult, metric, format string) string {
	m := pr.Median(metric)
	if math.IsNaN(m) {
		return "-"
	}
	lo, hi := pr.Spread(metric)
	return fmt.Sprintf(format+" ("+format+"-"+format+")", m, lo, hi)
}

// recommend derives the recommendation from the measured ratios: the
// first oversubscribed level (2 per CPU where measured), the
// communication-heavy kind (veth where measured, else loopback) against
// compute-only.
func (d oversubData) recommend() string {
	comm := ""
	for _, k := range []string{OversubVeth, OversubLoopback} {
		if d.at[k] != nil {
			comm = k
			break
		}
	}
	level := 0
	for _, k := range d.ks {
		if k > 1 && (level == 0 || k == 2) {
			level = k
		}
	}
	if level == 0 {
		return "Only one oversubscription level was measured: add procs_per_cpu values above 1 to compare."
	}
	lossOf := func(kind string) (float64, bool) {
		r := d.rel(kind, level, "ops_per_s")
		return 1 - r.med, r.ok
	}
	var b strings.Builder
	commLoss, commOK := lossOf(comm)
	compLoss, compOK := lossOf(OversubCompute)
	switch {
	case commOK && compOK:
		fmt.Fprintf(&b, "At %d processes per CPU, communication-heavy pairs (%s) %s of their aggregate throughput against 1 per CPU",
			level, comm, loseGain(commLoss))
		if p99 := d.rel(comm, level, "rtt_p99_us"); p99.ok {
			fmt.Fprintf(&b, ", with round-trip p99 x%.1f", p99.med)
		}
		fmt.Fprintf(&b, ", while compute-only processes %s. ", loseGain(compLoss))
		p99 := d.rel(comm, level, "rtt_p99_us")
		switch {
		case commLoss-compLoss > 0.05:
			b.WriteString("Don't oversubscribe communication-heavy ranks: give each rank its own CPU and keep each communicating pair on one L3 (FullPCPUs); compute-only work tolerates oversubscription better.")
		case p99.ok && p99.med > 1.5:
			b.WriteString("Throughput holds up but tail latency does not: keep latency-bound communicating ranks at one per CPU, each pair on one L3; oversubscribe compute-only work instead.")
		default:
			b.WriteString("On this machine oversubscription costs communication no more than compute: it is safe for both at this level; still keep each communicating pair on one L3.")
		}
	case compOK:
		fmt.Fprintf(&b, "At %d processes per CPU, compute-only processes %s of their aggregate throughput; no ping-pong kind was measured.", level, loseGain(compLoss))
	case commOK:
		fmt.Fprintf(&b, "At %d processes per CPU, communication-heavy pairs (%s) %s of their aggregate throughput; compute-only was not measured for comparison.", level, comm, loseGain(commLoss))
	default:
		return fmt.Sprintf("No kind was measured at both its baseline and %d processes per CPU: nothing to compare.", level)
	}
	if t, ok := d.vethTable(); ok && len(t.Rows) > 0 {
		_, v, _ := d.base(OversubVeth)
		_, l, _ := d.base(OversubLoopback)
		if r := ratioOf(v, l, "ops_per_s"); r.ok {
			fmt.Fprintf(&b, " The veth path between two namespaces (container networking) gives %.0f%% of loopback's round trips per second at the lowest level", 100*r.med)
			if p := ratioOf(v, l, "rtt_p99_us"); p.ok {
				fmt.Fprintf(&b, " (p99 x%.1f)", p.med)
			}
			b.WriteString(".")
		}
	}
	return b.String()
}

func loseGain(loss float64) string {
	if loss >= 0 {
		return fmt.Sprintf("lose %.0f%%", 100*loss)
	}
	return fmt.Sprintf("gain %.0f%%", -100*loss)
}

// CurrentSpec returns the spec as configured.
func (e *oversubExp) CurrentSpec() any { return &e.spec }
