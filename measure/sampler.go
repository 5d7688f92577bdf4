package measure

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/corepin/corepin/cpuset"
)

// DefaultInterval is the sampling period used when none is given. One sweep
// over a process of 8 worker threads cost 0.18-0.48 ms of CPU on the machine
// it was measured on (see the package doc), so 100 ms keeps the sampler
// under 0.5% of one CPU, within the 1% budget.
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
//
// Cost: on procfs (where fs.FS yields *os.File) each thread's three files
// stay open and are re-read with one pread each per sweep, and descendants
// are looked for only in sweeps where the pid namespace handed out a new
// pid (the last-pid field of /proc/loadavg changed). Other file systems,
// such as fstest.MapFS, are re-opened by path and fully rescanned every
// sweep.
type Sampler struct {
	fsys     fs.FS
	root     int
	interval time.Duration

	mu       sync.Mutex
	buf      []byte
	probed   bool
	children bool                // descendants from children files, not a ppid scan
	ownNS    bool                // fsys is the procfs of our own pid namespace
	loadavg  fs.File             // kept open to read last_pid, when ownNS
	lastPID  string              // last_pid at the previous discovery
	procs    map[int]*procState  // tracked members of the tree, by pid
	seenPIDs map[procKey]bool    // every process ever tracked
	parent   map[int]int         // ppid scan: pid -> ppid at first sight
	listed   map[int]bool        // ppid scan: scratch set of listed pids
	live     map[int]*thread     // threads being read, by TID
	threads  map[procKey]*thread // every thread ever read, by TID and start time
	cpus     cpuset.Builder
	samples  int
	cpuTime  time.Duration
	start    time.Time
	last     time.Time
	err      error

	stop chan struct{}
	done chan struct{}
}

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

// Files of a thread, in the order of thread.files.
var threadFiles = [...]string{"stat", "sched", "schedstat"}

type thread struct {
	pid, tid int
	dir      string     // "PID/task/TID/"
	files    [3]fs.File // open procfs files, or nil: re-open by path
	counted  bool       // in Sampler.threads
	start    uint64     // start time, once counted
	sched    TaskSched
	stat     SchedStat
}

func (t *thread) close() {
	for i, f := range t.files {
		if f != nil {
			f.Close()
			t.files[i] = nil
		}
	}
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
		live:     map[int]*thread{},
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

// Stop ends periodic sampling, takes a final sweep, closes the files the
// sampler holds open and returns the summary, with the first unexpected
// error met by any sweep. A process that exits while it is being read is
// not an error. Stop may be called without Start, after SampleOnce; the
// Sampler must not be used after Stop.
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
	s.mu.Lock()
	for tid, t := range s.live {
		t.close()
		delete(s.live, tid)
	}
	if s.loadavg != nil {
		s.loadavg.Close()
		s.loadavg = nil
	}
	s.mu.Unlock()
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
	if !s.probed {
		s.probe()
	}
	// Threads already known are read through their open files.
	for _, t := range s.live {
		note(s.readThread(t))
	}
	if s.newPIDs() {
		note(s.discover())
	}
	return errors.Join(errs...)
}

// probe decides once how descendants are found, and whether last_pid can
// tell when nothing new was created.
func (s *Sampler) probe() {
	s.probed = true
	p := strconv.Itoa(s.root)
	_, err := fs.Stat(s.fsys, p+"/task/"+p+"/children")
	s.children = err == nil // CONFIG_PROC_CHILDREN
	// /proc/loadavg reports the last pid of the reader's pid namespace, so
	// it says something about fsys only when fsys is our own procfs.
	if self, err := fs.ReadLink(s.fsys, "self"); err == nil && self == strconv.Itoa(os.Getpid()) {
		if f, err := s.fsys.Open("loadavg"); err == nil {
			if _, ok := f.(*os.File); ok {
				s.ownNS, s.loadavg = true, f
			} else {
				f.Close()
			}
		}
	}
}

// newPIDs reports whether a task may have been created since the last
// discovery: always, unless the last_pid field of /proc/loadavg
// ("0.00 0.01 0.05 1/123 4567") is unchanged.
func (s *Sampler) newPIDs() bool {
	if !s.ownNS {
		return true
	}
	data, err := readAt(s.loadavg, &s.buf)
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(bytes.TrimRight(data, "\n"), ' ')
	last := string(bytes.TrimSpace(data[i+1:]))
	if last == s.lastPID {
		return false
	}
	s.lastPID = last
	return true
}

// discover finds new members of the tree and new threads of its members,
// and reads them.
func (s *Sampler) discover() error {
	var errs []error
	note := func(err error) {
		if err != nil && !isGone(err) {
			errs = append(errs, err)
		}
	}
	if !s.children {
		note(s.scanTree())
	}
	// In children mode listing a process finds new members, which are
	// listed in the same sweep.
	done := make(map[int]bool, len(s.procs))
	for again := true; again; {
		again = false
		for pid := range s.procs {
			if done[pid] {
				continue
			}
			done[pid] = true
			again = true
			note(s.listThreads(pid))
		}
	}
	return errors.Join(errs...)
}

// listThreads opens and reads the threads of a tracked process not yet
// known. A process that is gone, or whose pid now names a later process, is
// dropped.
func (s *Sampler) listThreads(pid int) error {
	ps := s.procs[pid]
	if t := s.live[pid]; t == nil {
		// The leader first: its start time tells pid reuse apart.
		t = s.openThread(pid, pid)
		st, err := s.readStat(t)
		if err != nil || (ps.hasStart && ps.start != st.StartTime) {
			t.close()
			delete(s.procs, pid)
			return err
		}
		ps.start, ps.hasStart = st.StartTime, true
		s.seenPIDs[procKey{pid, st.StartTime}] = true
		s.live[pid] = t
		if err := s.readCounters(t, st); err != nil {
			return err
		}
	}
	p := strconv.Itoa(pid)
	entries, err := readDir(s.fsys, p+"/task")
	if err != nil {
		if isGone(err) {
			delete(s.procs, pid)
		}
		return err
	}
	var errs []error
	for _, e := range entries {
		tid, err := strconv.Atoi(e.Name())
		if err != nil || s.live[tid] != nil {
			continue
		}
		t := s.openThread(pid, tid)
		s.live[tid] = t
		if err := s.readThread(t); err != nil && !isGone(err) {
			errs = append(errs, err)
		}
	}
	if s.children {
		for _, e := range entries {
			data, err := readFile(s.fsys, p+"/task/"+e.Name()+"/children", &s.buf)
			if err == nil {
				err = s.addChildren(data)
			}
			if err != nil && !isGone(err) {
				errs = append(errs, fmt.Errorf("reading children of %s: %w", p, err))
			}
		}
	}
	return errors.Join(errs...)
}

// openThread returns a thread whose files are held open when fsys is procfs
// (yields *os.File, which pread can re-read from offset 0).
func (s *Sampler) openThread(pid, tid int) *thread {
	t := &thread{pid: pid, tid: tid, dir: strconv.Itoa(pid) + "/task/" + strconv.Itoa(tid) + "/"}
	for i, name := range threadFiles {
		f, err := s.fsys.Open(t.dir + name)
		if err != nil {
			break // read by path, which reports the error
		}
		if _, ok := f.(*os.File); !ok {
			f.Close()
			break
		}
		t.files[i] = f
	}
	return t
}

// readFileOf reads file i of t, through its open file or by path.
func (s *Sampler) readFileOf(t *thread, i int) ([]byte, error) {
	if f := t.files[i]; f != nil {
		return readAt(f, &s.buf)
	}
	return readFile(s.fsys, t.dir+threadFiles[i], &s.buf)
}

func (s *Sampler) readStat(t *thread) (TaskStat, error) {
	data, err := s.readFileOf(t, 0)
	if err != nil {
		return TaskStat{}, err
	}
	st, err := ParseTaskStat(data)
	if err != nil {
		return TaskStat{}, fmt.Errorf("reading %sstat: %w", t.dir, err)
	}
	return st, nil
}

// readThread reads one live thread; a thread that is gone is closed and
// forgotten as live, its last values kept.
func (s *Sampler) readThread(t *thread) error {
	st, err := s.readStat(t)
	if err == nil && t.counted && st.StartTime != t.start {
		// Read by path, the TID now names a later thread: this one is
		// gone. (An open procfs file would have failed with ESRCH.)
		err = fs.ErrNotExist
	}
	if err == nil {
		err = s.readCounters(t, st)
	}
	if isGone(err) {
		t.close()
		delete(s.live, t.tid)
	}
	return err
}

// readCounters records the stat just read and reads sched and schedstat.
func (s *Sampler) readCounters(t *thread, st TaskStat) error {
	if !t.counted {
		key := procKey{t.tid, st.StartTime}
		if old := s.threads[key]; old != nil {
			// Re-opened after a gone error on one file: carry on.
			t.sched, t.stat = old.sched, old.stat
		}
		s.threads[key] = t
		t.counted, t.start = true, st.StartTime
	}
	s.cpus.Add(st.Processor)
	var errs []error
	if data, err := s.readFileOf(t, 1); err != nil {
		errs = append(errs, err)
	} else if v, err := ParseTaskSched(data); err != nil {
		errs = append(errs, fmt.Errorf("reading %ssched: %w", t.dir, err))
	} else {
		// Counters only grow; max keeps the sums monotonic even so.
		t.sched.Migrations = max(t.sched.Migrations, v.Migrations)
		t.sched.Switches = max(t.sched.Switches, v.Switches)
		t.sched.VoluntarySwitches = max(t.sched.VoluntarySwitches, v.VoluntarySwitches)
		t.sched.InvoluntarySwitches = max(t.sched.InvoluntarySwitches, v.InvoluntarySwitches)
	}
	if data, err := s.readFileOf(t, 2); err != nil {
		errs = append(errs, err)
	} else if v, err := ParseSchedStat(data); err != nil {
		errs = append(errs, fmt.Errorf("reading %sschedstat: %w", t.dir, err))
	} else {
		t.stat.Run = max(t.stat.Run, v.Run)
		t.stat.Wait = max(t.stat.Wait, v.Wait)
		t.stat.Timeslices = max(t.stat.Timeslices, v.Timeslices)
	}
	for _, err := range errs {
		if isGone(err) {
			return err
		}
	}
	return errors.Join(errs...)
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
	entries, err := readDir(s.fsys, ".")
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
