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
	envRepeats = "COREPIN_BENCH_REPEATS"    // bursts per scheduler and N, interleaved
	envPct     = "COREPIN_BENCH_PLUGIN_PCT" // the plugin profile's percentageOfNodesToScore (unset: the chart's)
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
	// Repeats is the bursts of each scheduler at each N, the schedulers
	// taking turns (stock, plugin, stock, plugin, ...) on one control
	// plane: the checks compare the medians, so that one burst slowed by
	// the machine's other work does not decide.
	Repeats int `json:"repeats"`
	// PluginPct is the plugin profile's percentageOfNodesToScore, 0 for
	// kube-scheduler's adaptive default; the chart's unless
	// COREPIN_BENCH_PLUGIN_PCT says otherwise. Stock runs with
	// kube-scheduler's defaults.
	PluginPct int `json:"plugin_percentage_of_nodes_to_score"`
	// PluginWeight is Corepin's weight in the plugin's profile, the
	// chart's.
	PluginWeight int `json:"plugin_weight"`
	// pctOverride is COREPIN_BENCH_PLUGIN_PCT, nil when unset.
	pctOverride *int
}

func readParams(t *testing.T) params {
	p := params{Nodes: []int{100, 1000, 5000}, Pods: 300, Seed: 1, QPS: 1000, Schedulers: allSchedulers, CreateQPS: 5000, Creators: 64, LimitS: 300,
		Repeats: 5}
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
	}{{envPods, &p.Pods}, {envQPS, &p.QPS}, {envRepeats, &p.Repeats}} {
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
	if v := os.Getenv(envPct); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 100 {
			bad(envPct, v, "0 (kube-scheduler's adaptive default) to 100")
		}
		p.pctOverride = &n
	}
	_, p.PluginPct, p.PluginWeight = pluginConfig(t, "(the run's)", p.QPS, p.pctOverride)
	return p
}

// result is one scheduler's figures at one N: of one burst, or the
// median of its repeats (report.Medians).
type result struct {
	Nodes     int    `json:"nodes"`
	Scheduler string `json:"scheduler"`
	// Repeat numbers the burst from 1; 0 in a median, whose Pods, Bound,
	// Unschedulable and Refused are the repeats' sums.
	Repeat int `json:"repeat"`
	Pods   int `json:"pods"`
	Bound  int `json:"bound"`
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
	// Medians are the median of each scheduler's repeats at each N, what
	// the checks compare.
	Medians []result `json:"medians"`
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
	e.qps, e.pluginPct = p.QPS, p.pctOverride
	rep := &report{Params: p, Started: time.Now().UTC().Format(time.RFC3339)}
	begin := time.Now()
	t.Logf("bench-sched: N=%v M=%d seed=%d schedulers=%v, %d repeats each, scheduler client qps/burst %d/%d for each, creation qps/burst %d with %d creators, %s; %s",
		p.Nodes, p.Pods, p.Seed, p.Schedulers, p.Repeats, p.QPS, p.QPS, p.CreateQPS, p.Creators, modeOf(p), profilesOf(p))
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
	rep.Medians = medians(rep.Results)
	rep.Checks = checks(rep.Medians)
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
	for rp := 1; rp <= p.Repeats; rp++ {
		for i, s := range p.Schedulers {
			// The same pods each time: the repeats measure the machine's
			// noise, not other draws.
			pods := makePods(p.Pods, rand.New(rand.NewPCG(p.Seed, 1)), fmt.Sprintf("bench-%s-%d", s, rp), profileName(s))
			out = append(out, burst(t, e, p, cp, cs, dir, n, s, rp, pods, byName))
			if rp < p.Repeats || i < len(p.Schedulers)-1 {
				clearPods(ctx, t, cs, pods[0].Namespace)
			}
		}
	}
	return out
}

// burst runs scheduler s alone and creates pods at once, waiting until
// every one is bound or Unschedulable; the scheduler is stopped after.
func burst(t *testing.T, e env, p params, cp *kubetest.ControlPlane, cs kubernetes.Interface, dir string, n int, s string, rp int,
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
		t.Logf("N=%d %s #%d: %d pods created in %.1f s (%.0f/s)", n, s, rp, len(pods), took.Seconds(), float64(len(pods))/took.Seconds())
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
	t.Logf("N=%d %s #%d: scheduler ready (informers synced) in %.1f s", n, s, rp, time.Since(begin).Seconds())
	if s == plugin {
		// The plugin's cache decodes every node once from the informer's
		// first list, after the scheduler's own handlers synced: a burst
		// meets a warm scheduler, as in a running cluster.
		if !waitLog(ctx, proc, "corepin: node states decoded", 10*time.Minute) {
			t.Fatalf("N=%d: corepin-scheduler never said its node states were decoded", n)
		}
		t.Logf("N=%d %s #%d: node states decoded %.1f s after start", n, s, rp, time.Since(begin).Seconds())
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
			profile(t, port, cp.Token, 15, filepath.Join(p.Profile, fmt.Sprintf("bench-sched-%d-%s-%d.pprof", n, s, rp)))
		}()
	} else {
		close(profiled)
	}
	settled := w.wait(ctx, len(pods), time.Duration(p.LimitS*float64(time.Second)), func(bound, unsched int) {
		t.Logf("N=%d %s #%d: %d bound, %d Unschedulable, %.0f s into the burst", n, s, rp, bound, unsched, time.Since(start).Seconds())
	})
	<-profiled
	cpu1, rss := procUsage(pid)
	if p.Profile != "" {
		heapProfile(t, port, cp.Token, filepath.Join(p.Profile, fmt.Sprintf("bench-sched-%d-%s-%d.heap.pprof", n, s, rp)))
		metricsDump(t, port, cp.Token, filepath.Join(p.Profile, fmt.Sprintf("bench-sched-%d-%s-%d.metrics.txt", n, s, rp)))
	}
	out := w.snapshot()
	r := summarize(out, start)
	r.Nodes, r.Scheduler, r.Repeat, r.Pods, r.TimedOut = n, s, rp, len(pods), !settled
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
	t.Logf("N=%d %s #%d: %d bound, %d Unschedulable%s; %.1f pods/s, p50 %.0f ms, p99 %.0f ms; %d refused on replay",
		n, s, rp, r.Bound, r.Unschedulable, map[bool]string{true: " (timed out)"}[r.TimedOut], r.PodsPerS, r.P50Ms, r.P99Ms, r.Refused)
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

// The targets for the plugin against stock, on the medians of
// the repeats at 1000 and 5000 nodes (at other N the ratios are shown, not
// judged): pods/s, p99 from creation to binding, and peak RSS (at 5000).
const (
	wantPodsRatio = 0.9
	wantP99Ratio  = 1.5
	wantRSSRatio  = 1.25
)

// judged reports whether the targets apply at n nodes.
func judged(n int) bool { return n == 1000 || n == 5000 }

// checks are the requirements, each with its verdict, on the medians of
// the repeats: the plugin against stock (wantPodsRatio, wantP99Ratio,
// wantRSSRatio), the plugin at >= 10x the extender's pods/s at 1000 and
// 5000 nodes, no bound pod refused on replay in any burst (plugin and
// extender), and how each scheduler's figures grow from the fewest nodes
// to the most (shown, not judged).
func checks(meds []result) []string {
	by := map[[2]any]result{}
	var ns []int
	for _, r := range meds {
		by[[2]any{r.Nodes, r.Scheduler}] = r
		if !slices.Contains(ns, r.Nodes) {
			ns = append(ns, r.Nodes)
		}
	}
	mark := func(ok bool) string { return map[bool]string{true: "ok", false: "MISSED"}[ok] }
	verdict := func(n int, ok bool) string {
		if !judged(n) {
			return "shown"
		}
		return mark(ok)
	}
	var out []string
	for _, n := range ns {
		pl, okP := by[[2]any{n, plugin}]
		if st, ok := by[[2]any{n, stock}]; ok && okP && st.PodsPerS > 0 && st.P99Ms > 0 && st.SchedRSSMiB > 0 {
			ratio := pl.PodsPerS / st.PodsPerS
			out = append(out, fmt.Sprintf("N=%d plugin/stock pods/s %.2f (want >= %.2f at 1000 and 5000): %s", n, ratio, wantPodsRatio, verdict(n, ratio >= wantPodsRatio)))
			ratio = pl.P99Ms / st.P99Ms
			out = append(out, fmt.Sprintf("N=%d plugin/stock p99 %.2f (want <= %.2f at 1000 and 5000): %s", n, ratio, wantP99Ratio, verdict(n, ratio <= wantP99Ratio)))
			ratio = pl.SchedRSSMiB / st.SchedRSSMiB
			v := "shown"
			if n == 5000 {
				v = verdict(n, ratio <= wantRSSRatio)
			}
			out = append(out, fmt.Sprintf("N=%d plugin/stock peak RSS %.2f (want <= %.2f at 5000): %s", n, ratio, wantRSSRatio, v))
		}
		if ex, ok := by[[2]any{n, extender}]; ok && okP && ex.PodsPerS > 0 {
			ratio := pl.PodsPerS / ex.PodsPerS
			out = append(out, fmt.Sprintf("N=%d plugin/extender pods/s %.1f (want >= 10 at 1000 and 5000): %s", n, ratio, verdict(n, ratio >= 10)))
		}
		for _, s := range []string{plugin, extender} {
			if r, ok := by[[2]any{n, s}]; ok {
				out = append(out, fmt.Sprintf("N=%d %s refused on replay %d of %d bound (want 0): %s", n, s, r.Refused, r.Bound, mark(r.Refused == 0)))
			}
		}
	}
	if len(ns) > 1 {
		lo, hi := slices.Min(ns), slices.Max(ns)
		for _, s := range []string{stock, plugin, extender} {
			a, okA := by[[2]any{lo, s}]
			b, okB := by[[2]any{hi, s}]
			if !okA || !okB || b.PodsPerS == 0 || a.Bound == 0 || b.Bound == 0 || a.SchedRSSMiB == 0 {
				continue
			}
			out = append(out, fmt.Sprintf("%s from %d to %d nodes: pods/s x%.2f, CPU per pod x%.2f, peak RSS x%.2f", s, lo, hi,
				b.PodsPerS/a.PodsPerS, (b.SchedCPUS/float64(b.Bound))/(a.SchedCPUS/float64(a.Bound)), b.SchedRSSMiB/a.SchedRSSMiB))
		}
	}
	return out
}

// medians are the median of each scheduler's repeats at each N, in the
// order they first ran: pods/s, latencies, CPU and RSS each the median of
// its own (an odd count's middle, an even's mean of the two middle ones),
// the counts summed, timed out if any repeat was.
func medians(rs []result) []result {
	type key struct {
		n int
		s string
	}
	var order []key
	groups := map[key][]result{}
	for _, r := range rs {
		k := key{r.Nodes, r.Scheduler}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	med := func(g []result, f func(result) float64) float64 {
		v := make([]float64, len(g))
		for i, r := range g {
			v[i] = f(r)
		}
		slices.Sort(v)
		if len(v)%2 == 1 {
			return v[len(v)/2]
		}
		return (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	var out []result
	for _, k := range order {
		g := groups[k]
		m := result{Nodes: k.n, Scheduler: k.s}
		for _, r := range g {
			m.Pods += r.Pods
			m.Bound += r.Bound
			m.Unschedulable += r.Unschedulable
			m.Refused += r.Refused
			m.TimedOut = m.TimedOut || r.TimedOut
			if len(m.RefusedSample) < 5 {
				m.RefusedSample = append(m.RefusedSample, r.RefusedSample[:min(len(r.RefusedSample), 5-len(m.RefusedSample))]...)
			}
		}
		if m.Bound > 0 {
			m.RefusedShare = float64(m.Refused) / float64(m.Bound)
		}
		m.PodsPerS = med(g, func(r result) float64 { return r.PodsPerS })
		m.CreatePerS = med(g, func(r result) float64 { return r.CreatePerS })
		m.BindSpanS = med(g, func(r result) float64 { return r.BindSpanS })
		m.P50Ms = med(g, func(r result) float64 { return r.P50Ms })
		m.P99Ms = med(g, func(r result) float64 { return r.P99Ms })
		m.MaxMs = med(g, func(r result) float64 { return r.MaxMs })
		m.SchedCPUS = med(g, func(r result) float64 { return r.SchedCPUS })
		m.SchedRSSMiB = med(g, func(r result) float64 { return r.SchedRSSMiB })
		out = append(out, m)
	}
	return out
}

// profilesOf says what each scheduler runs.
func profilesOf(p params) string {
	pct := "kube-scheduler's adaptive default"
	if p.PluginPct > 0 {
		pct = strconv.Itoa(p.PluginPct)
	}
	return fmt.Sprintf("stock: kube-scheduler's defaults (percentageOfNodesToScore adaptive); plugin: mode plugin's profile, percentageOfNodesToScore %s, Corepin at weight %d", pct, p.PluginWeight)
}

// table is the report as a table: one row per burst, then one per N and
// scheduler with the medians the checks compare, then the checks.
func table(rep *report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "bench-sched: M=%d pods per burst, seed %d, %d repeats, scheduler client qps/burst %d/%d (each), %s, wall %.0f s\n",
		rep.Params.Pods, rep.Params.Seed, rep.Params.Repeats, rep.Params.QPS, rep.Params.QPS, modeOf(rep.Params), rep.WallS)
	fmt.Fprintf(&b, "%s\n", profilesOf(rep.Params))
	head := func() {
		fmt.Fprintf(&b, "%6s  %-9s %3s %9s %6s %9s %9s %9s %9s %8s %9s %8s %8s\n",
			"N", "scheduler", "#", "bound", "unsch", "pods/s", "p50 ms", "p99 ms", "max ms", "refused", "create/s", "cpu s", "rss MiB")
	}
	row := func(r result, rp string) {
		fmt.Fprintf(&b, "%6d  %-9s %3s %4d/%-4d %6d %9.1f %9.0f %9.0f %9.0f %8s %9.0f %8.1f %8.0f%s\n",
			r.Nodes, r.Scheduler, rp, r.Bound, r.Pods, r.Unschedulable, r.PodsPerS, r.P50Ms, r.P99Ms, r.MaxMs,
			fmt.Sprintf("%.1f%%", 100*r.RefusedShare), r.CreatePerS, r.SchedCPUS, r.SchedRSSMiB,
			cmp.Or(map[bool]string{true: "  (timed out)"}[r.TimedOut], ""))
	}
	head()
	for _, r := range rep.Results {
		row(r, strconv.Itoa(r.Repeat))
	}
	fmt.Fprintf(&b, "medians of the repeats (counts summed):\n")
	head()
	for _, r := range rep.Medians {
		row(r, "med")
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
