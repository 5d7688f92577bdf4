package bench

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/corepin/corepin/experiment"
)

// ratio is a within-run ratio of a point to its baseline: of the medians,
// with the min and max of the ratios of repeats paired by round.
type ratio struct {
	med, lo, hi float64
	ok          bool
}

func ratioOf(pr, base experiment.PointResult, metric string) ratio {
	num, den := pr.Median(metric), base.Median(metric)
	if math.IsNaN(num) || math.IsNaN(den) || den == 0 {
		return ratio{}
	}
	r := ratio{med: num / den, ok: true}
	if rs := pairedRatios(pr, base, metric); len(rs) > 0 {
		r.lo, r.hi = slices.Min(rs), slices.Max(rs)
	} else {
		r.lo, r.hi = r.med, r.med
	}
	return r
}

// pairedRatios are the ratios of pr's repeats of metric to base's, paired
// by round (repeat i of each ran in round i); rounds where base is 0 are
// left out.
func pairedRatios(pr, base experiment.PointResult, metric string) []float64 {
	a, b := pr.Values(metric), base.Values(metric)
	var out []float64
	for i := range min(len(a), len(b)) {
		if b[i] != 0 {
			out = append(out, a[i]/b[i])
		}
	}
	return out
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
	at    map[string]map[int]experiment.PointResult
}

func indexOversub(order []string, pts []experiment.PointResult) oversubData {
	d := oversubData{at: map[string]map[int]experiment.PointResult{}}
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
			d.at[kind] = map[int]experiment.PointResult{}
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
func (d oversubData) base(kind string) (int, experiment.PointResult, bool) {
	for _, k := range d.ks {
		if pr, ok := d.at[kind][k]; ok {
			return k, pr, true
		}
	}
	return 0, experiment.PointResult{}, false
}

// pair is kind's point at k processes per CPU and its baseline, ok false
// when either is missing.
func (d oversubData) pair(kind string, k int) (pr, base experiment.PointResult, ok bool) {
	_, base, ok = d.base(kind)
	pr, ok2 := d.at[kind][k]
	return pr, base, ok && ok2
}

func (d oversubData) rel(kind string, k int, metric string) ratio {
	pr, base, ok := d.pair(kind, k)
	if !ok {
		return ratio{}
	}
	return ratioOf(pr, base, metric)
}

// test compares kind's repeats of metric at k processes per CPU with those
// at its baseline (Mann-Whitney; no test when either is missing).
func (d oversubData) test(kind string, k int, metric string) Comparison {
	pr, base, ok := d.pair(kind, k)
	if !ok {
		return MannWhitney(nil, nil)
	}
	return MannWhitney(pr.Values(metric), base.Values(metric))
}

// relRepeats are kind's per-round ratios of metric at k processes per CPU
// to its baseline.
func (d oversubData) relRepeats(kind string, k int, metric string) []float64 {
	pr, base, ok := d.pair(kind, k)
	if !ok {
		return nil
	}
	return pairedRatios(pr, base, metric)
}

func (e *oversubExp) Analyze(_ *Env, pts []experiment.PointResult) Analysis {
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
	if med := experiment.Median(other); med > 0.05 {
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
