package jobs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/corepin/corepin/experiment"
	"github.com/corepin/corepin/store"
)

// MaxLogFiles bounds the logs AddDir reads from one directory.
const MaxLogFiles = 100000

// AddDir adds every regular file of dir (not its subdirectories) as one
// pod's log (Add). A file that cannot be opened is skipped with its
// reason; the error is for the directory itself (unreadable, or more
// than MaxLogFiles entries).
func (c *Collection) AddDir(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	if len(ents) > MaxLogFiles {
		return fmt.Errorf("%s: %d entries, more than %d", dir, len(ents), MaxLogFiles)
	}
	for _, de := range ents {
		if !de.Type().IsRegular() {
			continue
		}
		f, err := os.Open(filepath.Join(dir, de.Name()))
		if err != nil {
			c.Skipped = append(c.Skipped, Skipped{Log: de.Name(), Reason: err.Error()})
			continue
		}
		c.Add(de.Name(), f)
		f.Close()
	}
	return nil
}

// RecordIn records the collection in the results database at path
// (Record); version is corepin's.
func (c *Collection) RecordIn(path, version string) ([]int64, error) {
	d, err := store.Open(path)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	ids, err := c.Record(d, version)
	if err != nil {
		return nil, fmt.Errorf("recording results in %s: %w", path, err)
	}
	return ids, nil
}

// Recorded is what RecordEnded kept of the Jobs of a run that ended.
type Recorded struct {
	RunIDs     []int64
	Collection *Collection
	Cluster    ClusterSummary
	// Deleted is how many Jobs were deleted; DeleteErr says why they were
	// not (the results are recorded all the same).
	Deleted   int
	DeleteErr error
}

// RecordEnded collects the results of the pods of the Jobs named in ended
// (of sweep s, in r.Namespace of the cluster at host, for messages) and
// records them in the results database at path, as `corepin kube
// collect` does; with del it then deletes those Jobs and their pods. exps
// are the experiments whose results are kept; version is corepin's.
func (r Runner) RecordEnded(ctx context.Context, s *Sweep, ended []string, exps experiment.Catalog, path, version, host string, del bool) (Recorded, error) {
	rec := Recorded{Collection: &Collection{Experiments: exps}}
	c := rec.Collection
	sel := LabelSweep + "=" + s.Name
	cs, err := c.AddCluster(ctx, Cluster{Client: r.Client, Namespace: r.Namespace, Selector: sel, Jobs: ended})
	rec.Cluster = cs
	if err != nil {
		return rec, fmt.Errorf("collecting the results of %d Jobs from pods %s in namespace %s of %s: %w", len(ended), sel, r.Namespace, host, err)
	}
	if c.Results() == 0 {
		why := ""
		if len(c.Skipped) > 0 {
			why = fmt.Sprintf("; %s: %s", c.Skipped[0].Log, c.Skipped[0].Reason)
		}
		return rec, fmt.Errorf("nothing recorded: no corepin result in the pods of the %d Jobs that ended (%d pods, %d finished, %d skipped%s)",
			len(ended), cs.Pods, cs.Finished, len(c.Skipped), why)
	}
	if rec.RunIDs, err = c.RecordIn(path, version); err != nil {
		return rec, err
	}
	if del {
		if rec.DeleteErr = r.Delete(ctx, ended); rec.DeleteErr == nil {
			rec.Deleted = len(ended)
		}
	}
	return rec, nil
}

// Failure says, for a person, what went wrong with the Jobs of a run of
// sweep s in namespace ns of the cluster at host, and what to do next:
// nil when every Job completed. runErr is what Runner.Run returned;
// interrupted, that the run's context ended.
func (sum RunSummary) Failure(s *Sweep, ns, host string, runErr error, interrupted bool) error {
	f := sum.Failures()
	switch {
	case interrupted:
		return fmt.Errorf("interrupted: Job %s left running; %d Jobs ended and are recorded; run the same command again to resume", orDash(sum.Left), len(sum.Ended()))
	case runErr != nil:
		return fmt.Errorf("running the %s sweep in namespace %s of %s (the Jobs that ended are recorded): %w", s.Name, ns, host, runErr)
	case sum.Stopped != "":
		o := f[len(f)-1]
		next := fmt.Sprintf("fix the cause, delete it (kubectl delete job %s -n %s) and run the same command again to resume", o.Job, ns)
		if o.Status == StatusTimeout {
			next = fmt.Sprintf("run the same command again to wait for it and go on, or delete it (kubectl delete job %s -n %s)", o.Job, ns)
		}
		return fmt.Errorf("Job %s %s: %s (%s)", o.Job, o.Status, o.Reason, next)
	case len(f) > 0:
		parts := make([]string, len(f))
		for i, o := range f {
			parts[i] = fmt.Sprintf("%s %s: %s", o.Job, o.Status, o.Reason)
		}
		return fmt.Errorf("%d of %d Jobs did not complete: %s", len(f), len(sum.Outcomes), strings.Join(parts, "; "))
	case len(sum.Ended()) == 0:
		return errors.New("no Job ended")
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
