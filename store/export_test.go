package store

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite golden files")

// golden compares got with testdata/<test name>.golden, rewriting it with -update.
func golden(t *testing.T, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", t.Name()+".golden")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden file (run with -update to create it): %v", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s (-want +got):\n%s", path, diff)
	}
}

// goldenJobs are jobs with the awkward values an export must keep: commas,
// quotes and newlines in text, a signal, an unset throughput, no times.
func goldenJobs() []Job {
	a, b := sampleJob(0), sampleJob(1)
	a.RunID, b.RunID = 1, 1
	b.Cmd = `sh -c "x264 --threads 2, then exit"`
	b.ExitCode, b.Signal, b.StderrTail = -1, "SIGKILL", "killed\r\nby corepin"
	b.FramesPerS, b.OpsPerS = nil, ptr(1e-9)
	b.StartedAt, b.FinishedAt, b.Extra = time.Time{}, time.Time{}, nil
	return []Job{a, b}
}

func TestWriteJobsCSV(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteJobsCSV(&buf, goldenJobs()); err != nil {
		t.Fatal(err)
	}
	golden(t, buf.Bytes())
}

func TestWriteMeasurementsCSV(t *testing.T) {
	var buf bytes.Buffer
	ms := []Measurement{
		{RunID: 2, Experiment: "concurrency", Point: raw(`{"mode":"pinned","concurrency":4}`), Metric: "fps", Value: 123.5},
		{RunID: 2, Experiment: "concurrency", Point: raw(`{"mode":"pinned","concurrency":4}`), Metric: "fps", Value: 121, Repeat: 1},
		{RunID: 2, Experiment: "threads", Metric: "wall_s", Value: 2},
	}
	if err := WriteMeasurementsCSV(&buf, ms); err != nil {
		t.Fatal(err)
	}
	golden(t, buf.Bytes())
}

func TestJobsJSON(t *testing.T) {
	b, err := json.MarshalIndent(goldenJobs(), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, append(b, '\n'))
}

// FuzzJobCSV checks that parsing an export with encoding/csv gives back the
// header and each job's Record, whatever the text fields hold. The one
// change encoding/csv makes on reading is documented: it turns "\r\n"
// inside a quoted field into "\n".
func FuzzJobCSV(f *testing.F) {
	f.Add("ffmpeg -i a.mp4", "frame= 1\rframe= 2\r\n", "SIGKILL", "0-3", 1.5, int64(3), -1)
	f.Add(`"quoted, comma"`, "\n\n", "", "", 0.0, int64(0), 0)
	f.Add(" leading space", "\x00nul", "\xff", "0", -0.0, int64(-1), 255)
	f.Fuzz(func(t *testing.T, cmd, stderr, signal, cpuset string, wall float64, migr int64, exit int) {
		j := sampleJob(7)
		j.Cmd, j.StderrTail, j.Signal, j.Cpuset, j.WallS, j.Migrations, j.ExitCode = cmd, stderr, signal, cpuset, wall, migr, exit
		var buf bytes.Buffer
		if err := WriteJobsCSV(&buf, []Job{j, j}); err != nil {
			t.Fatal(err)
		}
		r := csv.NewReader(&buf)
		r.FieldsPerRecord = len(JobCSVHeader)
		got, err := r.ReadAll()
		if err != nil {
			t.Fatalf("reading the export back: %v\n%q", err, buf.String())
		}
		rec := j.Record()
		for i := range rec {
			rec[i] = strings.ReplaceAll(rec[i], "\r\n", "\n")
		}
		if diff := cmp.Diff([][]string{JobCSVHeader, rec, rec}, got); diff != "" {
			t.Errorf("export read back (-want +got):\n%s", diff)
		}
	})
}

// FuzzJobStore checks that a job comes back from the database exactly as
// it went in, or is refused with an error: text with NUL or invalid UTF-8,
// any float, any extra bytes.
func FuzzJobStore(f *testing.F) {
	f.Add("ffmpeg", "tail\x00with nul", "SIGTERM", 1.5, 24.0, int64(7), []byte(`{"a":[1,2]}`))
	f.Add("\xff\xfe", "", "", math.MaxFloat64, math.SmallestNonzeroFloat64, int64(math.MinInt64), []byte(`"\u0000"`))
	f.Add("", "x", "", 0.0, -0.0, int64(0), []byte(" {} "))
	f.Add("", "x", "", 0.0, 0.0, int64(0), []byte(`{"a":"\xff"}`))
	f.Add("", "x", "", 0.0, 0.0, int64(0), []byte(strings.Repeat("[", 1500)+strings.Repeat("]", 1500)))
	f.Add("", "x", "", 0.0, 0.0, int64(0), []byte(strings.Repeat("[", 1000)+`"[\\\"{"`+strings.Repeat("]", 1000)))
	f.Add("", "x", "", 0.0, 0.0, int64(0), []byte(`[1e999, "\ud800", -0]`))
	db := openT(f, filepath.Join(f.TempDir(), "fuzz.db"))
	f.Fuzz(func(t *testing.T, cmd, stderr, signal string, wall, fps float64, rss int64, extra []byte) {
		id, err := db.BeginRun(Run{Command: "fuzz"})
		if err != nil {
			t.Fatal(err)
		}
		j := sampleJob(0)
		j.Cmd, j.StderrTail, j.Signal, j.WallS, j.FramesPerS, j.MaxRSSKB = cmd, stderr, signal, wall, &fps, rss
		j.Extra = nil
		if len(extra) > 0 {
			j.Extra = extra
		}
		err = db.AddJob(id, j)
		finite := !math.IsNaN(wall) && !math.IsInf(wall, 0) && !math.IsNaN(fps) && !math.IsInf(fps, 0)
		if !finite || (len(extra) > 0 && (!json.Valid(extra) || jsonDepth(extra) > maxJSONDepth)) {
			if err == nil {
				t.Fatalf("AddJob(%+v) succeeded, want an error", j)
			}
			return
		}
		if err != nil {
			t.Fatalf("AddJob: %v", err)
		}
		got, err := db.Jobs(id)
		if err != nil {
			t.Fatal(err)
		}
		j.RunID = id
		if diff := cmp.Diff([]Job{j}, got); diff != "" {
			t.Errorf("job read back (-want +got):\n%s", diff)
		}
	})
}
