package bench

import (
	"math"
	"slices"
	"testing"
)

func TestMannWhitney(t *testing.T) {
	tests := []struct {
		name      string
		x, y      []float64
		wantU     float64
		wantP     float64
		wantExact bool
	}{
		// Five repeats each, fully separated: the smallest two-sided p of
		// n=5 vs 5 is 2/C(10,5) = 2/252.
		{name: "separated 5 vs 5", x: []float64{6, 7, 8, 9, 10}, y: []float64{1, 2, 3, 4, 5}, wantU: 25, wantP: 2.0 / 252, wantExact: true},
		{name: "reversed", x: []float64{1, 2, 3, 4, 5}, y: []float64{6, 7, 8, 9, 10}, wantU: 0, wantP: 2.0 / 252, wantExact: true},
		// Interleaved: U = 12.5 sits at the centre, p = 1.
		{name: "identical samples", x: []float64{1, 2, 3}, y: []float64{1, 2, 3}, wantU: 4.5, wantP: 1, wantExact: true},
		// 2 vs 2 separated: 2 of 6 splits are as extreme.
		{name: "two repeats each", x: []float64{10, 11}, y: []float64{1, 2}, wantU: 4, wantP: 2.0 / 6, wantExact: true},
		// All tied: no evidence of a difference.
		{name: "all tied", x: []float64{5, 5, 5}, y: []float64{5, 5, 5}, wantU: 4.5, wantP: 1, wantExact: true},
		// x = {1,2,3}, y = {4,5,6} with NaN dropped from y.
		{name: "NaN dropped", x: []float64{1, 2, 3}, y: []float64{4, 5, math.NaN(), 6}, wantU: 0, wantP: 2.0 / 20, wantExact: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := MannWhitney(tc.x, tc.y)
			if c.U != tc.wantU || math.Abs(c.P-tc.wantP) > 1e-12 || c.Exact != tc.wantExact {
				t.Errorf("MannWhitney(%v, %v) = U %v p %v exact %v, want U %v p %v exact %v", tc.x, tc.y, c.U, c.P, c.Exact, tc.wantU, tc.wantP, tc.wantExact)
			}
		})
	}
}

// Ties between the samples: x = {1, 2, 2}, y = {2, 3, 4} have midranks
// 1, 3, 3 | 3, 5, 6. The exact p-value must equal the share of all 20
// splits of those midranks at least as far from the mean as x's.
func TestMannWhitneyTiesMatchEnumeration(t *testing.T) {
	x, y := []float64{1, 2, 2}, []float64{2, 3, 4}
	ranks := []float64{1, 3, 3, 3, 5, 6}
	w := 1.0 + 3 + 3
	hit, total := 0, 0
	for a := 0; a < 6; a++ {
		for b := a + 1; b < 6; b++ {
			for c := b + 1; c < 6; c++ {
				s := ranks[a] + ranks[b] + ranks[c]
				total++
				if math.Abs(s-10.5) >= math.Abs(w-10.5) {
					hit++
				}
			}
		}
	}
	got := MannWhitney(x, y)
	if want := float64(hit) / float64(total); math.Abs(got.P-want) > 1e-12 {
		t.Errorf("MannWhitney(%v, %v).P = %v, want %v (enumerated)", x, y, got.P, want)
	}
}

func TestMannWhitneyLargeUsesNormal(t *testing.T) {
	var x, y []float64
	for i := range 40 {
		x = append(x, float64(i))
		y = append(y, float64(i)+0.5)
	}
	c := MannWhitney(x, y)
	if c.Exact || c.P < 0.5 || c.P > 1 {
		t.Errorf("MannWhitney(40 vs 40, shifted half a step) = %+v, want an approximate, large p", c)
	}
	y = y[:0]
	for i := range 40 {
		y = append(y, float64(i)+100)
	}
	if c := MannWhitney(x, y); c.Exact || c.P > 1e-6 {
		t.Errorf("MannWhitney(40 vs 40, separated) = %+v, want a tiny approximate p", c)
	}
}

func TestMannWhitneyEmpty(t *testing.T) {
	c := MannWhitney(nil, []float64{1})
	if !math.IsNaN(c.P) || c.Significant() {
		t.Errorf("MannWhitney(nil, [1]) = %+v, want NaN p, not significant", c)
	}
}

// The normal approximation against a published value: scipy's
// mannwhitneyu documentation (x = males, y = females, method="asymptotic",
// continuity correction) gives U = 17 and p = 0.11134688653314041. By
// hand: W = 32, E[U] = 10, sigma = sqrt(5*4*10/12), z = 6.5/sigma.
func TestMannWhitneyNormalMatchesScipy(t *testing.T) {
	x, y := []float64{19, 22, 16, 29, 24}, []float64{20, 11, 17, 12}
	c := mannWhitney(x, y, 0)
	if c.Exact || c.U != 17 || math.Abs(c.P-0.11134688653314041) > 1e-12 {
		t.Errorf("mannWhitney(%v, %v, normal) = %+v, want U 17, p 0.11134688653314041 (scipy, asymptotic)", x, y, c)
	}
}

// midranksOf ranks the pooled samples the slow way: a value's midrank is
// the number of smaller values plus half the number of equal ones plus
// one half.
func midranksOf(pool []float64) []float64 {
	r := make([]float64, len(pool))
	for i, v := range pool {
		less, eq := 0, 0
		for _, w := range pool {
			if w < v {
				less++
			} else if w == v {
				eq++
			}
		}
		r[i] = float64(less) + float64(eq+1)/2
	}
	return r
}

// rankSumVariance is the variance of the sum of n1 ranks drawn without
// replacement from ranks: n1*n2/(n*(n-1)) times the ranks' sum of squared
// deviations (sampling without replacement; with ties it is what the tie
// correction of the textbook formula computes, but derived apart from it).
func rankSumVariance(ranks []float64, n1 int) float64 {
	n := len(ranks)
	mean := 0.0
	for _, r := range ranks {
		mean += r
	}
	mean /= float64(n)
	ss := 0.0
	for _, r := range ranks {
		ss += (r - mean) * (r - mean)
	}
	return float64(n1*(n-n1)) / float64(n*(n-1)) * ss
}

// The reference variance is the variance of the rank sum over every split:
// checked by enumerating all 12,870 splits of 8 vs 8 tied midranks.
func TestRankSumVarianceMatchesEnumeration(t *testing.T) {
	pool := []float64{1, 1, 1, 2, 2, 3, 3, 3, 3, 4, 5, 5, 6, 6, 6, 6}
	ranks := midranksOf(pool)
	var sum, sum2, count float64
	for mask := 0; mask < 1<<16; mask++ {
		if bitsSet(mask) != 8 {
			continue
		}
		s := 0.0
		for i := range 16 {
			if mask&(1<<i) != 0 {
				s += ranks[i]
			}
		}
		sum, sum2, count = sum+s, sum2+s*s, count+1
	}
	enumerated := sum2/count - (sum/count)*(sum/count)
	if got := rankSumVariance(ranks, 8); math.Abs(got-enumerated) > 1e-9 {
		t.Errorf("rankSumVariance = %v, enumerated %v over %v splits", got, enumerated, count)
	}
}

func bitsSet(m int) int {
	n := 0
	for ; m != 0; m &= m - 1 {
		n++
	}
	return n
}

// The normal approximation, which the full concurrency sweep's 15 vs 15
// repeats use, must equal the continuity-corrected normal tail of the rank
// sum with its true variance over every split (rankSumVariance, derived
// apart from the code's tie-corrected formula): an error in sigma or a
// dropped tie correction moves it off. The tied samples take the tie
// correction to 0.87 of the untied variance.
func TestMannWhitneyNormalMatchesPermutationVariance(t *testing.T) {
	seq := func(from, step float64, n int) []float64 {
		var xs []float64
		for i := range n {
			xs = append(xs, from+step*float64(i))
		}
		return xs
	}
	rep := func(v float64, n int) []float64 {
		var xs []float64
		for range n {
			xs = append(xs, v)
		}
		return xs
	}
	tests := []struct {
		name string
		x, y []float64
	}{
		{name: "shifted, no ties", x: seq(0, 1, 15), y: seq(5.5, 1, 15)},
		{name: "overlapping, no ties", x: seq(0, 1, 15), y: seq(2.5, 1, 15)},
		{name: "two values", x: append(rep(0, 10), rep(1, 5)...), y: append(rep(0, 3), rep(1, 12)...)},
		{name: "three values", x: append(append(rep(1, 7), rep(2, 5)...), rep(3, 3)...), y: append(append(rep(1, 2), rep(2, 5)...), rep(3, 8)...)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pool := append(slices.Clone(tc.x), tc.y...)
			ranks := midranksOf(pool)
			n1, n := len(tc.x), len(pool)
			w := 0.0
			for _, r := range ranks[:n1] {
				w += r
			}
			sd := math.Sqrt(rankSumVariance(ranks, n1))
			z := max(math.Abs(w-float64(n1*(n+1))/2)-0.5, 0) / sd
			want := math.Erfc(z / math.Sqrt2)
			got := MannWhitney(tc.x, tc.y)
			if got.Exact || math.Abs(got.P-want) > 1e-9*want {
				t.Errorf("MannWhitney(15 vs 15) = %+v, want the normal approximation p = %.6g (W %v, sd %.4g)", got, want, w, sd)
			}
		})
	}
}
