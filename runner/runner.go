package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/enforce"
	"github.com/corepin/corepin/proc"
	"github.com/corepin/corepin/qos"
	"github.com/corepin/corepin/store"
)

// Placement is an exclusive set of CPUs for one pinned job, with the NUMA
// nodes it spans (the job's memory nodes).
type Placement struct {
	CPUs cpuset.CPUSet
	Mems cpuset.CPUSet
}

// Placer hands out exclusive CPUs for pinned jobs and takes them back. The
// runner holds no placement state of its own.
type Placer interface {
	Place(id string, cpus int) (Placement, error)
	Release(id string) error
}

// row is the results database's job record; JobResult embeds it under
// an unexported name so that j.Job stays the job's number.
type row = store.Job

// JobResult is one finished (or failed, or killed) job: the job record
// the results database keeps (store.Job: command, mode, QoS, cpuset, times,
// counters, exit) plus what only a live batch has. Its JSON form is the
// `corepin run -o json` job object of design.md, extended.
type JobResult struct {
	row
	Error      string `json:"error,omitempty"`
	StdoutTail string `json:"stdout_tail,omitempty"`
	// FPS and OpsPerSec are read from the job's last stdout line when it is
	// a JSON object with "fps" or "ops_per_s" (corepin workload -o json).
	FPS       float64 `json:"fps,omitempty"`
	OpsPerSec float64 `json:"ops_per_s,omitempty"`
	// Frames and Ops are the work the report says was done.
	Frames int64 `json:"frames,omitempty"`
	Ops    int64 `json:"ops,omitempty"`
	// PSISomeS and PSIFullS are the CPU pressure stall time during the
	// job (some / full), of the job's own group where the kernel keeps one
	// (cgroup v2) and otherwise of the whole machine, as PSIScope says
	// ("group" or "system"); nil where the kernel has no PSI.
	PSISomeS *float64 `json:"psi_some_s,omitempty"`
	PSIFullS *float64 `json:"psi_full_s,omitempty"`
	PSIScope string   `json:"psi_scope,omitempty"`
	// Leftovers are the processes the job left running when its leader
	// exited; corepin killed them. At most the first 64 are listed;
	// LeftoverCount counts them all (LeftoverNote says both).
	Leftovers     []proc.Leftover `json:"leftovers,omitempty"`
	LeftoverCount int             `json:"-"`
}

// Row returns the job as the results database records it: the record,
// its throughput, and in Extra the error, the CPU pressure and the
// leftovers.
func (j JobResult) Row() store.Job {
	r := j.row
	if j.FPS > 0 {
		r.FramesPerS = &j.FPS
	}
	if j.OpsPerSec > 0 {
		r.OpsPerS = &j.OpsPerSec
	}
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
	if len(extra) > 0 {
		r.Extra, _ = json.Marshal(extra) // maps of strings, floats and a struct slice always encode
	}
	return r
}

// Efficiency is CPU time over the CPU time the job was given (wall x K).
func (j JobResult) Efficiency() float64 {
	if j.WallS <= 0 || j.CPUs <= 0 {
		return 0
	}
	return (j.UserS + j.SysS) / (j.WallS * j.CPUs)
}

// EventKind says what happened to a job.
type EventKind int

// Event kinds.
const (
	JobStarted EventKind = iota
	JobFinished
)

// Event reports progress to the caller (progress bars, logs).
type Event struct {
	Kind    EventKind
	Job     int
	Cpuset  string
	Result  *JobResult // for JobFinished
	Running int
	Done    int
	Total   int
}

// Runner runs batches. Its fields are the front door's choices; Run holds
// every piece of state it needs on its stack.
type Runner struct {
	Driver enforce.Driver
	// Placer gives pinned jobs their CPUs.
	Placer Placer
	// Pool is where quota, burst and unbounded jobs run; empty means every
	// CPU of corepin's root group.
	Pool cpuset.CPUSet
	// Period is the CFS period for quota modes (0: enforce.DefaultPeriod).
	Period time.Duration
	// SampleInterval is measure's sampling interval (0: its default).
	SampleInterval time.Duration
	// OnEvent, if set, is called from the job goroutines (serialised).
	OnEvent func(Event)
	// OnResult, if set, is called once per job as it ends, before Run
	// returns, so results survive a later crash (serialised).
	OnResult func(JobResult) error
	// Env is added to each job's environment (after os.Environ).
	Env []string
	// TailBytes is how much of each job's stdout and stderr is kept
	// (0: 4096).
	TailBytes int
	// Output, if set, receives each job's stdout when it ends, whole jobs
	// at a time (like GNU parallel --group).
	Output func(job int, stdout []byte)
	// OnGroup, if set, is called with a job's group once its process
	// started (live) and again once it ended (not live), from the job's
	// goroutine: the QoS loop of `corepin run --qos BE` follows the live
	// groups this way.
	OnGroup func(job int, g enforce.Group, live bool)
}

// Run runs every job of spec and returns their results in job order. When
// ctx is cancelled, running jobs' process groups are killed, their groups
// removed and CPUs released; jobs not yet started are not run, and the
// results so far are returned with ctx's error.
func (r *Runner) Run(ctx context.Context, spec Spec) ([]JobResult, error) {
	spec, err := spec.Normalize()
	if err != nil {
		return nil, err
	}
	if spec.Mode == Pinned && r.Placer == nil {
		return nil, errors.New("running batch: pinned mode needs a placer")
	}
	total := len(spec.Commands)
	results := make([]JobResult, 0, total)
	var (
		mu      sync.Mutex // guards results, running, done, cbErr and the callbacks
		running int
		cbErr   error
	)
	emit := func(ev Event) {
		ev.Running, ev.Done, ev.Total = running, len(results), total
		if r.OnEvent != nil {
			r.OnEvent(ev)
		}
	}
	slots := make(chan struct{}, spec.Concurrency)
	var wg sync.WaitGroup
	for i, argv := range spec.Commands {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-slots }()
			res := r.runJob(ctx, spec, i, argv, func(set string) {
				mu.Lock()
				running++
				emit(Event{Kind: JobStarted, Job: i, Cpuset: set})
				mu.Unlock()
			})
			mu.Lock()
			defer mu.Unlock()
			if res.startedOK {
				running--
			}
			results = append(results, res.JobResult)
			if r.OnResult != nil {
				if err := r.OnResult(res.JobResult); err != nil && cbErr == nil {
					cbErr = err
				}
			}
			emit(Event{Kind: JobFinished, Job: i, Cpuset: res.Cpuset, Result: &res.JobResult})
		})
	}
	wg.Wait()
	sortResults(results)
	if err := ctx.Err(); err != nil {
		return results, fmt.Errorf("running batch: stopped after %d of %d jobs: %w", len(results), total, err)
	}
	if cbErr != nil {
		return results, fmt.Errorf("recording results: %w", cbErr)
	}
	return results, nil
}

type jobOutcome struct {
	JobResult
	startedOK bool
}

// resources returns the enforcement settings of a job in spec's mode.
func (r *Runner) resources(spec Spec, p Placement) enforce.Resources {
	if spec.Mode == Pinned {
		res := qos.Resources(spec.Mode, spec.QoS, spec.CPUs, p.CPUs, p.Mems, r.Period)
		res.NoLoadBalance = spec.NoLoadBalance
		return res
	}
	res := qos.Resources(spec.Mode, spec.QoS, spec.CPUs, r.Pool, cpuset.CPUSet{}, r.Period)
	pool := r.Pool.Size()
	if r.Pool.IsEmpty() {
		pool = spec.MachineCPUs
	}
	res.RTShare = spec.RTShare(pool)
	return res
}

func (r *Runner) runJob(ctx context.Context, spec Spec, i int, argv []string, started func(set string)) (out jobOutcome) {
	out.JobResult = JobResult{row: row{Job: i, Cmd: ShellJoin(argv), Mode: string(spec.Mode), QoS: string(spec.QoS), CPUs: spec.CPUs, StartedAt: time.Now()}}
	fail := func(err error) jobOutcome {
		out.ExitCode = -1
		out.Error = err.Error()
		return out
	}
	name := fmt.Sprintf("job-%d", i)
	var place Placement
	if spec.Mode == Pinned {
		p, err := r.Placer.Place(name, int(spec.CPUs))
		if err != nil {
			return fail(fmt.Errorf("placing job %d: %w", i, err))
		}
		place = p
		defer func() {
			if err := r.Placer.Release(name); err != nil && out.Error == "" {
				out.Error = fmt.Sprintf("releasing cpus: %v", err)
			}
		}()
	}
	set := place.CPUs
	if spec.Mode != Pinned {
		set = r.Pool
	}
	out.Cpuset = set.String()
	out.Threads = spec.ThreadsFor(spec.CPUs)
	if ctx.Err() != nil {
		return fail(ctx.Err())
	}

	env := append(append(os.Environ(), r.Env...), ThreadEnv(out.Threads)...)
	env = append(env, fmt.Sprintf("COREPIN_JOB=%d", i), "COREPIN_CPUSET="+out.Cpuset)
	limit := r.TailBytes
	if limit == 0 {
		limit = proc.DefaultTail
	}
	stdout := proc.NewTail(1 << 20) // the whole report of a workload, for workloadReport and Output
	out.StartedAt = time.Now()
	p, err := proc.Start(ctx, proc.Spec{
		Argv: Expand(argv, i, spec.CPUs, out.Cpuset, out.Threads), Env: env,
		Driver: r.Driver, Group: name, Resources: r.resources(spec, place),
		Stdout: stdout, TailBytes: limit, Measure: true, SampleInterval: r.SampleInterval,
		RealTime: spec.RealTime,
	})
	if err != nil {
		return fail(fmt.Errorf("starting job %d: %w", i, err))
	}
	out.startedOK = true
	started(out.Cpuset)
	if r.OnGroup != nil && p.Group() != nil {
		r.OnGroup(i, p.Group(), true)
		defer r.OnGroup(i, p.Group(), false)
	}
	ex, err := p.Wait()
	if err != nil {
		out.Error = err.Error()
	}
	out.setExit(ex)
	if len(ex.Leftovers) > 0 {
		// The job itself ended as its exit code says; what it left is
		// reported, not counted as its failure.
		out.StderrTail += "corepin: the job " + LeftoverNote(ex.LeftoverCount, ex.Leftovers) + "\n"
	}
	if ex.Stopped && ctx.Err() != nil && out.Error == "" {
		out.Error = "killed: batch stopped"
	}
	rep := workloadReport(stdout.Bytes())
	out.FPS, out.OpsPerSec, out.Frames, out.Ops = rep.FPS, rep.OpsPerSec, rep.Frames, rep.Ops
	if r.Output != nil {
		r.Output(i, stdout.Bytes())
	}
	return out
}

// setExit copies a finished process's exit and measurement into j.
func (j *JobResult) setExit(ex proc.Exit) {
	res := ex.Result
	j.ExitCode, j.Signal = ex.Code, ex.Signal
	j.StdoutTail, j.StderrTail = ex.Stdout, ex.Stderr
	j.WallS, j.UserS, j.SysS = res.Wall.Seconds(), res.User.Seconds(), res.Sys.Seconds()
	j.MaxRSSKB = res.MaxRSSKB
	j.CPUsUsed = res.CPUsUsed.String()
	j.Migrations, j.CtxSwitches = res.Migrations, res.CtxSwitches
	j.RunDelayS = res.RunDelay.Seconds()
	j.NrPeriods, j.ThrottledPeriods = res.Throttle.Periods, res.Throttle.ThrottledPeriods
	j.ThrottledS = res.Throttle.ThrottledTime.Seconds()
	if res.PSI != nil {
		some := res.PSI.Some.Seconds()
		j.PSISomeS, j.PSIScope = &some, ex.PSIScope
		if res.PSI.HasFull {
			full := res.PSI.Full.Seconds()
			j.PSIFullS = &full
		}
	}
	j.Leftovers, j.LeftoverCount = ex.Leftovers, max(ex.LeftoverCount, len(ex.Leftovers))
	j.FinishedAt = j.StartedAt.Add(res.Wall)
}

// LeftoverNote says what a job left running when its leader exited, all
// of which corepin killed: count processes, of which ls lists the first
// (all of them, or proc's first 64 of more), as "left 2 processes
// running; killed all of them: 12 (sleep), 13 (sleep)".
func LeftoverNote(count int, ls []proc.Leftover) string {
	count = max(count, len(ls))
	switch {
	case count == 1:
		return "left 1 process running; killed it: " + leftoverList(ls)
	case count > len(ls):
		return fmt.Sprintf("left %d processes running; killed all of them (the first %d: %s)", count, len(ls), leftoverList(ls))
	}
	return fmt.Sprintf("left %d processes running; killed all of them: %s", count, leftoverList(ls))
}

// leftoverList renders leftovers as "pid (comm), ...".
func leftoverList(ls []proc.Leftover) string {
	parts := make([]string, len(ls))
	for i, l := range ls {
		parts[i] = l.String()
	}
	return strings.Join(parts, ", ")
}

// rates is what a workload report says it did.
type rates struct {
	FPS       float64 `json:"fps"`
	OpsPerSec float64 `json:"ops_per_s"`
	Frames    int64   `json:"frames"`
	Ops       int64   `json:"ops"`
}

// workloadReport reads the last JSON object a job printed on stdout
// (corepin workload -o json prints one, indented), after any other output.
func workloadReport(stdout []byte) rates {
	var v rates
	i := bytes.LastIndex(stdout, []byte("\n{"))
	if i < 0 {
		if !bytes.HasPrefix(stdout, []byte("{")) {
			return v
		}
		i = -1
	}
	if json.Unmarshal(stdout[i+1:], &v) != nil {
		return rates{}
	}
	return v
}

// ShellJoin renders argv as a person would type it into a shell: words of
// plain characters as they are, anything else in single quotes. The
// placeholders {job}, {cpus}, {cpuset}, {threads} stay unquoted.
func ShellJoin(argv []string) string {
	out := make([]string, len(argv))
	for i, a := range argv {
		if a != "" && strings.IndexFunc(a, func(r rune) bool {
			return !(r == '-' || r == '_' || r == '.' || r == '/' || r == '=' || r == ':' || r == ',' || r == '{' || r == '}' || r == '+' ||
				(r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z'))
		}) < 0 {
			out[i] = a
			continue
		}
		out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(out, " ")
}
