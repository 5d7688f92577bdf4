package proc

import (
	"golang.org/x/sys/unix"
)

// waitExited blocks until the child pid has exited, without reaping it
// (waitid with WNOWAIT): until it is reaped its pid, and so its process
// group id, cannot be reused, so signalling the group stays safe.
func waitExited(pid int) {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			return
		}
	}
}
