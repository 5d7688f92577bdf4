package experiment

import (
	"math"
	"slices"
	"sort"
)

// Metrics are the values one run of a point measured, by name
// ("wall_s", "p99_ms", "fps").
type Metrics map[string]float64

// PointResult holds every repeat of one point and their summary.
type PointResult struct {
	Point   Point     `json:"point"`
	Repeats []Metrics `json:"repeats"`
	// Errors are the repeats that failed, in order of occurrence.
	Errors []string `json:"errors,omitempty"`
}

// Values returns metric's values over the repeats that measured it.
func (r PointResult) Values(metric string) []float64 {
	var out []float64
	for _, m := range r.Repeats {
		if v, ok := m[metric]; ok && !math.IsNaN(v) {
			out = append(out, v)
		}
	}
	return out
}

// Median returns the median of metric over the repeats (NaN if none).
func (r PointResult) Median(metric string) float64 { return Median(r.Values(metric)) }

// Spread returns the min and max of metric over the repeats.
func (r PointResult) Spread(metric string) (lo, hi float64) {
	v := r.Values(metric)
	if len(v) == 0 {
		return math.NaN(), math.NaN()
	}
	return slices.Min(v), slices.Max(v)
}

// Median of xs (NaN when empty).
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
