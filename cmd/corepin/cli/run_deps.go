package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
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
// refused up front (exit 2 for a path that is the user's mistake). The
// default database (no --db, no $COREPIN_DB) that this user may not
// write, as for nobody or a user whose $HOME is another's, does not stop
// the run: its results are not recorded, said in notes (issue 17 §2).
func openRecorder(f runFlags, notes *runNotes) (*recorder, error) {
	if f.noDB {
		return &recorder{}, nil
	}
	path, err := resultsPath(f.db)
	chosen := f.db != "" || os.Getenv(store.EnvDB) != ""
	if err != nil && !chosen {
		notes.add("results not recorded (give --db)",
			fmt.Sprintf("results are not recorded: %v; give --db FILE or set %s (or --no-db)", err, store.EnvDB))
		return &recorder{}, nil
	}
	if err != nil {
		return nil, err
	}
	db, err := store.Open(path)
	if err != nil && !chosen && unwritable(err) {
		notes.add("results not recorded (give --db)",
			fmt.Sprintf("results are not recorded: %v; give --db FILE or set %s (or --no-db)", err, store.EnvDB))
		return &recorder{}, nil
	}
	if badStoreFile(err) {
		return nil, &UsageError{Err: fmt.Errorf("--db: %w", err)}
	}
	if err != nil {
		return nil, err
	}
	return &recorder{db: db}, nil
}

// unwritable reports whether err is this user being denied a database
// file or its directory.
func unwritable(err error) bool {
	return errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS) || errors.Is(err, store.ErrReadOnly)
}

// badStoreFile reports whether err refuses a state or results file the
// user named, for what the file is or where it is (exit 2, change the
// flag or the file), rather than a failure of the system such as a lock
// held past the busy timeout (exit 1).
func badStoreFile(err error) bool {
	for _, e := range []error{store.ErrPlace, store.ErrNotDB, store.ErrCorrupt, store.ErrForeign, store.ErrTooNew, store.ErrReadOnly} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// noteInterrupted marks the runs whose corepin process died before they
// finished, and says so once on stderr: their rows stay, as recorded.
func noteInterrupted(w io.Writer, db *store.DB) {
	ids, err := db.MarkInterrupted()
	if err != nil {
		fmt.Fprintf(w, "corepin: warning: %v\n", err)
		return
	}
	for _, id := range ids {
		fmt.Fprintf(w, "corepin: run %d was interrupted (its corepin process is gone); `corepin results --run %d` has what it finished\n", id, id)
	}
}

// begin records the run's metadata, after marking earlier runs whose
// corepin process died (said on w).
func (r *recorder) begin(w io.Writer, t *topology.Topology, spec runner.Spec, driver string) error {
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
	noteInterrupted(w, r.db)
	if r.runID, err = r.db.BeginRun(run); err != nil {
		return err
	}
	return nil
}

func (r *recorder) add(j runner.JobResult) error {
	if r.db == nil {
		return nil
	}
	return r.db.AddJob(r.runID, j.Row())
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
