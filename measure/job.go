package measure

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"time"
)

// Option configures Watch.
type Option func(*options)

type options struct {
	interval  time.Duration
	procFS    fs.FS
	cpuStatFS fs.FS
	cpuStat   string
	psiFS     fs.FS
	psi       string
	start     time.Time
	// cpuBase and psiBase, when set, are the "before" readings, taken
	// before the process started (WithBefore).
	cpuBase *CPUStat
	psiBase *PSI
}

// WithInterval sets the sampling interval (default DefaultInterval).
func WithInterval(d time.Duration) Option { return func(o *options) { o.interval = d } }

// WithProcFS sets the procfs root (default os.DirFS("/proc")).
func WithProcFS(fsys fs.FS) Option { return func(o *options) { o.procFS = fsys } }

// WithCPUStat names the job's cgroup cpu.stat file, read at Watch and at
// exit for Result.Throttle. Without it Throttle stays zero.
func WithCPUStat(fsys fs.FS, path string) Option {
	return func(o *options) { o.cpuStatFS, o.cpuStat = fsys, path }
}

// WithBefore gives the "before" cpu.stat and PSI readings (either may be
// nil: read at Watch), taken before the process started: a process
// throttled (or stalled) between its start and Watch would otherwise have
// that time in its "before", and a short job all of it.
func WithBefore(cpu *CPUStat, psi *PSI) Option {
	return func(o *options) { o.cpuBase, o.psiBase = cpu, psi }
}

// WithPressure names the PSI file to diff for Result.PSI, such as a cgroup
// v2 group's cpu.pressure. The default is the system-wide PSIFile in the
// procfs root.
func WithPressure(fsys fs.FS, path string) Option {
	return func(o *options) { o.psiFS, o.psi = fsys, path }
}

// WithStart sets the instant Wall counts from, such as just before
// cmd.Start; the default is the call to Watch.
func WithStart(t time.Time) Option { return func(o *options) { o.start = t } }

// Job measures one process that its caller started; measure never launches
// anything itself.
type Job struct {
	pid       int
	reap      func() (*os.ProcessState, error)
	o         options
	sampler   *Sampler
	cpuBefore CPUStat
	psiBefore *PSI
}

// Watch starts measuring cmd, which must have been started and not yet
// waited for: it reads the "before" cpu.stat and PSI and starts a Sampler
// on the process tree. The caller then calls Job.Wait instead of cmd.Wait.
func Watch(cmd *exec.Cmd, opts ...Option) (*Job, error) {
	if cmd.Process == nil {
		return nil, errors.New("watching command: not started")
	}
	return WatchPID(cmd.Process.Pid, func() (*os.ProcessState, error) {
		err := cmd.Wait()
		return cmd.ProcessState, err
	}, opts...)
}

// WatchPID is Watch for a child process pid that its caller reaps itself:
// Job.Wait calls reap once the process has exited and the last sweep is
// taken, and reap returns the reaped state (and the error of the wait).
// Whoever owns the process (package proc) uses reap to clear up what the
// process left before the state is read.
func WatchPID(pid int, reap func() (*os.ProcessState, error), opts ...Option) (*Job, error) {
	if pid <= 0 || reap == nil {
		return nil, errors.New("watching process: no pid or no reap")
	}
	j := &Job{pid: pid, reap: reap}
	for _, opt := range opts {
		opt(&j.o)
	}
	if j.o.start.IsZero() {
		j.o.start = time.Now()
	}
	if j.o.procFS == nil {
		j.o.procFS = os.DirFS("/proc")
	}
	if j.o.psiFS == nil {
		j.o.psiFS, j.o.psi = j.o.procFS, PSIFile
	}
	switch {
	case j.o.cpuStatFS != nil && j.o.cpuBase != nil:
		j.cpuBefore = *j.o.cpuBase
	case j.o.cpuStatFS != nil:
		st, err := ReadCPUStat(j.o.cpuStatFS, j.o.cpuStat)
		if err != nil {
			return nil, fmt.Errorf("watching command: %w", err)
		}
		j.cpuBefore = st
	}
	p, err := ReadPSI(j.o.psiFS, j.o.psi)
	if j.o.psiBase != nil {
		p, err = *j.o.psiBase, nil
	}
	switch {
	case err == nil:
		j.psiBefore = &p
	case !errors.Is(err, ErrNotSupported):
		return nil, fmt.Errorf("watching command: %w", err)
	}
	j.sampler = NewSampler(j.o.procFS, pid, j.o.interval)
	j.sampler.Start()
	return j, nil
}

// Wait waits for the process to exit, reads the "after" cpu.stat and PSI,
// takes a last sweep while it is still a zombie (its descendants may still
// run), reaps it (cmd.Wait, or WatchPID's reap) and returns the Result. The Result is filled as far as possible even when the
// error is non-nil; the error joins cmd.Wait's (use errors.As for
// *exec.ExitError) with any measuring failure.
func (j *Job) Wait() (Result, error) {
	var errs []error
	if err := waitExited(j.pid); err != nil {
		errs = append(errs, err)
	}
	end := time.Now()
	// The "after" readings at once, so that they cover the window Wall
	// does: on a loaded machine the sweep and the reap below can take
	// seconds, and system-wide pressure read after them counted stalls
	// of other work past the job's end (psi_some_s 3.9 s for a job of
	// 2.5 s, which kube collect then refused as implausible).
	var r Result
	if j.o.cpuStatFS != nil {
		after, err := ReadCPUStat(j.o.cpuStatFS, j.o.cpuStat)
		if err == nil {
			r.Throttle, err = Delta(j.cpuBefore, after)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	if j.psiBefore != nil {
		after, err := ReadPSI(j.o.psiFS, j.o.psi)
		var d PSIDelta
		if err == nil {
			d, err = PSISub(*j.psiBefore, after)
		}
		if err != nil {
			errs = append(errs, err)
		} else {
			r.PSI = &d
		}
	}
	sample, serr := j.sampler.Stop()
	if serr != nil {
		errs = append(errs, fmt.Errorf("sampling: %w", serr))
	}
	ps, werr := j.reap()
	if werr != nil {
		errs = append(errs, werr)
	}
	r.Wall = end.Sub(j.o.start)
	r.SetSample(sample)
	if ps != nil {
		if err := r.SetRusage(ps); err != nil {
			errs = append(errs, err)
		}
	}
	return r, errors.Join(errs...)
}
