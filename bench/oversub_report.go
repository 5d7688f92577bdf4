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

func placementAnalysis(pts []experiment.PointResult) (Table, Chart, string, bool) {
	type key struct {
		kind  string
		k     int
		place string
	}
	at := map[key]experiment.PointResult{}
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
		p99 := func(pr experiment.PointResult, ok bool) string {
			if !ok {
				return "-"
			}
			return fmt.Sprintf("%.0f", pr.Median("rtt_p99_us"))
		}
		t.Rows = append(t.Rows, []string{r.kind, strconv.Itoa(r.k), rt.String(), ra.String(), p99(os, true), p99(tg, okT), p99(ap, okA)})
		chart.XLabels = append(chart.XLabels, fmt.Sprintf("%s %d/CPU", strings.TrimPrefix(r.kind, "pingpong-"), r.k))
		together.Y, apart.Y = append(together.Y, nanIfNot(rt)), append(apart.Y, nanIfNot(ra))
		if rec == "" && okT && okA && rt.ok && ra.ok {
			c := MannWhitney(tg.Values("ops_per_s"), ap.Values("ops_per_s"))
			if c.Significant() {
				rec = fmt.Sprintf("Placement matters: at %d per CPU, %s pairs pinned to one CPU ran %.2fx the round trips of pairs pinned apart, beyond the noise (%s; %.2fx and %.2fx the scheduler's own placement).",
					r.k, r.kind, rt.med/ra.med, c, rt.med, ra.med)
			} else {
				rec = fmt.Sprintf("Placement: at %d per CPU, %s pairs pinned to one CPU ran %.2fx the round trips of pairs pinned apart, a difference within the noise (%s; %.2fx and %.2fx the scheduler's own placement): this run does not show that placement matters.",
					r.k, r.kind, rt.med/ra.med, c, rt.med, ra.med)
			}
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

func medSpread(pr experiment.PointResult, metric, format string) string {
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
	commAgg, compAgg := d.test(comm, level, "ops_per_s"), d.test(OversubCompute, level, "ops_per_s")
	switch {
	case commOK && compOK:
		fmt.Fprintf(&b, "At %d processes per CPU, communication-heavy pairs (%s) %s of their aggregate throughput against 1 per CPU (%s)",
			level, comm, loseGain(commLoss), noise(commAgg))
		p99, p99Test := d.rel(comm, level, "rtt_p99_us"), d.test(comm, level, "rtt_p99_us")
		if p99.ok {
			fmt.Fprintf(&b, ", with round-trip p99 x%.1f (%s)", p99.med, noise(p99Test))
		}
		fmt.Fprintf(&b, ", while compute-only processes %s (%s). ", loseGain(compLoss), noise(compAgg))
		// Communication against compute: each kind's throughput relative
		// to its own baseline, round by round.
		gap := commLoss - compLoss
		vs := MannWhitney(d.relRepeats(comm, level, "ops_per_s"), d.relRepeats(OversubCompute, level, "ops_per_s"))
		tailBad := p99.ok && p99.med > 1.5
		switch {
		case gap > 0.05 && vs.Significant():
			fmt.Fprintf(&b, "Don't oversubscribe communication-heavy ranks (they lose %.0f points more than compute-only, beyond the noise: %s): give each rank its own CPU and keep each communicating pair on one L3 (FullPCPUs); compute-only work tolerates oversubscription better.",
				100*gap, vs)
		case tailBad && p99Test.Significant():
			if gap > 0.05 {
				fmt.Fprintf(&b, "Tail latency does not hold up: keep latency-bound communicating ranks at one per CPU, each pair on one L3; oversubscribe compute-only work instead. Their extra throughput loss against compute-only (%.0f points) is within the noise (%s).",
					100*gap, vs)
			} else {
				b.WriteString("Throughput holds up but tail latency does not: keep latency-bound communicating ranks at one per CPU, each pair on one L3; oversubscribe compute-only work instead.")
			}
		case gap < -0.05 && vs.Significant():
			// Pairs that share a CPU hand off without a wake-up on
			// another: oversubscribing them can gain throughput.
			fmt.Fprintf(&b, "On this machine oversubscription costs communication less than it costs compute (communication-heavy pairs fared %.0f points better than compute-only, beyond the noise: %s): at this level it is no worse for them than for compute-only work; still keep each communicating pair on one L3.",
				-100*gap, vs)
		case gap > 0.05 || gap < -0.05 || tailBad:
			var within []string
			if gap > 0.05 {
				within = append(within, fmt.Sprintf("communication-heavy pairs lost %.0f points more than compute-only (%s)", 100*gap, vs))
			} else if gap < -0.05 {
				within = append(within, fmt.Sprintf("communication-heavy pairs fared %.0f points better than compute-only (%s)", -100*gap, vs))
			}
			if tailBad {
				within = append(within, fmt.Sprintf("their round-trip p99 rose x%.1f (%s)", p99.med, p99Test))
			}
			fmt.Fprintf(&b, "No advice follows from this run: %s, within the noise; more repeats (--repeats) can tell.", strings.Join(within, " and "))
		default:
			fmt.Fprintf(&b, "On this machine oversubscription costs communication within 5 points of what it costs compute (%+.0f points, %s): at this level it is as safe for one as for the other; still keep each communicating pair on one L3.",
				100*gap, vs)
		}
	case compOK:
		fmt.Fprintf(&b, "At %d processes per CPU, compute-only processes %s of their aggregate throughput (%s); no ping-pong kind was measured.",
			level, loseGain(compLoss), noise(compAgg))
	case commOK:
		fmt.Fprintf(&b, "At %d processes per CPU, communication-heavy pairs (%s) %s of their aggregate throughput (%s); compute-only was not measured for comparison.",
			level, comm, loseGain(commLoss), noise(commAgg))
	default:
		return fmt.Sprintf("No kind was measured at both its baseline and %d processes per CPU: nothing to compare.", level)
	}
	if t, ok := d.vethTable(); ok && len(t.Rows) > 0 {
		_, v, _ := d.base(OversubVeth)
		_, l, _ := d.base(OversubLoopback)
		if r := ratioOf(v, l, "ops_per_s"); r.ok {
			fmt.Fprintf(&b, " The veth path between two namespaces (container networking) gives %.0f%% of loopback's round trips per second at the lowest level (%s)",
				100*r.med, noise(MannWhitney(v.Values("ops_per_s"), l.Values("ops_per_s"))))
			if p := ratioOf(v, l, "rtt_p99_us"); p.ok {
				fmt.Fprintf(&b, ", with p99 x%.1f (%s)", p.med, noise(MannWhitney(v.Values("rtt_p99_us"), l.Values("rtt_p99_us"))))
			}
			b.WriteString(".")
		}
	}
	return b.String()
}

// noise is c as a parenthesis: the test alone when the difference is
// significant, else marked as within the noise.
func noise(c Comparison) string {
	if c.Significant() {
		return c.String()
	}
	return "within the noise: " + c.String()
}

func loseGain(loss float64) string {
	if loss >= 0 {
		return fmt.Sprintf("lose %.0f%%", 100*loss)
	}
	return fmt.Sprintf("gain %.0f%%", -100*loss)
}
