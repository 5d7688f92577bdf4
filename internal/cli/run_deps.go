package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/corepin/corepin/runner"
	"github.com/corepin/corepin/store"
	"github.com/corepin/corepin/topology"
)

// recorder writes a batch's run and job rows to the results database as
// jobs end, so a killed batch keeps what finished.
type recorder struct {
	db    *store.DB
	runID int64
}

// openRecorder opens the results database (unless --no-db) before
// anything else is created, so a database path that cannot be used is
// refused up front (exit 2 for a path that is the user's mistake).
func openRecorder(f runFlags) (*recorder, error) {
	if f.noDB {
		return &recorder{}, nil
	}
	path, err := resultsPath(f.db)
	if err != nil {
		return nil, err
	}
	db, err := store.Open(path)
	if errors.Is(err, store.ErrPlace) || errors.Is(err, store.ErrNotDB) || errors.Is(err, store.ErrCorrupt) ||
		errors.Is(err, store.ErrForeign) || errors.Is(err, store.ErrTooNew) {
		return nil, &UsageError{Err: fmt.Errorf("--db: %w", err)}
	}
	if err != nil {
		return nil, err
	}
	return &recorder{db: db}, nil
}

// begin records the run's metadata.
func (r *recorder) begin(t *topology.Topology, spec runner.Spec, driver string) error {
	if r.db == nil {
		return nil
	}
	run, err := store.NewRun("run", map[string]any{
		"jobs": len(spec.Commands), "concurrency": spec.Concurrency, "cpus": spec.CPUs,
		"mode": spec.Mode, "qos": spec.QoS, "threads": spec.Threads, "driver": driver,
	}, Version, t.Summary(), t.Doc())
	if err != nil {
		return err
	}
	if r.runID, err = r.db.BeginRun(run); err != nil {
		return err
	}
	return nil
}

func (r *recorder) add(j runner.JobResult) error {
	if r.db == nil {
		return nil
	}
	row := store.Job{
		Index: j.Job, Cmd: j.Cmd, Mode: string(j.Mode), QoS: string(j.QoS), CPUs: j.CPUs,
		Threads: j.Threads, Cpuset: j.Cpuset, WallS: j.WallS, UserS: j.UserS, SysS: j.SysS,
		MaxRSSKB: j.MaxRSSKB, CPUsUsed: j.CPUsUsed, Migrations: j.Migrations,
		CtxSwitches: j.CtxSwitches, RunDelayS: j.RunDelayS,
		ThrottledPeriods: int64(j.ThrottledPeriods), ThrottledS: j.ThrottledS,
		NrPeriods: int64(j.NrPeriods), ExitCode: j.ExitCode, Signal: j.Signal,
		StderrTail: j.StderrTail, StartedAt: j.StartedAt,
		FinishedAt: j.StartedAt.Add(time.Duration(j.WallS * float64(time.Second))),
	}
	if j.FPS > 0 {
		row.FramesPerS = &j.FPS
	}
	if j.OpsPerSec > 0 {
		row.OpsPerS = &j.OpsPerSec
	}
	if extra := jobExtra(j); len(extra) > 0 {
		row.Extra, _ = json.Marshal(extra)
	}
	return r.db.AddJob(r.runID, row)
}

func (r *recorder) finish() {
	if r.db != nil {
		_ = r.db.FinishRun(r.runID, time.Now())
	}
}

func (r *recorder) where() string {
	if r.db == nil {
		return ""
	}
	return fmt.Sprintf("%s (run %d; corepin results --run %d)", r.db.Path(), r.runID, r.runID)
}

func (r *recorder) Close() error {
	if r.db == nil {
		return nil
	}
	return r.db.Close()
}

// jobExtra is what a job row keeps beyond its columns: the error, the CPU
// pressure during the job, and what it left running.
func jobExtra(j runner.JobResult) map[string]any {
	extra := map[string]any{}
	if j.Error != "" {
		extra["error"] = j.Error
	}
	if j.PSISomeS != nil {
		extra["psi_some_s"], extra["psi_scope"] = *j.PSISomeS, j.PSIScope
		if j.PSIFullS != nil {
			extra["psi_full_s"] = *j.PSIFullS
		}
	}
	if len(j.Leftovers) > 0 {
		extra["leftovers"] = j.Leftovers
	}
	return extra
}

// kernelRelease returns uname -r (bench.go's report header).
func kernelRelease() string { return store.KernelRelease() }
