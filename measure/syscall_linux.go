package measure

import (
	"fmt"
	"syscall"
	"time"
	"unsafe"
)

// The standard syscall package lacks clock_gettime and waitid; these two
// calls are small enough not to justify golang.org/x/sys, whose current
// release would raise the module's go directive.

const (
	clockThreadCPUTimeID = 3 // CLOCK_THREAD_CPUTIME_ID, <linux/time.h>
	pPID                 = 1 // P_PID, <linux/wait.h>
	wExited              = 0x4
	wNoWait              = 0x1000000
)

// threadCPU returns the CPU time of the calling OS thread, or 0 if the clock
// cannot be read.
func threadCPU() time.Duration {
	var ts syscall.Timespec
	_, _, e := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTimeID, uintptr(unsafe.Pointer(&ts)), 0)
	if e != 0 {
		return 0
	}
	return time.Duration(ts.Nano())
}

// waitExited blocks until the child pid has exited, without reaping it
// (waitid with WNOWAIT), so that its /proc files, and those of its
// descendants, can still be read. ECHILD (someone else reaped it) is not an
// error.
func waitExited(pid int) error {
	var info [128]byte // siginfo_t
	for {
		_, _, e := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid), uintptr(unsafe.Pointer(&info[0])), wExited|wNoWait, 0, 0)
		switch {
		case e == 0, e == syscall.ECHILD:
			return nil
		case e == syscall.EINTR:
			continue
		default:
			return fmt.Errorf("waiting for exit: %w", e)
		}
	}
}
