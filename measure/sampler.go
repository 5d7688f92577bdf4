package measure

import (
	"errors"
	"fmt"
	"io/fs"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/corepin/corepin/cpuset"
)

// DefaultInterval is the sampling period used when none is given. One sweep
// over a process of 8 threads costs about 0.1 ms of CPU on the machine this
// was measured on (see doc.go), so 100 ms keeps the sampler near 0.1% of one
// CPU, well under the 1% budget.
const DefaultInterval = 100 * time.Millisecond

// Sample summarises what a Sampler saw of a process tree. Counters are sums,
// over every thread ever seen (keyed by TID and start time, so exited and
// reused TIDs count once each), of the last value read for that thread.
// Activity of a thread after its last sweep, and of threads that lived and
// died between two sweeps, is not counted.
type Sample struct {
	// CPUsUsed holds every CPU a thread was seen on (the processor field of
	// its stat). A thread that ran briefly on a CPU between two sweeps
	// leaves no trace, so this is a lower bound.
	CPUsUsed            cpuset.CPUSet
	Migrations          int64         // se.nr_migrations
	VoluntarySwitches   int64         // nr_voluntary_switches
	InvoluntarySwitches int64         // nr_involuntary_switches
	RunTime             time.Duration // schedstat: time on a CPU
	RunDelay            time.Duration // schedstat: time runnable but waiting for a CPU
	Timeslices          int64         // schedstat: timeslices run
	Threads             int           // distinct threads seen
	Processes           int           // distinct processes seen
	Samples             int           // sweeps taken
	SamplerCPU          time.Duration // CPU time the sweeps themselves cost
	Elapsed             time.Duration // from Start to the last sweep
}

// CtxSwitches returns voluntary plus involuntary context switches.
func (s Sample) CtxSwitches() int64 { return s.VoluntarySwitches + s.InvoluntarySwitches }

// Overhead returns the sampler's CPU cost as a fraction of one CPU over
// Elapsed (0.01 is 1% of a CPU); 0 when nothing has elapsed.
func (s Sample) Overhead() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return s.SamplerCPU.Seconds() / s.Elapsed.Seconds()
}

// Sampler periodically reads the scheduler's per-thread files for a process
// and all its descendants. It reads only through the fs.FS it was given,
// rooted at the procfs mount. A Sampler is safe for concurrent use.
type Sampler struct {
	fsys     fs.FS
	root     int
	interval time.Duration

	mu       sync.Mutex
	buf      []byte
	children childrenMode
	procs    map[int]*procState  // tracked members of the tree, by pid
	seenPIDs map[procKey]bool    // every process ever tracked
	parent   map[int]int         // ppid scan: pid -> ppid at first sight
	listed   map[int]bool        // ppid scan: scratch set of listed pids
	threads  map[procKey]*thread // by TID and start time
	cpus     cpuset.Builder
	samples  int
	cpuTime  time.Duration
	start    time.Time
	last     time.Time
	err      error

	stop chan struct{}
	done chan struct{}
}

type childrenMode int

const (
	childrenUnknown childrenMode = iota
	childrenFile                 // /proc/PID/task/TID/children (CONFIG_PROC_CHILDREN)
	childrenScan                 // scan /proc/*/stat for ppid
)

// procKey names a task across TID reuse: the kernel never gives two live
// tasks one TID, and a reused TID gets a later start time.
type procKey struct {
	id    int
	start uint64
}

type procState struct {
	start    uint64
	hasStart bool
}

type thread struct {
	sched TaskSched
	stat  SchedStat
}

// NewSampler returns a sampler of the process pid and its descendants,
// reading fsys (os.DirFS("/proc") in production) every interval once
// started; interval <= 0 means DefaultInterval.
func NewSampler(fsys fs.FS, pid int, interval time.Duration) *Sampler {
	if interval <= 0 {
		interval = DefaultInterval
	}
	return &Sampler{
		fsys:     fsys,
		root:     pid,
		interval: interval,
		procs:    map[int]*procState{pid: {}},
		seenPIDs: map[procKey]bool{},
		parent:   map[int]int{},
		listed:   map[int]bool{},
		threads:  map[procKey]*thread{},
	}
}

// Start takes a first sweep and then one every interval in a new goroutine,
// until Stop. It panics if called twice.
func (s *Sampler) Start() {
	s.mu.Lock()
	if s.stop != nil {
		s.mu.Unlock()
		panic("measure: Sampler.Start called twice")
	}
	s.stop, s.done = make(chan struct{}), make(chan struct{})
	if s.start.IsZero() {
		s.start = time.Now()
	}
	s.mu.Unlock()
	go s.loop()
}

func (s *Sampler) loop() {
	defer close(s.done)
	// Sweeps run on one locked thread so that their CPU cost can be read
	// from the thread's own clock.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		s.sweepLocked()
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
	}
}

// Stop ends periodic sampling, takes a final sweep and returns the summary,
// with the first unexpected error met by any sweep. A process that exits
// while it is being read is not an error. Stop may be called without Start,
// after SampleOnce.
func (s *Sampler) Stop() (Sample, error) {
	s.mu.Lock()
	stop, done := s.stop, s.done
	s.mu.Unlock()
	if stop != nil {
		select {
		case <-stop:
		default:
			close(stop)
		}
		<-done
	}
	runtime.LockOSThread()
	s.sweepLocked()
	runtime.UnlockOSThread()
	return s.Snapshot(), s.Err()
}

// SampleOnce takes one sweep now, on the calling goroutine, and returns the
// first unexpected error of that sweep.
func (s *Sampler) SampleOnce() error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	s.mu.Lock()
	before := s.err
	s.mu.Unlock()
	err := s.sweepLocked()
	if before != nil {
		return nil
	}
	return err
}

// Err returns the first unexpected error met by any sweep so far.
func (s *Sampler) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Snapshot returns the summary so far. Successive snapshots never decrease.
func (s *Sampler) Snapshot() Sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := Sample{
		CPUsUsed:   s.cpus.Result(),
		Threads:    len(s.threads),
		Processes:  len(s.seenPIDs),
		Samples:    s.samples,
		SamplerCPU: s.cpuTime,
	}
	if !s.start.IsZero() {
		out.Elapsed = s.last.Sub(s.start)
	}
	for _, t := range s.threads {
		out.Migrations += t.sched.Migrations
		out.VoluntarySwitches += t.sched.VoluntarySwitches
		out.InvoluntarySwitches += t.sched.InvoluntarySwitches
		out.RunTime += t.stat.Run
		out.RunDelay += t.stat.Wait
		out.Timeslices += t.stat.Timeslices
	}
	return out
}

// sweepLocked takes the lock, reads the tree once and returns the first
// unexpected error of this sweep. The caller has locked its OS thread.
func (s *Sampler) sweepLocked() error {
	c0 := threadCPU()
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.sweep()
	if err != nil && s.err == nil {
		s.err = err
	}
	s.samples++
	s.last = time.Now()
	if s.start.IsZero() {
		s.start = s.last
	}
	s.cpuTime += threadCPU() - c0
	return err
}

func (s *Sampler) sweep() error {
	var errs []error
	note := func(err error) {
		if err != nil && !isGone(err) {
			errs = append(errs, err)
		}
	}
	if s.children == childrenUnknown {
		s.children = s.probeChildren()
	}
	if s.children == childrenScan {
		note(s.scanTree())
	}
	// Read every tracked process; in children mode this also discovers new
	// members, which are read in the same sweep.
	done := make(map[int]bool, len(s.procs))
	for again := true; again; {
		again = false
		for pid := range s.procs {
			if done[pid] {
				continue
			}
			done[pid] = true
			again = true
			note(s.readProc(pid))
		}
	}
	return errors.Join(errs...)
}

// probeChildren decides once how descendants are found: through the
// children files when the kernel has them (CONFIG_PROC_CHILDREN), else by a
// ppid scan of every process.
func (s *Sampler) probeChildren() childrenMode {
	p := strconv.Itoa(s.root)
	_, err := fs.Stat(s.fsys, p+"/task/"+p+"/children")
	if err == nil {
		return childrenFile
	}
	if isGone(err) {
		if _, err := fs.Stat(s.fsys, p+"/task/"+p); err != nil {
			// The root is gone; nothing is left to find either way.
			return childrenScan
		}
	}
	return childrenScan
}

// readProc reads every thread of a tracked process. A process that is gone,
// or whose pid now names a later process, is dropped.
func (s *Sampler) readProc(pid int) error {
	ps := s.procs[pid]
	p := strconv.Itoa(pid)
	leader, err := s.readThread(p, pid, ps)
	if err != nil || leader == nil {
		delete(s.procs, pid)
		return err
	}
	entries, err := fs.ReadDir(s.fsys, p+"/task")
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		tid, err := strconv.Atoi(e.Name())
		if err != nil || tid == pid {
			continue
		}
		if _, err := s.readThread(p, tid, nil); err != nil && !isGone(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// readThread reads one thread's stat, sched and schedstat, and in children
// mode its children. For a leader (ps != nil) it checks the start time
// against the recorded one and returns nil stat when the pid was reused.
func (s *Sampler) readThread(p string, tid int, ps *procState) (*TaskStat, error) {
	dir := p + "/task/" + strconv.Itoa(tid) + "/"
	data, err := readFile(s.fsys, dir+"stat", &s.buf)
	if err != nil {
		return nil, err
	}
	st, err := ParseTaskStat(data)
	if err != nil {
		return nil, fmt.Errorf("reading %sstat: %w", dir, err)
	}
	if ps != nil {
		if ps.hasStart && ps.start != st.StartTime {
			return nil, nil
		}
		ps.start, ps.hasStart = st.StartTime, true
		s.seenPIDs[procKey{tid, st.StartTime}] = true
	}
	s.cpus.Add(st.Processor)
	key := procKey{tid, st.StartTime}
	t := s.threads[key]
	if t == nil {
		t = &thread{}
		s.threads[key] = t
	}
	var errs []error
	if data, err := readFile(s.fsys, dir+"sched", &s.buf); err != nil {
		errs = append(errs, err)
	} else if v, err := ParseTaskSched(data); err != nil {
		errs = append(errs, fmt.Errorf("reading %ssched: %w", dir, err))
	} else {
		// Counters only grow; max keeps the sums monotonic even so.
		t.sched.Migrations = max(t.sched.Migrations, v.Migrations)
		t.sched.Switches = max(t.sched.Switches, v.Switches)
		t.sched.VoluntarySwitches = max(t.sched.VoluntarySwitches, v.VoluntarySwitches)
		t.sched.InvoluntarySwitches = max(t.sched.InvoluntarySwitches, v.InvoluntarySwitches)
	}
	if data, err := readFile(s.fsys, dir+"schedstat", &s.buf); err != nil {
		errs = append(errs, err)
	} else if v, err := ParseSchedStat(data); err != nil {
		errs = append(errs, fmt.Errorf("reading %sschedstat: %w", dir, err))
	} else {
		t.stat.Run = max(t.stat.Run, v.Run)
		t.stat.Wait = max(t.stat.Wait, v.Wait)
		t.stat.Timeslices = max(t.stat.Timeslices, v.Timeslices)
	}
	if s.children == childrenFile {
		if data, err := readFile(s.fsys, dir+"children", &s.buf); err != nil {
			errs = append(errs, err)
		} else if err := s.addChildren(data); err != nil {
			errs = append(errs, fmt.Errorf("reading %schildren: %w", dir, err))
		}
	}
	var kept []error
	for _, err := range errs {
		if !isGone(err) {
			kept = append(kept, err)
		}
	}
	return &st, errors.Join(kept...)
}

// addChildren tracks the pids of a children file (space-separated).
func (s *Sampler) addChildren(data []byte) error {
	for len(data) > 0 {
		i := 0
		for i < len(data) && data[i] != ' ' && data[i] != '\n' {
			i++
		}
		if i > 0 {
			v, ok := parseUint(data[:i])
			if !ok || v > 1<<31 {
				return fmt.Errorf("parsing pid %q: %w", data[:i], errFormat)
			}
			if s.procs[int(v)] == nil {
				s.procs[int(v)] = &procState{}
			}
		}
		if i < len(data) {
			i++
		}
		data = data[i:]
	}
	return nil
}

// scanTree finds new descendants by reading the ppid of every process not
// seen before. A process's ppid changes only when its parent dies and it is
// re-parented to init or a subreaper, outside the tree, so the ppid at first
// sight is enough; tracked processes stay tracked after re-parenting.
func (s *Sampler) scanTree() error {
	entries, err := fs.ReadDir(s.fsys, ".")
	if err != nil {
		return fmt.Errorf("listing processes: %w", err)
	}
	clear(s.listed)
	var fresh []int
	var errs []error
	for _, e := range entries {
		name := e.Name()
		if name[0] < '0' || name[0] > '9' {
			continue
		}
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		s.listed[pid] = true
		if _, ok := s.parent[pid]; ok {
			continue
		}
		data, err := readFile(s.fsys, name+"/stat", &s.buf)
		if err != nil {
			if !isGone(err) {
				errs = append(errs, err)
			}
			continue
		}
		st, err := ParseTaskStat(data)
		if err != nil {
			errs = append(errs, fmt.Errorf("reading %s/stat: %w", name, err))
			continue
		}
		s.parent[pid] = st.PPID
		fresh = append(fresh, pid)
	}
	for pid := range s.parent {
		if !s.listed[pid] {
			delete(s.parent, pid)
		}
	}
	// Add fresh processes whose parent is tracked, until none is added:
	// a fresh child of a fresh child joins on a later pass.
	for added := true; added; {
		added = false
		for i, pid := range fresh {
			if pid < 0 || s.procs[pid] != nil {
				continue
			}
			if s.procs[s.parent[pid]] != nil {
				s.procs[pid] = &procState{}
				fresh[i] = -1
				added = true
			}
		}
	}
	return errors.Join(errs...)
}
