package workload

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// SpinOptions configures [Spin].
type SpinOptions struct {
	// Duration is how long every thread spins. Exactly one of Duration and
	// Ops must be positive.
	Duration time.Duration
	// Ops, if positive, is a fixed amount of work instead: the threads take
	// ops from one shared count until Ops are done, so Wall measures how much
	// CPU the job got.
	Ops int64
	// Threads is the number of spinning threads; it must be positive.
	Threads int
	// Nice, if not 0, is the nice value (-20..19) of every spinning
	// thread. Linux keeps nice per thread (setpriority(2), BUGS), so each
	// spinning thread sets its own before it spins: the batch of the nice
	// study, without nice(1) in front of corepin.
	Nice int
}

// SpinResult is what one [Spin] run did.
type SpinResult struct {
	Ops       int64         // operations completed, all threads together
	OpsPerSec float64       // Ops / Wall
	Threads   int           // threads that ran
	Wall      time.Duration // from starting the first thread to the last one stopping
	PerThread []int64       // operations per thread, in thread order
	// NiceKept is set when SpinOptions.Nice was below the nice the
	// spinning threads started at and this process may not lower a nice
	// (no CAP_SYS_NICE, as for a user at nice 5 asking for 2): the
	// threads kept their nice, Nice, and spun all the same (issue 17 §2).
	NiceKept bool
	Nice     int // with NiceKept: the nice the threads kept
}

// spinRounds is the work of one op: this many dependent rounds of an
// xorshift64 step folded into a multiply-rotate accumulator, about 10 µs
// on a 2020s x86 core. It is fixed so ops from two runs of the same binary
// are the same work.
const spinRounds = 4096

// spinSink keeps the compiler from proving the kernel's result unused.
var spinSink atomic.Uint64

// spinOp runs one op from state x and returns the next state.
func spinOp(x uint64) uint64 {
	acc := x
	for range spinRounds {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		acc = bits.RotateLeft64(acc+x*0x9e3779b97f4a7c15, 31)
	}
	return acc | 1 // xorshift state must never be 0
}

// Spin runs a CPU-bound integer kernel on opts.Threads goroutines, each
// locked to its own OS thread, for opts.Duration or until opts.Ops are done,
// and counts the fixed-size ops they complete. It touches no memory beyond registers, so it measures
// CPU time actually received, not memory bandwidth. Threads beyond
// GOMAXPROCS wait for the Go scheduler rather than the kernel's; the CLI
// raises GOMAXPROCS to the thread count, Spin does not change it.
//
// If ctx ends first, Spin stops early and returns what was done so far with
// ctx's error.
func Spin(ctx context.Context, opts SpinOptions) (SpinResult, error) {
	if (opts.Duration > 0) == (opts.Ops > 0) || opts.Duration < 0 || opts.Ops < 0 {
		return SpinResult{}, fmt.Errorf("%w: spin for %v or %d ops: want exactly one of them, positive", ErrInvalid, opts.Duration, opts.Ops)
	}
	if opts.Nice < -20 || opts.Nice > 19 {
		return SpinResult{}, fmt.Errorf("%w: spin nice %d: want -20..19", ErrInvalid, opts.Nice)
	}
	if opts.Threads < 1 {
		return SpinResult{}, fmt.Errorf("%w: spin threads %d: want >= 1", ErrInvalid, opts.Threads)
	}
	var stop, cancelled atomic.Bool
	var claimed atomic.Int64 // ops taken so far, with opts.Ops
	per := make([]int64, opts.Threads)
	var wg sync.WaitGroup
	var niceErr atomic.Pointer[error]
	var kept atomic.Pointer[int] // the nice a thread kept (SpinResult.NiceKept)
	start := time.Now()
	if opts.Duration > 0 {
		timer := time.AfterFunc(opts.Duration, func() { stop.Store(true) })
		defer timer.Stop()
	}
	done, watched := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-ctx.Done():
			// Only an early stop is a cancellation.
			if !stop.Swap(true) {
				cancelled.Store(true)
			}
		case <-done:
		}
	}()
	for i := range opts.Threads {
		wg.Go(func() {
			runtime.LockOSThread()
			if opts.Nice != 0 {
				// who 0 is the calling thread; the thread is not unlocked,
				// so it ends with this goroutine and its nice with it.
				err := syscall.Setpriority(syscall.PRIO_PROCESS, 0, opts.Nice)
				if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) {
					// Lowering a nice needs the right; keep this one.
					if n, gerr := syscall.Getpriority(syscall.PRIO_PROCESS, 0); gerr == nil {
						nice := 20 - n // the raw syscall's value is 20 - nice
						kept.CompareAndSwap(nil, &nice)
						err = nil
					}
				}
				if err != nil {
					niceErr.CompareAndSwap(nil, &err)
				}
			} else {
				defer runtime.UnlockOSThread()
			}
			x := uint64(i)*0x2545f4914f6cdd1d + 0x853c49e6748fea9b
			var n int64
			for !stop.Load() {
				if opts.Ops > 0 && claimed.Add(1) > opts.Ops {
					break
				}
				x = spinOp(x)
				n++
			}
			per[i] = n
			spinSink.Add(x)
		})
	}
	wg.Wait()
	wall := time.Since(start)
	close(done)
	<-watched
	res := SpinResult{Threads: opts.Threads, Wall: wall, PerThread: per}
	if k := kept.Load(); k != nil {
		res.NiceKept, res.Nice = true, *k
	}
	if err := niceErr.Load(); err != nil {
		return res, fmt.Errorf("setting nice %d: %w", opts.Nice, *err)
	}
	for _, n := range per {
		res.Ops += n
	}
	if wall > 0 {
		res.OpsPerSec = float64(res.Ops) / wall.Seconds()
	}
	if cancelled.Load() {
		return res, fmt.Errorf("spinning: %w", context.Cause(ctx))
	}
	return res, nil
}
