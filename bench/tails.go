package bench

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/corepin/corepin/experiment"
)

// Tail is the latency distribution of one repeat: how many requests it
// timed and its quantile function, sampled at ascending percentiles from
// the load generator's HdrHistogram (loadgen.Result.CDF, 35 steps from 0
// to 100, denser towards the tail).
type Tail struct {
	N   int
	Pct []float64 // percentiles, ascending, from 0 to 100
	Lat []float64 // latency at each, non-decreasing
}

// tailSteps is the fewest steps a Tail needs to stand for its requests.
const tailSteps = 10

// tailOf reads a repeat's Tail from its cdf_<percentile> metrics and its
// count of timed requests (latencies); false when it has none.
func tailOf(m experiment.Metrics) (Tail, bool) {
	type step struct{ p, v float64 }
	var steps []step
	for k, v := range m {
		s, ok := strings.CutPrefix(k, "cdf_")
		if !ok || math.IsNaN(v) {
			continue
		}
		if p, err := strconv.ParseFloat(s, 64); err == nil {
			steps = append(steps, step{p, v})
		}
	}
	n := m["latencies"]
	if len(steps) < tailSteps || !(n >= 1) {
		return Tail{}, false
	}
	slices.SortFunc(steps, func(a, b step) int { return cmp.Compare(a.p, b.p) })
	t := Tail{N: int(n)}
	for _, s := range steps {
		t.Pct = append(t.Pct, s.p)
		t.Lat = append(t.Lat, s.v)
	}
	if t.Pct[0] > 0 || t.Pct[len(t.Pct)-1] < 100 {
		return Tail{}, false
	}
	return t, true
}

// at returns the latency at percentile p by linear interpolation between
// the steps.
func (t Tail) at(p float64) float64 {
	i, _ := slices.BinarySearch(t.Pct, p)
	switch {
	case i == 0:
		return t.Lat[0]
	case i >= len(t.Pct):
		return t.Lat[len(t.Lat)-1]
	}
	p0, p1 := t.Pct[i-1], t.Pct[i]
	if p1 == p0 {
		return t.Lat[i]
	}
	return t.Lat[i-1] + (t.Lat[i]-t.Lat[i-1])*(p-p0)/(p1-p0)
}

// Bootstrap settings of TailBootstrap: resamples, the most requests drawn
// per repeat (fewer draws only widen the spread: the test stays honest,
// and nginx's 5,000 requests a repeat stay cheap) and the fixed seed that
// makes the same data give the same p-value in every report.
const (
	bootIters      = 1000
	bootMaxPerRep  = 2000
	bootSeed       = 17
	bootMinRepeats = 2
)

// TailBootstrap compares the q-th percentile (99: p99) of the requests of
// x's repeats, pooled, with that of y's. It is a two-level bootstrap: each
// resample draws as many repeats as were measured, with replacement, and
// then each drawn repeat's requests, with replacement, from its latency
// distribution; so both the run-to-run variance (a machine busier in one
// repeat than in another) and the request-to-request one count. The
// two-sided p-value is twice the share of resamples whose pooled-tail
// ratio falls on the far side of 1 (at least 1/(iterations+1)). Fewer than
// two repeats a side give no test (NaN).
func TailBootstrap(x, y []Tail, q float64) Comparison {
	c := Comparison{Method: MethodBootstrap, NX: len(x), NY: len(y), P: math.NaN()}
	for _, t := range x {
		c.RequestsX += t.N
	}
	for _, t := range y {
		c.RequestsY += t.N
	}
	if len(x) < bootMinRepeats || len(y) < bootMinRepeats {
		return c
	}
	rng := rand.New(rand.NewPCG(bootSeed, uint64(len(x)*1000+len(y))))
	var pool []float64
	draw := func(ts []Tail) float64 {
		pool = pool[:0]
		for range ts {
			t := ts[rng.IntN(len(ts))]
			for range min(t.N, bootMaxPerRep) {
				pool = append(pool, t.at(100*rng.Float64()))
			}
		}
		return quantileSelect(pool, q/100)
	}
	below, above := 0, 0
	for range bootIters {
		r := draw(x) / draw(y)
		if !(r > 1) { // NaN counts against a difference
			below++
		}
		if !(r < 1) {
			above++
		}
	}
	c.P = min(1, 2*float64(min(below, above)+1)/float64(bootIters+1))
	return c
}

// quantileSelect returns the q-quantile (0-1) of xs, the value of rank
// ceil(q*n), reordering xs (Hoare's selection, expected linear time).
func quantileSelect(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	k := min(len(xs)-1, max(0, int(math.Ceil(q*float64(len(xs))))-1))
	lo, hi := 0, len(xs)-1
	for lo < hi {
		pivot := xs[(lo+hi)/2]
		i, j := lo, hi
		for i <= j {
			for xs[i] < pivot {
				i++
			}
			for xs[j] > pivot {
				j--
			}
			if i <= j {
				xs[i], xs[j] = xs[j], xs[i]
				i++
				j--
			}
		}
		switch {
		case k <= j:
			hi = j
		case k >= i:
			lo = i
		default:
			return xs[k]
		}
	}
	return xs[k]
}

// MethodBootstrap names TailBootstrap's test in Comparison.Method.
const MethodBootstrap = "bootstrap"

func (c Comparison) bootstrapString() string {
	if math.IsNaN(c.P) {
		return fmt.Sprintf("no test: n=%d vs %d repeats", c.NX, c.NY)
	}
	return fmt.Sprintf("bootstrap of pooled requests p=%.3g, n=%d vs %d repeats, %d vs %d requests", c.P, c.NX, c.NY, c.RequestsX, c.RequestsY)
}
