package measure

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// threadCPU returns the CPU time of the calling OS thread, or 0 if the clock
// cannot be read.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// waitExited blocks until the child pid has exited, without reaping it
// (waitid with WNOWAIT), so that its /proc files, and those of its
// descendants, can still be read. ECHILD (someone else reaped it) is not an
// error.
func waitExited(pid int) error {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		switch {
		case err == nil, errors.Is(err, unix.ECHILD):
			return nil
		case errors.Is(err, unix.EINTR):
			continue
		default:
			return fmt.Errorf("waiting for exit: %w", err)
		}
	}
}
