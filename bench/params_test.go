package bench

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/corepin/corepin/experiment"
	"github.com/corepin/corepin/store"
	"github.com/corepin/corepin/topology"
)

// storeAndRebuild records r the way `corepin bench` does (its Params and
// topology with the run, every repeat's metrics and each experiment's
// elapsed time as measurements), then rebuilds it as `corepin report`
// does, from the database alone with fresh experiments.
func storeAndRebuild(t *testing.T, r Report) Report {
	t.Helper()
	db, err := store.Open(filepath.Join(t.TempDir(), "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	params, err := json.Marshal(r.Params)
	if err != nil {
		t.Fatal(err)
	}
	topo, err := json.Marshal(r.Topology)
	if err != nil {
		t.Fatal(err)
	}
	id, err := db.BeginRun(store.Run{StartedAt: r.GeneratedAt, Command: "bench", Params: params, CorepinVersion: r.CorepinVersion,
		Kernel: r.Kernel, Hostname: r.Hostname, TopologySummary: r.TopologySummary, Topology: topo})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range r.Experiments {
		// Measured in a random order: store the last point first.
		for _, p := range slices.Backward(e.Points) {
			for i, m := range p.Repeats {
				rows, err := experiment.Measurements(e.Name, p.Point, i, m)
				if err != nil {
					t.Fatal(err)
				}
				if err := db.AddMeasurement(id, rows...); err != nil {
					t.Fatal(err)
				}
			}
		}
		rows, err := experiment.ExperimentMeasurements(e.Name, e.Elapsed, e.Points)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.AddMeasurement(id, rows...); err != nil {
			t.Fatal(err)
		}
	}
	runs, err := db.Runs(store.RunFilter{ID: id})
	if err != nil || len(runs) != 1 {
		t.Fatalf("Runs(%d) = %v, %v", id, runs, err)
	}
	ms, err := db.Measurements(id, "")
	if err != nil {
		t.Fatal(err)
	}
	back, err := Rebuild(runs[0], ms, &Env{})
	if err != nil {
		t.Fatalf("Rebuild: %v", err)
	}
	return back
}

// runReport analyses synthetic points of the selected experiments,
// configured by the YAML spec, the way a bench run does after measuring,
// and returns the report the run would write.
func runReport(t *testing.T, spec string, quick bool, points map[string][]experiment.PointResult, names ...string) Report {
	t.Helper()
	exps, err := Select(names)
	if err != nil {
		t.Fatal(err)
	}
	if err := experiment.Configure(exps, []byte(spec), quick); err != nil {
		t.Fatal(err)
	}
	topo := topology.MustSynthetic(topology.Shape{Sockets: 1, NodesPerSocket: 1, L3PerNode: 1, CoresPerL3: 2, ThreadsPerCore: 2})
	env := &Env{Topo: topo, Quick: quick}
	argv := append([]string{"corepin", "bench", "--quick", "--spec", "my spec.yaml"}, names...)
	params, err := ResolveParams(experiment.Params{Quick: quick, Repeats: 3, Seed: 9, Driver: "cgroup-v1", Argv: argv,
		Commands: []string{strings.Join(argv, " ")}, SpecFile: "my spec.yaml"}, exps, env)
	if err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	_ = topo.Render(&text, topology.RenderOptions{})
	r := Report{RunID: 1, GeneratedAt: time.Date(2026, 11, 23, 1, 2, 3, 456789000, time.Local), CorepinVersion: "test",
		Kernel: "6.1.0", Hostname: "box", Quick: quick, Driver: "cgroup-v1", Topology: topo.Doc(), TopologySummary: topo.Summary(),
		TopologyText: text.String(), Commands: params.Commands, Params: params}
	for i, e := range exps {
		pts := points[e.Name()]
		r.Experiments = append(r.Experiments, ExperimentReport{Name: e.Name(), Title: e.Title(), Points: pts,
			Analysis: e.Analyze(env, pts), Elapsed: float64(10 + i)})
	}
	return r
}

func colocationPoints() []experiment.PointResult {
	m := func(p99, batch float64) experiment.Metrics {
		return experiment.Metrics{"p99_ms": p99, "p50_ms": 1, "batch_cpus": batch, "service_cpus": 0.5, "machine_cpus": 2}
	}
	pt := func(pol string, ms ...experiment.Metrics) experiment.PointResult {
		return experiment.PointResult{Point: experiment.P("service", "cpu", "policy", pol), Repeats: ms}
	}
	return []experiment.PointResult{
		pt(polAlone, m(10, 0), m(11, 0), m(12, 0)),
		pt(polBatchAlone, experiment.Metrics{"batch_cpus": 2}, experiment.Metrics{"batch_cpus": 1.9}, experiment.Metrics{"batch_cpus": 2}),
		pt(polNone, m(30, 1.45), m(31, 1.45), m(29, 1.45)),
		pt(polCorepin, m(10.5, 1.4), m(10.8, 1.4), m(10.2, 1.4)),
	}
}

func threadsPoints() []experiment.PointResult {
	pt := func(threads string, rates ...float64) experiment.PointResult {
		p := experiment.PointResult{Point: experiment.P("cpus", 2, "threads", threads)}
		for _, r := range rates {
			p.Repeats = append(p.Repeats, experiment.Metrics{"rate": r, "wall_s": 100 / r, "migrations": 3})
		}
		return p
	}
	return []experiment.PointResult{pt("1", 50, 51, 52), pt("2", 98, 99, 100), pt("4", 97, 99, 101), pt("auto", 80, 81, 82)}
}

// Issue 8 §3 and issue 9 §1: a report regenerated from the database equals
// the one the run wrote, including what the recorded --spec changed (the
// colocation service's cost and load tool, the threads workload's unit).
// Before Params were stored, Rebuild analysed with the defaults: "3 ms CPU
// per request", no wrk note, "ops/s".
func TestRebuiltReportEqualsRunReport(t *testing.T) {
	spec := `
colocation:
  cost_ms: 7
  tool: wrk
threads:
  job: {workload: transcode}
`
	pts := map[string][]experiment.PointResult{"colocation": colocationPoints(), "threads": threadsPoints()}
	run := runReport(t, spec, true, pts, "threads", "colocation")
	back := storeAndRebuild(t, run)

	if diff := cmp.Diff(run, back, cmpopts.EquateNaNs()); diff != "" {
		t.Errorf("rebuilt report differs from the run's (-run +rebuilt):\n%s", diff)
	}
	// Rendering (package render) is a function of the Report alone; these
	// are the figures the recorded spec changes.
	b, err := json.Marshal(back)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"7 ms CPU per request", "wrk is closed-loop", "frames/s", `"elapsed_s":10`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("rebuilt report lacks %q", want)
		}
	}
	if got, want := back.Experiments[0].Name, "threads"; got != want {
		t.Errorf("first rebuilt experiment = %q, want the run's order (%q)", got, want)
	}
	if diff := cmp.Diff(run.Params.Argv, back.Params.Argv); diff != "" {
		t.Errorf("rebuilt argv differs (-run +rebuilt):\n%s", diff)
	}
}

// A failed repeat counts in the rebuilt report as in the run's; only its
// message is not in the database.
func TestRebuiltReportCountsFailedRepeats(t *testing.T) {
	pts := colocationPoints()
	pts[2].Errors = []string{"boom"}
	run := runReport(t, "", true, map[string][]experiment.PointResult{"colocation": pts}, "colocation")
	back := storeAndRebuild(t, run)
	if got := back.Experiments[0].Points[2].Errors; len(got) != 1 {
		t.Errorf("rebuilt errors of point 2 = %q, want one", got)
	}
	if diff := cmp.Diff(run, back, cmpopts.EquateNaNs(), cmpopts.IgnoreFields(experiment.PointResult{}, "Errors")); diff != "" {
		t.Errorf("rebuilt report differs beyond the error messages (-run +rebuilt):\n%s", diff)
	}
}

// A run recorded before Params carried specs (only flags) rebuilds with
// the defaults for its quick flag.
func TestRebuildOldParams(t *testing.T) {
	run := runReport(t, "", true, map[string][]experiment.PointResult{"colocation": colocationPoints()}, "colocation")
	run.Params = experiment.Params{Quick: true, Driver: "cgroup-v1", Commands: run.Commands}
	back := storeAndRebuild(t, run)
	if got, want := back.Experiments[0].Analysis, run.Experiments[0].Analysis; !cmp.Equal(got, want, cmpopts.EquateNaNs()) {
		t.Errorf("rebuilt analysis of an old run differs:\n%s", cmp.Diff(want, got, cmpopts.EquateNaNs()))
	}
}

// A recorded spec that no longer fits the experiment is an error naming
// it, not a silent default.
func TestParamsApplyRejectsBadSpec(t *testing.T) {
	p := experiment.Params{Experiments: []experiment.ExperimentParams{{Name: "colocation", Spec: json.RawMessage(`{"cost_ms":"seven"}`)}}}
	e := &colocationExp{}
	if _, err := p.Apply(e); err == nil || !strings.Contains(err.Error(), "colocation") {
		t.Errorf("Apply(bad spec) = %v, want an error naming colocation", err)
	}
}

func FuzzParseParams(f *testing.F) {
	f.Add([]byte(`{"quick":true,"experiments":[{"name":"threads","spec":{"cpus":2}}]}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := experiment.ParseParams(b)
		if err != nil {
			return
		}
		for _, e := range Experiments() {
			_, _ = p.Apply(e) // must not panic on any recorded spec
		}
	})
}
