package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func raw(s string) json.RawMessage { return json.RawMessage(s) }

func ptr[T any](v T) *T { return &v }

// sampleJob is a fully populated job that depends only on i, so a reader
// can tell a complete row from a partial one.
func sampleJob(i int) Job {
	start := time.Date(2026, 3, 1, 12, 0, i, 0, time.UTC)
	return Job{
		Job: i, Cmd: fmt.Sprintf("ffmpeg -i in%d.mp4 -threads 2 out%d.mp4", i, i),
		Mode: "pinned", QoS: "LSE", CPUs: 2, Threads: 2, Cpuset: fmt.Sprintf("%d-%d", 2*i, 2*i+1),
		WallS: 1.5 + float64(i), UserS: 2.75, SysS: 0.125, MaxRSSKB: 1 << 20, CPUsUsed: fmt.Sprintf("%d-%d", 2*i, 2*i+1),
		Migrations: int64(i), CtxSwitches: 1000 + int64(i), RunDelayS: 0.01, ThrottledPeriods: 3,
		ThrottledS: 0.25, NrPeriods: 100, ExitCode: 0, StderrTail: "done, \"quoted\"\nsecond line",
		FramesPerS: ptr(24.5 + float64(i)), StartedAt: start, FinishedAt: start.Add(1500 * time.Millisecond),
		Extra: raw(fmt.Sprintf(`{"i":%d}`, i)),
	}
}

func newDB(t *testing.T) *DB { return openT(t, filepath.Join(t.TempDir(), "results.db")) }

func TestAddJobErrors(t *testing.T) {
	db := newDB(t)
	id, err := db.BeginRun(Run{Command: "run"})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.AddJob(id, sampleJob(0)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		run  int64
		job  Job
		is   error
		msg  string
	}{
		{name: "duplicate index", run: id, job: sampleJob(0), is: ErrExists, msg: "adding job 0 of run 1: already exists"},
		{name: "unknown run", run: 42, job: sampleJob(1), is: ErrNotFound, msg: "adding job 1 of run 42: run not found"},
		{name: "NaN", run: id, job: Job{Job: 2, WallS: math.NaN()}, msg: "wall_s is NaN: want a finite number"},
		{name: "infinite fps", run: id, job: Job{Job: 2, FramesPerS: ptr(math.Inf(1))}, msg: "frames_per_s is +Inf"},
		{name: "extra not JSON", run: id, job: Job{Job: 2, Extra: raw("{")}, msg: "extra is not valid JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := db.AddJob(tc.run, tc.job)
			if err == nil || (tc.is != nil && !errors.Is(err, tc.is)) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("AddJob = %v, want an error saying %q", err, tc.msg)
			}
		})
	}
	jobs, err := db.Jobs(0)
	if err != nil || len(jobs) != 1 {
		t.Errorf("Jobs(0) = %d jobs, %v; want 1: a refused job must write nothing", len(jobs), err)
	}
}

func TestRunsFilter(t *testing.T) {
	db := newDB(t)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, c := range []string{"run", "bench scaling", "run", "run"} {
		if _, err := db.BeginRun(Run{Command: c, StartedAt: t0.Add(time.Duration(i) * time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(rs []Run) []int64 {
		var out []int64
		for _, r := range rs {
			out = append(out, r.ID)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		f    RunFilter
		want []int64
	}{
		{name: "all", want: []int64{1, 2, 3, 4}},
		{name: "by id", f: RunFilter{ID: 3}, want: []int64{3}},
		{name: "unknown id", f: RunFilter{ID: 9}, want: nil},
		{name: "by command", f: RunFilter{Command: "run"}, want: []int64{1, 3, 4}},
		{name: "since", f: RunFilter{Since: t0.Add(2 * time.Hour)}, want: []int64{3, 4}},
		{name: "newest two, oldest first", f: RunFilter{Limit: 2}, want: []int64{3, 4}},
		{name: "newest run of a command", f: RunFilter{Command: "bench scaling", Limit: 1}, want: []int64{2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs, err := db.Runs(tc.f)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, ids(rs)); diff != "" {
				t.Errorf("Runs(%+v) ids (-want +got):\n%s", tc.f, diff)
			}
		})
	}
	if err := db.FinishRun(9, time.Time{}); !errors.Is(err, ErrNotFound) {
		t.Errorf("FinishRun(9) = %v, want ErrNotFound", err)
	}
	if _, err := db.BeginRun(Run{}); err == nil {
		t.Error("BeginRun without a command succeeded")
	}
	if _, err := db.BeginRun(Run{Command: "run", Params: raw("{oops")}); err == nil {
		t.Error("BeginRun with invalid params JSON succeeded")
	}
}

func TestMeasurements(t *testing.T) {
	db := newDB(t)
	r1, _ := db.BeginRun(Run{Command: "bench"})
	r2, _ := db.BeginRun(Run{Command: "bench"})
	ms := []Measurement{
		{Experiment: "concurrency", Point: raw(`{"mode":"pinned","concurrency":4}`), Metric: "fps", Value: 123.5},
		{Experiment: "concurrency", Point: raw(`{"mode":"pinned","concurrency":4}`), Metric: "fps", Value: 121, Repeat: 1},
		{Experiment: "threads", Metric: "wall_s", Value: 2},
	}
	if err := db.AddMeasurement(r1, ms...); err != nil {
		t.Fatal(err)
	}
	if err := db.AddMeasurement(r2, Measurement{Experiment: "threads", Metric: "wall_s", Value: 3}); err != nil {
		t.Fatal(err)
	}
	// One bad measurement refuses the whole batch.
	err := db.AddMeasurement(r2, Measurement{Experiment: "x", Metric: "m", Value: 1}, Measurement{Experiment: "x", Metric: "m", Point: raw("[")})
	if err == nil {
		t.Error("AddMeasurement with invalid point JSON succeeded")
	}
	if err := db.AddMeasurement(r2, Measurement{Experiment: "x", Metric: "m", Value: math.NaN()}); err == nil {
		t.Error("AddMeasurement of NaN succeeded")
	}
	if err := db.AddMeasurement(99, Measurement{Experiment: "x", Metric: "m"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("AddMeasurement to run 99 = %v, want ErrNotFound", err)
	}
	for i := range ms {
		ms[i].RunID = r1
	}
	for _, tc := range []struct {
		name string
		run  int64
		exp  string
		want []Measurement
	}{
		{name: "one run", run: r1, want: ms},
		{name: "one experiment", exp: "threads", want: []Measurement{ms[2], {RunID: r2, Experiment: "threads", Metric: "wall_s", Value: 3}}},
		{name: "both", run: r2, exp: "concurrency", want: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := db.Measurements(tc.run, tc.exp)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Measurements(%d, %q) (-want +got):\n%s", tc.run, tc.exp, diff)
			}
		})
	}
}

// TestJobJSONKeys pins the keys shared with `corepin run -o json`.
func TestJobJSONKeys(t *testing.T) {
	b, err := json.Marshal(Job{Job: 3, Cpuset: "0-1", Mode: "pinned", WallS: 1.2, UserS: 2.3, SysS: 0.1, CPUsUsed: "0-1", Migrations: 3})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	json.Unmarshal(b, &m)
	want := map[string]any{"job": 3.0, "cpuset": "0-1", "mode": "pinned", "wall_s": 1.2, "user_s": 2.3,
		"sys_s": 0.1, "cpus_used": "0-1", "migrations": 3.0, "throttled_s": 0.0, "exit_code": 0.0}
	for k, v := range want {
		if !cmp.Equal(m[k], v) {
			t.Errorf("key %s = %v, want %v (in %s)", k, m[k], v, b)
		}
	}
	for _, k := range []string{"frames_per_s", "ops_per_s", "started_at", "finished_at", "extra", "signal"} {
		if _, ok := m[k]; ok {
			t.Errorf("unset %s is in %s, want it left out", k, b)
		}
	}
}

func TestNewRun(t *testing.T) {
	r, err := NewRun("run", map[string]any{"jobs": 2}, "v1", "1 socket", map[string]any{"cpus": []int{}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Command != "run" || string(r.Params) != `{"jobs":2}` || string(r.Topology) != `{"cpus":[]}` ||
		r.Kernel == "" || r.StartedAt.IsZero() || r.CorepinVersion != "v1" || r.TopologySummary != "1 socket" {
		t.Errorf("NewRun() = %+v", r)
	}
	if _, err := NewRun("run", func() {}, "v1", "", nil); err == nil {
		t.Error("NewRun with unencodable params = nil error")
	}
}

func TestResults(t *testing.T) {
	db := newDB(t)
	if r, err := db.Results(ResultsQuery{Jobs: true, Measurements: true}); err != nil || r.Runs == nil || r.Jobs == nil || r.Measurements == nil {
		t.Fatalf("empty database: Results = %+v, %v; want empty, non-nil lists", r, err)
	}
	a, _ := db.BeginRun(Run{Command: "run"})
	b, _ := db.BeginRun(Run{Command: "bench"})
	for i, id := range []int64{a, b, b} {
		if err := db.AddJob(id, sampleJob(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.AddMeasurement(b, Measurement{Experiment: "threads", Point: raw(`{"threads":2}`), Metric: "ops_per_s", Value: 5, Repeat: 1}); err != nil {
		t.Fatal(err)
	}
	r, err := db.Results(ResultsQuery{Run: b, Jobs: true})
	if err != nil || len(r.Runs) != 1 || r.Runs[0].ID != b || len(r.Jobs) != 2 || r.Measurements != nil {
		t.Errorf("run %d with jobs: %d runs, %d jobs, measurements %v, err %v; want 1 run, 2 jobs, none", b, len(r.Runs), len(r.Jobs), r.Measurements, err)
	}
	r, err = db.Results(ResultsQuery{Measurements: true})
	if err != nil || len(r.Runs) != 2 || len(r.Jobs) != 0 || len(r.Measurements) != 1 || r.Measurements[0].RunID != b {
		t.Errorf("every run with measurements: %d runs, %d jobs, %+v, err %v", len(r.Runs), len(r.Jobs), r.Measurements, err)
	}
	if _, err := db.Results(ResultsQuery{Run: 99}); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown run: err %v, want ErrNotFound", err)
	}
}
