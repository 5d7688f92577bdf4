package bench

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"slices"

	"github.com/corepin/corepin/store"
	"github.com/corepin/corepin/topology"
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

// ParsePoint decodes a point's JSON object keeping its key order.
func ParsePoint(b []byte) (Point, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("parsing point %s: %w", b, err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("parsing point %s: not an object", b)
	}
	var p Point
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("parsing point %s: %w", b, err)
		}
		var v any
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("parsing point %s: %w", b, err)
		}
		p = append(p, KV{Key: fmt.Sprint(kt), Value: fmt.Sprint(v)})
	}
	return p, nil
}

// Experiment-level rows: facts of an experiment or of one of its points
// rather than of one repeat. They are stored with Repeat -1 (no repeat) so
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
	noRepeat     = -1
)

// ExperimentMeasurements are the experiment-level store rows of rep (its
// elapsed time, and per point its place and failed repeats), so that a
// rebuilt report shows what the run's report showed.
func ExperimentMeasurements(rep ExperimentReport) ([]store.Measurement, error) {
	out := []store.Measurement{{Experiment: rep.Name, Point: json.RawMessage("{}"), Metric: ElapsedMetric, Value: rep.Elapsed, Repeat: noRepeat}}
	for i, p := range rep.Points {
		pj, err := json.Marshal(p.Point)
		if err != nil {
			return nil, err
		}
		out = append(out, store.Measurement{Experiment: rep.Name, Point: pj, Metric: PointIndexMetric, Value: float64(i), Repeat: noRepeat})
		if len(p.Errors) > 0 {
			out = append(out, store.Measurement{Experiment: rep.Name, Point: pj, Metric: FailedMetric, Value: float64(len(p.Errors)), Repeat: noRepeat})
		}
	}
	return out, nil
}

// failedNotStored stands for a failed repeat's message in a rebuilt report:
// the database keeps how many failed, not why.
const failedNotStored = "failed (the message is in the run's output, not in the database)"

// Rebuild regroups stored measurements of one bench run into each
// experiment's points and re-runs its analysis with the parameters the run
// recorded (Params), so a report regenerated from the database alone
// equals the one the run wrote. Experiments come in the run's order.
func Rebuild(run store.Run, ms []store.Measurement, env *Env) (Report, error) {
	r := Report{RunID: run.ID, GeneratedAt: run.StartedAt.Local(), CorepinVersion: run.CorepinVersion,
		Kernel: run.Kernel, Hostname: run.Hostname, TopologySummary: run.TopologySummary}
	params, err := ParseParams(run.Params)
	if err != nil {
		return r, fmt.Errorf("reading run %d: %w", run.ID, err)
	}
	r.Params = params
	r.Quick, r.Driver, r.Commands = params.Quick, params.Driver, params.Commands
	if len(run.Topology) > 0 {
		if err := json.Unmarshal(run.Topology, &r.Topology); err != nil {
			return r, fmt.Errorf("reading run %d topology: %w", run.ID, err)
		}
		t, err := topology.FromDoc(r.Topology)
		if err != nil {
			return r, fmt.Errorf("reading run %d topology: %w", run.ID, err)
		}
		env.Topo = t
		var b bytes.Buffer
		_ = t.Render(&b, topology.RenderOptions{})
		r.TopologyText = b.String()
	}
	env.Quick = params.Quick
	type key struct{ exp, point string }
	type acc struct {
		point   Point
		index   int // PointIndexMetric, or the order first seen
		failed  int
		repeats map[int]Metrics
	}
	byPoint := map[key]*acc{}
	elapsed := map[string]float64{}
	var order []key
	for _, m := range ms {
		if m.Repeat == noRepeat && m.Metric == ElapsedMetric {
			elapsed[m.Experiment] = m.Value
			continue
		}
		k := key{m.Experiment, string(m.Point)}
		a := byPoint[k]
		if a == nil {
			p, err := ParsePoint(m.Point)
			if err != nil {
				return r, err
			}
			a = &acc{point: p, index: math.MaxInt32 + len(order), repeats: map[int]Metrics{}}
			byPoint[k] = a
			order = append(order, k)
		}
		switch {
		case m.Repeat == noRepeat && m.Metric == PointIndexMetric:
			a.index = int(m.Value)
		case m.Repeat == noRepeat && m.Metric == FailedMetric:
			a.failed = int(m.Value)
		case m.Repeat == noRepeat:
			// An experiment-level fact of a later version: not a metric.
		default:
			if a.repeats[m.Repeat] == nil {
				a.repeats[m.Repeat] = Metrics{}
			}
			a.repeats[m.Repeat][m.Metric] = m.Value
		}
	}
	slices.SortStableFunc(order, func(x, y key) int { return cmp.Compare(byPoint[x].index, byPoint[y].index) })
	for _, e := range runOrder(params) {
		var pts []PointResult
		for _, k := range order {
			if k.exp != e.Name() {
				continue
			}
			a := byPoint[k]
			pr := PointResult{Point: a.point}
			reps := make([]int, 0, len(a.repeats))
			for i := range a.repeats {
				reps = append(reps, i)
			}
			slices.Sort(reps)
			for _, i := range reps {
				pr.Repeats = append(pr.Repeats, a.repeats[i])
			}
			for range min(a.failed, 1<<16) {
				pr.Errors = append(pr.Errors, failedNotStored)
			}
			pts = append(pts, pr)
		}
		if len(pts) == 0 {
			continue
		}
		if _, err := params.Apply(e); err != nil {
			return r, fmt.Errorf("reading run %d: %w", run.ID, err)
		}
		r.Experiments = append(r.Experiments, ExperimentReport{
			Name: e.Name(), Title: e.Title(), Points: pts, Analysis: e.Analyze(env, pts), Elapsed: elapsed[e.Name()],
		})
	}
	if len(r.Experiments) == 0 {
		return r, fmt.Errorf("run %d has no measurements of a known experiment", run.ID)
	}
	return r, nil
}

// runOrder returns a fresh instance of every experiment: those p recorded
// first, in the run's order, then the rest in the canonical order.
func runOrder(p Params) []Experiment {
	all := Experiments()
	var out []Experiment
	for _, ep := range p.Experiments {
		if i := slices.IndexFunc(all, func(e Experiment) bool { return e.Name() == ep.Name }); i >= 0 {
			out = append(out, all[i])
			all = slices.Delete(all, i, i+1)
		}
	}
	return append(out, all...)
}
