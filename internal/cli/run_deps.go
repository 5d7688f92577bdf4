package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"

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

func openRecorder(f runFlags, t *topology.Topology, spec runner.Spec, driver string) (*recorder, error) {
	if f.noDB {
		return &recorder{}, nil
	}
	path, err := resultsPath(f.db)
	if err != nil {
		return nil, err
	}
	db, err := store.Open(path)
	if err != nil {
		return nil, err
	}
	params, _ := json.Marshal(map[string]any{
		"jobs": len(spec.Commands), "concurrency": spec.Concurrency, "cpus": spec.CPUs,
		"mode": spec.Mode, "qos": spec.QoS, "threads": spec.Threads, "driver": driver,
	})
	topoJSON, _ := json.Marshal(t.Doc())
	host, _ := os.Hostname()
	id, err := db.BeginRun(store.Run{
		StartedAt: time.Now(), Command: "run", Params: params, CorepinVersion: Version,
		Kernel: kernelRelease(), Hostname: host, TopologySummary: t.Summary(), Topology: topoJSON,
	})
	if err != nil {
		db.Close()
		return nil, err
	}
	return &recorder{db: db, runID: id}, nil
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
	if j.Error != "" {
		row.Extra, _ = json.Marshal(map[string]string{"error": j.Error})
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

// kernelRelease returns uname -r.
func kernelRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}
