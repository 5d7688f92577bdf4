package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/enforce"
	"github.com/corepin/corepin/experiment"
	"github.com/corepin/corepin/loadgen"
	"github.com/corepin/corepin/measure"
	"github.com/corepin/corepin/proc"
	"github.com/corepin/corepin/workload"
)

// stopGrace is how long a party of a colocation point gets between
// SIGTERM and SIGKILL when the point ends.
const stopGrace = time.Second

// batchSlack is how long the batch may run past the load's warm-up and
// duration; the point stops it when the load ends, well before.
const batchSlack = 10 * time.Minute

// loadTail bounds the load generator's JSON result (CDF included).
const loadTail = 1 << 20

// genRTShare is the real-time share of each CPU the load generator's group
// holds when it runs in a real-time class: several times what it uses at
// the bench's rates (a few hundredths of a CPU for the built-in service,
// about a fifth against nginx), so it is never throttled, and beside the
// real-time route's service (half of each CPU on 2 CPUs) within the 0.95
// all real-time groups may have.
const genRTShare = 0.3

// party is one started process of a point.
type party struct {
	p *proc.Process
}

// stopAll stops the parties in order (the batch before the service it may
// share a group with) and removes the groups the point made.
func stopAll(parties []party, groups []enforce.Group) {
	for _, pt := range parties {
		if pt.p != nil {
			_, _ = pt.p.Stop(stopGrace)
		}
	}
	for _, g := range groups {
		_ = enforce.RemoveWhenEmpty(g, 5*time.Second)
	}
}

// procCPU returns the CPU time pid and its threads used so far, read
// through measure.
func procCPU(pid int) (time.Duration, error) { return measure.ProcessCPU(os.DirFS("/proc"), pid) }

func sumCPU(ps []*proc.Process) time.Duration {
	var t time.Duration
	for _, p := range ps {
		if d, err := procCPU(p.Pid()); err == nil {
			t += d
		}
	}
	return t
}

// startService starts the service svc through proc in the group its spec
// names and returns it with its URL once it answers. The returned party is
// set whenever a process started, so the caller stops it on error too.
func (e *colocationExp) startService(ctx context.Context, env *Env, svc string, spec proc.Spec) (party, string, error) {
	switch svc {
	case svcCPU:
		// loadgen.StartService reads the announced address from a pipe,
		// in one goroutine (issue 8: a polled buffer raced), and stops the
		// service if it never announces one.
		spec.Argv = []string{env.Exe, "serve", "cpu", "--listen", "127.0.0.1:0", "--cost", fmt.Sprintf("%gms", e.spec.CostMS), "-o", "json"}
		sp, err := loadgen.StartService(ctx, spec, 10*time.Second)
		if err != nil {
			return party{}, "", fmt.Errorf("starting the cpu service: %w", err)
		}
		return party{p: sp.Proc}, sp.URL, waitHTTP(ctx, sp.Addr)
	case svcNginx:
		port, err := freePort()
		if err != nil {
			return party{}, "", err
		}
		dir := filepath.Join(env.Dir, "nginx")
		if err := writeNginxConf(dir, port); err != nil {
			return party{}, "", err
		}
		spec.Argv = []string{"nginx", "-p", dir, "-c", filepath.Join(dir, "nginx.conf")}
		p, err := proc.Start(ctx, spec)
		if err != nil {
			return party{}, "", err
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		return party{p: p}, "http://" + addr + "/index.html", waitHTTP(ctx, addr)
	}
	return party{}, "", fmt.Errorf("%w: unknown service %q: use cpu or nginx", experiment.ErrUsage, svc)
}

// startBatch starts the batch: n CPU-saturating spin processes with
// threads threads each, running for d, all in group g (which the batch may
// share with the service). proc starts each process; g.AddProc moves it
// into the shared group, which proc's one-group-per-process cannot name.
func startBatch(ctx context.Context, env *Env, g enforce.Group, n, threads, nice int, d time.Duration) ([]*proc.Process, []party, error) {
	var batch []*proc.Process
	var parties []party
	for range n {
		argv := append([]string{env.Exe}, workload.SpinNiceArgs(d, strconv.Itoa(threads), nice)...)
		p, err := proc.Start(ctx, proc.Spec{Argv: argv})
		if err != nil {
			return batch, parties, fmt.Errorf("starting the batch: %w", err)
		}
		parties = append(parties, party{p: p})
		if err := g.AddProc(p.Pid()); err != nil {
			return batch, parties, fmt.Errorf("moving the batch into %s: %w", g.Name(), err)
		}
		batch = append(batch, p)
	}
	return batch, parties, nil
}

func (e *colocationExp) Run(ctx context.Context, env *Env, p experiment.Point) (experiment.Metrics, error) {
	svc, policy := p.Get("service"), p.Get("policy")
	pl, err := e.place(env, policy)
	if err != nil {
		return nil, err
	}
	var parties []party // stopped in order: batch first
	var groups []enforce.Group
	defer func() { stopAll(parties, groups) }()

	var svcProc *proc.Process
	var url string
	if policy != polBatchAlone {
		pt, u, err := e.startService(ctx, env, svc, proc.Spec{Driver: env.Driver, Group: "colo-svc", Resources: pl.svcRes, RealTime: pl.svcRT})
		if pt.p != nil {
			parties = append(parties, pt)
		}
		if err != nil {
			return nil, fmt.Errorf("starting %s service: %w", svc, err)
		}
		svcProc, url = pt.p, u
	}
	// The batch: one CPU-saturating spin process per CPU it may use, each
	// with as many threads, running past the end of the load.
	var batch []*proc.Process
	var bg enforce.Group
	if pl.scan {
		if e.scan == nil {
			return nil, fmt.Errorf("policy %s: the wake_scan switch is not open", policy)
		}
		if _, err := e.scan.Hold(); err != nil {
			return nil, fmt.Errorf("policy %s: turning SIS_UTIL off: %w", policy, err)
		}
		defer e.scan.Release()
	}
	if policy != polAlone {
		if pl.sameGroup && svcProc != nil {
			bg = svcProc.Group()
		} else {
			g, err := pl.batchDriver.Create("colo-batch", pl.batchRes)
			if err != nil {
				return nil, err
			}
			bg = g
			groups = append(groups, g)
		}
		n := e.spec.BatchJobs
		if n == 0 {
			n = pl.batchCPUs.Size()
		}
		nice := 0
		if pl.nice {
			nice = 19
		}
		// The batch runs until the point stops it (stopAll), not for a
		// fixed time: on a busy machine starting the load generator can
		// take seconds, and a batch that ended inside the window left the
		// service alone for its last part and lost its CPU time from the
		// sum (negative batch CPUs were seen).
		b, bp, err := startBatch(ctx, env, bg, n, pl.batchCPUs.Size(), nice, e.spec.Warmup+e.spec.Duration+batchSlack)
		batch = b
		parties = append(bp, parties...)
		if err != nil {
			return nil, err
		}
		time.Sleep(300 * time.Millisecond) // let the batch saturate the CPUs
	}
	qctx, qstop := context.WithCancel(ctx)
	defer qstop()
	q, err := startQoS(qctx, policy, pl.svcCPUs.Union(pl.batchCPUs), svcProc, batch, bg, pl.batchRes)
	if err != nil {
		return nil, err
	}
	m := experiment.Metrics{}
	work := pl.svcCPUs.Union(pl.batchCPUs)
	cpuBefore, busyErr := measure.ReadCPUSum(os.DirFS("/proc"), work)
	batchBefore := sumCPU(batch)
	var svcBefore, waitBefore time.Duration
	var waitErr error
	if svcProc != nil {
		svcBefore, _ = procCPU(svcProc.Pid())
		waitBefore, waitErr = measure.RunDelay(os.DirFS("/proc"), svcProc.Pid())
	}
	start := time.Now()
	if policy == polBatchAlone {
		select {
		case <-time.After(e.spec.Warmup + e.spec.Duration):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	} else {
		res, genCPU, err := e.load(ctx, env, pl, url, e.rate(env, svc, pl.svcCPUs.Union(pl.batchCPUs)))
		if err != nil {
			return nil, err
		}
		if !pl.genRT.IsZero() {
			m["generator_rt"] = 1
		}
		if pl.genCPUs.Intersects(pl.svcCPUs.Union(pl.batchCPUs)) {
			// The generator shares the CPUs under test (machines with
			// fewer than 4): what it uses is not idle for the batch.
			m["generator_cpus"] = genCPU.Seconds() / (time.Since(start).Seconds())
		}
		m["p50_ms"] = msOf(res.P50)
		m["p90_ms"] = msOf(res.P90)
		m["p99_ms"] = msOf(res.P99)
		m["p999_ms"] = msOf(res.P999)
		m["max_ms"] = msOf(res.Max)
		m["rps"] = res.AchievedRPS
		m["target_rps"] = res.TargetRPS
		m["errors"] = float64(res.Errors)
		m["late_sends"] = float64(res.LateSends)
		// Every step of the distribution is kept, not only the chart's
		// (cdfKeep): the tests of the tails resample the requests from it.
		for _, c := range res.CDF {
			m[fmt.Sprintf("cdf_%g", c.Percentile)] = msOf(c.Latency)
		}
		m["latencies"] = float64(res.Requests - res.Errors + res.BadStatus)
	}
	elapsed := time.Since(start).Seconds()
	qstop()
	q.metrics(m, elapsed)
	if len(batch) > 0 {
		m["batch_cpus"] = (sumCPU(batch) - batchBefore).Seconds() / elapsed
	}
	if svcProc != nil {
		if after, err := procCPU(svcProc.Pid()); err == nil {
			m["service_cpus"] = (after - svcBefore).Seconds() / elapsed
		}
		// How long the service's threads waited on a run queue, in
		// ms per second of the window: the share of its time the
		// batch or other work on the machine held its CPU. A bad tail
		// with little wait is not the scheduler's.
		if after, err := measure.RunDelay(os.DirFS("/proc"), svcProc.Pid()); err == nil && waitErr == nil && after >= waitBefore {
			m["service_wait_ms_per_s"] = msOf(after-waitBefore) / elapsed
		}
	}
	m["machine_cpus"] = float64(work.Size())
	// The CPU nothing used (idle and iowait of the CPUs under test, over
	// the same window): what the batch could still have had. On a shared
	// machine other work (and a hypervisor's steal) takes some of what
	// the service leaves, and a batch under cpu.idle yields to it too.
	if cpuAfter, err := measure.ReadCPUSum(os.DirFS("/proc"), work); err == nil && busyErr == nil {
		busy := (cpuAfter.Busy() - cpuBefore.Busy()).Seconds() / elapsed
		m["idle_cpus"] = max(0, float64(work.Size())-busy)
		m["other_cpus"] = max(0, busy-m["batch_cpus"]-m["service_cpus"]-m["generator_cpus"])
		// The time a hypervisor ran something else on these CPUs (a
		// virtual machine's steal): neither side had it, and no lever
		// inside the machine gets it back. It is part of other_cpus.
		if cpuAfter.Steal >= cpuBefore.Steal {
			m["steal_cpus"] = float64(cpuAfter.Steal-cpuBefore.Steal) / measure.ClockTicks / elapsed
		}
	}
	return m, nil
}

// load drives the service with the configured tool through proc, in its
// own group on the generator's CPUs, and returns the tool's result and the
// CPU time the generator used (its rusage).
func (e *colocationExp) load(ctx context.Context, env *Env, pl placement, url string, rate float64) (*loadgen.Result, time.Duration, error) {
	argv := []string{env.Exe, "load", "--url", url, "--duration", e.spec.Duration.String(),
		"--warmup", e.spec.Warmup.String(), "--connections", strconv.Itoa(e.spec.Connections), "-o", "json"}
	if e.spec.Tool == toolWrk {
		argv = append(argv, "--wrk")
	} else {
		argv = append(argv, "--rate", strconv.FormatFloat(rate, 'f', 1, 64))
	}
	p, err := proc.Start(ctx, generatorSpec(env, pl, argv))
	if err != nil {
		return nil, 0, err
	}
	x, err := p.Wait()
	if err != nil {
		return nil, 0, fmt.Errorf("load generator: %w", err)
	}
	if x.Code != 0 || len(x.Stdout) >= loadTail {
		return nil, 0, fmt.Errorf("load generator: exit %d%s: %s", x.Code, signalNote(x.Signal), strings.TrimSpace(x.Stderr+x.Stdout))
	}
	var res loadgen.Result
	if err := json.Unmarshal([]byte(x.Stdout), &res); err != nil {
		return nil, 0, fmt.Errorf("reading the load generator's result %q: %w", x.Stdout, err)
	}
	return &res, x.Result.User + x.Result.Sys, nil
}

// generatorSpec is how the load generator of a point starts: in its own
// group on the generator's CPUs, in the generator's class (with a real-time
// share of its own when that class is real-time).
func generatorSpec(env *Env, pl placement, argv []string) proc.Spec {
	res := enforce.Resources{CPUs: pl.genCPUs}
	if !pl.genRT.IsZero() {
		res.RTShare = genRTShare
	}
	return proc.Spec{Argv: argv, Driver: env.Driver, Group: "colo-load", Resources: res, RealTime: pl.genRT, TailBytes: loadTail}
}

func signalNote(sig string) string {
	if sig == "" {
		return ""
	}
	return " (" + sig + ")"
}

func (e *colocationExp) rate(env *Env, svc string, work cpuset.CPUSet) float64 {
	if svc == svcNginx {
		return e.spec.NginxRate
	}
	return e.spec.LoadFraction * float64(work.Size()) / (e.spec.CostMS / 1000)
}

// cdfKeep are the latency percentiles stored for the CDF chart.
var cdfKeep = []float64{10, 50, 75, 90, 95, 97.5, 99, 99.5, 99.9, 99.99, 100}

func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
