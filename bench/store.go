package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
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

// Rebuild regroups stored measurements of one bench run into each
// experiment's points and re-runs its analysis, so a report can be
// regenerated from the database alone.
func Rebuild(run store.Run, ms []store.Measurement, env *Env) (Report, error) {
	r := Report{RunID: run.ID, GeneratedAt: run.StartedAt, CorepinVersion: run.CorepinVersion,
		Kernel: run.Kernel, Hostname: run.Hostname, TopologySummary: run.TopologySummary}
	var params struct {
		Quick    bool     `json:"quick"`
		Driver   string   `json:"driver"`
		Commands []string `json:"commands"`
	}
	if len(run.Params) > 0 {
		if err := json.Unmarshal(run.Params, &params); err != nil {
			return r, fmt.Errorf("reading run %d parameters: %w", run.ID, err)
		}
	}
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
		repeats map[int]Metrics
	}
	byPoint := map[key]*acc{}
	var order []key
	for _, m := range ms {
		k := key{m.Experiment, string(m.Point)}
		a := byPoint[k]
		if a == nil {
			p, err := ParsePoint(m.Point)
			if err != nil {
				return r, err
			}
			a = &acc{point: p, repeats: map[int]Metrics{}}
			byPoint[k] = a
			order = append(order, k)
		}
		if a.repeats[m.Repeat] == nil {
			a.repeats[m.Repeat] = Metrics{}
		}
		a.repeats[m.Repeat][m.Metric] = m.Value
	}
	for _, e := range Experiments() {
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
			pts = append(pts, pr)
		}
		if len(pts) == 0 {
			continue
		}
		if c, ok := e.(Configurable); ok {
			c.Spec(params.Quick)
		}
		r.Experiments = append(r.Experiments, ExperimentReport{
			Name: e.Name(), Title: e.Title(), Points: pts, Analysis: e.Analyze(env, pts),
		})
	}
	if len(r.Experiments) == 0 {
		return r, fmt.Errorf("run %d has no measurements of a known experiment", run.ID)
	}
	return r, nil
}
