package proc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/corepin/corepin/enforce"
	"github.com/corepin/corepin/measure"
)

// Sentinel errors.
var (
	// ErrSpec is wrapped by every error about a Spec that cannot run.
	ErrSpec = errors.New("invalid process spec")
	// ErrNotFound is wrapped when the program is not an executable file
	// (exec.ErrNotFound also matches).
	ErrNotFound = exec.ErrNotFound
)

// Defaults and bounds.
const (
	// DefaultTail is the stdout and stderr tail kept when Spec.TailBytes
	// is 0.
	DefaultTail = 4096
	// MaxTail bounds Spec.TailBytes.
	MaxTail = 16 << 20
	// removeTimeout is how long Wait waits for killed processes to leave
	// the group before removing it fails with EBUSY.
	removeTimeout = 5 * time.Second
	// pipeDelay bounds how long Wait waits for the output pipes to close
	// once every process it could find is dead (exec.Cmd.WaitDelay): a
	// process that escaped both groups may still hold them.
	pipeDelay = 2 * time.Second
	// maxLeftovers bounds the leftovers listed in Exit.
	maxLeftovers = 64
)

// Spec is what to run and how to confine it.
type Spec struct {
	// Argv is the program and its arguments. A program without a slash is
	// looked up in PATH (of this process) before anything is created.
	Argv []string
	// Env is the whole environment of the process; nil means this
	// process's environment.
	Env []string
	// Dir is the working directory; "" means this process's.
	Dir string
	// Driver makes the process's group; nil means no group (the process
	// still gets its own process group).
	Driver enforce.Driver
	// Group names the group (enforce.ValidateName); required with Driver.
	Group string
	// Resources are the group's settings (nice, pinning and idle
	// included).
	Resources enforce.Resources
	// Stdout and Stderr, if set, receive the process's output as it comes,
	// besides the tails kept in Exit.
	Stdout, Stderr io.Writer
	// TailBytes is how much of the end of stdout and of stderr Exit keeps
	// (0: DefaultTail; at most MaxTail).
	TailBytes int
	// Measure samples the process tree while it runs and fills
	// Exit.Result (rusage, CPUs used, migrations, the group's cpu.stat and
	// pressure).
	Measure bool
	// SampleInterval is the sampling interval (0: measure's default).
	SampleInterval time.Duration
	// RealTime, when set, is the real-time class every thread of the
	// process runs in (enforce.StartRealTime); Resources.RTShare bounds
	// it where the driver can.
	RealTime enforce.RealTime
}

// Leftover is a process still in a job's group or process group after the
// job's leader exited.
type Leftover struct {
	PID  int    `json:"pid"`
	Comm string `json:"comm"`
}

// String renders l as "pid (comm)".
func (l Leftover) String() string { return strconv.Itoa(l.PID) + " (" + l.Comm + ")" }

// PSI scopes of Exit.PSIScope.
const (
	PSIGroup  = "group"  // the group's own cpu.pressure (cgroup v2)
	PSISystem = "system" // /proc/pressure/cpu: the group has none (cgroup v1, affinity)
)

// Exit is how a process ended.
type Exit struct {
	// Code is the exit status, or -1 when a signal ended the process.
	Code int
	// Signal names the signal that ended it ("killed"), if one did.
	Signal string
	// Stdout and Stderr are the tails of the output.
	Stdout, Stderr string
	// Leftovers are the processes that stayed after the leader exited
	// (all killed), at most 64; LeftoverCount counts them all.
	Leftovers     []Leftover
	LeftoverCount int
	// Stopped is true when Stop or a cancelled context ended the process.
	Stopped bool
	// Result is the measurement (Spec.Measure); Wall is always set.
	Result measure.Result
	// PSIScope says whose pressure Result.PSI is (PSIGroup, PSISystem),
	// "" when none was read.
	PSIScope string
}

// Process is a running process started by Start.
type Process struct {
	spec    Spec
	cmd     *exec.Cmd
	group   enforce.Group
	begin   time.Time
	stdout  *Tail
	stderr  *Tail
	watch   *measure.Job
	scope   string
	done    chan struct{}
	exit    Exit
	err     error
	stopped chan struct{} // closed by Stop or ctx cancel
	stopMu  sync.Mutex    // guards reaped and the closing of stopped
	reaped  bool          // the leader is reaped: its pid may be reused
	stopCtx func() bool
}

// Start validates spec, creates its group, and starts the process in it,
// confined from its first instruction and in a process group of its own.
// Cancelling ctx kills the process group and the group's processes; Wait
// still has to be called (or Stop) to learn the exit and remove the group.
// Errors about spec wrap ErrSpec or ErrNotFound and create nothing.
func Start(ctx context.Context, spec Spec) (*Process, error) {
	if err := spec.check(); err != nil {
		return nil, err
	}
	path, err := LookPath(spec.Argv[0])
	if err != nil {
		return nil, err
	}
	limit := spec.TailBytes
	if limit == 0 {
		limit = DefaultTail
	}
	p := &Process{spec: spec, done: make(chan struct{}), stopped: make(chan struct{}),
		stdout: NewTail(limit), stderr: NewTail(limit)}
	cmd := &exec.Cmd{Path: path, Args: slices.Clone(spec.Argv), Dir: spec.Dir}
	cmd.Env = spec.Env
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Stdout, cmd.Stderr = io.Writer(p.stdout), io.Writer(p.stderr)
	if spec.Stdout != nil {
		cmd.Stdout = io.MultiWriter(p.stdout, spec.Stdout)
	}
	if spec.Stderr != nil {
		cmd.Stderr = io.MultiWriter(p.stderr, spec.Stderr)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = pipeDelay
	p.cmd = cmd

	if spec.Driver != nil {
		g, err := spec.Driver.Create(spec.Group, spec.Resources)
		if err != nil {
			return nil, fmt.Errorf("starting %s: %w", spec.Argv[0], err)
		}
		p.group = g
	}
	if err := ctx.Err(); err != nil {
		p.removeGroup()
		return nil, fmt.Errorf("starting %s: %w", spec.Argv[0], err)
	}
	// The group's counters before the process runs: read after its start,
	// a short job throttled (or stalled) before the reading would show
	// none of it (TestRunQuotaJSON on a loaded machine).
	var opts []measure.Option
	if spec.Measure {
		opts, p.scope = p.groupFiles(opts)
	}
	p.begin = time.Now()
	if err := enforce.StartRealTime(ctx, p.group, cmd, spec.RealTime); err != nil {
		p.removeGroup()
		return nil, fmt.Errorf("starting %s: %w", spec.Argv[0], err)
	}
	if spec.Measure {
		opts = append(opts, measure.WithStart(p.begin))
		if spec.SampleInterval > 0 {
			opts = append(opts, measure.WithInterval(spec.SampleInterval))
		}
		w, err := measure.WatchPID(cmd.Process.Pid, p.reap, opts...)
		if err != nil {
			// Measuring is the caller's wish, not the process's need: the
			// process runs on and Wait reports the error.
			p.err = fmt.Errorf("measuring: %w", err)
		}
		p.watch = w
	}
	p.stopCtx = context.AfterFunc(ctx, func() { p.signalStop(syscall.SIGKILL) })
	go p.finish()
	return p, nil
}

func (s Spec) check() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrSpec}, args...)...)
	}
	switch {
	case len(s.Argv) == 0 || s.Argv[0] == "":
		return bad("no program")
	case s.TailBytes < 0 || s.TailBytes > MaxTail:
		return bad("tail of %d bytes outside [0, %d]", s.TailBytes, MaxTail)
	case s.SampleInterval < 0:
		return bad("negative sample interval %v", s.SampleInterval)
	case s.Driver != nil && s.Group == "":
		return bad("a driver without a group name")
	}
	for _, a := range s.Argv {
		if strings.IndexByte(a, 0) >= 0 {
			return bad("argument %q holds a NUL byte", a)
		}
	}
	if s.Driver != nil {
		if err := enforce.ValidateName(s.Group); err != nil {
			return fmt.Errorf("%w: %w", ErrSpec, err)
		}
	}
	return nil
}

// LookPath finds the program argv0 as Start would: a name without a slash
// in PATH, a path as it is; either must be an executable regular file.
// Front doors call it to refuse a batch before any job starts.
func LookPath(argv0 string) (string, error) {
	path, err := exec.LookPath(argv0)
	if err != nil {
		return "", fmt.Errorf("finding %q: %w", argv0, err)
	}
	if !filepath.IsAbs(path) {
		if abs, aerr := filepath.Abs(path); aerr == nil {
			path = abs
		}
	}
	return path, nil
}

// groupFiles adds the group's cpu.stat and pressure to opts, read now as
// the "before" of the measurement (call it before the process starts),
// and says whose pressure Result.PSI will hold.
func (p *Process) groupFiles(opts []measure.Option) ([]measure.Option, string) {
	cf, ok := p.group.(enforce.ControlFiler)
	if !ok {
		// The system's pressure, from before the start too.
		if psi, err := measure.ReadPSI(os.DirFS("/proc"), measure.PSIFile); err == nil {
			return append(opts, measure.WithBefore(nil, &psi)), PSISystem
		}
		return opts, PSISystem
	}
	fsys := cf.ControlFS()
	// A file that does not read now is read again at Watch, which
	// reports the error.
	var cpu *measure.CPUStat
	if _, err := fs.Stat(fsys, "cpu.stat"); err == nil {
		opts = append(opts, measure.WithCPUStat(fsys, "cpu.stat"))
		if st, err := measure.ReadCPUStat(fsys, "cpu.stat"); err == nil {
			cpu = &st
		}
	}
	if _, err := fs.Stat(fsys, "cpu.pressure"); err == nil {
		var psi *measure.PSI
		if p, err := measure.ReadPSI(fsys, "cpu.pressure"); err == nil {
			psi = &p
		}
		return append(opts, measure.WithPressure(fsys, "cpu.pressure"), measure.WithBefore(cpu, psi)), PSIGroup
	}
	var psi *measure.PSI
	if p, err := measure.ReadPSI(os.DirFS("/proc"), measure.PSIFile); err == nil {
		psi = &p
	}
	return append(opts, measure.WithBefore(cpu, psi)), PSISystem
}

// Pid is the process's pid (and process group id).
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Group is the process's enforcement group, nil without a Driver. It is
// removed when Wait returns.
func (p *Process) Group() enforce.Group { return p.group }

// Done is closed once the process has ended and its group is removed.
func (p *Process) Done() <-chan struct{} { return p.done }

// Wait waits for the process to exit, kills and names what stayed in its
// group and process group, removes the group, and returns the exit. The
// error is about corepin's side (measuring, removing the group), never the
// process's exit status; Exit is filled either way. Wait may be called
// more than once.
func (p *Process) Wait() (Exit, error) {
	<-p.done
	return p.exit, p.err
}

// Stop ends the process: SIGTERM to its process group, up to grace for
// the leader to exit, then SIGKILL; then as Wait.
func (p *Process) Stop(grace time.Duration) (Exit, error) {
	p.signalStop(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		p.signalStop(syscall.SIGKILL)
	}
	return p.Wait()
}

// signalStop marks the process stopped and signals its process group
// (SIGKILL also kills the group's members) unless it has been reaped.
func (p *Process) signalStop(sig syscall.Signal) {
	p.stopMu.Lock()
	defer p.stopMu.Unlock()
	if p.reaped {
		return
	}
	select {
	case <-p.stopped:
	default:
		close(p.stopped)
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, sig)
	if sig == syscall.SIGKILL {
		if k, ok := p.group.(enforce.Killer); ok {
			_ = k.Kill()
		}
	}
}

// finish waits for the process and fills p.exit; it runs once, in its own
// goroutine from Start.
func (p *Process) finish() {
	var res measure.Result
	var err error
	if p.watch != nil {
		res, err = p.watch.Wait()
		// The exit status is in the state; only corepin's failures count.
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = withoutExitError(err)
		}
		if err != nil {
			err = fmt.Errorf("measuring: %w", err)
		}
	} else {
		var ps *os.ProcessState
		ps, err = p.reap()
		res.Wall = time.Since(p.begin)
		if ps != nil {
			_ = res.SetRusage(ps)
		}
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = nil
		}
	}
	p.stopCtx()
	e := &p.exit
	e.Result = res
	if p.spec.Measure && res.PSI != nil {
		e.PSIScope = p.scope
	}
	if ps := p.cmd.ProcessState; ps != nil {
		e.Code = ps.ExitCode()
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			e.Signal = ws.Signal().String()
		}
	}
	select {
	case <-p.stopped:
		e.Stopped = true
	default:
	}
	e.Stdout, e.Stderr = p.stdout.String(), p.stderr.String()
	rerr := p.removeGroup()
	p.err = errors.Join(p.err, err, rerr)
	close(p.done)
}

// reap runs once the leader has exited (not yet reaped: its pid and
// process group cannot be reused meanwhile): it names and kills what
// stayed, then reaps the leader.
func (p *Process) reap() (*os.ProcessState, error) {
	leader := p.cmd.Process.Pid
	waitExited(leader)
	left := p.leftovers(leader)
	p.exit.LeftoverCount = len(left)
	p.exit.Leftovers = left[:min(len(left), maxLeftovers)]
	_ = syscall.Kill(-leader, syscall.SIGKILL)
	var kerr error
	if k, ok := p.group.(enforce.Killer); ok {
		kerr = k.Kill() // also what forked after the listing
	} else if len(left) > 0 {
		kerr = waitGone(leader) // SIGKILL is delivered asynchronously
	}
	p.stopMu.Lock()
	p.reaped = true
	p.stopMu.Unlock()
	err := p.cmd.Wait()
	if errors.Is(err, exec.ErrWaitDelay) {
		err = nil // a process outside every group we know still holds the pipes; it is named above if found
	}
	return p.cmd.ProcessState, errors.Join(err, kerr)
}

// leftovers lists the processes other than the leader in its group, or,
// without a listable group, in its process group.
func (p *Process) leftovers(leader int) []Leftover {
	var pids []int
	if l, ok := p.group.(enforce.ProcLister); ok {
		pids, _ = l.Procs()
	} else {
		pids = processGroup(leader)
	}
	var out []Leftover
	for _, pid := range pids {
		if pid == leader {
			continue
		}
		out = append(out, Leftover{PID: pid, Comm: comm(pid)})
	}
	return out
}

// removeGroup removes the group once its processes are gone.
func (p *Process) removeGroup() error {
	if p.group == nil {
		return nil
	}
	if err := enforce.RemoveWhenEmpty(p.group, removeTimeout); err != nil {
		return fmt.Errorf("removing group: %w", err)
	}
	return nil
}

// withoutExitError drops *exec.ExitError from a joined error.
func withoutExitError(err error) error {
	var keep []error
	if u, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range u.Unwrap() {
			var ee *exec.ExitError
			if !errors.As(e, &ee) {
				keep = append(keep, e)
			}
		}
		return errors.Join(keep...)
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return nil
	}
	return err
}

// comm reads /proc/pid/comm ("?" if the process is gone).
func comm(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	if err != nil {
		return "?"
	}
	return string(bytes.TrimSpace(b))
}

// waitGone waits until no process but the leader is left in process group
// pgid, for about 2 s, as enforce's Killer does for a group.
func waitGone(pgid int) error {
	var left []int
	for range 200 {
		left = slices.DeleteFunc(processGroup(pgid), func(pid int) bool { return pid == pgid })
		if len(left) == 0 {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("killing process group %d: %v still alive after SIGKILL", pgid, left)
}

// processGroup lists the processes whose process group is pgid.
func processGroup(pgid int) []int {
	es, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range es {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		if st, err := measure.ParseTaskStat(b); err == nil && st.PGRP == pgid && st.State != 'Z' {
			pids = append(pids, pid)
		}
	}
	return pids
}
