package workload

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/corepin/corepin/measure"
)

// NameWakeup is the wake-placement probe's workload name.
const NameWakeup = "wakeup"

// Scheduling classes of the probe's threads (sched(7)).
const (
	ClassNormal = "normal" // SCHED_OTHER at the process's nice
	ClassRR     = "rr"     // SCHED_RR at priority 1
	ClassFIFO   = "fifo"   // SCHED_FIFO at priority 1
)

// Bounds of WakeupOptions: every count a caller hands the probe is capped.
const (
	MaxWakeupThreads = 1024
	MaxWakeupRounds  = 100000
)

// WakeupOptions configures [Wakeup].
type WakeupOptions struct {
	// Threads wake together every Period; at least 1.
	Threads int
	// Period is the time between wakes; Burn the CPU time each thread
	// uses after a wake, below Period.
	Period, Burn time.Duration
	// Rounds is how many wakes are recorded; one more, first, is not.
	Rounds int
	// Class is ClassNormal, ClassRR or ClassFIFO.
	Class string
}

// Validate reports whether o is within the probe's bounds; errors wrap
// ErrInvalid.
func (o WakeupOptions) Validate() error {
	switch {
	case o.Threads < 1 || o.Threads > MaxWakeupThreads:
		return fmt.Errorf("%w: wakeup threads %d: want 1-%d", ErrInvalid, o.Threads, MaxWakeupThreads)
	case o.Rounds < 1 || o.Rounds > MaxWakeupRounds:
		return fmt.Errorf("%w: wakeup rounds %d: want 1-%d", ErrInvalid, o.Rounds, MaxWakeupRounds)
	case o.Period < time.Millisecond || o.Period > time.Second:
		return fmt.Errorf("%w: wakeup period %v: want 1ms-1s", ErrInvalid, o.Period)
	case o.Burn <= 0 || o.Burn >= o.Period:
		return fmt.Errorf("%w: wakeup burn %v: want above 0 and below the period %v", ErrInvalid, o.Burn, o.Period)
	}
	if _, err := classAttr(o.Class); err != nil {
		return err
	}
	return nil
}

// classAttr is the sched_setattr(2) argument of class.
func classAttr(class string) (unix.SchedAttr, error) {
	a := unix.SchedAttr{Size: unix.SizeofSchedAttr}
	switch class {
	case ClassNormal, "":
		return a, nil
	case ClassRR:
		a.Policy, a.Priority = unix.SCHED_RR, 1
	case ClassFIFO:
		a.Policy, a.Priority = unix.SCHED_FIFO, 1
	default:
		return a, fmt.Errorf("%w: scheduling class %q: use normal, rr or fifo", ErrInvalid, class)
	}
	return a, nil
}

// SetClass puts the calling OS thread (the caller has locked its
// goroutine to it) in class at priority 1; normal leaves it as it is.
// Without CAP_SYS_NICE or an RLIMIT_RTPRIO of 1 a real-time class fails
// with EPERM.
func SetClass(class string) error {
	a, err := classAttr(class)
	if err != nil || a.Policy == unix.SCHED_NORMAL {
		return err
	}
	if err := unix.SchedSetAttr(0, &a, 0); err != nil {
		return fmt.Errorf("setting scheduling class %s priority 1: %w", class, err)
	}
	return nil
}

// WakeupResult is what the probe's threads saw, one row per recorded
// round and one column per thread.
type WakeupResult struct {
	Threads int    `json:"threads"`
	Class   string `json:"class"`
	// WakeCPUs[r][i] is the CPU thread i ran on right after waking in
	// round r (getcpu(2)).
	WakeCPUs [][]int `json:"wake_cpus"`
	// RunqWaitNS[r][i] is the run-queue wait thread i accrued in round r
	// (the delta of schedstat's second field), in ns.
	RunqWaitNS [][]int64 `json:"runq_wait_ns"`
	// CPUNS is the CPU time the threads used over the recorded rounds.
	CPUNS int64 `json:"cpu_ns"`
	// WallNS is the recorded rounds' wall time.
	WallNS int64 `json:"wall_ns"`
}

// Wakeup runs the wake-placement probe: opts.Threads OS threads in
// opts.Class sleep to the same instant every opts.Period (an absolute
// CLOCK_MONOTONIC timer each, as a service's workers woken by one event),
// record the CPU they wake on, burn opts.Burn of their own CPU time and
// read their run-queue wait (/proc/thread-self/schedstat). It does not
// place anything itself: where the threads land is the kernel's choice.
func Wakeup(ctx context.Context, opts WakeupOptions) (WakeupResult, error) {
	if err := opts.Validate(); err != nil {
		return WakeupResult{}, err
	}
	n, rounds := opts.Threads, opts.Rounds+1
	res := WakeupResult{Threads: n, Class: opts.Class, WakeCPUs: make([][]int, rounds), RunqWaitNS: make([][]int64, rounds)}
	for r := range rounds {
		res.WakeCPUs[r] = make([]int, n)
		res.RunqWaitNS[r] = make([]int64, n)
	}
	cpu := make([]int64, n)
	var ready, setup sync.WaitGroup
	ready.Add(n)
	setup.Add(1)
	var start unix.Timespec
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			runtime.LockOSThread() // never unlocked: the thread ends with the goroutine, its class with it
			err := SetClass(opts.Class)
			var f *os.File
			if err == nil {
				f, err = os.Open("/proc/thread-self/schedstat")
			}
			ready.Done()
			setup.Wait()
			if err != nil {
				errs[i] = err
				return
			}
			defer f.Close()
			errs[i] = probeThread(ctx, f, start, opts, i, &res, &cpu[i])
		})
	}
	ready.Wait()
	// The first wake is a period away: every thread is asleep by then.
	var now unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &now); err != nil {
		return res, fmt.Errorf("reading the clock: %w", err)
	}
	start = unix.NsecToTimespec(now.Nano() + opts.Period.Nanoseconds())
	setup.Done()
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return res, err // the threads fail alike; say it once
		}
	}
	res.WakeCPUs, res.RunqWaitNS = res.WakeCPUs[1:], res.RunqWaitNS[1:]
	res.WallNS = int64(opts.Rounds) * opts.Period.Nanoseconds()
	for _, c := range cpu {
		res.CPUNS += c
	}
	return res, ctx.Err()
}

// probeThread is one thread's rounds; it records into column i of res.
func probeThread(ctx context.Context, f *os.File, start unix.Timespec, opts WakeupOptions, i int, res *WakeupResult, cpuNS *int64) error {
	buf := make([]byte, 128)
	readWait := func() (int64, error) {
		k, err := f.ReadAt(buf, 0)
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, fmt.Errorf("reading schedstat: %w", err)
		}
		ss, err := measure.ParseSchedStat(buf[:k])
		return int64(ss.Wait), err
	}
	prev, err := readWait()
	if err != nil {
		return err
	}
	for r := range res.WakeCPUs {
		if ctx.Err() != nil {
			return nil
		}
		tick := unix.NsecToTimespec(start.Nano() + int64(r)*opts.Period.Nanoseconds())
		for {
			err := unix.ClockNanosleep(unix.CLOCK_MONOTONIC, unix.TIMER_ABSTIME, &tick, nil)
			if err == nil {
				break
			}
			if !errors.Is(err, unix.EINTR) {
				return fmt.Errorf("sleeping to the next wake: %w", err)
			}
		}
		res.WakeCPUs[r][i] = getcpu()
		used, err := burnThreadCPU(opts.Burn)
		if err != nil {
			return err
		}
		w, err := readWait()
		if err != nil {
			return err
		}
		res.RunqWaitNS[r][i] = w - prev
		prev = w
		if r > 0 {
			*cpuNS += used
		}
	}
	return nil
}

// getcpu returns the CPU the calling thread runs on (getcpu(2); -1 if
// the call fails).
func getcpu() int {
	var c uint32
	if _, _, e := unix.RawSyscall(unix.SYS_GETCPU, uintptr(unsafe.Pointer(&c)), 0, 0); e != 0 {
		return -1
	}
	return int(c)
}

// burnThreadCPU spins until the calling thread has used d of CPU time
// and returns what it used.
func burnThreadCPU(d time.Duration) (int64, error) {
	var t unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &t); err != nil {
		return 0, fmt.Errorf("reading thread CPU time: %w", err)
	}
	from, x := t.Nano(), uint64(0x9e3779b97f4a7c15)
	for {
		for range 64 {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
		}
		if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &t); err != nil {
			return 0, fmt.Errorf("reading thread CPU time: %w", err)
		}
		if t.Nano()-from >= d.Nanoseconds() {
			spinSink.Add(x)
			return t.Nano() - from, nil
		}
	}
}

// WakeupArgs returns the corepin arguments (after the binary's name) that
// run the probe with opts and print its JSON result.
func WakeupArgs(opts WakeupOptions) []string {
	return []string{"workload", NameWakeup, "--threads", strconv.Itoa(opts.Threads), "--period", opts.Period.String(),
		"--burn", opts.Burn.String(), "--rounds", strconv.Itoa(opts.Rounds), "--class", opts.Class, "-o", "json"}
}
