package bench

import (
	"math"
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
