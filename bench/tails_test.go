package bench

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/corepin/corepin/experiment"
)

// cdfSteps are the load generator's percentiles (loadgen's cdfPercentiles).
var cdfSteps = []float64{0, 10, 20, 30, 40, 50, 55, 60, 65, 70, 75, 77.5, 80, 82.5, 85, 87.5,
	90, 91.25, 92.5, 93.75, 95, 96.25, 97.5, 98.125, 98.75, 99, 99.375,
	99.5, 99.6875, 99.8, 99.9, 99.95, 99.99, 99.999, 100}

// repeatWithTail is one colocation repeat whose n requests have a p99 of
// p99 ms: a body near p99/10 and a tail rising to it, as the generator's
// histogram would report them.
func repeatWithTail(p99 float64, n int, batch float64) experiment.Metrics {
	g := func(p float64) float64 { return 1 + 9*math.Pow(p/100, 60) }
	m := experiment.Metrics{"p99_ms": p99, "batch_cpus": batch, "service_cpus": 0.5, "machine_cpus": 2, "latencies": float64(n)}
	for _, p := range cdfSteps {
		m[fmt.Sprintf("cdf_%g", p)] = p99 * g(p) / g(99)
	}
	return m
}

func tailsOf(t *testing.T, n int, p99s ...float64) []Tail {
	t.Helper()
	var ts []Tail
	for _, v := range p99s {
		tl, ok := tailOf(repeatWithTail(v, n, 1))
		if !ok {
			t.Fatalf("tailOf(repeat with p99 %v) found no tail", v)
		}
		ts = append(ts, tl)
	}
	return ts
}

func TestTailOf(t *testing.T) {
	tl, ok := tailOf(repeatWithTail(20, 800, 1))
	if !ok || tl.N != 800 || len(tl.Pct) != len(cdfSteps) {
		t.Fatalf("tailOf = %+v, %v; want 800 requests over %d steps", tl, ok, len(cdfSteps))
	}
	if got := tl.at(99); math.Abs(got-20) > 1e-9 {
		t.Errorf("at(99) = %v, want 20 (the p99)", got)
	}
	if got := tl.at(100); got != tl.Lat[len(tl.Lat)-1] {
		t.Errorf("at(100) = %v, want the maximum %v", got, tl.Lat[len(tl.Lat)-1])
	}
	if _, ok := tailOf(experiment.Metrics{"p99_ms": 3, "cdf_50": 1, "cdf_99": 3}); ok {
		t.Error("tailOf(two steps, no count) found a tail")
	}
}

func TestQuantileSelect(t *testing.T) {
	xs := []float64{9, 1, 8, 2, 7, 3, 6, 4, 5, 10}
	for _, tc := range []struct{ q, want float64 }{{0.5, 5}, {0.99, 10}, {0.1, 1}, {0.91, 10}, {0.9, 9}, {0, 1}} {
		if got := quantileSelect(append([]float64(nil), xs...), tc.q); got != tc.want {
			t.Errorf("quantileSelect(1..10, %v) = %v, want %v", tc.q, got, tc.want)
		}
	}
}

func TestTailBootstrap(t *testing.T) {
	tests := []struct {
		name    string
		x, y    []float64 // p99 of each repeat
		signif  bool
		maxP    float64 // when significant
		minP    float64 // when not
		mwAgree bool    // Mann-Whitney over the five p99s says the same
	}{
		{name: "same machine, same policy", x: []float64{10, 12, 11, 9, 10.5}, y: []float64{10.5, 11, 9.5, 12, 10}, minP: 0.2, mwAgree: true},
		{name: "three times the tail in every repeat", x: []float64{30, 36, 33, 27, 31.5}, y: []float64{10, 12, 11, 9, 10.5}, signif: true, maxP: 0.01, mwAgree: true},
		// Issue 17 §3: no policy's p99 ranged from 4.5x to 22x alone;
		// one calm repeat overlaps corepin's five, so the five p99s
		// cannot tell (Mann-Whitney p=0.15), while the requests can: the
		// pooled tail of no policy is several times corepin's in all but
		// the resamples that draw its calm repeat five times.
		{name: "one calm repeat among bad ones", x: []float64{5, 25, 30, 40, 50}, y: []float64{5.5, 6, 5.8, 6.2, 6.5}, signif: true, maxP: 0.01},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := TailBootstrap(tailsOf(t, 300, tc.x...), tailsOf(t, 300, tc.y...), 99)
			if c.Significant() != tc.signif || (tc.signif && c.P > tc.maxP) || (!tc.signif && c.P < tc.minP) {
				t.Errorf("TailBootstrap = %v (p %v), want significant %v", c, c.P, tc.signif)
			}
			if mw := MannWhitney(tc.x, tc.y); (mw.Significant() == tc.signif) != tc.mwAgree {
				t.Errorf("Mann-Whitney over the p99s = %v: want agreement %v with the bootstrap", mw, tc.mwAgree)
			}
			if again := TailBootstrap(tailsOf(t, 300, tc.x...), tailsOf(t, 300, tc.y...), 99); again.P != c.P {
				t.Errorf("TailBootstrap gave p %v, then %v on the same data: want one answer per data set", c.P, again.P)
			}
			if s := c.String(); !strings.Contains(s, "bootstrap of pooled requests p=") || !strings.Contains(s, "n=5 vs 5 repeats, 1500 vs 1500 requests") {
				t.Errorf("String() = %q", s)
			}
		})
	}
	if c := TailBootstrap(tailsOf(t, 300, 10), tailsOf(t, 300, 30, 31), 99); !math.IsNaN(c.P) || c.Significant() {
		t.Errorf("TailBootstrap(one repeat) = %+v, want no test", c)
	}
}

// A bootstrap p-value is never below 1/(iterations+1): with every
// resample on one side the observed data are one of iterations+1
// equally likely orderings, not proof beyond all doubt (issue 27 §2.5).
// Two-sided, two separated sets give 2/(iterations+1).
func TestTailBootstrapPNeverZero(t *testing.T) {
	x, y := tailsOf(t, 300, 30, 36, 33, 27, 31.5), tailsOf(t, 300, 10, 12, 11, 9, 10.5)
	for _, tc := range []struct {
		name string
		x, y []Tail
	}{{name: "x higher", x: x, y: y}, {name: "y higher", x: y, y: x}} {
		t.Run(tc.name, func(t *testing.T) {
			c := TailBootstrap(tc.x, tc.y, 99)
			if want := 2.0 / (bootIters + 1); c.P != want {
				t.Errorf("TailBootstrap of separated sets: p = %v, want %v (the floor, 2/(%d+1))", c.P, want, bootIters)
			}
			if !c.Significant() {
				t.Errorf("TailBootstrap of separated sets = %v, want significant", c)
			}
		})
	}
}

// simRepeats draws k repeats whose p99s scatter around median ms as a
// busy machine scatters them: log-normal with sigma 0.5 (a repeat at 2x
// the median is about as common as one at 0.5x), each with 150 requests.
func simRepeats(t *testing.T, rng *rand.Rand, k int, median float64) []Tail {
	t.Helper()
	var p99s []float64
	for range k {
		p99s = append(p99s, median*math.Exp(0.5*rng.NormFloat64()))
	}
	return tailsOf(t, 150, p99s...)
}

// TailBootstrap's p-value under the null and its power, on repeats drawn
// from known distributions: two policies with one tail must differ
// beyond the noise in about Alpha of the trials, and a tail three times
// another in most. The colocation tie rule rests on both: without power
// a better policy never displaces corepin's default, without the level
// noise does. (Measured here: level 2.5%, power 80%. With bursts of other
// work, a fifth of the repeats at 40x, the level rose to 11% in 100
// trials while Mann-Whitney over the p99s and a bootstrap of the median
// repeat's p99 stayed at 2-3%: the pooled p99 is the worst repeats'.)
func TestTailBootstrapLevelAndPower(t *testing.T) {
	if testing.Short() {
		t.Skip("simulation")
	}
	if raceEnabled {
		// 80 bootstraps on one goroutine: nothing for the detector to
		// see, and 40 s of its time on a quiet 2-CPU machine.
		t.Skip("simulation: make test runs it without the race detector")
	}
	rng := rand.New(rand.NewPCG(17, 3))
	const trials = 40
	rate := func(ratio float64) float64 {
		n := 0
		for range trials {
			if TailBootstrap(simRepeats(t, rng, 5, 20*ratio), simRepeats(t, rng, 5, 20), 99).Significant() {
				n++
			}
		}
		return float64(n) / trials
	}
	r1, r3 := rate(1), rate(3)
	t.Logf("level %.3f, power %.3f", r1, r3)
	if r := r1; r > 0.125 {
		t.Errorf("one tail, two policies: %.0f%% of %d trials differ beyond the noise, want about %.0f%% (at most 12.5%%)", 100*r, trials, 100*Alpha)
	}
	if r := r3; r < 0.75 {
		t.Errorf("a tail three times another: told apart in %.0f%% of %d trials, want at least 75%%", 100*r, trials)
	}
}
