package schedext

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/corepin/corepin/measure"
	"github.com/corepin/corepin/topology"
)

// States of the supervisor (Status.State).
const (
	// StateOff: no scheduler asked for, or none started yet.
	StateOff = "off"
	// StateUnavailable: the kernel has no sched_ext; nothing is started.
	StateUnavailable = "unavailable"
	// StateStarting: scx_layered runs and has not attached yet.
	StateStarting = "starting"
	// StateAttached: the kernel runs scx_layered's scheduler.
	StateAttached = "attached"
	// StateEjected: the kernel detached it while the process lives.
	StateEjected = "ejected"
	// StateDown: scx_layered is not running; a start is due after the
	// back-off.
	StateDown = "down"
	// StateForeign: a scheduler corepin did not start is attached;
	// corepin waits for it to detach and never fights it.
	StateForeign = "foreign"
)

// Reasons of transitions (Transition.Reason, the label of the agent's
// transitions counter).
const (
	ReasonStarted       = "started"        // first start of this supervisor
	ReasonRestarted     = "restarted"      // a start after a failure, past the back-off
	ReasonStaleRecord   = "stale_record"   // a start after discarding a record of a process gone
	ReasonConfigChanged = "config_changed" // a start after stopping one run on another config
	ReasonAdopted       = "adopted"        // an earlier agent's scx_layered taken over
	ReasonAttached      = "attached"       // the kernel runs its scheduler
	ReasonRefused       = "refused"        // it exited soon after its start, never attached
	ReasonExited        = "exited"         // it exited
	ReasonKilled        = "killed"         // a signal ended it
	ReasonEjected       = "ejected"        // the kernel detached its scheduler
	ReasonAttachTimeout = "attach_timeout" // it ran without attaching for too long
	ReasonStartFailed   = "start_failed"   // the binary could not be run
	ReasonForeign       = "foreign"        // another scheduler is attached
	ReasonUnavailable   = "unavailable"    // the kernel has no sched_ext
	ReasonStopped       = "stopped"        // stopped at the setting's removal
)

// Fair is Status.Decides while no sched_ext scheduler is attached.
const Fair = "fair"

// Defaults of Options.
const (
	DefaultPoll          = time.Second
	DefaultBackoffMin    = time.Second
	DefaultBackoffMax    = 5 * time.Minute
	DefaultRefusedWithin = 10 * time.Second
	DefaultAttachTimeout = time.Minute
	DefaultHealthyAfter  = time.Minute
	DefaultEjectGrace    = 10 * time.Second
	DefaultStopTimeout   = 10 * time.Second
	// MaxAttachGrowth bounds how far the time a start gets to attach grows
	// past AttachTimeout (16 minutes with the defaults).
	MaxAttachGrowth = 16
)

// Files the supervisor owns in Options.Dir.
const (
	ConfigFile = "scx_layered.json"
	LogFile    = "scx_layered.log"
	// MaxLog bounds the log file: past it, it is emptied (scx_layered
	// appends, so it goes on writing at the new end).
	MaxLog = 1 << 20
	// tailBytes and tailLines bound the stderr tail kept of a failure.
	tailBytes = 2048
	tailLines = 6
)

// Options configure Supervise and StopRecorded.
type Options struct {
	// Binary and Args are the validated setting (Setting.Validate).
	Binary string
	Args   []string
	// Dir holds the files the supervisor owns: ConfigFile, the layer
	// config it writes and scx_layered reads, and LogFile, scx_layered's
	// output.
	Dir string
	// Root is the machine whose sys/kernel/sched_ext is read ("" or "/":
	// this one); Proc its procfs (default /proc).
	Root string
	Proc string
	// Records keeps the record of the running scx_layered (required).
	Records Records
	Log     *slog.Logger
	// Observer, if not nil, is told of every transition.
	Observer Observer
	// Poll is how often the kernel's state and an adopted process are
	// read; the back-off doubles from BackoffMin to BackoffMax with each
	// failure in a row, and starts from BackoffMin again once scx_layered
	// stayed attached HealthyAfter. An exit within RefusedWithin of the
	// start without attaching is a refusal; a process not attached
	// AttachTimeout after its start (twice that after each such stop, up
	// to MaxAttachGrowth times it), or EjectGrace after the kernel
	// ejected its scheduler (scx_layered restarts itself after some
	// exits), is stopped; a stop sends SIGINT and, after StopTimeout,
	// SIGKILL. Zero: the defaults.
	Poll, BackoffMin, BackoffMax, RefusedWithin, AttachTimeout, HealthyAfter, EjectGrace, StopTimeout time.Duration
}

func (o *Options) defaults() {
	set := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	set(&o.Poll, DefaultPoll)
	set(&o.BackoffMin, DefaultBackoffMin)
	set(&o.BackoffMax, DefaultBackoffMax)
	set(&o.RefusedWithin, DefaultRefusedWithin)
	set(&o.AttachTimeout, DefaultAttachTimeout)
	set(&o.HealthyAfter, DefaultHealthyAfter)
	set(&o.EjectGrace, DefaultEjectGrace)
	set(&o.StopTimeout, DefaultStopTimeout)
	o.BackoffMax = max(o.BackoffMax, o.BackoffMin)
	if o.Root == "" {
		o.Root = "/"
	}
	if o.Proc == "" {
		o.Proc = "/proc"
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
}

// Transition is one change of the supervisor's state.
type Transition struct {
	At     time.Time `json:"at"`
	From   string    `json:"from"`
	To     string    `json:"to"`
	Reason string    `json:"reason"`
	// Detail says more: the exit status and the tail of scx_layered's
	// output, the kernel's state, the process.
	Detail string `json:"detail,omitempty"`
	// BackoffS is, on a transition to down, the wait before the next
	// start in seconds.
	BackoffS float64 `json:"backoff_s,omitempty"`
}

// Status is what the supervisor says of the node: `corepin ctl top`'s
// sched_ext line and the agent's metrics.
type Status struct {
	Mode  string `json:"mode"`
	State string `json:"state"`
	// Decides names what schedules the node's tasks: the attached BPF
	// scheduler (root/ops), or Fair (the kernel's fair class: the
	// fair-class BE routes act).
	Decides string `json:"decides"`
	// InertRoutes are the BE routes the attached scheduler leaves inert
	// (topology.InertRoutes); empty while the fair class decides.
	InertRoutes []string `json:"inert_routes"`
	PID         int      `json:"pid,omitempty"`
	Adopted     bool     `json:"adopted,omitempty"`
	// Restarts counts starts after a failure; Failures the failures in a
	// row (the back-off's exponent).
	Restarts  int         `json:"restarts"`
	Failures  int         `json:"failures"`
	NextStart *time.Time  `json:"next_start,omitempty"`
	Last      *Transition `json:"last_transition,omitempty"`
}

// Observer is told of each transition with the status after it.
type Observer interface {
	Transitioned(t Transition, s Status)
}

// proc is the scx_layered the supervisor watches: its child, or an
// earlier agent's it adopted (then exits are found by polling).
type proc struct {
	id       measure.Identity
	comm     string
	p        *os.Process
	child    bool
	since    time.Time
	attached time.Time // zero until attached
	ejected  time.Time // zero unless ejected
	logOff   int64
	// child only: closed once Wait returned, with ps or werr set.
	exited chan struct{}
	ps     *os.ProcessState
	werr   error
	// why is the reason of a stop the supervisor made, "" otherwise.
	why, whyDetail string
}

// gone reports whether the process ended.
func (p *proc) gone(procRoot string) bool {
	if p.child {
		select {
		case <-p.exited:
			return true
		default:
			return false
		}
	}
	return !live(procRoot, p.id, p.comm)
}

// live reports whether id runs (not a zombie) under the name comm.
func live(procRoot string, id measure.Identity, comm string) bool {
	st, err := measure.ReadTaskStat(procRoot, id.PID)
	if err != nil {
		return !errors.Is(err, os.ErrNotExist) // unreadable: keep it
	}
	return st.StartTime == id.Start && st.State != 'Z' && st.Comm == comm
}

// Supervisor runs scx_layered on corepin's layer config and keeps it
// running: see Supervise.
type Supervisor struct {
	o      Options
	cfg    string // the config file's path
	spec   string
	comm   string
	cancel context.CancelFunc
	done   chan struct{}

	// Owned by the loop.
	cur   *proc
	timer *time.Timer
	ext   topology.SchedExt
	// attachWait is how long a start gets to attach: AttachTimeout,
	// doubled at each attach_timeout (a slow machine stays slow: it is
	// not reset), at most MaxAttachGrowth times AttachTimeout.
	attachWait time.Duration

	mu sync.Mutex
	st Status
}

// Supervise writes the layer config (LayeredConfig) to o.Dir, then, in
// the background until Close: adopts the scx_layered an earlier agent
// recorded in o.Records if it still runs (same pid, start time and comm,
// same spec; one on another spec is stopped and a new one started; a
// record of a process gone is discarded), else starts one (in a session
// of its own, so that it outlives the agent; its output in o.Dir's
// LogFile) unless the kernel has no sched_ext or runs a scheduler corepin
// did not start; watches the process and the kernel's
// /sys/kernel/sched_ext (state "enabled" with a root/ops naming
// "layered..." is attached; anything else once attached is ejected);
// restarts it with a bounded exponential back-off; and reports each
// transition to the log and o.Observer.
func Supervise(o Options) (*Supervisor, error) {
	o.defaults()
	if o.Records == nil {
		return nil, errors.New("supervising scx_layered: no record keeper")
	}
	data, err := MarshalLayered(LayeredConfig())
	if err != nil {
		return nil, err
	}
	s := &Supervisor{o: o, cfg: filepath.Join(o.Dir, ConfigFile), spec: specOf(o.Binary, o.Args, data),
		comm: commOf(o.Binary), done: make(chan struct{}), attachWait: o.AttachTimeout}
	if err := writeFile(s.cfg, data); err != nil {
		return nil, fmt.Errorf("writing the scx_layered config: %w", err)
	}
	s.st = Status{Mode: ModeLayered, State: StateOff, Decides: Fair, InertRoutes: []string{}}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go s.run(ctx)
	return s, nil
}

// specOf digests what a run of scx_layered is: binary, arguments,
// config.
func specOf(binary string, args []string, cfg []byte) string {
	h := sha256.New()
	for _, p := range append([]string{binary}, args...) {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	h.Write(cfg)
	return hex.EncodeToString(h.Sum(nil))
}

// commOf is the comm the kernel gives a process run from path: its base
// name, cut to TASK_COMM_LEN-1 bytes.
func commOf(path string) string {
	b := filepath.Base(path)
	if len(b) > 15 {
		b = b[:15]
	}
	return b
}

// writeFile replaces path's content atomically (mode 0644: the config
// is no secret, and scx_layered may run as another root-like user).
func writeFile(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(data)
	if err := tmp.Chmod(0o644); werr == nil {
		werr = err
	}
	if err := tmp.Close(); werr == nil {
		werr = err
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), path)
	}
	if werr != nil {
		os.Remove(tmp.Name())
	}
	return werr
}

// Status returns the supervisor's status now.
func (s *Supervisor) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.st
	st.InertRoutes = append([]string{}, st.InertRoutes...)
	if st.Last != nil {
		l := *st.Last
		st.Last = &l
	}
	return st
}

// Close stops supervising. It leaves scx_layered running and its record
// in place, for the next agent to adopt.
func (s *Supervisor) Close() error {
	s.cancel()
	<-s.done
	return nil
}

func (s *Supervisor) run(ctx context.Context) {
	defer close(s.done)
	s.begin()
	tick := time.NewTicker(s.o.Poll)
	defer tick.Stop()
	for {
		var exited <-chan struct{}
		if s.cur != nil && s.cur.child {
			exited = s.cur.exited
		}
		var due <-chan time.Time
		if s.timer != nil {
			due = s.timer.C
		}
		select {
		case <-ctx.Done():
			if s.timer != nil {
				s.timer.Stop()
			}
			return
		case <-exited:
			s.exited()
		case <-due:
			s.timer = nil
			s.start(ReasonRestarted, "")
		case <-tick.C:
			s.check()
		}
	}
}

// begin adopts the recorded scx_layered or starts one.
func (s *Supervisor) begin() {
	rec, err := s.o.Records.Load()
	if err != nil {
		s.o.Log.Warn("sched_ext: discarding an unreadable record", "err", err.Error())
		s.clear(Record{})
		s.start(ReasonStaleRecord, "record unreadable: "+err.Error())
		return
	}
	if rec == nil {
		s.start(ReasonStarted, "")
		return
	}
	p, why := s.find(*rec)
	if p == nil {
		s.o.Log.Info("sched_ext: discarding a stale record", "pid", rec.PID, "why", why)
		s.clear(*rec)
		s.start(ReasonStaleRecord, why)
		return
	}
	if rec.Spec != s.spec {
		p.why = ReasonConfigChanged
		detail := fmt.Sprintf("pid %d ran another binary, arguments or layer config: stopped (%s)", rec.PID, s.stop(p))
		s.clear(*rec)
		s.start(ReasonConfigChanged, detail)
		return
	}
	s.cur = p
	s.read()
	to := StateStarting
	if s.ours() {
		to, p.attached = StateAttached, time.Now()
	}
	s.transition(to, ReasonAdopted, fmt.Sprintf("pid %d, started by an earlier agent", rec.PID), 0)
}

// find returns the recorded process if it still runs as recorded (its
// pid with the same start time, comm and, for this binary, the comm the
// kernel gives it), opened for signals; else nil and why not.
func (s *Supervisor) find(rec Record) (*proc, string) {
	id := rec.Identity()
	st, err := measure.ReadTaskStat(s.o.Proc, rec.PID)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, fmt.Sprintf("pid %d is gone", rec.PID)
	case err != nil:
		return nil, fmt.Sprintf("pid %d unreadable: %v", rec.PID, err)
	case st.StartTime != rec.Start || st.State == 'Z':
		return nil, fmt.Sprintf("pid %d is another process now (started at tick %d, recorded %d)", rec.PID, st.StartTime, rec.Start)
	case st.Comm != rec.Comm || st.Comm != s.comm:
		return nil, fmt.Sprintf("pid %d runs %q, not %q", rec.PID, st.Comm, s.comm)
	}
	p, err := os.FindProcess(rec.PID) // a pidfd: signals reach this process only
	if err != nil {
		return nil, fmt.Sprintf("pid %d: %v", rec.PID, err)
	}
	if !live(s.o.Proc, id, rec.Comm) { // ended between the read and the open
		p.Release()
		return nil, fmt.Sprintf("pid %d is gone", rec.PID)
	}
	return &proc{id: id, comm: rec.Comm, p: p, since: time.Now(), logOff: logSize(s.logPath())}, ""
}

func (s *Supervisor) logPath() string { return filepath.Join(s.o.Dir, LogFile) }

func logSize(path string) int64 {
	if st, err := os.Stat(path); err == nil {
		return st.Size()
	}
	return 0
}

// read reads the kernel's sched_ext state into s.ext.
func (s *Supervisor) read() {
	ext, err := topology.OpenSchedExt(s.o.Root)
	if err != nil {
		s.o.Log.Debug("sched_ext: reading the kernel's state", "err", err.Error())
	}
	s.ext = ext
}

// ours reports whether the kernel runs a layered scheduler (scx_layered
// names it "layered_<version>_<target>").
func (s *Supervisor) ours() bool {
	return s.ext.State != nil && *s.ext.State == "enabled" && s.ext.Ops != nil && strings.HasPrefix(*s.ext.Ops, "layered")
}

// start starts scx_layered, unless the kernel has no sched_ext or runs a
// scheduler of someone else's.
func (s *Supervisor) start(reason, detail string) {
	s.read()
	if s.ext.State == nil {
		if s.st.State != StateUnavailable {
			s.transition(StateUnavailable, ReasonUnavailable,
				"no /sys/kernel/sched_ext: the kernel lacks CONFIG_SCHED_CLASS_EXT (Linux 6.12 or later with it); the fair class decides", 0)
		}
		return
	}
	if s.ext.Attached() {
		if s.st.State != StateForeign {
			s.transition(StateForeign, ReasonForeign, fmt.Sprintf("sched_ext %s (%s) attached by someone else: corepin waits for it to detach", *s.ext.State, *s.ext.Ops), 0)
		}
		return
	}
	p, err := s.spawn()
	if err != nil {
		s.fail(ReasonStartFailed, err.Error())
		return
	}
	s.cur = p
	if err := s.o.Records.Save(Record{PID: p.id.PID, Start: p.id.Start, Comm: p.comm, Spec: s.spec}); err != nil {
		s.o.Log.Warn("sched_ext: recording scx_layered; the next agent will not adopt it", "pid", p.id.PID, "err", err.Error())
	}
	if reason == ReasonRestarted {
		s.mu.Lock()
		s.st.Restarts++
		s.mu.Unlock()
	}
	d := fmt.Sprintf("pid %d", p.id.PID)
	if detail != "" {
		d += "; " + detail
	}
	s.transition(StateStarting, reason, d, 0)
}

// spawn runs the binary in a session of its own, its output appended to
// the log file, and reaps it in the background.
func (s *Supervisor) spawn() (*proc, error) {
	lp := s.logPath()
	if logSize(lp) > MaxLog {
		_ = os.Truncate(lp, 0)
	}
	lf, err := os.OpenFile(lp, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the scx_layered log: %w", err)
	}
	defer lf.Close()
	off, _ := lf.Seek(0, io.SeekEnd)
	cmd := exec.Command(s.o.Binary, append(append([]string{}, s.o.Args...), "f:"+s.cfg)...)
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.Dir = "/"
	// Its own session and process group: no signal meant for the agent's
	// group or terminal reaches it, and it outlives the agent.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", s.o.Binary, err)
	}
	// The comm recorded is the one the kernel gives the program (its base
	// name), not one read now: read right after Start it can still be
	// the parent's (execve renames the task after it closes the
	// close-on-exec pipe Start waits on). A comm "corepin" recorded so
	// made the next agent take the record for another program's and
	// discard it (seen under qemu on 6.12). The start time is the fork's
	// and final.
	p := &proc{p: cmd.Process, child: true, since: time.Now(), logOff: off, exited: make(chan struct{}), comm: s.comm}
	p.id = measure.Identity{PID: cmd.Process.Pid}
	if st, err := measure.ReadTaskStat(s.o.Proc, p.id.PID); err == nil {
		p.id.Start = st.StartTime
	}
	go func() {
		p.werr = cmd.Wait()
		p.ps = cmd.ProcessState
		close(p.exited)
	}()
	return p, nil
}

// check is one poll: the process's life and the kernel's state.
func (s *Supervisor) check() {
	s.read()
	p := s.cur
	if p == nil {
		switch s.st.State {
		case StateUnavailable, StateForeign:
			reason := ReasonStarted
			if s.st.Failures > 0 {
				reason = ReasonRestarted
			}
			s.start(reason, "")
		default:
			s.refresh()
		}
		return
	}
	s.trimLog()
	if p.gone(s.o.Proc) {
		if p.child {
			<-p.exited
		}
		s.exited()
		return
	}
	now := time.Now()
	switch {
	case s.ours():
		if s.st.State != StateAttached {
			p.attached, p.ejected = now, time.Time{}
			s.transition(StateAttached, ReasonAttached, fmt.Sprintf("pid %d; ops %s", p.id.PID, *s.ext.Ops), 0)
		} else if s.st.Failures > 0 && now.Sub(p.attached) >= s.o.HealthyAfter {
			s.mu.Lock()
			s.st.Failures = 0
			s.mu.Unlock()
		}
		s.refresh()
	case s.st.State == StateAttached:
		p.ejected = now
		s.transition(StateEjected, ReasonEjected, fmt.Sprintf("pid %d lives, the kernel says %s; the fair class decides", p.id.PID, s.kernel()), 0)
	case s.st.State == StateStarting && now.Sub(p.since) >= s.attachWait:
		// Loading a large BPF program can take longer than the bound on a
		// slow or loaded machine (a minute and more under emulation): the
		// next start gets twice the time, else it would be stopped in the
		// same place every time and never attach.
		had := s.attachWait
		s.attachWait = min(2*had, MaxAttachGrowth*s.o.AttachTimeout)
		p.why, p.whyDetail = ReasonAttachTimeout, fmt.Sprintf("not attached %v after its start (kernel: %s); the next start gets %v",
			had, s.kernel(), s.attachWait)
		p.whyDetail += "; " + s.stop(p)
		s.exited()
	case s.st.State == StateEjected && now.Sub(p.ejected) >= s.o.EjectGrace:
		p.why, p.whyDetail = ReasonEjected, fmt.Sprintf("still detached %v after the ejection (kernel: %s)", s.o.EjectGrace, s.kernel())
		p.whyDetail += "; " + s.stop(p)
		s.exited()
	default:
		s.refresh()
	}
}

func (s *Supervisor) kernel() string {
	st, ops := "none", ""
	if s.ext.State != nil {
		st = *s.ext.State
	}
	if s.ext.Ops != nil && *s.ext.Ops != "" {
		ops = " (" + *s.ext.Ops + ")"
	}
	return st + ops
}

// trimLog empties the log file once it passes MaxLog.
func (s *Supervisor) trimLog() {
	if logSize(s.logPath()) > MaxLog && os.Truncate(s.logPath(), 0) == nil && s.cur != nil {
		s.cur.logOff = 0
	}
}

// exited handles the end of the current process: the reason, the tail of
// its output, the back-off.
func (s *Supervisor) exited() {
	p := s.cur
	s.cur = nil
	if !p.child {
		p.p.Release() // a child's is released by Wait
	}
	s.clear(Record{PID: p.id.PID, Start: p.id.Start, Comm: p.comm, Spec: s.spec})
	reason, status := p.why, "exit status unknown (adopted)"
	if p.child {
		status = exitStatus(p.ps, p.werr)
	}
	detail := fmt.Sprintf("pid %d %s", p.id.PID, status)
	if p.whyDetail != "" {
		detail = fmt.Sprintf("pid %d %s", p.id.PID, p.whyDetail)
	}
	if reason == "" {
		signaled := p.ps != nil && p.ps.Sys().(syscall.WaitStatus).Signaled()
		switch {
		case p.child && p.attached.IsZero() && time.Since(p.since) < s.o.RefusedWithin:
			reason = ReasonRefused
		case signaled:
			reason = ReasonKilled
		default:
			reason = ReasonExited
		}
	}
	if tail := logTail(s.logPath(), p.logOff); tail != "" {
		detail += "; output: " + tail
	}
	s.fail(reason, detail)
}

func exitStatus(ps *os.ProcessState, err error) string {
	if ps == nil {
		if err != nil {
			return "wait: " + err.Error()
		}
		return "ended"
	}
	return ps.String()
}

// fail counts a failure, arms the back-off and reports the fall-back to
// the fair class.
func (s *Supervisor) fail(reason, detail string) {
	s.mu.Lock()
	s.st.Failures++
	n := s.st.Failures
	s.mu.Unlock()
	d := Backoff(s.o.BackoffMin, s.o.BackoffMax, n)
	s.timer = time.NewTimer(d)
	next := time.Now().Add(d)
	s.mu.Lock()
	s.st.NextStart = &next
	s.mu.Unlock()
	s.read()
	s.transition(StateDown, reason, detail, d)
}

// Backoff is the wait before the start that follows the n-th failure in
// a row: lo doubled n-1 times, at most hi.
func Backoff(lo, hi time.Duration, n int) time.Duration {
	d := lo
	for i := 1; i < n && d < hi; i++ {
		d *= 2
	}
	return min(d, hi)
}

// stop ends p: SIGINT (scx_layered detaches and exits), then SIGKILL
// after StopTimeout. It says how it ended.
func (s *Supervisor) stop(p *proc) string {
	return stopProc(p, s.o.Proc, s.o.StopTimeout, s.o.Poll)
}

func stopProc(p *proc, procRoot string, timeout, poll time.Duration) string {
	wait := func(d time.Duration) bool {
		deadline := time.Now().Add(d)
		step := min(poll, 50*time.Millisecond)
		for {
			if p.gone(procRoot) {
				return true
			}
			if time.Now().After(deadline) {
				return false
			}
			if p.child {
				select {
				case <-p.exited:
				case <-time.After(step):
				}
			} else {
				time.Sleep(step)
			}
		}
	}
	if err := p.p.Signal(os.Interrupt); err != nil && !p.gone(procRoot) {
		return "SIGINT failed: " + err.Error()
	}
	if wait(timeout) {
		return "SIGINT"
	}
	if err := p.p.Signal(os.Kill); err != nil && !p.gone(procRoot) {
		return "SIGKILL failed: " + err.Error()
	}
	if wait(timeout) {
		return fmt.Sprintf("SIGKILL after %v", timeout)
	}
	return fmt.Sprintf("still running %v after SIGKILL", timeout)
}

// clear deletes rec from the records (the zero Record: whatever is
// there, unreadable).
func (s *Supervisor) clear(rec Record) {
	if err := s.o.Records.Clear(rec); err != nil {
		s.o.Log.Warn("sched_ext: clearing the record", "err", err.Error())
	}
}

// refresh updates what decides from the last read, without a
// transition.
func (s *Supervisor) refresh() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fill()
}

// fill sets the status's kernel view; s.mu held.
func (s *Supervisor) fill() {
	s.st.Decides = Fair
	if s.ext.Attached() && s.ext.Ops != nil && *s.ext.Ops != "" {
		s.st.Decides = *s.ext.Ops
	}
	s.st.InertRoutes = topology.InertRoutes(s.ext)
	s.st.PID, s.st.Adopted = 0, false
	if s.cur != nil {
		s.st.PID, s.st.Adopted = s.cur.id.PID, !s.cur.child
	}
}

// transition moves to state to and reports it.
func (s *Supervisor) transition(to, reason, detail string, backoff time.Duration) {
	s.mu.Lock()
	t := Transition{At: time.Now(), From: s.st.State, To: to, Reason: reason, Detail: detail, BackoffS: backoff.Seconds()}
	s.st.State = to
	if to != StateDown {
		s.st.NextStart = nil
	}
	s.st.Last = &t
	s.fill()
	st := s.st
	s.mu.Unlock()
	args := []any{"from", t.From, "to", to, "reason", reason, "decides", st.Decides}
	if detail != "" {
		args = append(args, "detail", detail)
	}
	switch to {
	case StateDown:
		args = append(args, "next_start_in", backoff.String())
		s.o.Log.Warn("sched_ext: scx_layered down; the fair class decides and its BE routes act again", args...)
	case StateEjected:
		s.o.Log.Warn("sched_ext: the kernel ejected scx_layered's scheduler; the fair class decides and its BE routes act again", args...)
	case StateAttached:
		s.o.Log.Info("sched_ext: scx_layered attached; BE routes that cannot act: "+strings.Join(st.InertRoutes, ", "), args...)
	case StateForeign, StateUnavailable:
		s.o.Log.Warn("sched_ext: scx_layered not started", args...)
	default:
		s.o.Log.Info("sched_ext: scx_layered "+to, args...)
	}
	if s.o.Observer != nil {
		s.o.Observer.Transitioned(t, st)
	}
}

// logTail returns the last lines of the log from off on, without colour
// sequences, printable, at most tailBytes.
func logTail(path string, off int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.Size() <= off {
		return ""
	}
	from := max(off, st.Size()-tailBytes)
	b := make([]byte, st.Size()-from)
	n, _ := f.ReadAt(b, from)
	lines := strings.Split(strings.TrimSpace(csi.ReplaceAllString(string(b[:n]), "")), "\n")
	if len(lines) > tailLines {
		lines = lines[len(lines)-tailLines:]
	}
	return printable(strings.Join(lines, " | "))
}

// csi matches an escape sequence of the terminal's (ESC [, parameters,
// a final byte): scx_layered colours its log even into a file, and a
// kept "\x1b[2m" would read "?[2m" once printable.
var csi = regexp.MustCompile("\x1b\\[[0-?]*[ -/]*[@-~]")

// printable replaces control characters and invalid UTF-8.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == 0xfffd {
			return '?'
		}
		return r
	}, strings.ToValidUTF8(s, "?"))
}

// StopRecorded stops the scx_layered an earlier agent recorded in
// o.Records, if it still runs as recorded (SIGINT, then SIGKILL after
// o.StopTimeout), and deletes the record; a stale record is deleted. It
// says what it did ("" when there was no record).
func StopRecorded(o Options) (string, error) {
	o.defaults()
	rec, err := o.Records.Load()
	if err != nil {
		return "", errors.Join(err, o.Records.Clear(Record{}))
	}
	if rec == nil {
		return "", nil
	}
	s := &Supervisor{o: o, comm: rec.Comm}
	if o.Binary != "" {
		s.comm = commOf(o.Binary)
	}
	p, why := s.find(*rec)
	if p == nil {
		return "discarded a stale record: " + why, o.Records.Clear(*rec)
	}
	how := stopProc(p, o.Proc, o.StopTimeout, o.Poll)
	defer p.p.Release()
	if !p.gone(o.Proc) {
		return "", fmt.Errorf("stopping scx_layered pid %d: %s", rec.PID, how)
	}
	return fmt.Sprintf("stopped scx_layered pid %d (%s)", rec.PID, how), o.Records.Clear(*rec)
}
