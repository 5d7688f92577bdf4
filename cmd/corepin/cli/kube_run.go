package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	batchv1 "k8s.io/api/batch/v1"

	"github.com/corepin/corepin/kube/jobs"
)

const kubeRunUsage = `Runs a bench sweep on the cluster: builds exactly the Jobs corepin kube jobs
writes for the same flags, creates them one at a time, in order, so that
points do not disturb each other, waits for each to be complete or failed
(at most --job-timeout), then records the results of the sweep's pods in
the results database as corepin kube collect does, so corepin report works
at once.

Each Job is created with strict field validation (the API server refuses
what it does not know). A Job that exists already is not created again:
complete, it is skipped and its results are recorded with the others, so
running the same command again resumes a sweep; failed, it counts as
failed (delete it to run it again); running, it is waited for. A Job that
fails or does not finish in time stops the run (exit 1), naming it and
what its pods say (pod phase, ImagePullBackOff, OOMKilled, the scheduler's
or the extender's reason for not placing them); with --keep-going the run
goes on and reports the failures at the end. A Job that timed out is left
running.

On a terminal, stderr shows the Job being waited for ("[12/140] NAME
(cpus=2 mode=pinned concurrency=4): running, 3/4 pods done, 41 s");
otherwise one line per Job as it ends. -o json prints one JSON object per
Job on stdout as it ends ({"job","point","status","pods","wall_s",...},
status complete, failed, skipped or timeout), then one with the recorded
run ids, as kube collect -o json.

Interrupted (SIGINT, SIGTERM), it stops waiting, leaves the current Job
running, records the results of the Jobs that ended and says how to resume:
run the same command again.

The Jobs are kept (kubectl delete jobs -l corepin.io/sweep=SWEEP removes
them); --delete deletes each Job whose results were recorded, with its pods.
The cluster is chosen as for kube collect (--kubeconfig, --context,
--namespace); the account needs create, get, list and delete on jobs and
get/list on pods and pods/log in the namespace. The database is --db FILE,
else $COREPIN_DB, else corepin's default.

Examples:
  corepin kube run --sweep concurrency --image registry.example/corepin:1.0 --namespace bench
  corepin kube run --sweep threads --topology node.json --repeats 5 --job-timeout 1h --keep-going
  corepin kube run --sweep throughput --quick --scheduler-name corepin-scheduler --delete -o json
  corepin report          # the recorded run`

// kubeRunClient connects kube run to the cluster chosen by k: the API,
// the namespace and the host for messages. Tests replace it.
var kubeRunClient = func(k *kubeFlags) (jobs.RunAPI, string, string, error) {
	c, err := k.client()
	if err != nil {
		return nil, "", "", err
	}
	return c, c.Namespace, c.Host, nil
}

// kubeRunInterval is how often kube run reads the Job it waits for.
var kubeRunInterval = jobs.RunInterval

func newKubeRunCmd(e *env) *cobra.Command {
	var (
		sf             sweepFlags
		kf             kubeFlags
		db             string
		jobTimeout     time.Duration
		keepGoing, del bool
	)
	cmd := &cobra.Command{
		Use:   "run --sweep concurrency|threads|throughput [--job-timeout D] [--keep-going] [--delete]",
		Short: "Run a bench sweep's Jobs on the cluster one at a time and record the results",
		Long:  kubeRunUsage,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if jobTimeout <= 0 || jobTimeout > jobs.MaxJobTimeout {
				return Usagef("--job-timeout %s: want above 0 and at most %s", jobTimeout, jobs.MaxJobTimeout)
			}
			s, err := sf.plan(cmd)
			if err != nil {
				return err
			}
			path, err := resultsPath(db)
			if err != nil {
				return err
			}
			api, ns, host, err := kubeRunClient(&kf)
			if err != nil {
				return err
			}
			sf.o.Namespace = ns
			objs, err := sf.objects(s)
			if err != nil {
				return err
			}
			// What planning changed to fit the node, and the points the
			// cluster's nodes would run in waves: on stderr, or in the
			// last JSON object with -o json.
			fit, err := jobs.CheckFit(contextOf(cmd), api, s)
			if err != nil {
				return &UsageError{Err: err}
			}
			notes := append(append([]string{}, s.Notes...), fit...)
			if !e.JSON() {
				for _, n := range notes {
					fmt.Fprintf(e.stderr, "corepin: note: %s\n", n)
				}
			}
			return kubeRun(cmd, e, kubeRunSetup{api: api, ns: ns, host: host, sweep: s, objs: objs, db: path,
				timeout: jobTimeout, keepGoing: keepGoing, delete: del, notes: notes})
		},
	}
	fl := cmd.Flags()
	sf.add(fl)
	kf.add(fl)
	fl.StringVar(&db, "db", "", "results database (default $COREPIN_DB, else corepin's default)")
	fl.DurationVar(&jobTimeout, "job-timeout", jobs.DefaultJobTimeout, fmt.Sprintf("longest wait for one Job (at most %s)", jobs.MaxJobTimeout))
	fl.BoolVar(&keepGoing, "keep-going", false, "go on after a Job fails or times out; report the failures at the end")
	fl.BoolVar(&del, "delete", false, "delete each Job (and its pods) once its results are recorded (default: keep them)")
	return cmd
}

type kubeRunSetup struct {
	api               jobs.RunAPI
	ns, host          string
	sweep             *jobs.Sweep
	objs              []batchv1.Job
	db                string
	timeout           time.Duration
	keepGoing, delete bool
	// notes are said before the run (text) or in its last JSON object.
	notes []string
}

// kubeRun runs the Jobs, then records what ended.
func kubeRun(cmd *cobra.Command, e *env, k kubeRunSetup) error {
	show := newRunShow(e)
	r := jobs.Runner{Client: k.api, Namespace: k.ns, Interval: kubeRunInterval, JobTimeout: k.timeout, KeepGoing: k.keepGoing,
		Progress: show.progress, Done: show.done}
	ctx, stop := signalContext(cmd)
	sum, runErr := r.Run(ctx, k.sweep, k.objs)
	interrupted := ctx.Err() != nil
	stop() // a second interrupt ends corepin at once
	show.clear()
	ended, failed := sum.Ended(), sum.Failures()
	if runErr != nil && !interrupted {
		if errors.Is(runErr, jobs.ErrInvalid) {
			return &UsageError{Err: runErr}
		}
		if len(ended) == 0 {
			return fmt.Errorf("running the %s sweep in namespace %s of %s: %w", k.sweep.Name, k.ns, k.host, runErr)
		}
	}
	// What went wrong with the Jobs, said after their results are in.
	failure := sum.Failure(k.sweep, k.ns, k.host, runErr, interrupted)
	if len(ended) == 0 {
		if e.JSON() {
			_ = show.final(map[string]any{"run_ids": []int64{}, "db": k.db, "results": 0, "jobs": len(sum.Outcomes), "left_running": sum.Left, "notes": k.notes})
		}
		return fmt.Errorf("nothing recorded: %w", failure)
	}
	rec, err := r.RecordEnded(contextOf(cmd), k.sweep, ended, sweeps, k.db, Version, k.host, k.delete)
	if err != nil {
		if failure != nil {
			fmt.Fprintf(e.stderr, "corepin: %v\n", failure)
		}
		return err
	}
	if rec.DeleteErr != nil {
		fmt.Fprintf(e.stderr, "corepin: warning: %v\n", rec.DeleteErr)
	}
	c, cs := rec.Collection, rec.Cluster
	if e.JSON() {
		out := collectionJSON(c, rec.RunIDs, k.db)
		out["pods"], out["finished"], out["from_logs"] = cs.Pods, cs.Finished, cs.FromLogs
		out["jobs"], out["failed"], out["left_running"], out["deleted"] = len(sum.Outcomes), len(failed), sum.Left, rec.Deleted
		out["notes"] = k.notes
		if err := show.final(out); err != nil {
			return err
		}
		return failure
	}
	printCollected(e.stdout, c, rec.RunIDs, k.db)
	fmt.Fprintf(e.stdout, "%d Jobs ended (%d failed), %d pods: %d results (%d from logs), %d skipped", len(ended), len(failed), cs.Pods, c.Results(), cs.FromLogs, len(c.Skipped))
	if k.delete {
		fmt.Fprintf(e.stdout, "; %d Jobs deleted", rec.Deleted)
	}
	fmt.Fprintln(e.stdout)
	return failure
}

// runShow shows a run's progress: on a terminal, the Job waited for on one
// line of stderr, rewritten; otherwise a line per Job as it ends (text) or
// a JSON object per Job on stdout (-o json).
type runShow struct {
	e   *env
	tty bool
	enc *json.Encoder
	// open is true while a progress line is on the terminal.
	open bool
}

func newRunShow(e *env) *runShow {
	sh := &runShow{e: e}
	if f, ok := e.stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		sh.tty = true
	}
	if e.JSON() {
		sh.enc = json.NewEncoder(e.stdout)
	}
	return sh
}

func (sh *runShow) progress(p jobs.RunProgress) {
	if !sh.tty {
		return
	}
	fmt.Fprintf(sh.e.stderr, "\r\033[K[%d/%d] %s (%s): %s, %d/%d pods done, %.0f s", p.N, p.Total, p.Job, p.Point, p.State, p.Done, p.Pods, p.Elapsed.Seconds())
	sh.open = true
}

func (sh *runShow) done(o jobs.Outcome) {
	sh.clear()
	if sh.enc != nil {
		_ = sh.enc.Encode(o)
		if !sh.tty {
			return
		}
	}
	line := fmt.Sprintf("[%d/%d] %s (%s): %s, %d/%d pods succeeded, %.0f s", o.N, o.Total, o.Job, o.PointLabel, o.Status, o.Succeeded, o.Pods, o.WallS)
	if o.Reason != "" {
		line += ": " + o.Reason
	}
	fmt.Fprintln(sh.e.stderr, line)
}

// clear ends the progress line on the terminal.
func (sh *runShow) clear() {
	if sh.open {
		io.WriteString(sh.e.stderr, "\r\033[K")
		sh.open = false
	}
}

// final prints the last JSON object of the run.
func (sh *runShow) final(v any) error {
	return sh.enc.Encode(v)
}
