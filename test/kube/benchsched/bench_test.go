// Package benchsched is make bench-sched: corepin's scheduling at fleet
// scale (issue 22 §4). etcd and kube-apiserver (make kube-bin's
// binaries), N nodes as API objects publishing real machines' topologies
// (the sysfs fixtures, read by the topology package) at random occupancy
// through kube/nodestate's encoder, and a burst of M pods with CPU wishes
// created at once, bound by each scheduler in turn: stock kube-scheduler
// (no topology), corepin-scheduler (the framework plugin) and
// kube-scheduler with corepin's extender under the shipped configuration.
// For each: pods/s to bind the burst, p50/p99 creation-to-binding, and the
// share of bound pods their node refuses when its bindings are replayed
// through its allocator.
package benchsched

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/corepin/corepin/test/kube/kubetest"
)

// Parameters, from the environment (make bench-sched passes its own
// variables through them).
const (
	envBin     = "COREPIN_KUBE_BIN"
	envCorepin = "COREPIN_BIN"
	envSched   = "COREPIN_SCHED_BIN"
	envNodes   = "COREPIN_BENCH_NODES"      // N list, comma-separated
	envPods    = "COREPIN_BENCH_PODS"       // M
	envSeed    = "COREPIN_BENCH_SEED"       // occupancy and pod draws
	envQPS     = "COREPIN_BENCH_QPS"        // every scheduler's client qps and burst
	envScheds  = "COREPIN_BENCH_SCHEDULERS" // a subset of stock,plugin,extender
	envReport  = "COREPIN_BENCH_REPORT"     // the JSON report's path
	envPending = "COREPIN_BENCH_PENDING"    // 1: create the burst before the scheduler starts
	envLimit   = "COREPIN_BENCH_LIMIT"      // the longest a burst may take to settle
	envProfile = "COREPIN_BENCH_PROFILE"    // a directory: a CPU profile of each scheduler's burst there, and its heap after
)

// params are one run's parameters.
type params struct {
	Nodes      []int    `json:"nodes"`
	Pods       int      `json:"pods"`
	Seed       uint64   `json:"seed"`
	QPS        int      `json:"scheduler_qps_burst"`
	Schedulers []string `json:"schedulers"`
	// CreateQPS is the creating client's qps and burst, Creators its
	// concurrent creations.
	CreateQPS int `json:"create_qps"`
	Creators  int `json:"creators"`
	// Live creates each burst at once when its scheduler is ready (for
	// the plugin, once its cache has decoded every node: a warm
	// scheduler, as in a running cluster), latencies from each pod's
	// creation; the creation rate is in each result. Without it
	// (COREPIN_BENCH_PENDING=1) the burst is created first and the
	// scheduler started on it, so that creation can never be the limit:
	// pods/s and latencies count from the scheduler's readiness, its
	// start-up (the plugin decoding every node) included.
	Live bool `json:"live"`
	// Profile is the directory of each burst's CPU profile of its
	// scheduler (seconds of the burst, from its /debug/pprof) and of its
	// heap when the burst settled (after a GC), "" for none.
	Profile string `json:"profile,omitempty"`
	// LimitS is the longest a burst may take to settle; a burst still
	// settling then is reported as timed out, its figures those of the
	// pods bound by then.
	LimitS float64 `json:"limit_s"`
}

func readParams(t *testing.T) params {
	p := params{Nodes: []int{100, 1000, 5000}, Pods: 300, Seed: 1, QPS: 1000, Schedulers: allSchedulers, CreateQPS: 5000, Creators: 64, LimitS: 300}
	bad := func(name, v, want string) { t.Fatalf("%s=%q: want %s", name, v, want) }
	if v := os.Getenv(envNodes); v != "" {
		p.Nodes = nil
		for f := range strings.SplitSeq(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				bad(envNodes, v, "node counts separated by commas, e.g. 100,1000,5000")
			}
			p.Nodes = append(p.Nodes, n)
		}
	}
	for _, f := range []struct {
		name string
		dst  *int
	}{{envPods, &p.Pods}, {envQPS, &p.QPS}} {
		if v := os.Getenv(f.name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				bad(f.name, v, "a positive integer")
			}
			*f.dst = n
		}
	}
	if v := os.Getenv(envSeed); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			bad(envSeed, v, "an unsigned integer")
		}
		p.Seed = s
	}
	p.Live = os.Getenv(envPending) != "1"
	p.Profile = os.Getenv(envProfile)
	if v := os.Getenv(envLimit); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			bad(envLimit, v, "a duration, e.g. 5m")
		}
		p.LimitS = d.Seconds()
	}
	if v := os.Getenv(envScheds); v != "" {
		p.Schedulers = nil
		for f := range strings.SplitSeq(v, ",") {
			if !slices.Contains(allSchedulers, f) {
				bad(envScheds, v, "a comma-separated subset of "+strings.Join(allSchedulers, ","))
			}
			p.Schedulers = append(p.Schedulers, f)
		}
	}
	return p
}

// result is one scheduler's figures at one N.
type result struct {
	Nodes     int    `json:"nodes"`
	Scheduler string `json:"scheduler"`
	Pods      int    `json:"pods"`
	Bound     int    `json:"bound"`
	// Unschedulable are the pods left Unschedulable; TimedOut says the
	// burst had not settled at the limit.
	Unschedulable int  `json:"unschedulable"`
	TimedOut      bool `json:"timed_out,omitempty"`
	// PodsPerS is the bound pods over the time from the first creation
	// to the last binding; CreatePerS the pods over the creation time.
	PodsPerS   float64 `json:"pods_per_s"`
	CreatePerS float64 `json:"create_per_s"`
	BindSpanS  float64 `json:"bind_span_s"`
	// P50Ms, P99Ms, MaxMs: creation (its API call returned; or the
	// scheduler's readiness, for a burst created before it) to binding
	// (the watch saw the node), bound pods.
	P50Ms float64 `json:"p50_ms"`
	P99Ms float64 `json:"p99_ms"`
	MaxMs float64 `json:"max_ms"`
	// Refused are the bound pods their node's allocator refuses on
	// replay; RefusedShare their share of the bound.
	Refused       int      `json:"refused"`
	RefusedShare  float64  `json:"refused_share"`
	RefusedSample []string `json:"refused_sample,omitempty"`
	// SchedCPUS is the scheduler process's CPU time during the burst,
	// SchedRSSMiB its peak resident memory at the end.
	SchedCPUS   float64 `json:"scheduler_cpu_s"`
	SchedRSSMiB float64 `json:"scheduler_peak_rss_mib"`
}

// report is the JSON report.
type report struct {
	Params  params   `json:"params"`
	Started string   `json:"started"`
	WallS   float64  `json:"wall_s"`
	Results []result `json:"results"`
	// Stopped says where the N list stopped early and why.
	Stopped string   `json:"stopped,omitempty"`
	Checks  []string `json:"checks"`
}

// TestBenchSched is make bench-sched.
func TestBenchSched(t *testing.T) {
	e := env{bin: os.Getenv(envBin), corepin: os.Getenv(envCorepin), sched: os.Getenv(envSched)}
	if e.bin == "" || e.corepin == "" || e.sched == "" {
		t.Skipf("run through make bench-sched (%s, %s, %s unset)", envBin, envCorepin, envSched)
	}
	p := readParams(t)
	e.qps = p.QPS
	rep := &report{Params: p, Started: time.Now().UTC().Format(time.RFC3339)}
	begin := time.Now()
	t.Logf("bench-sched: N=%v M=%d seed=%d schedulers=%v, scheduler client qps/burst %d/%d for each, creation qps/burst %d with %d creators, %s",
		p.Nodes, p.Pods, p.Seed, p.Schedulers, p.QPS, p.QPS, p.CreateQPS, p.Creators, modeOf(p))
	ms := machines(t)
	var names []string
	for _, m := range ms {
		names = append(names, fmt.Sprintf("%s (%d CPUs, %d NUMA nodes)", m.name, m.topo.Allowed().Size(), len(m.topo.NodesWithCPUs())))
	}
	t.Logf("machine types: %s", strings.Join(names, ", "))
	for _, n := range p.Nodes {
		if free := memAvailableGiB(); free < float64(n)/1000+3 {
			rep.Stopped = fmt.Sprintf("N=%d not run: %.1f GiB available, the run wants about %.0f", n, free, float64(n)/1000+3)
			t.Log(rep.Stopped)
			break
		}
		ok := t.Run(fmt.Sprintf("N=%d", n), func(t *testing.T) {
			rep.Results = append(rep.Results, runN(t, e, p, ms, n)...)
		})
		if !ok {
			rep.Stopped = fmt.Sprintf("N=%d failed (see its log)", n)
			break
		}
	}
	rep.WallS = time.Since(begin).Seconds()
	rep.Checks = checks(rep.Results)
	t.Log("\n" + table(rep))
	writeReport(t, rep)
}

// runN runs every scheduler's burst on a fresh control plane of n nodes.
func runN(t *testing.T, e env, p params, ms []machine, n int) []result {
	dir := t.TempDir()
	ps := &kubetest.Procs{T: t}
	t.Cleanup(ps.Stop)
	cp := kubetest.StartControlPlane(t, ps, e.bin, dir, "--max-requests-inflight=2000", "--max-mutating-requests-inflight=1000")
	cfg := rest.CopyConfig(cp.Config)
	cfg.QPS, cfg.Burst = float32(p.CreateQPS), p.CreateQPS
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(p.Seed, uint64(n)))
	begin := time.Now()
	nodes := makeNodes(t, ms, n, rng)
	byName := map[string]*corev1.Node{}
	for _, bn := range nodes {
		byName[bn.obj.Name] = bn.obj
	}
	if err := createNodes(ctx, cs, nodes); err != nil {
		t.Fatal(err)
	}
	t.Logf("N=%d: control plane ready in %.1f s; %d nodes built and created in %.1f s", n, cp.Ready.Seconds(), n, time.Since(begin).Seconds())
	var out []result
	for i, s := range p.Schedulers {
		pods := makePods(p.Pods, rand.New(rand.NewPCG(p.Seed, 1)), fmt.Sprintf("bench-%s", s), profileName(s))
		out = append(out, burst(t, e, p, cp, cs, dir, n, s, pods, byName))
		if i < len(p.Schedulers)-1 {
			clearPods(ctx, t, cs, pods[0].Namespace)
		}
	}
	return out
}

// burst runs scheduler s alone and creates pods at once, waiting until
// every one is bound or Unschedulable; the scheduler is stopped after.
func burst(t *testing.T, e env, p params, cp *kubetest.ControlPlane, cs kubernetes.Interface, dir string, n int, s string,
	pods []*corev1.Pod, nodes map[string]*corev1.Node) result {
	ctx := t.Context()
	ns := pods[0].Namespace
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := watch(ctx, cs, ns)
	if err != nil {
		t.Fatal(err)
	}
	create := func() (time.Time, time.Duration) {
		start := time.Now()
		err := createAll(len(pods), p.Creators, func(i int) error {
			if _, err := cs.CoreV1().Pods(ns).Create(ctx, pods[i], metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("creating pod %s: %w", pods[i].Name, err)
			}
			w.created(pods[i].Name, time.Now())
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		t.Logf("N=%d %s: %d pods created in %.1f s (%.0f/s)", n, s, len(pods), took.Seconds(), float64(len(pods))/took.Seconds())
		return start, took
	}
	var start time.Time
	var createdIn time.Duration
	if !p.Live {
		start, createdIn = create()
	}
	ps := &kubetest.Procs{T: t}
	begin := time.Now()
	proc, port := startScheduler(t, e, ps, dir, cp.Kubeconfig, s)
	defer ps.Stop()
	t.Logf("N=%d %s: scheduler ready (informers synced) in %.1f s", n, s, time.Since(begin).Seconds())
	if s == plugin {
		// The plugin's cache decodes every node once from the informer's
		// first list, after the scheduler's own handlers synced: a burst
		// meets a warm scheduler, as in a running cluster.
		if !waitLog(ctx, proc, "corepin: node states decoded", 10*time.Minute) {
			t.Fatalf("N=%d: corepin-scheduler never said its node states were decoded", n)
		}
		t.Logf("N=%d %s: node states decoded %.1f s after start", n, s, time.Since(begin).Seconds())
	}
	pid := proc.Cmd.Process.Pid
	cpu0, _ := procUsage(pid)
	if p.Live {
		start, createdIn = create()
	} else {
		start = time.Now() // the burst is there: from the scheduler's readiness
	}
	profiled := make(chan struct{})
	if p.Profile != "" {
		go func() {
			defer close(profiled)
			profile(t, port, cp.Token, 15, filepath.Join(p.Profile, fmt.Sprintf("bench-sched-%d-%s.pprof", n, s)))
		}()
	} else {
		close(profiled)
	}
	settled := w.wait(ctx, len(pods), time.Duration(p.LimitS*float64(time.Second)), func(bound, unsched int) {
		t.Logf("N=%d %s: %d bound, %d Unschedulable, %.0f s into the burst", n, s, bound, unsched, time.Since(start).Seconds())
	})
	<-profiled
	cpu1, rss := procUsage(pid)
	if p.Profile != "" {
		heapProfile(t, port, cp.Token, filepath.Join(p.Profile, fmt.Sprintf("bench-sched-%d-%s.heap.pprof", n, s)))
	}
	out := w.snapshot()
	r := summarize(out, start)
	r.Nodes, r.Scheduler, r.Pods, r.TimedOut = n, s, len(pods), !settled
	r.CreatePerS = float64(len(pods)) / createdIn.Seconds()
	r.SchedCPUS, r.SchedRSSMiB = (cpu1 - cpu0).Seconds(), rss
	refused, err := replay(nodes, pods, out)
	if err != nil {
		t.Fatal(err)
	}
	r.Refused = len(refused)
	if r.Bound > 0 {
		r.RefusedShare = float64(r.Refused) / float64(r.Bound)
	}
	r.RefusedSample = refused[:min(len(refused), 5)]
	t.Logf("N=%d %s: %d bound, %d Unschedulable%s; %.1f pods/s, p50 %.0f ms, p99 %.0f ms; %d refused on replay",
		n, s, r.Bound, r.Unschedulable, map[bool]string{true: " (timed out)"}[r.TimedOut], r.PodsPerS, r.P50Ms, r.P99Ms, r.Refused)
	return r
}

// waitLog reports whether p's output holds line within limit.
func waitLog(ctx context.Context, p *kubetest.Proc, line string, limit time.Duration) bool {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, limit, true, func(context.Context) (bool, error) {
		return strings.Contains(p.Log.String(), line), nil
	})
	return err == nil
}

// summarize counts the outcomes of a burst that began at start (its
// creation, or the scheduler's readiness when the pods were there before:
// a binding seen before start, the readiness being polled, moves start to
// it). A pod's latency runs from its creation or start, the later.
func summarize(out map[string]outcome, start time.Time) result {
	var r result
	var last time.Time
	for _, o := range out {
		if o.node != "" && o.bound.Before(start) {
			start = o.bound
		}
	}
	var lat []time.Duration
	for _, o := range out {
		switch {
		case o.node != "":
			r.Bound++
			lat = append(lat, o.bound.Sub(later(o.created, start)))
			if o.bound.After(last) {
				last = o.bound
			}
		case o.unschedulable:
			r.Unschedulable++
		}
	}
	if len(lat) == 0 {
		return r
	}
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	r.P50Ms, r.P99Ms, r.MaxMs = ms(lat[len(lat)/2]), ms(lat[(len(lat)*99)/100]), ms(lat[len(lat)-1])
	r.BindSpanS = last.Sub(start).Seconds()
	r.PodsPerS = float64(r.Bound) / r.BindSpanS
	return r
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// clearPods deletes the namespace's pods at once (grace 0: no kubelet runs
// them) and waits until none is left, so that the next scheduler starts
// on the nodes as they were.
func clearPods(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns string) {
	zero := int64(0)
	if err := cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil && len(l.Items) == 0, err
	})
	if err != nil {
		t.Fatalf("deleting the pods of %s: %v", ns, err)
	}
}

// modeOf says how the bursts are created and timed.
func modeOf(p params) string {
	if p.Live {
		return "bursts created at once on a ready scheduler (latency from each pod's creation)"
	}
	return "bursts created before the scheduler starts (pods/s and latency from its readiness, start-up included)"
}

// memAvailableGiB is /proc/meminfo's MemAvailable.
func memAvailableGiB() float64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for l := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(l, "MemAvailable:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / (1 << 20)
		}
	}
	return 0
}

// checks are the requirements, each with its verdict: the plugin
// at >= 50% of stock's pods/s and >= 10x the extender's at 1000 and 5000
// nodes (at 100 the figures are shown, not judged: a burst there is
// bound about as fast as it is created), and no bound pod refused on
// replay (plugin and extender).
func checks(rs []result) []string {
	by := map[[2]any]result{}
	var ns []int
	for _, r := range rs {
		by[[2]any{r.Nodes, r.Scheduler}] = r
		if !slices.Contains(ns, r.Nodes) {
			ns = append(ns, r.Nodes)
		}
	}
	verdict := func(ok bool) string { return map[bool]string{true: "ok", false: "MISSED"}[ok] }
	var out []string
	for _, n := range ns {
		pl, okP := by[[2]any{n, plugin}]
		if st, ok := by[[2]any{n, stock}]; ok && okP && st.PodsPerS > 0 {
			ratio := pl.PodsPerS / st.PodsPerS
			out = append(out, fmt.Sprintf("N=%d plugin/stock pods/s %.2f (want >= 0.5 at 1000 and 5000): %s", n, ratio, verdict(ratio >= 0.5 || n < 1000)))
		}
		if ex, ok := by[[2]any{n, extender}]; ok && okP && ex.PodsPerS > 0 {
			ratio := pl.PodsPerS / ex.PodsPerS
			out = append(out, fmt.Sprintf("N=%d plugin/extender pods/s %.1f (want >= 10 at 1000 and 5000): %s", n, ratio, verdict(ratio >= 10 || n < 1000)))
		}
		for _, s := range []string{plugin, extender} {
			if r, ok := by[[2]any{n, s}]; ok {
				out = append(out, fmt.Sprintf("N=%d %s refused on replay %d of %d bound (want 0): %s", n, s, r.Refused, r.Bound, verdict(r.Refused == 0)))
			}
		}
	}
	return out
}

// table is the report as a table, one row per N and scheduler, then the
// checks.
func table(rep *report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "bench-sched: M=%d pods per burst, seed %d, scheduler client qps/burst %d/%d (each), %s, wall %.0f s\n",
		rep.Params.Pods, rep.Params.Seed, rep.Params.QPS, rep.Params.QPS, modeOf(rep.Params), rep.WallS)
	fmt.Fprintf(&b, "%6s  %-9s %9s %6s %9s %9s %9s %9s %8s %9s %8s %8s\n",
		"N", "scheduler", "bound", "unsch", "pods/s", "p50 ms", "p99 ms", "max ms", "refused", "create/s", "cpu s", "rss MiB")
	for _, r := range rep.Results {
		fmt.Fprintf(&b, "%6d  %-9s %4d/%-4d %6d %9.1f %9.0f %9.0f %9.0f %8s %9.0f %8.1f %8.0f%s\n",
			r.Nodes, r.Scheduler, r.Bound, r.Pods, r.Unschedulable, r.PodsPerS, r.P50Ms, r.P99Ms, r.MaxMs,
			fmt.Sprintf("%.1f%%", 100*r.RefusedShare), r.CreatePerS, r.SchedCPUS, r.SchedRSSMiB,
			cmp.Or(map[bool]string{true: "  (timed out)"}[r.TimedOut], ""))
	}
	if rep.Stopped != "" {
		fmt.Fprintf(&b, "stopped: %s\n", rep.Stopped)
	}
	for _, c := range rep.Checks {
		fmt.Fprintf(&b, "check: %s\n", c)
	}
	return b.String()
}

// writeReport writes the JSON report to $COREPIN_BENCH_REPORT, if set.
func writeReport(t *testing.T, rep *report) {
	path := os.Getenv(envReport)
	if path == "" {
		return
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("report: %s", path)
}
