package cli

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/corepin/corepin/store"
)

func init() {
	// Share -update with other golden tests of this package if one declares it.
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite golden files")
	}
}

// resultsGolden compares got with testdata/<test name>.golden; -update rewrites it.
func resultsGolden(t *testing.T, got string) {
	t.Helper()
	path := filepath.Join("testdata", t.Name()+".golden")
	if f := flag.Lookup("update"); f != nil && f.Value.String() == "true" {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden file (run with -update to create it): %v", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", path, diff)
	}
}

func resultsCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Main(args, strings.NewReader(""), &out, &errb)
	return out.String(), errb.String(), code
}

func f64(v float64) *float64 { return &v }

// resultsFixture writes a database with two runs: a run of two jobs (one
// killed, with awkward text) and a bench run with measurements.
func resultsFixture(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "results.db")
	db, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	run, err := db.BeginRun(store.Run{StartedAt: t0, Command: "run", Params: json.RawMessage(`{"jobs":2,"cpus":2,"mode":"pinned"}`),
		CorepinVersion: "v0.1.0", Kernel: "6.1.0-18-amd64", Hostname: "enc-7", TopologySummary: "1 socket, 4 cores, 8 CPUs"})
	if err != nil {
		t.Fatal(err)
	}
	jobs := []store.Job{
		{Job: 0, Cmd: "ffmpeg -i a.mp4 -threads 2 a.mkv", Mode: "pinned", QoS: "LSE", CPUs: 2, Threads: 2, Cpuset: "0-1",
			WallS: 10.5, UserS: 20.25, SysS: 0.5, MaxRSSKB: 204800, CPUsUsed: "0-1", Migrations: 3, CtxSwitches: 1200,
			RunDelayS: 0.02, FramesPerS: f64(57.1), StartedAt: t0, FinishedAt: t0.Add(10500 * time.Millisecond)},
		{Job: 1, Cmd: `sh -c "spin, then\nexit"`, Mode: "pinned", QoS: "LSE", CPUs: 2, Threads: 2, Cpuset: "2-3",
			WallS: 3, UserS: 5.5, SysS: 0.25, CPUsUsed: "2-3", ExitCode: -1, Signal: "SIGKILL",
			StderrTail: "frame=  10\rframe=  20\nkilled, \"late\"", Extra: json.RawMessage(`{"retries":1}`)},
	}
	for _, j := range jobs {
		if err := db.AddJob(run, j); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.FinishRun(run, t0.Add(11*time.Second)); err != nil {
		t.Fatal(err)
	}
	bench, err := db.BeginRun(store.Run{StartedAt: t0.Add(time.Hour), Command: "bench", Hostname: "enc-7"})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.AddMeasurement(bench,
		store.Measurement{Experiment: "concurrency", Point: json.RawMessage(`{"mode":"pinned","concurrency":4}`), Metric: "fps", Value: 230.5},
		store.Measurement{Experiment: "concurrency", Point: json.RawMessage(`{"mode":"quota","concurrency":4}`), Metric: "fps", Value: 201, Repeat: 1},
	); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestResultsOutput(t *testing.T) {
	db := resultsFixture(t)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{name: "runs", args: []string{"results"}},
		{name: "jobs of run 1", args: []string{"results", "--run", "1"}},
		{name: "measurements", args: []string{"results", "--measurements"}},
		{name: "csv", args: []string{"results", "--format", "csv"}},
		{name: "csv of run 2 is a header", args: []string{"results", "--format", "csv", "--run", "2"}},
		{name: "csv measurements", args: []string{"results", "--format", "csv", "--measurements"}},
		{name: "json run 1", args: []string{"results", "--format", "json", "--run", "1"}},
		{name: "o json with measurements", args: []string{"results", "-o", "json", "--run", "2", "--measurements"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, stderr, code := resultsCLI(t, append(tc.args, "--db", db)...)
			if code != 0 || stderr != "" {
				t.Fatalf("exit %d, stderr %q", code, stderr)
			}
			resultsGolden(t, out)
		})
	}
}

// TestResultsCSVParses reads the CSV export back with encoding/csv: one
// record per job, each as wide as the header, text fields intact.
func TestResultsCSVParses(t *testing.T) {
	out, _, code := resultsCLI(t, "results", "--format", "csv", "--db", resultsFixture(t))
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 3 {
		t.Fatalf("%d records, want a header and 2 jobs", len(recs))
	}
	col := map[string]int{}
	for i, h := range recs[0] {
		col[h] = i
	}
	for k, want := range map[string]string{"cmd": `sh -c "spin, then\nexit"`, "signal": "SIGKILL", "exit_code": "-1",
		"stderr_tail": "frame=  10\rframe=  20\nkilled, \"late\"", "frames_per_s": "", "extra": `{"retries":1}`} {
		if got := recs[2][col[k]]; got != want {
			t.Errorf("job 1 %s = %q, want %q", k, got, want)
		}
	}
}

func TestResultsUseDefaultPath(t *testing.T) {
	db := resultsFixture(t)
	t.Setenv(store.EnvDB, db)
	out, stderr, code := resultsCLI(t, "results")
	if code != 0 || !strings.Contains(out, "enc-7") {
		t.Errorf("results with %s set: exit %d, %q %q", store.EnvDB, code, out, stderr)
	}
}

func TestResultsBadInputExitsTwo(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.db")
	garbageData := []byte("this is not a database\n")
	if err := os.WriteFile(garbage, garbageData, 0o644); err != nil {
		t.Fatal(err)
	}
	db := resultsFixture(t)
	for _, tc := range []struct {
		name string
		args []string
		msg  string
	}{
		{name: "missing database", args: []string{"--db", filepath.Join(dir, "none.db")}, msg: "no results database at " + filepath.Join(dir, "none.db")},
		{name: "not a database", args: []string{"--db", garbage}, msg: garbage + ": not a SQLite database"},
		{name: "unknown run", args: []string{"--db", db, "--run", "9"}, msg: "no run 9 in"},
		{name: "run zero", args: []string{"--db", db, "--run", "0"}, msg: "run ids start at 1"},
		{name: "unknown format", args: []string{"--db", db, "--format", "xml"}, msg: `unknown --format "xml"`},
		{name: "csv and -o json", args: []string{"--db", db, "--format", "csv", "-o", "json"}, msg: "disagree"},
		{name: "stray argument", args: []string{"--db", db, "3"}, msg: "unknown command"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, stderr, code := resultsCLI(t, append([]string{"results"}, tc.args...)...)
			if code != 2 || !strings.Contains(stderr, tc.msg) || out != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 2 saying %q", code, out, stderr, tc.msg)
			}
			if strings.Count(stderr, "\n") != 1 {
				t.Errorf("stderr is not one line: %q", stderr)
			}
		})
	}
	if got, _ := os.ReadFile(garbage); !bytes.Equal(got, garbageData) {
		t.Errorf("corepin results changed a file that is not a database: %q", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "none.db")); err == nil {
		t.Error("corepin results created a database that did not exist")
	}
}
