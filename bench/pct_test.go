package bench

import (
	"math"
	"testing"
)

// TestPctWithoutBaseline: a change that could not be computed reads
// "n/a" in a report, not "+NaN%" or "+Inf%" (issue 17 §5).
func TestPctWithoutBaseline(t *testing.T) {
	for _, tc := range []struct {
		in   float64
		want string
	}{
		{0.25, "+25%"}, {-0.1, "-10%"}, {0, "+0%"},
		{math.NaN(), "n/a"}, {math.Inf(1), "n/a"}, {math.Inf(-1), "n/a"},
	} {
		if got := pct(tc.in); got != tc.want {
			t.Errorf("pct(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
