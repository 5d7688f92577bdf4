package bench

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"slices"

	"github.com/corepin/corepin/experiment"
	"github.com/corepin/corepin/store"
	"github.com/corepin/corepin/topology"
)

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
	params, err := experiment.ParseParams(run.Params)
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
		point   experiment.Point
		index   int // experiment.PointIndexMetric, or the order first seen
		failed  int
		repeats map[int]experiment.Metrics
	}
	byPoint := map[key]*acc{}
	elapsed := map[string]float64{}
	var order []key
	for _, m := range ms {
		if m.Repeat == experiment.NoRepeat && m.Metric == experiment.ElapsedMetric {
			elapsed[m.Experiment] = m.Value
			continue
		}
		k := key{m.Experiment, string(m.Point)}
		a := byPoint[k]
		if a == nil {
			p, err := experiment.ParsePoint(m.Point)
			if err != nil {
				return r, err
			}
			a = &acc{point: p, index: math.MaxInt32 + len(order), repeats: map[int]experiment.Metrics{}}
			byPoint[k] = a
			order = append(order, k)
		}
		switch {
		case m.Repeat == experiment.NoRepeat && m.Metric == experiment.PointIndexMetric:
			a.index = int(m.Value)
		case m.Repeat == experiment.NoRepeat && m.Metric == experiment.FailedMetric:
			a.failed = int(m.Value)
		case m.Repeat == experiment.NoRepeat:
			// An experiment-level fact of a later version: not a metric.
		default:
			if a.repeats[m.Repeat] == nil {
				a.repeats[m.Repeat] = experiment.Metrics{}
			}
			a.repeats[m.Repeat][m.Metric] = m.Value
		}
	}
	slices.SortStableFunc(order, func(x, y key) int { return cmp.Compare(byPoint[x].index, byPoint[y].index) })
	for _, e := range runOrder(params) {
		var pts []experiment.PointResult
		for _, k := range order {
			if k.exp != e.Name() {
				continue
			}
			a := byPoint[k]
			pr := experiment.PointResult{Point: a.point}
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
func runOrder(p experiment.Params) []Experiment {
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
