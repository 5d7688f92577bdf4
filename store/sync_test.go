package store

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestResultsSyncTheLog checks that each results write fsyncs the
// write-ahead log after its commit (the file runs synchronous=NORMAL, so
// SQLite syncs nothing at commit, and results must survive a power loss
// as they did under FULL), that the log's directory is synced once, and
// that assignment writes do not sync (see "Crash safety" in doc.go).
func TestResultsSyncTheLog(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.db")
	db := openT(t, path)
	var synced []string
	db.fsync = func(f *os.File) error {
		synced = append(synced, f.Name())
		return f.Sync()
	}
	var run int64
	for _, w := range []struct {
		name  string
		write func() error
		want  []string
	}{
		{"BeginRun", func() (err error) { run, err = db.BeginRun(Run{Command: "sync"}); return err }, []string{path + "-wal", dir}},
		{"AddJob", func() error { return db.AddJob(run, sampleJob(0)) }, []string{path + "-wal"}},
		{"AddMeasurement", func() error {
			return db.AddMeasurement(run, Measurement{Experiment: "e", Metric: "m", Value: 1})
		}, []string{path + "-wal"}},
		{"FinishRun", func() error { return db.FinishRun(run, time.Time{}) }, []string{path + "-wal"}},
		{"MarkInterrupted", func() error { _, err := db.MarkInterrupted(); return err }, []string{path + "-wal"}},
		{"Admit", func() error {
			_, err := db.Admit("a", func([]Assignment) (Assignment, error) { return Assignment{Cpuset: "1", QoS: "LSE"}, nil })
			return err
		}, nil},
		{"DeleteAssignment", func() error { return db.DeleteAssignment("a") }, nil},
	} {
		synced = nil
		if err := w.write(); err != nil {
			t.Fatalf("%s: %v", w.name, err)
		}
		if !slices.Equal(synced, w.want) {
			t.Errorf("%s synced %q, want %q", w.name, synced, w.want)
		}
	}
}

// TestSyncFailureSaysCommitted checks that a failed sync of a results
// write is an error that says the row is committed, and that ENOSPC from
// the sync does not read as a full disk (IsFull: nothing written).
func TestSyncFailureSaysCommitted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	db := openT(t, path)
	db.fsync = func(f *os.File) error { return &os.PathError{Op: "fsync", Path: f.Name(), Err: syscall.ENOSPC} }
	_, err := db.BeginRun(Run{Command: "sync"})
	if err == nil || !strings.Contains(err.Error(), "committed, but not synced to disk") {
		t.Fatalf("BeginRun with a failing sync = %v, want the commit reported", err)
	}
	if IsFull(err) || errors.Is(err, syscall.ENOSPC) {
		t.Errorf("IsFull(%v) = true, want false: the row was written", err)
	}
	runs, err := db.Runs(RunFilter{})
	if err != nil || len(runs) != 1 {
		t.Errorf("Runs() = %d runs, %v; want the 1 committed", len(runs), err)
	}
}
