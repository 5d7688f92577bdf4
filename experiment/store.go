package experiment

import (
	"encoding/json"
	"slices"

	"github.com/corepin/corepin/store"
)

// Measurements turns one measured run of a point into store rows, one per
// metric, sorted by metric name.
func Measurements(exp string, p Point, repeat int, m Metrics) ([]store.Measurement, error) {
	pj, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	slices.Sort(names)
	out := make([]store.Measurement, 0, len(m))
	for _, k := range names {
		out = append(out, store.Measurement{Experiment: exp, Point: pj, Metric: k, Value: m[k], Repeat: repeat})
	}
	return out, nil
}

// Experiment-level rows: facts of an experiment or of one of its points
// rather than of one repeat. They are stored with Repeat NoRepeat so
// that no reader mistakes them for a measured metric.
const (
	// ElapsedMetric is how long the experiment ran, in seconds; its point
	// is the empty object.
	ElapsedMetric = "experiment_elapsed_s"
	// PointIndexMetric is a point's place in the experiment's parameter
	// space (Points order); measured repeats come in random order.
	PointIndexMetric = "point_index"
	// FailedMetric is how many repeats of a point failed.
	FailedMetric = "failed_repeats"
	// NoRepeat is the Repeat of an experiment-level row.
	NoRepeat = -1
)

// ExperimentMeasurements are the experiment-level store rows of experiment
// exp (its elapsed seconds, and per point its place and failed repeats),
// so that a rebuilt report shows what the run's report showed.
func ExperimentMeasurements(exp string, elapsed float64, points []PointResult) ([]store.Measurement, error) {
	out := []store.Measurement{{Experiment: exp, Point: json.RawMessage("{}"), Metric: ElapsedMetric, Value: elapsed, Repeat: NoRepeat}}
	for i, p := range points {
		pj, err := json.Marshal(p.Point)
		if err != nil {
			return nil, err
		}
		out = append(out, store.Measurement{Experiment: exp, Point: pj, Metric: PointIndexMetric, Value: float64(i), Repeat: NoRepeat})
		if len(p.Errors) > 0 {
			out = append(out, store.Measurement{Experiment: exp, Point: pj, Metric: FailedMetric, Value: float64(len(p.Errors)), Repeat: NoRepeat})
		}
	}
	return out, nil
}
