package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/corepin/corepin/experiment"
	"github.com/corepin/corepin/store"
	"github.com/corepin/corepin/topology"
)

// countExp records the order it was run in and reports a metric that
// depends on the point and the repeat.
type countExp struct {
	order  []string
	failOn string
	spec   countSpec
}

type countSpec struct {
	Sizes []int `yaml:"sizes"`
}

func (c *countExp) Name() string  { return "count" }
func (c *countExp) Title() string { return "counting" }
func (c *countExp) Spec(quick bool) any {
	c.spec = countSpec{Sizes: []int{1, 2, 3}}
	if quick {
		c.spec.Sizes = []int{1, 2}
	}
	return &c.spec
}
func (c *countExp) CurrentSpec() any { return &c.spec }
func (c *countExp) Points(*Env) []experiment.Point {
	var ps []experiment.Point
	for _, s := range c.spec.Sizes {
		ps = append(ps, experiment.P("size", s))
	}
	return ps
}
func (c *countExp) Run(_ context.Context, _ *Env, p experiment.Point) (experiment.Metrics, error) {
	c.order = append(c.order, p.Get("size"))
	if p.Get("size") == c.failOn {
		return nil, errors.New("boom")
	}
	var n float64
	fmt.Sscan(p.Get("size"), &n)
	return experiment.Metrics{"value": n * 10, "repeat_seen": float64(len(c.order))}, nil
}
func (c *countExp) Analyze(_ *Env, pts []experiment.PointResult) Analysis {
	t := Table{Columns: []string{"size", "median"}}
	for _, p := range pts {
		t.Rows = append(t.Rows, []string{p.Point.Get("size"), fmt.Sprint(p.Median("value"))})
	}
	return Analysis{Tables: []Table{t}, Recommendation: fmt.Sprintf("%d points", len(pts))}
}

func TestRunExperimentInterleavesRepeats(t *testing.T) {
	e := &countExp{}
	e.Spec(false)
	rep, err := RunExperiment(context.Background(), &Env{}, e, Options{Repeats: 5, Warmup: true, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	if len(e.order) != 1+15 {
		t.Fatalf("%d runs, want 1 warm-up + 15", len(e.order))
	}
	// Every round of 3 measures each point once.
	for r := range 5 {
		round := e.order[1+3*r : 1+3*(r+1)]
		seen := map[string]bool{}
		for _, s := range round {
			seen[s] = true
		}
		if len(seen) != 3 {
			t.Errorf("round %d = %v, want each point once", r, round)
		}
	}
	if strings.Join(e.order[1:4], "") == "123" && strings.Join(e.order[4:7], "") == "123" && strings.Join(e.order[7:10], "") == "123" {
		t.Errorf("order %v is not randomised", e.order)
	}
	for _, p := range rep.Points {
		if len(p.Repeats) != 5 {
			t.Errorf("point %s: %d repeats, want 5", p.Point.Label(), len(p.Repeats))
		}
	}
	if got := rep.Points[1].Median("value"); got != 20 {
		t.Errorf("median = %v, want 20", got)
	}
	if rep.Analysis.Recommendation != "3 points" {
		t.Errorf("Analyze not applied: %+v", rep.Analysis)
	}
}

// openExp is countExp with a second stage: after the planned rounds it
// calls the points named in open undecided.
type openExp struct {
	countExp
	open  []int
	calls int
	seen  []int // repeats per point at the call
}

func (o *openExp) Open(_ *Env, pts []experiment.PointResult) []int {
	o.calls++
	for _, p := range pts {
		o.seen = append(o.seen, len(p.Repeats))
	}
	return o.open
}

// A Sequential experiment's open points get Repeats more runs each, in
// rounds of their own after the planned ones, and Open is asked once.
func TestRunExperimentSecondStage(t *testing.T) {
	e := &openExp{open: []int{2, 0, 2, 7}}
	e.Spec(false)
	rep, err := RunExperiment(context.Background(), &Env{}, e, Options{Repeats: 5, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	if e.calls != 1 || fmt.Sprint(e.seen) != "[5 5 5]" {
		t.Errorf("Open called %d times, seeing %v repeats; want once, after 5 of each", e.calls, e.seen)
	}
	var got []int
	for _, p := range rep.Points {
		got = append(got, len(p.Repeats))
	}
	if fmt.Sprint(got) != "[10 5 10]" {
		t.Errorf("repeats per point = %v, want [10 5 10] (points 0 and 2 open; 7 is no point)", got)
	}
	// The second stage comes after the first, each of its rounds holding
	// both open points once.
	for r := range 5 {
		round := slices.Sorted(slices.Values(e.order[15+2*r : 15+2*(r+1)]))
		if fmt.Sprint(round) != "[1 3]" {
			t.Errorf("second-stage round %d = %v, want sizes 1 and 3 once each", r, round)
		}
	}
	e = &openExp{}
	e.Spec(false)
	if _, err := RunExperiment(context.Background(), &Env{}, e, Options{Repeats: 5, Seed: 3}); err != nil || len(e.order) != 15 {
		t.Errorf("with nothing open: %d runs (%v), want 15", len(e.order), err)
	}
}

func TestRunExperimentReportsFailedPoints(t *testing.T) {
	e := &countExp{failOn: "2"}
	e.Spec(false)
	rep, err := RunExperiment(context.Background(), &Env{}, e, Options{Repeats: 2, Seed: 1})
	if err == nil || !strings.Contains(err.Error(), "size=2: boom") {
		t.Fatalf("error = %v, want the failing point named", err)
	}
	if len(rep.Points[1].Errors) != 2 || len(rep.Points[0].Repeats) != 2 {
		t.Errorf("points = %+v", rep.Points)
	}
}

func TestConfigure(t *testing.T) {
	e := &countExp{}
	if err := experiment.Configure([]Experiment{e}, []byte("count:\n  sizes: [4, 5]\n"), true); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(e.spec.Sizes) != "[4 5]" {
		t.Errorf("sizes = %v, want [4 5]", e.spec.Sizes)
	}
	for _, bad := range []string{"count:\n  size: [1]\n", "nope:\n  x: 1\n", "count: [\n"} {
		if err := experiment.Configure([]Experiment{&countExp{}}, []byte(bad), true); !errors.Is(err, experiment.ErrUsage) {
			t.Errorf("experiment.Configure(%q) = %v, want experiment.ErrUsage", bad, err)
		}
	}
}

func TestStatistics(t *testing.T) {
	if m := experiment.Median([]float64{3, 1, 2, 10}); m != 2.5 {
		t.Errorf("Median = %v", m)
	}
	if !math.IsNaN(experiment.Median(nil)) {
		t.Errorf("experiment.Median(nil) is not NaN")
	}
	if q := Quantile([]float64{1, 2, 3, 4, 5}, 0.25); q != 2 {
		t.Errorf("Quantile = %v", q)
	}
}

// A report rebuilt from the database equals the one measured.
func TestRebuildFromStore(t *testing.T) {
	Register(func() Experiment { return &countExp{} })
	defer func() { registry = registry[:len(registry)-1] }()
	e := &countExp{}
	e.Spec(false)
	rep, err := RunExperiment(context.Background(), &Env{}, e, Options{Repeats: 3, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(filepath.Join(t.TempDir(), "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	topo := topology.MustSynthetic(topology.Shape{Sockets: 1, NodesPerSocket: 1, L3PerNode: 1, CoresPerL3: 2, ThreadsPerCore: 2})
	tj, _ := json.Marshal(topo.Doc())
	id, err := db.BeginRun(store.Run{Command: "bench", Topology: tj, Params: json.RawMessage(`{"quick":false}`)})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range rep.Points {
		for i, m := range p.Repeats {
			rows, err := experiment.Measurements("count", p.Point, i, m)
			if err != nil {
				t.Fatal(err)
			}
			if err := db.AddMeasurement(id, rows...); err != nil {
				t.Fatal(err)
			}
		}
	}
	runs, _ := db.Runs(store.RunFilter{ID: id})
	ms, err := db.Measurements(id, "")
	if err != nil {
		t.Fatal(err)
	}
	back, err := Rebuild(runs[0], ms, &Env{})
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Experiments) != 1 {
		t.Fatalf("%d experiments rebuilt", len(back.Experiments))
	}
	got, want := back.Experiments[0].Analysis.Tables[0].Rows, rep.Analysis.Tables[0].Rows
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("rebuilt table %v, want %v", got, want)
	}
	if !strings.Contains(back.TopologyText, "cores: 0+2 1+3") {
		t.Errorf("topology text = %q", back.TopologyText)
	}
	if got := back.Experiments[0].Analysis.Recommendation; got != "3 points" {
		t.Errorf("rebuilt recommendation = %q, want %q", got, "3 points")
	}
}

func TestReportJSONRoundTrip(t *testing.T) {
	r := Report{Experiments: []ExperimentReport{{Name: "x", Points: []experiment.PointResult{{Point: experiment.P("b", 1, "a", 2), Repeats: []experiment.Metrics{{"v": 1}}}},
		Analysis: Analysis{Charts: []Chart{{Kind: ChartHeatmap, Grid: [][]float64{{1, math.NaN()}}, Series: []Series{{Name: "s", Y: []float64{math.Inf(1), 2}, Values: [][]float64{{math.NaN()}}}}}}}}}}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	var back Report
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("Unmarshal: %v", err)
	}
	c := back.Experiments[0].Analysis.Charts[0]
	if c.Grid[0][0] != 1 || !math.IsNaN(c.Grid[0][1]) || !math.IsNaN(c.Series[0].Y[0]) || c.Series[0].Y[1] != 2 || !math.IsNaN(c.Series[0].Values[0][0]) {
		t.Errorf("chart after round trip = %+v", c)
	}
	if got := back.Experiments[0].Points[0].Point.Label(); got != "b=1 a=2" {
		t.Errorf("point = %q, want key order kept", got)
	}
}

// Issue 27 §3: a billion repeats planned a billion tasks per point before
// the first run (and before SIGTERM was looked at). RunExperiment refuses
// more than MaxRepeats repeats, and more than MaxRuns runs however the
// spec's lists multiply, before it plans or runs anything.
func TestRunExperimentBoundsRuns(t *testing.T) {
	many := make([]int, MaxRuns/MaxRepeats+1)
	for i := range many {
		many[i] = i + 1
	}
	tests := []struct {
		name    string
		sizes   []int
		repeats int
		msg     string
	}{
		{name: "a billion repeats", sizes: []int{1}, repeats: 1_000_000_000, msg: "1000000000 repeats: at most 100"},
		{name: "points x repeats over MaxRuns", sizes: many, repeats: MaxRepeats, msg: "1001 points x 100 repeats: at most 100000 runs"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := &countExp{spec: countSpec{Sizes: tc.sizes}}
			_, err := RunExperiment(context.Background(), &Env{}, e, Options{Repeats: tc.repeats, Warmup: true})
			if !errors.Is(err, experiment.ErrUsage) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("RunExperiment error = %v, want %v saying %q", err, experiment.ErrUsage, tc.msg)
			}
			if len(e.order) != 0 {
				t.Errorf("%d runs made, want none", len(e.order))
			}
		})
	}
}
