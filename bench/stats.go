package bench

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// Alpha is the significance level of the tests behind recommendations: a
// difference with a two-sided p-value at or above it is a tie.
const Alpha = 0.05

// exactLimit bounds the number of rank assignments MannWhitney counts
// exactly; larger samples use the normal approximation.
const exactLimit = 1 << 20

// Comparison is a two-sided Mann-Whitney U test of two samples of repeats.
type Comparison struct {
	// U is the statistic of x: how often a value of x exceeds one of y
	// (ties count one half).
	U float64
	// P is the two-sided p-value; NaN when a sample is empty.
	P float64
	// NX and NY are the sample sizes.
	NX, NY int
	// Exact says P is exact (the permutation distribution of the ranks,
	// ties included) rather than the normal approximation.
	Exact bool
	// Method is "" for the Mann-Whitney test of the repeats' values, or
	// MethodBootstrap for TailBootstrap over their requests, which sets
	// RequestsX and RequestsY (U stays zero).
	Method               string
	RequestsX, RequestsY int
}

// Significant reports whether the samples differ at level Alpha.
func (c Comparison) Significant() bool { return c.P < Alpha }

// String is "Mann-Whitney p=0.008, n=5 vs 5", or for TailBootstrap
// "bootstrap of pooled requests p=0.002, n=5 vs 5 repeats, 4165 vs 4165
// requests".
func (c Comparison) String() string {
	if c.Method == MethodBootstrap {
		return c.bootstrapString()
	}
	if math.IsNaN(c.P) {
		return fmt.Sprintf("no test: n=%d vs %d", c.NX, c.NY)
	}
	return fmt.Sprintf("Mann-Whitney p=%.3g, n=%d vs %d", c.P, c.NX, c.NY)
}

// MannWhitney compares x and y (NaNs dropped) with the two-sided
// Mann-Whitney U (Wilcoxon rank-sum) test, which assumes nothing about the
// distribution of the repeats. For small samples the p-value is exact: the
// rank sum of x is compared with its distribution over every way to split
// the pooled midranks, so ties are handled exactly too. Larger samples use
// the normal approximation with the tie correction.
func MannWhitney(x, y []float64) Comparison { return mannWhitney(x, y, exactLimit) }

// mannWhitney is MannWhitney counting exactly up to limit rank
// assignments; tests pass 0 to reach the normal approximation with small
// samples whose p-values are tabled.
func mannWhitney(x, y []float64, limit float64) Comparison {
	x, y = finiteValues(x), finiteValues(y)
	c := Comparison{NX: len(x), NY: len(y), P: math.NaN()}
	if len(x) == 0 || len(y) == 0 {
		return c
	}
	n1, n := len(x), len(x)+len(y)
	type obs struct {
		v    float64
		from int
	}
	all := make([]obs, 0, n)
	for _, v := range x {
		all = append(all, obs{v, 0})
	}
	for _, v := range y {
		all = append(all, obs{v, 1})
	}
	slices.SortFunc(all, func(a, b obs) int { return cmp.Compare(a.v, b.v) })
	// Doubled midranks are integers: a tie group over positions i..j-1
	// (1-based ranks i+1..j) has midrank (i+1+j)/2.
	ranks2 := make([]int, n)
	var tieTerm float64 // sum of t^3 - t over tie groups
	w2 := 0             // doubled rank sum of x
	for i := 0; i < n; {
		j := i
		for j < n && all[j].v == all[i].v {
			j++
		}
		for k := i; k < j; k++ {
			ranks2[k] = i + 1 + j
			if all[k].from == 0 {
				w2 += ranks2[k]
			}
		}
		t := float64(j - i)
		tieTerm += t*t*t - t
		i = j
	}
	c.U = float64(w2)/2 - float64(n1*(n1+1))/2
	mean2 := n1 * (n + 1) // E[2W]
	dev := abs(w2 - mean2)
	if binom(n, n1) <= limit {
		c.Exact = true
		c.P = exactTail(ranks2, n1, mean2, dev)
		return c
	}
	n2 := float64(len(y))
	nf, n1f := float64(n), float64(n1)
	sigma := math.Sqrt(n1f * n2 / 12 * ((nf + 1) - tieTerm/(nf*(nf-1))))
	if sigma == 0 {
		c.P = 1
		return c
	}
	z := (math.Abs(float64(w2-mean2)/2) - 0.5) / sigma // continuity correction
	c.P = min(1, math.Erfc(max(z, 0)/math.Sqrt2))
	return c
}

// exactTail is the share of the ways to pick n1 of the doubled ranks whose
// sum deviates from mean2 by at least dev.
func exactTail(ranks2 []int, n1, mean2, dev int) float64 {
	maxSum := 0
	for _, r := range ranks2 {
		maxSum += r
	}
	// ways[k][s]: subsets of size k of the ranks seen so far summing to s.
	ways := make([][]float64, n1+1)
	for k := range ways {
		ways[k] = make([]float64, maxSum+1)
	}
	ways[0][0] = 1
	for _, r := range ranks2 {
		for k := n1; k >= 1; k-- {
			for s := maxSum; s >= r; s-- {
				ways[k][s] += ways[k-1][s-r]
			}
		}
	}
	var hit, total float64
	for s, w := range ways[n1] {
		total += w
		if abs(s-mean2) >= dev {
			hit += w
		}
	}
	return min(1, hit/total)
}

func finiteValues(xs []float64) []float64 {
	out := make([]float64, 0, len(xs))
	for _, v := range xs {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			out = append(out, v)
		}
	}
	return out
}

func binom(n, k int) float64 {
	r := 1.0
	for i := 1; i <= k; i++ {
		r = r * float64(n-k+i) / float64(i)
	}
	return r
}

func abs(i int) int {
	if i < 0 {
		return -i
	}
	return i
}
