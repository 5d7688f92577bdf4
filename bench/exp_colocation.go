package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/enforce"
	"github.com/corepin/corepin/loadgen"
	"github.com/corepin/corepin/measure"
	"github.com/corepin/corepin/workload"
)

func init() { Register(func() Experiment { return &colocationExp{} }) }

// Colocation policies: where the service and the batch run and with what
// priority. The nice patterns are the nice study's four.
const (
	polAlone        = "alone"       // the service alone: the baseline
	polBatchAlone   = "batch-alone" // the batch alone: its own baseline
	polNone         = "none"        // batch and service in one group, no priority
	polNice         = "nice"        // batch at nice 19 in its own group
	polNiceBatchLim = "nice+batch-limit"
	polNiceSvcLim   = "nice+service-limit"
	polNiceBothLim  = "nice+both-limits"
	polWeight       = "weight"   // batch group at the minimal weight
	polIdle         = "idle"     // batch group cpu.idle
	polLSE          = "lse"      // service on exclusive whole cores (LSE/FullPCPUs), batch on the rest
	polLSR          = "lsr"      // service bound (LSR/SpreadByPCPUs), batch BE may borrow its CPUs
	polCorepin      = "corepin"  // corepin's default: service LS, batch BE under the idle corepin-be root
	svcCPU          = "cpu"      // the built-in CPU-cost service
	svcNginx        = "nginx"    // real nginx serving a small static file
	toolOpenLoop    = "openloop" // corepin's open-loop generator
	toolWrk         = "wrk"
)

// AllPolicies lists every colocation policy, baselines first.
var AllPolicies = []string{polAlone, polBatchAlone, polNone, polNice, polNiceBatchLim, polNiceSvcLim, polNiceBothLim,
	polWeight, polIdle, polLSE, polLSR, polCorepin}

type colocationSpec struct {
	Services []string `yaml:"services" json:"services"`
	Policies []string `yaml:"policies" json:"policies"`
	// NginxPolicies, when set, is the policy list for nginx.
	NginxPolicies []string `yaml:"nginx_policies" json:"nginx_policies"`
	// CostMS is the CPU cost of one request to the built-in service.
	CostMS float64 `yaml:"cost_ms" json:"cost_ms"`
	// LoadFraction sizes the open-loop rate so the built-in service uses
	// this fraction of the machine's CPUs alone.
	LoadFraction float64 `yaml:"load_fraction" json:"load_fraction"`
	// NginxRate is the open-loop rate against nginx.
	NginxRate   float64       `yaml:"nginx_rate" json:"nginx_rate"`
	Tool        string        `yaml:"tool" json:"tool"`
	Connections int           `yaml:"connections" json:"connections"`
	Warmup      time.Duration `yaml:"warmup" json:"warmup"`
	Duration    time.Duration `yaml:"duration" json:"duration"`
	// BatchJobs is how many CPU-saturating processes the batch runs (0: one
	// per allowed CPU), each with as many threads as allowed CPUs.
	BatchJobs int `yaml:"batch_jobs" json:"batch_jobs"`
}

type colocationExp struct {
	spec   colocationSpec
	be     enforce.Driver // the idle corepin-be root, for BE batches
	hasNgx bool
}

func (e *colocationExp) Name() string { return "colocation" }
func (e *colocationExp) Title() string {
	return "a latency-sensitive service beside a CPU-saturating batch, per isolation policy"
}

func (e *colocationExp) Spec(quick bool) any {
	e.spec = colocationSpec{
		Services:     []string{svcCPU, svcNginx},
		Policies:     slices.Clone(AllPolicies),
		CostMS:       3,
		LoadFraction: 0.25,
		NginxRate:    2000,
		Tool:         toolOpenLoop,
		Connections:  16,
		Warmup:       time.Second,
		Duration:     8 * time.Second,
	}
	if quick {
		// Fewer policies, each measured long enough for a p99 of ~800
		// requests: the bar compares p99s within 10%.
		e.spec.Policies = []string{polAlone, polBatchAlone, polNone, polNice, polIdle, polCorepin}
		e.spec.NginxPolicies = []string{polAlone, polNone, polCorepin}
		e.spec.Warmup = 500 * time.Millisecond
		e.spec.Duration = 5 * time.Second
		e.spec.NginxRate = 1000
	}
	return &e.spec
}

func (e *colocationExp) Setup(ctx context.Context, env *Env) error {
	if e.spec.Services == nil {
		e.Spec(env.Quick)
	}
	for _, p := range append(slices.Clone(e.spec.Policies), e.spec.NginxPolicies...) {
		if !slices.Contains(AllPolicies, p) {
			return fmt.Errorf("%w: colocation policy %q: choose from %s", ErrUsage, p, strings.Join(AllPolicies, ", "))
		}
	}
	if e.spec.Tool != toolOpenLoop && e.spec.Tool != toolWrk {
		return fmt.Errorf("%w: colocation tool %q: use openloop or wrk", ErrUsage, e.spec.Tool)
	}
	if _, err := exec.LookPath("nginx"); err == nil {
		e.hasNgx = true
	} else if slices.Contains(e.spec.Services, svcNginx) {
		env.Logf("colocation: nginx not installed (Debian package nginx): measuring the built-in service only")
	}
	if env.Driver == nil || env.Driver.Name() == enforce.NameAffinity {
		return fmt.Errorf("colocation needs a writable cgroup (cgroup v1 or v2) to compare group priorities")
	}
	be, err := enforce.Detect(enforce.WithRoot("corepin-be"))
	if err != nil {
		return err
	}
	if rp, ok := be.(enforce.RootPrioritizer); ok {
		if _, err := rp.SetRootIdle(); err != nil {
			return err
		}
	}
	e.be = be
	return nil
}

func (e *colocationExp) Teardown(*Env) error { return nil }

func (e *colocationExp) Points(env *Env) []Point {
	if e.spec.Services == nil {
		e.Spec(env.Quick)
	}
	var ps []Point
	for _, s := range e.spec.Services {
		if s == svcNginx && !e.hasNgx && e.be != nil {
			continue
		}
		pols := e.spec.Policies
		if s == svcNginx && e.spec.NginxPolicies != nil {
			pols = e.spec.NginxPolicies
		}
		for _, p := range pols {
			ps = append(ps, P("service", s, "policy", p))
		}
	}
	return ps
}

// placement is where one point puts its three parties.
type placement struct {
	svcCPUs, batchCPUs, genCPUs cpuset.CPUSet
	svcRes, batchRes            enforce.Resources
	batchDriver                 enforce.Driver
	sameGroup                   bool // batch joins the service's group
	nice                        bool // batch at nice 19
}

// place decides the groups of a policy. The load generator gets a CPU of
// its own when the machine has 4 or more; below that it shares.
func (e *colocationExp) place(env *Env, policy string) (placement, error) {
	all := env.Topo.Allowed()
	pl := placement{genCPUs: all, batchDriver: env.Driver}
	work := all
	if all.Size() >= 4 {
		gen := cpuset.New(all.Max())
		if c, ok := env.Topo.CPU(all.Max()); ok {
			gen = env.Topo.CoreCPUs(c.Core).Intersection(all)
		}
		pl.genCPUs = gen
		work = all.Difference(gen)
	}
	pl.svcCPUs, pl.batchCPUs = work, work
	pl.svcRes = enforce.Resources{CPUs: work}
	pl.batchRes = enforce.Resources{CPUs: work}
	half := time.Duration(float64(work.Size()) / 2 * float64(enforce.DefaultPeriod))
	switch policy {
	case polNone:
		pl.sameGroup = true
	case polNice:
		pl.nice = true
	case polNiceBatchLim:
		pl.nice, pl.batchRes.Quota = true, half
	case polNiceSvcLim:
		pl.nice, pl.svcRes.Quota = true, half
	case polNiceBothLim:
		pl.nice, pl.batchRes.Quota, pl.svcRes.Quota = true, half, half
	case polWeight:
		pl.batchRes.Weight = 1
	case polIdle:
		pl.batchRes.Idle = true
	case polLSE, polLSR:
		bind := alloc.BindFullPCPUs
		if policy == polLSR {
			bind = alloc.BindSpreadByPCPUs
		}
		st, err := alloc.NewState(env.Topo, alloc.Config{Reserved: env.Topo.Online().Difference(work)})
		if err != nil {
			return pl, err
		}
		need := max(1, int(math.Ceil(float64(work.Size())*e.spec.LoadFraction*2)))
		need = min(need, work.Size()-1)
		if need < 1 {
			return pl, fmt.Errorf("policy %s needs at least 2 CPUs", policy)
		}
		p, err := st.Allocate(alloc.Request{ID: "service", CPUs: need, QoS: alloc.LSE, Bind: bind, TopologyPolicy: alloc.TopologyBestEffort})
		if err != nil {
			return pl, err
		}
		pl.svcCPUs = p.CPUs
		pl.svcRes.CPUs = p.CPUs
		if policy == polLSE {
			pl.batchCPUs = work.Difference(p.CPUs)
			pl.batchRes.CPUs = pl.batchCPUs
		} else {
			pl.batchRes.Idle = true // BE borrows the LSR CPUs when idle
			pl.batchDriver = e.be
		}
	case polCorepin:
		pl.batchRes.Idle = true
		pl.batchDriver = e.be
	}
	return pl, nil
}

// proc is a started process with its group.
type proc struct {
	cmd   *exec.Cmd
	group enforce.Group
	owned bool // remove the group at stop
}

func startIn(g enforce.Group, argv []string, stdout io.Writer) (*exec.Cmd, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stdout = stdout
	if err := enforce.Start(g, cmd); err != nil {
		return nil, err
	}
	return cmd, nil
}

// firstLine returns the first line read from r, or an error once timeout
// passes or r ends without one. A goroutine keeps draining r after the
// line, so the writer never blocks on a full pipe, and closes r when the
// writer closes its end.
func firstLine(r io.ReadCloser, timeout time.Duration) ([]byte, error) {
	lines := make(chan []byte, 1)
	go func() {
		br := bufio.NewReader(io.LimitReader(r, 64<<10))
		line, err := br.ReadBytes('\n')
		if err == nil {
			lines <- line[:len(line)-1]
		}
		close(lines)
		_, _ = io.Copy(io.Discard, r)
		r.Close()
	}()
	select {
	case line, ok := <-lines:
		if !ok {
			return nil, errors.New("the output ended before its first line")
		}
		return line, nil
	case <-time.After(timeout):
		return nil, fmt.Errorf("no line of output within %v", timeout)
	}
}

func stop(ps ...*proc) {
	for _, p := range ps {
		if p == nil || p.cmd == nil || p.cmd.Process == nil {
			continue
		}
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		_ = p.cmd.Wait()
	}
	for _, p := range ps {
		if p != nil && p.owned && p.group != nil {
			_ = enforce.RemoveWhenEmpty(p.group, 5*time.Second)
		}
	}
}

// procCPU returns the CPU time used so far by pid and its threads
// (utime + stime of /proc/PID/stat, in clock ticks).
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	st, err := measure.ParseTaskStat(b)
	if err != nil {
		return 0, err
	}
	return time.Duration(st.UTime+st.STime) * time.Second / clockTicks, nil
}

func sumCPU(cmds []*exec.Cmd) time.Duration {
	var t time.Duration
	for _, c := range cmds {
		if d, err := procCPU(c.Process.Pid); err == nil {
			t += d
		}
	}
	return t
}

// startService starts the service of point p in group g and returns it with
// its URL once it answers.
func (e *colocationExp) startService(ctx context.Context, env *Env, svc string, g enforce.Group) (*exec.Cmd, string, error) {
	switch svc {
	case svcCPU:
		// The service's stdout is a pipe read by one goroutine (firstLine),
		// never a buffer polled while os/exec writes it.
		pr, pw, err := os.Pipe()
		if err != nil {
			return nil, "", err
		}
		cmd, err := startIn(g, []string{env.Exe, "serve", "cpu", "--listen", "127.0.0.1:0",
			"--cost", fmt.Sprintf("%gms", e.spec.CostMS), "-o", "json"}, pw)
		pw.Close()
		if err != nil {
			pr.Close()
			return nil, "", err
		}
		line, err := firstLine(pr, 10*time.Second)
		if err != nil {
			return cmd, "", fmt.Errorf("reading the cpu service's address: %w", err)
		}
		var v struct {
			Listen string `json:"listen"`
		}
		if err := json.Unmarshal(line, &v); err != nil || v.Listen == "" {
			return cmd, "", fmt.Errorf("reading the service's address from %q: %v", line, err)
		}
		return cmd, "http://" + v.Listen + "/", waitHTTP(ctx, v.Listen)
	case svcNginx:
		port, err := freePort()
		if err != nil {
			return nil, "", err
		}
		dir := filepath.Join(env.Dir, "nginx")
		if err := writeNginxConf(dir, port); err != nil {
			return nil, "", err
		}
		cmd, err := startIn(g, []string{"nginx", "-p", dir, "-c", filepath.Join(dir, "nginx.conf")}, nil)
		if err != nil {
			return nil, "", err
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		return cmd, "http://" + addr + "/index.html", waitHTTP(ctx, addr)
	}
	return nil, "", fmt.Errorf("%w: unknown service %q: use cpu or nginx", ErrUsage, svc)
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func waitHTTP(ctx context.Context, addr string) error {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.Close()
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("service at %s did not accept connections within 10 s", addr)
}

// writeNginxConf writes a single-process nginx serving a small static page
// on 127.0.0.1:port, everything under dir.
func writeNginxConf(dir string, port int) error {
	if err := os.MkdirAll(filepath.Join(dir, "html"), 0o755); err != nil {
		return err
	}
	page := strings.Repeat("corepin colocation test page\n", 20)
	if err := os.WriteFile(filepath.Join(dir, "html", "index.html"), []byte(page), 0o644); err != nil {
		return err
	}
	conf := fmt.Sprintf(`daemon off;
master_process off;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path %[1]s/tmp;
  proxy_temp_path %[1]s/tmp;
  fastcgi_temp_path %[1]s/tmp;
  uwsgi_temp_path %[1]s/tmp;
  scgi_temp_path %[1]s/tmp;
  keepalive_requests 1000000;
  server {
    listen 127.0.0.1:%[2]d;
    root %[1]s/html;
  }
}
`, dir, port)
	if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(conf), 0o644)
}

func (e *colocationExp) rate(env *Env, svc string, work cpuset.CPUSet) float64 {
	if svc == svcNginx {
		return e.spec.NginxRate
	}
	return e.spec.LoadFraction * float64(work.Size()) / (e.spec.CostMS / 1000)
}

func (e *colocationExp) Run(ctx context.Context, env *Env, p Point) (Metrics, error) {
	svc, policy := p.Get("service"), p.Get("policy")
	pl, err := e.place(env, policy)
	if err != nil {
		return nil, err
	}
	var parties []*proc
	defer func() { stop(parties...) }()

	// The service's group exists in every policy: "none" puts the batch in it.
	svcGroup, err := env.Driver.Create("colo-svc", pl.svcRes)
	if err != nil {
		return nil, err
	}
	svcProc := &proc{group: svcGroup, owned: true}
	parties = append(parties, svcProc)
	var svcCmd *exec.Cmd
	var url string
	if policy != polBatchAlone {
		svcCmd, url, err = e.startService(ctx, env, svc, svcGroup)
		svcProc.cmd = svcCmd
		if err != nil {
			return nil, fmt.Errorf("starting %s service: %w", svc, err)
		}
	}
	// The batch: one CPU-saturating spin process per CPU it may use, each
	// with as many threads, running past the end of the load.
	var batch []*exec.Cmd
	if policy != polAlone {
		bg := svcGroup
		if !pl.sameGroup {
			g, err := pl.batchDriver.Create("colo-batch", pl.batchRes)
			if err != nil {
				return nil, err
			}
			bg = g
			parties = append(parties, &proc{group: g, owned: true})
		}
		n := e.spec.BatchJobs
		if n == 0 {
			n = pl.batchCPUs.Size()
		}
		spinFor := e.spec.Warmup + e.spec.Duration + 5*time.Second
		for range n {
			argv := append([]string{env.Exe}, workload.SpinArgs(spinFor, strconv.Itoa(pl.batchCPUs.Size()))...)
			if pl.nice {
				argv = append([]string{"nice", "-n", "19"}, argv...)
			}
			cmd, err := startIn(bg, argv, &bytes.Buffer{})
			if err != nil {
				return nil, fmt.Errorf("starting the batch: %w", err)
			}
			batch = append(batch, cmd)
			parties = append([]*proc{{cmd: cmd}}, parties...)
		}
		time.Sleep(300 * time.Millisecond) // let the batch saturate the CPUs
	}
	m := Metrics{}
	window := e.spec.Warmup + e.spec.Duration
	batchBefore := sumCPU(batch)
	var svcBefore time.Duration
	if svcCmd != nil {
		svcBefore, _ = procCPU(svcCmd.Process.Pid)
	}
	start := time.Now()
	if policy == polBatchAlone {
		select {
		case <-time.After(window):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	} else {
		res, genCPU, err := e.load(ctx, env, pl, url, e.rate(env, svc, pl.svcCPUs.Union(pl.batchCPUs)))
		if err != nil {
			return nil, err
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
		for _, c := range res.CDF {
			if slices.Contains(cdfKeep, c.Percentile) {
				m[fmt.Sprintf("cdf_%g", c.Percentile)] = msOf(c.Latency)
			}
		}
	}
	elapsed := time.Since(start).Seconds()
	if len(batch) > 0 {
		m["batch_cpus"] = (sumCPU(batch) - batchBefore).Seconds() / elapsed
	}
	if svcCmd != nil {
		if after, err := procCPU(svcCmd.Process.Pid); err == nil {
			m["service_cpus"] = (after - svcBefore).Seconds() / elapsed
		}
	}
	m["machine_cpus"] = float64(pl.svcCPUs.Union(pl.batchCPUs).Size())
	return m, nil
}

// cdfKeep are the latency percentiles stored for the CDF chart.
var cdfKeep = []float64{10, 50, 75, 90, 95, 97.5, 99, 99.5, 99.9, 99.99, 100}

func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// load drives the service with the configured tool, from its own group on
// the generator's CPUs.
// It also returns the CPU time the generator used (its rusage).
func (e *colocationExp) load(ctx context.Context, env *Env, pl placement, url string, rate float64) (*loadgen.Result, time.Duration, error) {
	g, err := env.Driver.Create("colo-load", enforce.Resources{CPUs: pl.genCPUs})
	if err != nil {
		return nil, 0, err
	}
	argv := []string{env.Exe, "load", "--url", url, "--duration", e.spec.Duration.String(),
		"--warmup", e.spec.Warmup.String(), "--connections", strconv.Itoa(e.spec.Connections), "-o", "json"}
	if e.spec.Tool == toolWrk {
		argv = append(argv, "--wrk")
	} else {
		argv = append(argv, "--rate", strconv.FormatFloat(rate, 'f', 1, 64))
	}
	var out bytes.Buffer
	cmd, err := startIn(g, argv, &out)
	if err != nil {
		g.Remove()
		return nil, 0, err
	}
	werr := cmd.Wait()
	_ = enforce.RemoveWhenEmpty(g, 5*time.Second)
	if werr != nil {
		return nil, 0, fmt.Errorf("load generator: %v: %s", werr, strings.TrimSpace(out.String()))
	}
	var res loadgen.Result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		return nil, 0, fmt.Errorf("reading the load generator's result %q: %w", out.String(), err)
	}
	return &res, cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(), nil
}

// Analyze compares every policy's p99 with the service alone and the
// batch's CPU with what the service leaves idle, per service.
func (e *colocationExp) Analyze(env *Env, pts []PointResult) Analysis {
	var a Analysis
	var services []string
	for _, p := range pts {
		if s := p.Point.Get("service"); !slices.Contains(services, s) {
			services = append(services, s)
		}
	}
	var recs []string
	for _, s := range services {
		var sp []PointResult
		for _, p := range pts {
			if p.Point.Get("service") == s {
				sp = append(sp, p)
			}
		}
		rec := e.analyzeService(s, sp, &a)
		if rec != "" {
			recs = append(recs, rec)
		}
	}
	a.Recommendation = strings.Join(recs, " ")
	return a
}

func (e *colocationExp) analyzeService(svc string, pts []PointResult, a *Analysis) string {
	find := func(pol string) *PointResult {
		for i := range pts {
			if pts[i].Point.Get("policy") == pol {
				return &pts[i]
			}
		}
		return nil
	}
	alone := find(polAlone)
	aloneP99 := math.NaN()
	if alone != nil {
		aloneP99 = alone.Median("p99_ms")
	}
	batchAlone := math.NaN()
	if ba := find(polBatchAlone); ba != nil {
		batchAlone = ba.Median("batch_cpus")
	}
	name := map[string]string{svcCPU: fmt.Sprintf("built-in service (%.0f ms CPU per request)", e.spec.CostMS), svcNginx: "nginx"}[svc]
	if name == "" {
		name = svc
	}
	t := Table{Title: "Colocation: " + name + " (medians of repeats)",
		Columns: []string{"policy", "p50", "p90", "p99", "p99 / alone", "p99.9", "max", "req/s", "errors", "batch CPUs", "batch / idle CPU"}}
	bars := Chart{Kind: ChartBar, Title: name + ": p99 latency relative to the service alone", XLabel: "policy", YLabel: "p99 / p99 alone"}
	barS := Series{Name: "p99 ratio"}
	cpuS := Series{Name: "batch share of idle CPU"}
	cdf := Chart{Kind: ChartCDF, Title: name + ": latency distribution per policy", XLabel: "latency (ms)", YLabel: "percentile", LogX: true}
	type scored struct {
		pol          string
		ratio, share float64
	}
	var scores []scored
	for _, p := range pts {
		pol := p.Point.Get("policy")
		idle := p.Median("machine_cpus") - p.Median("service_cpus") - nanTo(p.Median("generator_cpus"), 0)
		share := p.Median("batch_cpus") / idle
		if pol == polBatchAlone {
			t.Rows = append(t.Rows, []string{pol, "-", "-", "-", "-", "-", "-", "-", "-", fmt.Sprintf("%.2f", p.Median("batch_cpus")), "-"})
			continue
		}
		ratio := p.Median("p99_ms") / aloneP99
		shareS := "-"
		if pol != polAlone {
			shareS = fmt.Sprintf("%.0f%%", 100*share)
			scores = append(scores, scored{pol, ratio, share})
		}
		t.Rows = append(t.Rows, []string{pol, fmtMs(p.Median("p50_ms")), fmtMs(p.Median("p90_ms")), fmtMs(p.Median("p99_ms")),
			fmt.Sprintf("%.2fx", ratio), fmtMs(p.Median("p999_ms")), fmtMs(p.Median("max_ms")),
			fmt.Sprintf("%.0f", p.Median("rps")), fmt.Sprintf("%.0f", p.Median("errors")),
			fmt.Sprintf("%.2f", p.Median("batch_cpus")), shareS})
		bars.XLabels = append(bars.XLabels, pol)
		barS.Y = append(barS.Y, ratio)
		cpuS.Y = append(cpuS.Y, nanTo(share, 0))
		var xs, ys []float64
		for _, q := range cdfKeep {
			if v := p.Median(fmt.Sprintf("cdf_%g", q)); !math.IsNaN(v) {
				xs, ys = append(xs, v), append(ys, q)
			}
		}
		cdf.Series = append(cdf.Series, Series{Name: pol, X: xs, Y: ys})
	}
	t.Note = fmt.Sprintf("batch / idle CPU: the batch's CPU over the CPU the service left idle (machine minus service, minus the load generator where it shares the CPUs); batch alone used %.2f CPUs", batchAlone)
	if e.spec.Tool == toolWrk {
		t.Note += "; wrk is closed-loop, so its tail understates what users at a fixed rate see"
	}
	if env := e.spec; env.LoadFraction > 0 {
		t.Note += "; on machines with fewer than 4 CPUs the load generator shares CPUs with both sides, which inflates every figure alike"
	}
	bars.Series = []Series{barS, cpuS}
	a.Tables = append(a.Tables, t)
	a.Charts = append(a.Charts, bars, cdf)
	if math.IsNaN(aloneP99) || len(scores) == 0 {
		return ""
	}
	// The best policy keeps p99 lowest among those giving the batch at
	// least 90% of the idle CPU.
	best := scored{ratio: math.Inf(1)}
	for _, s := range scores {
		if s.share >= 0.9 && s.ratio < best.ratio {
			best = s
		}
	}
	var rec string
	if best.pol == "" {
		rec = fmt.Sprintf("%s: no policy kept the batch at 90%% of the idle CPU", svc)
	} else {
		rec = fmt.Sprintf("%s: use %s (p99 %.2fx alone, batch keeps %.0f%% of the idle CPU).", svc, best.pol, best.ratio, 100*best.share)
	}
	for _, s := range scores {
		if s.pol == polCorepin {
			verdict := "meets"
			if !(s.ratio <= 1.10 && s.share >= 0.9) {
				verdict = "misses"
			}
			rec += fmt.Sprintf(" corepin's default %s the bar (p99 <= 1.10x alone with >= 90%% of idle CPU to the batch): %.2fx, %.0f%%.", verdict, s.ratio, 100*s.share)
		}
		if s.pol == polNone {
			rec += fmt.Sprintf(" Without a policy p99 is %.2fx alone.", s.ratio)
		}
	}
	return rec
}

func fmtMs(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	if v < 1 {
		return fmt.Sprintf("%.0fus", v*1000)
	}
	return fmt.Sprintf("%.1fms", v)
}

func nanTo(v, d float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return d
	}
	return v
}

// CurrentSpec returns the spec as configured.
func (e *colocationExp) CurrentSpec() any { return &e.spec }
