package runner

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"strconv"
	"strings"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/enforce"
	"github.com/corepin/corepin/proc"
	"github.com/corepin/corepin/qos"
)

// ErrSpec is wrapped by every error about an invalid batch description.
var ErrSpec = errors.New("invalid batch")

// Mode is how a job's CPU share is enforced: qos's modes, whose rule
// (qos.Resources) maps a mode and a class to group settings; runner keeps
// the names for its callers.
type Mode = qos.Mode

// Enforcement modes (qos.ModePinned and the others).
const (
	Pinned    = qos.ModePinned
	Quota     = qos.ModeQuota
	Burst     = qos.ModeBurst
	Unbounded = qos.ModeUnbounded
)

// Modes lists the modes in the order the CLI documents them.
var Modes = []Mode{Pinned, Quota, Burst, Unbounded}

// ParseMode reads a mode name.
func ParseMode(s string) (Mode, error) {
	for _, m := range Modes {
		if string(m) == s {
			return m, nil
		}
	}
	return "", fmt.Errorf("%w: unknown mode %q: use pinned, quota, burst or unbounded", ErrSpec, s)
}

// QoS is alloc's quality-of-service class (after Koordinator); runner
// keeps the name for its callers.
type QoS = alloc.QoS

// QoS classes runnable as a batch. SYSTEM is the reserved pool and is not
// given to batches.
const (
	LSE = alloc.LSE // exclusive CPUs, shared with nobody
	LSR = alloc.LSR // bound CPUs; best-effort work may borrow them when idle
	LS  = alloc.LS  // the shared pool, bounded by quota or weight
	BE  = alloc.BE  // best effort: idle-priority, never delays the others
)

// Bounds of a Spec, so that no flag can exhaust the machine corepin runs
// on before a job starts.
const (
	// MaxJobs bounds the jobs of one batch (and lines of a jobs file).
	MaxJobs = 100_000
	// MaxThreadsPerCPU bounds Threads at this many per CPU of the machine.
	MaxThreadsPerCPU = 16
)

// ParseQoS reads a QoS class name runnable as a batch; "" means the
// mode's default.
func ParseQoS(s string) (QoS, error) {
	switch q := QoS(strings.ToUpper(s)); q {
	case LSE, LSR, LS, BE, "":
		return q, nil
	}
	return "", fmt.Errorf("%w: unknown qos %q: use LSE, LSR, LS or BE", ErrSpec, s)
}

// Spec describes a batch: one command per job, how many run at once, and
// the CPUs each gets.
type Spec struct {
	// Commands holds one argv per job; the placeholders {job}, {cpus},
	// {cpuset} and {threads} are expanded when the job starts.
	Commands [][]string
	// Concurrency is how many jobs run at once (>= 1).
	Concurrency int
	// CPUs is K, the CPUs per job; fractional only for quota, burst and
	// unbounded modes.
	CPUs float64
	Mode Mode
	// QoS defaults to LSE for pinned jobs and LS otherwise.
	QoS QoS
	// Threads is the thread count given to each job (placeholder and
	// environment); 0 means auto: the job's CPUs, rounded up.
	Threads int
	// MachineCPUs is the CPUs the batch may use (the pool); it bounds CPUs,
	// Threads and pinned Concurrency x CPUs. 0 means runtime.NumCPU().
	MachineCPUs int
	// RealTime is the LS real-time route: every thread of each job runs in
	// this class (SCHED_RR or SCHED_FIFO at priority 1), bounded to the
	// job's CPUs' worth of each period where the kernel groups real-time
	// time (RTShare). Only for QoS LS on the shared pool.
	RealTime enforce.RealTime
	// NoLoadBalance takes each pinned job's CPUs out of the scheduler's
	// load balancing while it runs (enforce.Resources.NoLoadBalance; a
	// job the kernel or cgroup layout cannot give it fails with the
	// reason). Only for QoS LSE and LSR.
	NoLoadBalance bool
}

// RTShare is the real-time share of each CPU of the pool a job of spec
// may use (qos.RTShare of the CPUs the job may use in its mode: K, or 2K
// for burst); 0 without the real-time route.
func (s Spec) RTShare(pool int) float64 {
	if s.RealTime.IsZero() {
		return 0
	}
	k := s.CPUs
	if s.Mode == Burst {
		k *= 2
	}
	return qos.RTShare(k, pool)
}

// Normalize fills defaults and checks the spec, returning a copy. Errors
// wrap ErrSpec and say what to change. The mode follows from the QoS when
// only the QoS is given: LSE and LSR are pinned, LS is quota (the shared
// pool bounded by its share), BE is unbounded (weight only, idle).
// Each command's program must exist (found in PATH) unless its name holds
// a placeholder.
func (s Spec) Normalize() (Spec, error) {
	bad := func(format string, args ...any) (Spec, error) {
		return Spec{}, fmt.Errorf("%w: "+format, append([]any{ErrSpec}, args...)...)
	}
	if len(s.Commands) == 0 {
		return bad("no jobs: give a command after -- or a --jobs-file")
	}
	if len(s.Commands) > MaxJobs {
		return bad("%d jobs: at most %d per batch", len(s.Commands), MaxJobs)
	}
	if s.MachineCPUs <= 0 {
		s.MachineCPUs = runtime.NumCPU()
	}
	found := map[string]bool{}
	for i, c := range s.Commands {
		if len(c) == 0 || c[0] == "" {
			return bad("job %d has an empty command", i)
		}
		for _, a := range c {
			if strings.IndexByte(a, 0) >= 0 {
				return bad("job %d: argument %q holds a NUL byte", i, a)
			}
		}
		if found[c[0]] || strings.Contains(c[0], "{") {
			continue
		}
		if _, err := proc.LookPath(c[0]); err != nil {
			return bad("job %d: %w: install it or give its full path", i, err)
		}
		found[c[0]] = true
	}
	if s.Concurrency < 1 || s.Concurrency > MaxJobs {
		return bad("concurrency %d: must be between 1 and %d", s.Concurrency, MaxJobs)
	}
	if s.CPUs <= 0 || math.IsNaN(s.CPUs) || math.IsInf(s.CPUs, 0) {
		return bad("cpus per job %v: must be a positive number", s.CPUs)
	}
	if s.CPUs > float64(s.MachineCPUs) {
		return bad("cpus per job %v: this machine allows corepin %d CPUs: use --cpus %d or fewer", s.CPUs, s.MachineCPUs, s.MachineCPUs)
	}
	if s.QoS != "" {
		if _, err := ParseQoS(string(s.QoS)); err != nil {
			return Spec{}, err
		}
	}
	if s.Mode == "" {
		s.Mode = qos.ClassMode(s.QoS)
	}
	if _, err := ParseMode(string(s.Mode)); err != nil {
		return Spec{}, err
	}
	if s.Mode == Pinned && s.CPUs != math.Trunc(s.CPUs) {
		return bad("pinned jobs get whole CPUs, not %v: use --cpus %v, or --mode quota for a fractional share", s.CPUs, math.Ceil(s.CPUs))
	}
	if (s.Mode == Quota || s.Mode == Burst) && s.CPUs < qos.MinQuotaCPUs {
		return bad("a quota of %v CPUs is below the kernel's minimum of %v: use --cpus %v or more, or --mode unbounded", s.CPUs, qos.MinQuotaCPUs, qos.MinQuotaCPUs)
	}
	if s.Mode == Pinned && float64(s.Concurrency)*s.CPUs > float64(s.MachineCPUs) {
		return bad("%d pinned jobs at once x %v CPUs need %v CPUs, this machine allows corepin %d: use --concurrency %d or fewer, or fewer --cpus",
			s.Concurrency, s.CPUs, float64(s.Concurrency)*s.CPUs, s.MachineCPUs, max(1, int(float64(s.MachineCPUs)/s.CPUs)))
	}
	if s.QoS == "" {
		s.QoS = LS
		if s.Mode == Pinned {
			s.QoS = LSE
		}
	}
	switch {
	case (s.QoS == LSE || s.QoS == LSR) && s.Mode != Pinned:
		return bad("qos %s needs its own CPUs: use --mode pinned (or --qos LS for a shared pool)", s.QoS)
	case (s.QoS == LS || s.QoS == BE) && s.Mode == Pinned:
		return bad("qos %s runs on the shared pool, not pinned CPUs: drop --mode pinned (or use --mode quota, burst or unbounded)", s.QoS)
	}
	if s.NoLoadBalance && s.QoS != LSE && s.QoS != LSR {
		return bad("no load balancing applies to qos LSE or LSR only: it takes CPUs of the job's own out of the scheduler's balancing; qos %s shares its CPUs", s.QoS)
	}
	if !s.RealTime.IsZero() {
		if _, err := enforce.ParseRealTime(s.RealTime.Policy); err != nil {
			return bad("%v", err)
		}
		if s.QoS != LS {
			return bad("--sched %s is the real-time route of LS work on the shared pool, beside BE work; qos %s: use --qos LS (LSE and LSR jobs have CPUs of their own, a BE job must never preempt others)",
				s.RealTime, s.QoS)
		}
	}
	if maxT := MaxThreadsPerCPU * s.MachineCPUs; s.Threads < 0 || s.Threads > maxT {
		return bad("threads %d: must be auto or between 1 and %d (%d per CPU of this machine)", s.Threads, maxT, MaxThreadsPerCPU)
	}
	return s, nil
}

// ThreadsFor returns the thread count of a job given ncpus CPUs.
func (s Spec) ThreadsFor(ncpus float64) int {
	if s.Threads > 0 {
		return s.Threads
	}
	return max(1, int(math.Ceil(ncpus)))
}

// ParseThreads reads --threads: "auto" (0) or a positive integer.
func ParseThreads(v string) (int, error) {
	if v == "auto" || v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%w: threads %q: use auto or a positive integer", ErrSpec, v)
	}
	return n, nil
}

// Expand replaces the placeholders in argv.
func Expand(argv []string, job int, cpus float64, set string, threads int) []string {
	r := strings.NewReplacer(
		"{job}", strconv.Itoa(job),
		"{cpus}", strconv.FormatFloat(cpus, 'f', -1, 64),
		"{cpuset}", set,
		"{threads}", strconv.Itoa(threads),
	)
	out := make([]string, len(argv))
	for i, a := range argv {
		out[i] = r.Replace(a)
	}
	return out
}

// ThreadEnv returns the environment variables that size common runtimes'
// thread pools to n.
func ThreadEnv(n int) []string {
	v := strconv.Itoa(n)
	return []string{
		"COREPIN_THREADS=" + v,
		"OMP_NUM_THREADS=" + v,
		"GOMAXPROCS=" + v,
		"MKL_NUM_THREADS=" + v,
		"OPENBLAS_NUM_THREADS=" + v,
		"NUMEXPR_NUM_THREADS=" + v,
		"RAYON_NUM_THREADS=" + v,
		"TBB_NUM_THREADS=" + v,
	}
}
