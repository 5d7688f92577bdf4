package bench

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/experiment"
	"github.com/corepin/corepin/topology"
	"github.com/corepin/corepin/workload"
)

// Row is one line of an experiment's results as data: `-o json`'s rows
// (analysis.rows), keyed by snake_case names, null where not measured.
type Row map[string]any

// stackedRound reports whether, in one round, two or more LS threads woke
// on one CPU while a CPU of cpus woke none of them: the kernel stacked
// the service's threads while a CPU ran only other work (the batch, when
// one runs; nothing, when none does). CPUs outside cpus and unknown CPUs
// (negative) count for neither side.
func stackedRound(wake []int, cpus cpuset.CPUSet) bool {
	count := make(map[int]int, len(wake))
	shared := false
	for _, c := range wake {
		if c < 0 || !cpus.Contains(c) {
			continue
		}
		count[c]++
		if count[c] == 2 {
			shared = true
		}
	}
	return shared && len(count) < cpus.Size()
}

// wakeRounds is the analysis of one probe run.
type wakeRounds struct {
	Rounds     int
	Stacked    int
	StackedPct float64
	// WaitP50US and WaitP99US are percentiles of the run-queue wait per
	// thread and round, in µs (HdrHistogram, 3 significant figures).
	WaitP50US, WaitP99US float64
}

// maxWaitUS caps a recorded wait: a run-queue wait above 10 s is counted
// as 10 s.
const maxWaitUS = 10_000_000

// analyzeWakeRounds computes the figures of one probe run on cpus.
func analyzeWakeRounds(res workload.WakeupResult, cpus cpuset.CPUSet) wakeRounds {
	w := wakeRounds{Rounds: len(res.WakeCPUs)}
	for _, r := range res.WakeCPUs {
		if stackedRound(r, cpus) {
			w.Stacked++
		}
	}
	w.StackedPct = math.NaN()
	if w.Rounds > 0 {
		w.StackedPct = 100 * float64(w.Stacked) / float64(w.Rounds)
	}
	h := hdrhistogram.New(1, maxWaitUS, 3)
	for _, r := range res.RunqWaitNS {
		for _, ns := range r {
			_ = h.RecordValue(min(max(ns/int64(time.Microsecond), 0), maxWaitUS))
		}
	}
	w.WaitP50US, w.WaitP99US = math.NaN(), math.NaN()
	if h.TotalCount() > 0 {
		w.WaitP50US, w.WaitP99US = float64(h.ValueAtQuantile(50)), float64(h.ValueAtQuantile(99))
	}
	return w
}

// beShareOfIdle is the batch's share of the CPU the service left: batch
// CPU time / (CPUs x wall - the service's CPU time), clamped to 0..1;
// NaN when nothing was left.
func beShareOfIdle(batch, ls, wall time.Duration, cpus int) float64 {
	idle := time.Duration(cpus)*wall - ls
	if idle <= 0 {
		return math.NaN()
	}
	return min(1, max(0, batch.Seconds()/idle.Seconds()))
}

// allCPUs is the set the probe's threads may wake on: the allowed CPUs.
func allCPUs(env *Env) cpuset.CPUSet {
	if env.Topo != nil && env.Topo.Allowed().Size() > 0 {
		return env.Topo.Allowed()
	}
	var b cpuset.Builder
	for c := range allowedCPUs(env) {
		b.Add(c)
	}
	return b.Result()
}

// wakeupMetrics are the per-point figures of a row, in column order.
var wakeupMetrics = []string{"stacked_pct", "runq_wait_p50_us", "runq_wait_p99_us", "be_share_of_idle"}

// Analyze makes one row per point (medians over repeats), the table of
// those rows and a notice of what was skipped, once.
func (e *wakeupExp) Analyze(_ *Env, pts []experiment.PointResult) Analysis {
	t := Table{Title: "Wake placement beside a BE batch (medians of repeats)",
		Columns: []string{"BE route", "LS class", "batch threads", "LS threads", "stacked %", "runq wait p50 µs", "runq wait p99 µs", "BE share of idle"}}
	var a Analysis
	for _, p := range pts {
		row := Row{"be_route": p.Point.Get("be_route"), "ls_class": p.Point.Get("ls_class")}
		cells := []string{p.Point.Get("be_route"), p.Point.Get("ls_class"), p.Point.Get("batch_threads"), p.Point.Get("ls_threads")}
		for _, k := range []string{"batch_threads", "ls_threads"} {
			if n, err := strconv.Atoi(p.Point.Get(k)); err == nil {
				row[k] = n
			}
		}
		for _, k := range wakeupMetrics {
			v := p.Median(k)
			row[k] = nil
			if !math.IsNaN(v) {
				row[k] = v
			}
			cells = append(cells, fmtWake(k, v))
		}
		row["repeats"] = len(p.Repeats)
		a.Rows = append(a.Rows, row)
		t.Rows = append(t.Rows, cells)
	}
	t.Note = fmt.Sprintf("stacked: rounds in which two LS threads woke on one CPU while another CPU woke none of them (%d rounds of %v, %v CPU each); "+
		"runq wait: schedstat's run-queue wait per thread and round; BE share: the batch's CPU / (CPUs x wall - the service's CPU)",
		e.spec.Rounds, e.spec.Period, e.spec.Burn)
	a.Tables = []Table{t}
	a.Skipped = e.spec.Skipped
	a.Notice = skipNotice(e.spec.Skipped)
	if len(e.spec.Inert) > 0 {
		n := "an attached sched_ext scheduler leaves " + strings.Join(e.spec.Inert, ", ") + " without effect (measured all the same)"
		a.Notice = strings.TrimPrefix(a.Notice+"; "+n, "; ")
	}
	a.Recommendation = wakeupRecommendation(a.Rows, stackedRepeats(pts))
	return a
}

// wakeKey names a point by route, class and batch size.
type wakeKey struct{ route, class, batch string }

// stackedRepeats are each point's stacked % per repeat.
func stackedRepeats(pts []experiment.PointResult) map[wakeKey][]float64 {
	out := map[wakeKey][]float64{}
	for _, p := range pts {
		k := wakeKey{p.Point.Get("be_route"), p.Point.Get("ls_class"), p.Point.Get("batch_threads")}
		out[k] = p.Values("stacked_pct")
	}
	return out
}

func fmtWake(metric string, v float64) string {
	switch {
	case math.IsNaN(v):
		return "-"
	case metric == "be_share_of_idle":
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.0f", v)
}

// skipNotice says what was skipped and why, each reason once:
// "skipped ls_class rr, ls_class fifo: <reason>; be_route cpu_idle: <reason>".
func skipNotice(skips []Skip) string {
	var order []string
	by := map[string][]string{}
	for _, s := range skips {
		if _, ok := by[s.Reason]; !ok {
			order = append(order, s.Reason)
		}
		by[s.Reason] = append(by[s.Reason], s.What)
	}
	parts := make([]string, len(order))
	for i, r := range order {
		parts[i] = strings.Join(by[r], ", ") + ": " + r
	}
	if len(parts) == 0 {
		return ""
	}
	return "skipped " + strings.Join(parts, "; ")
}

// wakeupRecommendation compares, at each batch size, the route and class
// that stacked least (a tie goes to the shorter p99 wait) with corepin's
// default (the idle_parent route, the normal class) over the repeats
// (Mann-Whitney, Alpha), and names the one whose difference is largest
// among those lower beyond the noise; otherwise it keeps the default and
// says why. Where the default was not measured (no writable cgroup) it
// names what stacked least and says that it was compared with nothing.
func wakeupRecommendation(rows []Row, reps map[wakeKey][]float64) string {
	type cand struct {
		row    Row
		v, p99 float64
	}
	best := map[string]cand{} // by batch size
	alone := map[any]float64{}
	for _, r := range rows {
		v, ok1 := r["stacked_pct"].(float64)
		p99, ok2 := r["runq_wait_p99_us"].(float64)
		if !ok1 || !ok2 {
			continue
		}
		if r["be_route"] == topology.RouteNone {
			alone[r["ls_class"]] = v
			continue
		}
		b := fmt.Sprint(r["batch_threads"])
		if c, ok := best[b]; !ok || v < c.v || (v == c.v && p99 < c.p99) {
			best[b] = cand{r, v, p99}
		}
	}
	if len(best) == 0 {
		return "no route beside a batch was measured"
	}
	describe := func(r Row) string {
		base := ""
		if v, ok := alone[r["ls_class"]]; ok {
			base = fmt.Sprintf(" (%.0f%% with no batch)", v)
		}
		return fmt.Sprintf("route %s, LS class %s, %v batch thread(s): %.0f%% of rounds stacked%s, run-queue wait p99 %.0f µs",
			r["be_route"], r["ls_class"], r["batch_threads"], r["stacked_pct"], base, r["runq_wait_p99_us"])
	}
	sizes := make([]string, 0, len(best))
	for b := range best {
		sizes = append(sizes, b)
	}
	slices.Sort(sizes)
	var pick, kept string
	var gain float64
	measuredDefault := false
	for _, b := range sizes {
		c := best[b]
		def, ok := reps[wakeKey{topology.RouteIdleParent, workload.ClassNormal, b}]
		if !ok {
			continue
		}
		measuredDefault = true
		mine := reps[wakeKey{fmt.Sprint(c.row["be_route"]), fmt.Sprint(c.row["ls_class"]), b}]
		cmp := MannWhitney(mine, def)
		d := experiment.Median(def) - experiment.Median(mine)
		if d > 0 && cmp.Significant() {
			if d > gain {
				gain = d
				pick = fmt.Sprintf("fewest stacked wakes beside a batch: %s, against corepin's default route (idle_parent, normal class) at %.0f%% (%s)",
					describe(c.row), experiment.Median(def), cmp)
			}
		} else if kept == "" && d > 0 {
			kept = fmt.Sprintf("; %s was not lower beyond the noise than its %.0f%% (%s)", describe(c.row), experiment.Median(def), cmp)
		}
	}
	switch {
	case pick != "":
		return pick
	case !measuredDefault:
		var c cand
		for i, b := range sizes {
			if i == 0 || best[b].v < c.v || (best[b].v == c.v && best[b].p99 < c.p99) {
				c = best[b]
			}
		}
		return "stacked least beside a batch: " + describe(c.row) + "; not compared with corepin's default route (idle_parent), which was not measured here"
	}
	return "keep corepin's default (BE under the idle parent, LS in the normal class): no route or class stacked fewer wakes beyond the noise" + kept
}
