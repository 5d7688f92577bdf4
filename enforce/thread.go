package enforce

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// Requested-slice bounds of EEVDF (Linux 6.12, kernel/sched/syscalls.c:
// __setscheduler_params clamps sched_runtime of a fair task to
// [0.1ms, 100ms]). See sched(7), "SCHED_OTHER" and sched_setattr(2).
const (
	MinSlice = 100 * time.Microsecond
	MaxSlice = 100 * time.Millisecond
)

// ThreadSched is a per-thread scheduling setting, applied without cgroups
// by SetThreadSched.
type ThreadSched struct {
	// Idle puts the thread in SCHED_IDLE: it runs only when no normal
	// thread on its CPU wants to (sched(7)).
	Idle bool
	// Slice asks EEVDF for this slice (sched_attr.sched_runtime, Linux
	// 6.12+; a SCHED_OTHER thread keeps its nice value). A shorter slice
	// gets a latency-sensitive thread on a CPU sooner after it wakes; on a
	// best-effort thread it bounds how long it runs once picked, and a
	// group's entity takes its children's shortest slice where the kernel
	// propagates it. Older kernels ignore it, and so does 6.18 for a
	// SCHED_IDLE thread; TaskSlice reads back what was kept.
	Slice time.Duration
}

// Validate reports whether s is consistent; an error wraps
// ErrInvalidResources.
func (s ThreadSched) Validate() error {
	if s.Slice != 0 && (s.Slice < MinSlice || s.Slice > MaxSlice) {
		return fmt.Errorf("%w: slice %v outside [%v, %v]", ErrInvalidResources, s.Slice, MinSlice, MaxSlice)
	}
	return nil
}

// SetTaskSched applies s to the one thread tid (0: the calling thread).
// The zero ThreadSched resets the thread to SCHED_OTHER with the kernel's
// default slice, keeping its nice value.
func SetTaskSched(tid int, s ThreadSched) error {
	if err := s.Validate(); err != nil {
		return err
	}
	cur, err := unix.SchedGetAttr(tid, 0)
	if err != nil {
		return fmt.Errorf("reading the scheduling of thread %d: %w", tid, err)
	}
	attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_NORMAL, Nice: cur.Nice, Runtime: uint64(s.Slice)}
	if s.Idle {
		attr = unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_IDLE, Runtime: uint64(s.Slice)}
	}
	if err := unix.SchedSetAttr(tid, &attr, 0); err != nil {
		return fmt.Errorf("setting the scheduling of thread %d: %w", tid, err)
	}
	return nil
}

// TaskSlice returns the requested slice the kernel holds for thread tid
// (sched_getattr's sched_runtime; 0 on kernels without custom slices, for
// which the field of a fair task reads 0) and whether it is SCHED_IDLE.
func TaskSlice(tid int) (slice time.Duration, idle bool, err error) {
	a, err := unix.SchedGetAttr(tid, 0)
	if err != nil {
		return 0, false, fmt.Errorf("reading the scheduling of thread %d: %w", tid, err)
	}
	return time.Duration(a.Runtime), a.Policy == unix.SCHED_IDLE, nil
}

// SetThreadSched applies s to every thread of process pid (eachThread:
// threads created meanwhile inherit from their creator). A thread that
// exits meanwhile is skipped.
func SetThreadSched(pid int, s ThreadSched) error {
	if err := s.Validate(); err != nil {
		return err
	}
	return eachThread(pid, func(tid int) error {
		if err := SetTaskSched(tid, s); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("scheduling pid %d: %w", pid, err)
		}
		return nil
	})
}

// KernelAtLeast reports whether the running kernel is at least
// major.minor (uname(2)); false when the release does not parse.
func KernelAtLeast(major, minor int) bool {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return false
	}
	return kernelAtLeast(unix.ByteSliceToString(u.Release[:]), major, minor)
}

// SetThreadSlice requests slice (see ThreadSched.Slice; 0: the kernel
// default) for every thread of process pid, keeping each thread's policy
// (SCHED_OTHER or SCHED_IDLE) and nice value. A thread that exits
// meanwhile is skipped.
func SetThreadSlice(pid int, slice time.Duration) error {
	if err := (ThreadSched{Slice: slice}).Validate(); err != nil {
		return err
	}
	return eachThread(pid, func(tid int) error {
		cur, err := unix.SchedGetAttr(tid, 0)
		if errors.Is(err, unix.ESRCH) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading the scheduling of thread %d: %w", tid, err)
		}
		if cur.Policy != unix.SCHED_NORMAL && cur.Policy != unix.SCHED_IDLE && cur.Policy != unix.SCHED_BATCH {
			return nil // a real-time thread has no fair slice
		}
		attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: cur.Policy, Nice: cur.Nice, Runtime: uint64(slice)}
		if err := unix.SchedSetAttr(tid, &attr, 0); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("setting the slice of thread %d: %w", tid, err)
		}
		return nil
	})
}
