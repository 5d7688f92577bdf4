package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/enforce"
	"github.com/corepin/corepin/measure"
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

// JobResult is one finished (or failed, or killed) job. Its JSON form is the
// `corepin run -o json` job object of design.md, extended.
type JobResult struct {
	Job              int       `json:"job"`
	Cmd              string    `json:"cmd"`
	Cpuset           string    `json:"cpuset"`
	Mode             Mode      `json:"mode"`
	QoS              QoS       `json:"qos"`
	CPUs             float64   `json:"cpus"`
	Threads          int       `json:"threads"`
	WallS            float64   `json:"wall_s"`
	UserS            float64   `json:"user_s"`
	SysS             float64   `json:"sys_s"`
	MaxRSSKB         int64     `json:"max_rss_kb"`
	CPUsUsed         string    `json:"cpus_used"`
	Migrations       int64     `json:"migrations"`
	CtxSwitches      int64     `json:"ctx_switches"`
	RunDelayS        float64   `json:"run_delay_s"`
	NrPeriods        uint64    `json:"nr_periods"`
	ThrottledPeriods uint64    `json:"throttled_periods"`
	ThrottledS       float64   `json:"throttled_s"`
	ExitCode         int       `json:"exit_code"`
	Signal           string    `json:"signal,omitempty"`
	Error            string    `json:"error,omitempty"`
	StdoutTail       string    `json:"stdout_tail,omitempty"`
	StderrTail       string    `json:"stderr_tail,omitempty"`
	StartedAt        time.Time `json:"started_at"`
	// FPS and OpsPerSec are read from the job's last stdout line when it is
	// a JSON object with "fps" or "ops_per_s" (corepin workload -o json).
	FPS       float64 `json:"fps,omitempty"`
	OpsPerSec float64 `json:"ops_per_s,omitempty"`
	// Frames and Ops are the work the report says was done.
	Frames int64 `json:"frames,omitempty"`
	Ops    int64 `json:"ops,omitempty"`
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
	period := r.Period
	if period == 0 {
		period = enforce.DefaultPeriod
	}
	res := enforce.Resources{Period: period}
	switch spec.Mode {
	case Pinned:
		res.CPUs, res.Mems = p.CPUs, p.Mems
		res.Period = 0
	case Quota:
		res.CPUs = r.Pool
		res.Quota = time.Duration(spec.CPUs * float64(period))
	case Burst:
		res.CPUs = r.Pool
		res.Quota = time.Duration(2 * spec.CPUs * float64(period))
	case Unbounded:
		res.CPUs = r.Pool
		res.Period = 0
		res.Weight = uint64(math.Min(enforce.MaxWeight, math.Max(1, math.Round(spec.CPUs*enforce.DefaultWeight))))
	}
	if spec.QoS == BE {
		res.Weight = 0
		res.Idle = true
	}
	return res
}

func (r *Runner) runJob(ctx context.Context, spec Spec, i int, argv []string, started func(set string)) (out jobOutcome) {
	out.JobResult = JobResult{Job: i, Cmd: ShellJoin(argv), Mode: spec.Mode, QoS: spec.QoS, CPUs: spec.CPUs, StartedAt: time.Now()}
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
	ncpus := spec.CPUs
	out.Threads = spec.ThreadsFor(ncpus)
	if ctx.Err() != nil {
		return fail(ctx.Err())
	}

	g, err := r.Driver.Create(name, r.resources(spec, place))
	if err != nil {
		return fail(fmt.Errorf("creating group for job %d: %w", i, err))
	}
	defer func() {
		if err := enforce.RemoveWhenEmpty(g, 5*time.Second); err != nil && out.Error == "" {
			out.Error = fmt.Sprintf("removing group: %v", err)
		}
	}()

	args := Expand(argv, i, spec.CPUs, out.Cpuset, out.Threads)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(append(os.Environ(), r.Env...), ThreadEnv(out.Threads)...)
	cmd.Env = append(cmd.Env, fmt.Sprintf("COREPIN_JOB=%d", i), "COREPIN_CPUSET="+out.Cpuset)
	limit := r.TailBytes
	if limit == 0 {
		limit = 4096
	}
	stdout, stderr := &tailBuffer{limit: 1 << 20}, &tailBuffer{limit: limit}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	begin := time.Now()
	out.StartedAt = begin
	if err := enforce.Start(g, cmd); err != nil {
		return fail(fmt.Errorf("starting job %d: %w", i, err))
	}
	out.startedOK = true
	started(out.Cpuset)
	var mopts []measure.Option
	mopts = append(mopts, measure.WithStart(begin))
	if r.SampleInterval > 0 {
		mopts = append(mopts, measure.WithInterval(r.SampleInterval))
	}
	watch, werr := measure.Watch(cmd, mopts...)
	stop := context.AfterFunc(ctx, func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	})
	var res measure.Result
	if werr != nil {
		err = cmd.Wait()
		res.Wall = time.Since(begin)
		if cmd.ProcessState != nil {
			_ = res.SetRusage(cmd.ProcessState)
		}
		out.Error = fmt.Sprintf("measuring: %v", werr)
	} else {
		res, err = watch.Wait()
	}
	stop()
	// Whatever the job left behind in its process group goes with it.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)

	out.WallS = res.Wall.Seconds()
	out.UserS = res.User.Seconds()
	out.SysS = res.Sys.Seconds()
	out.MaxRSSKB = res.MaxRSSKB
	out.CPUsUsed = res.CPUsUsed.String()
	out.Migrations = res.Migrations
	out.CtxSwitches = res.CtxSwitches
	out.RunDelayS = res.RunDelay.Seconds()
	if st, serr := g.Stats(); serr == nil {
		out.NrPeriods, out.ThrottledPeriods = st.NrPeriods, st.NrThrottled
		out.ThrottledS = st.ThrottledTime.Seconds()
	}
	if ps := cmd.ProcessState; ps != nil {
		out.ExitCode = ps.ExitCode()
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			out.Signal = ws.Signal().String()
		}
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) && out.Error == "" {
		out.Error = err.Error()
	}
	if ctx.Err() != nil && out.Error == "" {
		out.Error = "killed: batch stopped"
	}
	rep := workloadReport(stdout.bytes())
	out.FPS, out.OpsPerSec, out.Frames, out.Ops = rep.FPS, rep.OpsPerSec, rep.Frames, rep.Ops
	out.StdoutTail = stdout.tail(limit)
	out.StderrTail = stderr.tail(limit)
	if r.Output != nil {
		r.Output(i, stdout.bytes())
	}
	return out
}

// tailBuffer keeps the last limit bytes written to it.
type tailBuffer struct {
	mu    sync.Mutex
	buf   []byte
	limit int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.limit; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) bytes() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return bytes.Clone(t.buf)
}

func (t *tailBuffer) tail(n int) string {
	b := t.bytes()
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
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
