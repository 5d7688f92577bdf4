package enforce

import (
	"errors"
	"fmt"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// NiceLimit is what this process may do to the nice values of its own
// threads (sched(7), "Privileges and resource limits"): raising a nice
// (less priority) is always allowed; lowering one needs CAP_SYS_NICE, or
// stays within what RLIMIT_NICE allows (a nice of 20 - rlim_cur at the
// lowest, setrlimit(2)).
type NiceLimit struct {
	// Own is the nice value this process's threads run at (the caller's:
	// `nice -n 5 corepin ...` gives 5).
	Own int
	// Lowest is the lowest nice a SCHED_OTHER thread of this process may
	// be given: -20 with CAP_SYS_NICE. Above 19 when none may, as for a
	// process under SCHED_IDLE that may not leave it.
	Lowest int
}

// Clamp returns the nice a thread asked to run at nice gets: nice itself
// where it is allowed, else the lowest allowed (at most this process's own
// nice, which a thread it starts keeps).
func (l NiceLimit) Clamp(nice int) int { return max(nice, l.Lowest) }

// Note says in one sentence what the limit keeps, or "" when this process
// may give any nice.
func (l NiceLimit) Note() string {
	switch {
	case l.Lowest <= -20:
		return ""
	case l.Lowest > 19:
		return fmt.Sprintf("this process may not set SCHED_OTHER on its threads (it runs at nice %d under another policy, without CAP_SYS_NICE): its groups keep its scheduling where a Weight asks for another", l.Own)
	case l.Lowest >= l.Own:
		return fmt.Sprintf("this process runs at nice %d and may not lower it (no CAP_SYS_NICE, RLIMIT_NICE too low): its groups keep nice %d where a Weight asks for less (a Weight of 100 is nice 0)", l.Own, l.Lowest)
	}
	return fmt.Sprintf("a nice below %d needs CAP_SYS_NICE (RLIMIT_NICE allows %d): groups whose Weight asks for less run at nice %d", l.Lowest, l.Lowest, l.Lowest)
}

// ProbeNice returns this process's NiceLimit, probed once per process on a
// throwaway OS thread (a goroutine locked to it that exits locked, so the
// runtime discards the thread), set back as it was: it tries each nice
// from -20 up until one is accepted, so the answer holds whatever grants the right (a
// capability in this user namespace or not, RLIMIT_NICE). A thread
// whose scheduling cannot be read is an error.
var ProbeNice = sync.OnceValues(func() (NiceLimit, error) {
	type answer struct {
		l   NiceLimit
		err error
	}
	ch := make(chan answer, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		cur, err := unix.SchedGetAttr(0, 0)
		if err != nil {
			ch <- answer{err: fmt.Errorf("reading own scheduling: %w", err)}
			return
		}
		l := NiceLimit{Own: int(cur.Nice), Lowest: 20}
		for n := -20; n <= 19; n++ {
			attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_NORMAL, Nice: int32(n)}
			err := unix.SchedSetAttr(0, &attr, 0)
			if err == nil {
				l.Lowest = n
				// Back to what it was (a raise, always allowed): the
				// thread may be the main one, which the runtime wedges
				// rather than ends, and whose nice ps(1) shows.
				if err := unix.SchedSetAttr(0, cur, 0); err != nil {
					ch <- answer{err: fmt.Errorf("restoring own scheduling: %w", err)}
					return
				}
				break
			}
			if !denied(err) {
				ch <- answer{err: fmt.Errorf("probing nice %d: %w", n, err)}
				return
			}
		}
		ch <- answer{l: l}
	}()
	a := <-ch
	return a.l, a.err
})

// denied reports whether err is the kernel refusing a scheduling change
// for want of privilege (EPERM; EACCES from a security module).
func denied(err error) bool { return errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) }
