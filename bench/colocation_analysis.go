package bench

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

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
	if qt, ok := qosTable(svc, pts); ok {
		a.Tables = append(a.Tables, qt)
	}
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
		rec = fmt.Sprintf("%s: no policy kept the batch at 90%% of the idle CPU.", svc)
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
