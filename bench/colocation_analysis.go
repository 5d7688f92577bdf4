package bench

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/corepin/corepin/experiment"
)

// Analyze compares every policy's p99 with the service alone and the
// batch's CPU with what the service leaves idle, per service.
func (e *colocationExp) Analyze(env *Env, pts []experiment.PointResult) Analysis {
	var a Analysis
	var recs []string
	for _, s := range servicesOf(pts) {
		var sp []experiment.PointResult
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

func (e *colocationExp) analyzeService(svc string, pts []experiment.PointResult, a *Analysis) string {
	find := func(pol string) *experiment.PointResult {
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
		Columns: []string{"policy", "p50", "p90", "p99", "p99 / alone", "p99.9", "max", "req/s", "errors", "batch CPUs", "batch / idle CPU", "svc run-queue wait", "steal CPUs"}}
	bars := Chart{Kind: ChartBar, Title: name + ": p99 latency relative to the service alone", XLabel: "policy", YLabel: "p99 / p99 alone"}
	barS := Series{Name: "p99 ratio"}
	cpuS := Series{Name: "batch share of idle CPU"}
	cdf := Chart{Kind: ChartCDF, Title: name + ": latency distribution per policy", XLabel: "latency (ms)", YLabel: "percentile", LogX: true}
	for _, p := range pts {
		pol := p.Point.Get("policy")
		share := batchShare(p)
		na := NotApplicable
		if pol == polBatchAlone {
			t.Rows = append(t.Rows, []string{pol, na, na, na, na, na, na, na, na, cell("%.2f", p.Median("batch_cpus")), na, na, cell("%.3f", p.Median("steal_cpus"))})
			continue
		}
		ratio := p.Median("p99_ms") / aloneP99
		batchS, shareS := na, na // no batch runs beside the service alone
		if pol != polAlone {
			batchS, shareS = cell("%.2f", p.Median("batch_cpus")), cell("%.0f%%", 100*share)
		}
		t.Rows = append(t.Rows, []string{pol, fmtMs(p.Median("p50_ms")), fmtMs(p.Median("p90_ms")), fmtMs(p.Median("p99_ms")),
			cell("%.2fx", ratio), fmtMs(p.Median("p999_ms")), fmtMs(p.Median("max_ms")),
			cell("%.0f", p.Median("rps")), cell("%.0f", p.Median("errors")), batchS, shareS,
			cell("%.1f ms/s", p.Median("service_wait_ms_per_s")), cell("%.3f", p.Median("steal_cpus"))})
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
	t.Note = "batch / idle CPU: the batch's CPU over what it used plus what stayed idle on the CPUs under test (so the service, the load generator where it shares the CPUs, and any other work on the machine are left out)"
	if !math.IsNaN(batchAlone) { // the batch ran alone too (not in every policy list)
		t.Note += fmt.Sprintf("; the batch alone used %.2f CPUs", batchAlone)
	}
	if other := medianOver(pts, "other_cpus"); other >= 0.1 {
		t.Note += fmt.Sprintf("; other work on the machine used %.2f CPUs (median of the points): a batch under cpu.idle yields to it as to the service", other)
	}
	if e.spec.Tool == toolWrk {
		t.Note += "; wrk is closed-loop, so its tail understates what users at a fixed rate see"
	}
	if shared := medianOver(pts, "generator_cpus"); !math.IsNaN(shared) {
		if medianOver(pts, "generator_rt") == 1 {
			t.Note += "; the load generator shares the CPUs under test (fewer than 4) and ran in the fifo class, standing in for clients on other machines, so its own waits for a CPU are not counted as the service's"
		} else {
			t.Note += "; the load generator shares the CPUs under test (fewer than 4) in the fair class, so its own waits for a CPU count as the service's latency (run the bench as root, or with RLIMIT_RTPRIO >= 1, for generator_class auto to put it in fifo)"
		}
	}
	t.Note += "; svc run-queue wait: how long the service's threads waited for a CPU, per second of the window (schedstat); steal CPUs: what the hypervisor took from the CPUs under test (a tail with little wait and much steal is not the scheduler's)"
	bars.Series = []Series{barS, cpuS}
	a.Tables = append(a.Tables, t)
	if qt, ok := qosTable(svc, pts); ok {
		a.Tables = append(a.Tables, qt)
	}
	a.Charts = append(a.Charts, bars, cdf)
	scores, none := colocationScores(pts)
	if math.IsNaN(aloneP99) || len(scores) == 0 {
		return ""
	}
	rec, tested := recommendColocation(svc, scores, none)
	rec += leftOut(scores)
	for _, s := range scores {
		if s.pol == polCorepin {
			verdict := "meets"
			if !(s.ratio <= 1.10 && s.share >= minBatchShare) {
				verdict = "misses"
			}
			rec += fmt.Sprintf(" corepin's default %s the bar (p99 <= 1.10x alone with >= 90%% of idle CPU to the batch): %.2fx, %.0f%%", verdict, s.ratio, 100*s.share)
			if none != nil && !tested {
				rec += "; " + againstNone(s, *none)
			}
			rec += "."
		}
		if s.pol == polNone {
			rec += fmt.Sprintf(" Without a policy p99 is %.2fx alone.", s.ratio)
		}
	}
	if other, machine := medianOver(pts, "other_cpus"), medianOver(pts, "machine_cpus"); other >= busyShare*machine {
		rec += fmt.Sprintf(" Other work used %.2f of the %.0f CPUs during the runs: the tails measure it as much as the policies.", other, machine)
	}
	return rec
}

// busyShare is the share of the CPUs under test that other work on the
// machine must take for the recommendation to say its tails measure that
// work too.
const busyShare = 0.25

// batchShare is the median over p's repeats of the batch's share of the
// CPU it could have had: what it used over what it used plus what stayed
// idle on the CPUs under test. Where nothing was left (the batch got no
// CPU and none stayed idle: other work took it all) the policy wasted
// nothing, and the share is 1. Repeats measured before idle_cpus was
// recorded use the older estimate: the batch's CPU over the machine minus
// the service and the generator, which counts other work on the machine
// as idle and so reads a batch under cpu.idle as starved on a busy
// machine (issue 17 §3).
func batchShare(p experiment.PointResult) float64 {
	var shares []float64
	for _, m := range p.Repeats {
		batch, ok := m["batch_cpus"]
		if !ok || math.IsNaN(batch) {
			continue
		}
		if idle, ok := m["idle_cpus"]; ok && !math.IsNaN(idle) {
			if batch+idle < 0.01 {
				shares = append(shares, 1)
			} else {
				shares = append(shares, batch/(batch+idle))
			}
			continue
		}
		left := m["machine_cpus"] - m["service_cpus"] - nanTo(m["generator_cpus"], 0)
		shares = append(shares, batch/left)
	}
	return experiment.Median(shares)
}

// medianOver is the median of metric over every repeat of pts.
func medianOver(pts []experiment.PointResult, metric string) float64 {
	var all []float64
	for _, p := range pts {
		all = append(all, p.Values(metric)...)
	}
	return experiment.Median(all)
}

// minBatchShare is the share of the CPU the service leaves idle that a
// colocation policy must leave the batch to be recommended.
const minBatchShare = 0.9

// scored is one colocation policy's outcome for one service: medians of
// its p99 over the service's p99 alone and of the batch's share of the
// idle CPU, with the repeats they come from and, where the repeats carry
// them, their latency distributions.
type scored struct {
	pol          string
	ratio, share float64
	p99          []float64 // per repeat, ms
	tails        []Tail    // per repeat; nil unless every repeat has one
	// displaces says the policy's batch took CPU from other work on the
	// machine (displacedBy), with the test that says so in displacedTest.
	displaced     float64 // median other work alone minus under the policy, CPUs
	displaces     bool
	displacedTest Comparison
}

func scoredOf(pol string, ratio, share float64, p experiment.PointResult) scored {
	s := scored{pol: pol, ratio: ratio, share: share, p99: p.Values("p99_ms")}
	for _, m := range p.Repeats {
		t, ok := tailOf(m)
		if !ok {
			return s
		}
		s.tails = append(s.tails, t)
	}
	if len(s.tails) != len(s.p99) {
		s.tails = nil
	}
	return s
}

// tailTest compares the p99 of a with b's: over the requests themselves
// (TailBootstrap) where both carry their latency distributions, else a
// Mann-Whitney test of the repeats' p99s. Five p99s a side overlap on a
// busy machine even when one policy's tail is several times the other's;
// the requests, pooled and resampled within and across repeats, tell.
func tailTest(a, b scored) Comparison {
	if a.tails != nil && b.tails != nil {
		return TailBootstrap(a.tails, b.tails, 99)
	}
	return MannWhitney(a.p99, b.p99)
}

// recommendColocation picks, among the policies that leave the batch at
// least minBatchShare of the idle CPU, the one with the lowest median p99;
// it replaces corepin's own default (polCorepin) only when its p99 is
// lower beyond the noise (a tie goes to corepin, so noise cannot flip the
// headline between two policies that measured alike). The pick is
// recommended over the default (none: no policy) when its p99 is lower
// beyond the noise; when the test cannot tell, it is still recommended,
// saying so, if it is corepin's default with a median p99 no higher than
// no policy's (the same tie rule: corepin's default stands unless beaten
// beyond the noise) or its median is severalTimes lower. A pick whose
// median p99 is higher than no policy's is never recommended: nothing
// that measured worse than the default is. Otherwise the default stays, with the
// test that kept it. Beside a CPU hog and other builds every policy
// measured alike (0.65-0.87x alone, none 0.72x): the tails measured the
// other work, and the headline must not flip on which median it lifted.
// tested says whether the text carries the test of corepin's policy
// against none.
func recommendColocation(svc string, scores []scored, none *scored) (rec string, tested bool) {
	const keep = "keep the default (none: no policy)"
	best, tie := pickColocation(scores)
	switch {
	case best == nil && none == nil:
		return fmt.Sprintf("%s: no policy kept the batch at 90%% of the idle CPU.", svc), false
	case best == nil:
		return fmt.Sprintf("%s: %s: every policy left the batch under 90%% of the idle CPU.", svc, keep), false
	}
	switch {
	case none == nil:
		return fmt.Sprintf("%s: use %s (p99 %.2fx alone, batch keeps %.0f%% of the idle CPU); the default (none: no policy) was not measured to compare with%s.",
			svc, best.pol, best.ratio, 100*best.share, tie), false
	case best.pol == polNone:
		return fmt.Sprintf("%s: %s: none of the policies leaving the batch 90%% of the idle CPU had a lower p99 (none: %.2fx alone, batch keeps %.0f%%).",
			svc, keep, best.ratio, 100*best.share), false
	}
	tested = best.pol == polCorepin
	c := tailTest(*best, *none)
	switch {
	case best.ratio >= none.ratio && c.Significant():
		return fmt.Sprintf("%s: %s: none of the policies leaving the batch 90%% of the idle CPU had a lower p99; the best, %s, measured %.2fx alone against its %.2fx (%s).",
			svc, keep, best.pol, best.ratio, none.ratio, c), tested
	case c.Significant():
		return fmt.Sprintf("%s: use %s (p99 %.2fx alone, batch keeps %.0f%% of the idle CPU), lower than no policy's %.2fx beyond the noise (%s)%s.",
			svc, best.pol, best.ratio, 100*best.share, none.ratio, c, tie), tested
	case best.pol == polCorepin && best.ratio <= none.ratio:
		if strings.HasPrefix(tie, "; "+polNone+" ") {
			tie = "" // the tie was with none: the text says it once
		}
		return fmt.Sprintf("%s: use %s (p99 %.2fx alone, batch keeps %.0f%% of the idle CPU); no policy measured %.2fx, not different beyond the noise (%s), and a tie goes to corepin's default%s.",
			svc, best.pol, best.ratio, 100*best.share, none.ratio, c, tie), tested
	case best.ratio*severalTimes <= none.ratio:
		return fmt.Sprintf("%s: use %s (p99 %.2fx alone, batch keeps %.0f%% of the idle CPU); no policy measured %.2fx, %.1f times its p99, though the repeats overlap (%s)%s.",
			svc, best.pol, best.ratio, 100*best.share, none.ratio, none.ratio/best.ratio, c, tie), tested
	}
	return fmt.Sprintf("%s: %s: %s measured p99 %.2fx alone against its %.2fx, a difference that is not significant (%s).",
		svc, keep, best.pol, best.ratio, none.ratio, c), tested
}

// severalTimes is how many times the pick's median p99 no policy's must
// be for the pick to be recommended although the test cannot yet tell
// them apart (issue 17 §3: no policy must not win against a policy
// several times better only because a few repeats overlap).
const severalTimes = 2

// minDisplaced is how much CPU (median over the repeats) a policy's batch
// must take from other work on the machine, against the service alone,
// for displacedBy to count it: below it, the difference is the other
// work's own ebb and flow.
const minDisplaced = 0.2

// displacedBy says whether a policy's batch took CPU from other work on
// the machine: the other work's CPU (other_cpus per repeat) under the
// policy is lower than with the service alone by at least minDisplaced
// CPUs (medians) and beyond the noise (Mann-Whitney over the repeats). A
// best-effort batch uses only CPU nothing else wants; one that holds its
// group's share against the machine's other processes (a batch under
// cpu.idle inside the service's group, which keeps that group runnable)
// can make the service's tail look better than alone on a busy machine,
// by taking the CPU from work the run does not measure. Such a policy is
// not recommended (issue 17 §3: demo 1 of session 9 said "use idle, p99
// 0.29x alone" while its batch took 0.72 of the other work's 1.36 CPUs).
func displacedBy(alone, under []float64) (cpus float64, displaces bool, c Comparison) {
	c = MannWhitney(alone, under)
	cpus = experiment.Median(alone) - experiment.Median(under)
	return cpus, cpus >= minDisplaced && c.Significant(), c
}

// pickColocation returns the policy to weigh against no policy: among
// those leaving the batch minBatchShare of the idle CPU, the lowest median
// p99, unless corepin's default is not beaten beyond the noise; tie says
// why corepin's default took its place ("" when it did not).
func pickColocation(scores []scored) (best *scored, tie string) {
	var def *scored
	for i, s := range scores {
		if s.passedOver() {
			continue
		}
		if s.share >= minBatchShare && !math.IsNaN(s.ratio) && (best == nil || s.ratio < best.ratio) {
			best = &scores[i]
		}
		if s.pol == polCorepin && s.share >= minBatchShare && !math.IsNaN(s.ratio) {
			def = &scores[i]
		}
	}
	if def != nil && best != def {
		if c := tailTest(*best, *def); !c.Significant() {
			tie = fmt.Sprintf("; %s measured %.2fx, not lower beyond the noise (%s), so the tie goes to corepin's default", best.pol, best.ratio, c)
			best = def
		}
	}
	return best, tie
}

// openGap is how far apart (as a ratio of median p99s) the pick and no
// policy must be for an undecided comparison to earn more repeats: a gap
// that large left open is the five repeats' fault, not the policies'.
const openGap = 1.25

// Open names, per service, every point but the batch alone while the
// pick's comparison with no policy is undecided and their medians are
// openGap apart, so RunExperiment measures them again (Sequential): a
// quick run's five repeats must not keep no policy against a policy
// several times better (issue 17 §3). Every policy and the service alone
// are measured again, not only the two compared: other work on the
// machine comes in bursts, and a second stage of two points alone put a
// burst on them and not on the rest. In a demo beside a niced .ci/run, a
// burst began at the last first-stage round and lasted through the
// second: corepin's default took 3 of its 6 runs from then on at p99
// 0.96-2.9 s (its first four: 13-33 ms), while qos, whose last run came
// just before, kept 9-49 ms, and qos then beat it "beyond the noise"
// (p=0.018) on time alone.
func (e *colocationExp) Open(_ *Env, pts []experiment.PointResult) []int {
	var open []int
	for _, svc := range servicesOf(pts) {
		var idx []int
		var sp []experiment.PointResult
		for i, p := range pts {
			if p.Point.Get("service") == svc {
				idx, sp = append(idx, i), append(sp, p)
			}
		}
		scores, none := colocationScores(sp)
		best, _ := pickColocation(scores)
		if best == nil || none == nil || best.pol == polNone {
			continue
		}
		lo, hi := min(best.ratio, none.ratio), max(best.ratio, none.ratio)
		if c := tailTest(*best, *none); c.Significant() || !(hi >= openGap*lo) {
			continue
		}
		for j, p := range sp {
			if p.Point.Get("policy") != polBatchAlone {
				open = append(open, idx[j])
			}
		}
	}
	return open
}

func servicesOf(pts []experiment.PointResult) []string {
	var services []string
	for _, p := range pts {
		if s := p.Point.Get("service"); !slices.Contains(services, s) {
			services = append(services, s)
		}
	}
	return services
}

// colocationScores scores the policies of one service's points (every
// one but the two baselines) against the service alone, and returns no
// policy's score too (nil when it was not measured).
func colocationScores(pts []experiment.PointResult) (scores []scored, none *scored) {
	aloneP99 := math.NaN()
	var aloneOther []float64
	for _, p := range pts {
		if p.Point.Get("policy") == polAlone {
			aloneP99, aloneOther = p.Median("p99_ms"), p.Values("other_cpus")
		}
	}
	for _, p := range pts {
		if pol := p.Point.Get("policy"); pol != polAlone && pol != polBatchAlone {
			s := scoredOf(pol, p.Median("p99_ms")/aloneP99, batchShare(p), p)
			s.displaced, s.displaces, s.displacedTest = displacedBy(aloneOther, p.Values("other_cpus"))
			scores = append(scores, s)
		}
	}
	for i := range scores {
		if scores[i].pol == polNone {
			none = &scores[i]
		}
	}
	return scores, none
}

// passedOver says s is not recommended because its batch is not
// best-effort to the rest of the machine (displaces); no policy, the
// default it is weighed against, never is.
func (s scored) passedOver() bool { return s.displaces && s.pol != polNone }

// leftOut names the policies pickColocation passed over because their
// batch took CPU from other work on the machine ("" when none did).
func leftOut(scores []scored) string {
	var out string
	for _, s := range scores {
		if s.passedOver() {
			out += fmt.Sprintf(" Not recommended: %s (p99 %.2fx alone), whose batch took %.2f CPUs from other work on the machine against the service alone (%s), which a best-effort batch must not.",
				s.pol, s.ratio, s.displaced, s.displacedTest)
		}
	}
	return out
}

// againstNone says whether s's p99 differs from no policy's beyond the
// noise.
func againstNone(s, none scored) string {
	c := tailTest(s, none)
	switch {
	case !c.Significant():
		return fmt.Sprintf("its p99 and no policy's %.2fx differ by an amount that is not significant (%s)", none.ratio, c)
	case s.ratio < none.ratio:
		return fmt.Sprintf("its p99 is lower than no policy's %.2fx beyond the noise (%s)", none.ratio, c)
	}
	return fmt.Sprintf("its p99 is higher than no policy's %.2fx beyond the noise (%s)", none.ratio, c)
}

func fmtMs(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return NotApplicable
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
