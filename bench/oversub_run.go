package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/enforce"
	"github.com/corepin/corepin/experiment"
	"github.com/corepin/corepin/measure"
	"github.com/corepin/corepin/netbench"
	"github.com/corepin/corepin/proc"
)

// rank is one launched rank process: proc runs it, its stdout is a pipe
// read line by line.
type rank struct {
	p    *proc.Process
	argv []string
	out  *bufio.Reader
	pipe *io.PipeWriter
}

// startRank starts argv through proc with GOMAXPROCS=1, pinned to cpu
// (>= 0) through the affinity driver pin.
func startRank(ctx context.Context, pin enforce.Driver, name string, cpu int, argv []string) (*rank, error) {
	pr, pw := io.Pipe()
	// One OS thread runs Go code: a rank is single-threaded, and idle Ps
	// would spin looking for work on CPUs the other ranks need.
	spec := proc.Spec{Argv: argv, Env: append(os.Environ(), "GOMAXPROCS=1"), Stdout: pw}
	if cpu >= 0 && pin != nil {
		spec.Driver, spec.Group, spec.Resources = pin, name, enforce.Resources{CPUs: cpuset.New(cpu)}
	}
	p, err := proc.Start(ctx, spec)
	if err != nil {
		pw.Close()
		return nil, err
	}
	return &rank{p: p, argv: argv, out: bufio.NewReader(io.LimitReader(pr, 1<<20)), pipe: pw}, nil
}

// line reads the next JSON line of r into v.
func (r *rank) line(v any) error {
	s, err := r.out.ReadString('\n')
	if err != nil {
		x, werr := r.wait()
		return fmt.Errorf("%s: no output (%v, exit %d %s %v): %s", strings.Join(r.argv, " "), err, x.Code, x.Signal, werr, strings.TrimSpace(x.Stderr))
	}
	if err := json.Unmarshal([]byte(s), v); err != nil {
		return fmt.Errorf("parsing output %q: %w", strings.TrimSpace(s), err)
	}
	return nil
}

// wait waits for the rank to exit and closes its pipe.
func (r *rank) wait() (proc.Exit, error) {
	go func() { <-r.p.Done(); r.pipe.Close() }()
	return r.p.Wait()
}

func (r *rank) stop() {
	_, _ = r.p.Stop(0)
	r.pipe.Close()
}

// runGroup runs procs processes of kind, each unit doing work, and returns
// the point's metrics.
func (e *oversubExp) runGroup(ctx context.Context, env *Env, kind, placement string, procs int, work int64, timeout time.Duration) (m experiment.Metrics, err error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	barrier, err := netbench.NewBarrier(env.Dir)
	if err != nil {
		return nil, err
	}
	defer barrier.Release()
	var all, units []*rank
	defer func() {
		for _, r := range all {
			r.stop()
		}
	}()
	launch := func(name string, cpu int, argv []string) (*rank, error) {
		r, err := startRank(ctx, e.pin, name, cpu, argv)
		if err != nil {
			return nil, err
		}
		all = append(all, r)
		return r, nil
	}
	exe := env.Exe
	switch kind {
	case OversubCompute:
		for i := range procs {
			r, err := launch("", -1, []string{exe, "pingpong", "compute", "--ops", strconv.FormatInt(work, 10), "--wait-fifo", barrier.Path(), "-o", "json"})
			if err != nil {
				return nil, fmt.Errorf("starting compute rank %d: %w", i, err)
			}
			units = append(units, r)
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
			srv, err := launch(fmt.Sprintf("ov-%d-srv", i), srvCPU, srvWrap([]string{exe, "pingpong", "server", "--listen", listen, "--conns", "1", "-o", "json"}))
			if err != nil {
				return nil, err
			}
			var ready netbench.Listening
			if err := srv.line(&ready); err != nil {
				return nil, fmt.Errorf("starting echo server: %w", err)
			}
			cli, err := launch(fmt.Sprintf("ov-%d-cli", i), cliCPU, cliWrap([]string{exe, "pingpong", "client", "--connect", ready.Listen,
				"--messages", strconv.FormatInt(work, 10), "--size", strconv.Itoa(e.spec.Size), "--wait-fifo", barrier.Path(), "-o", "json"}))
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
		var r netbench.Ready
		if err := u.line(&r); err != nil {
			return nil, err
		}
	}
	// The point's wall time runs from releasing the barrier to the last
	// result: it includes the time a released process waits for a CPU,
	// which the processes' own timers (started once they run) miss.
	busy0, busyErr := cpuBusy(env)
	t0 := time.Now()
	if err := barrier.Release(); err != nil {
		return nil, err
	}
	var total float64
	var p50s, p99s []float64
	for _, u := range units {
		var r netbench.RankResult
		if err := u.line(&r); err != nil {
			return nil, err
		}
		total += float64(int64(r.RoundTrips) + r.Ops)
		p50s = append(p50s, r.RTTP50US)
		p99s = append(p99s, r.RTTP99US)
	}
	wall := time.Since(t0).Seconds()
	var ours float64
	for _, r := range all {
		x, err := r.wait()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", strings.Join(r.argv, " "), err)
		}
		if x.Code != 0 {
			return nil, fmt.Errorf("%s: exit %d %s: %s", strings.Join(r.argv, " "), x.Code, x.Signal, strings.TrimSpace(x.Stderr))
		}
		ours += (x.Result.User + x.Result.Sys).Seconds()
	}
	busy1, busyErr1 := cpuBusy(env)
	m = experiment.Metrics{
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
		m["rtt_p50_us"] = experiment.Median(p50s)
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

// cpuBusy returns the busy seconds (user, nice, system, irq, softirq,
// steal) of corepin's allowed CPUs since boot, read through measure from
// /proc/stat.
func cpuBusy(env *Env) (float64, error) {
	var cpus cpuset.CPUSet
	if env.Topo != nil {
		cpus = env.Topo.Allowed()
	}
	busy, err := measure.ReadCPUBusy(os.DirFS("/proc"), cpus)
	return busy.Seconds(), err
}
