package enforce

import (
	"bytes"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corepin/corepin/internal/userfile"
)

// Real-time classes a workload's threads may run in (sched(7)): the LS
// real-time route. A waking real-time task is placed by the real-time
// class's search for the lowest-priority CPU, which finds a CPU running
// only fair (or idle) work whatever the fair class's idle-CPU scan does.
const (
	RTNormal = "normal" // the fair class: no real-time route
	RTRR     = "rr"     // SCHED_RR
	RTFIFO   = "fifo"   // SCHED_FIFO
)

// MaxRTShare bounds Resources.RTShare: the kernel's own default keeps 5%
// of every CPU from real-time tasks (kernel.sched_rt_runtime_us 950000 of
// sched_rt_period_us 1000000).
const MaxRTShare = 0.95

// rtPriority is the real-time priority of the route: the lowest, so
// every other real-time task (kernel threads such as migration and
// watchdogs, an operator's own) still comes first.
const rtPriority = 1

// ErrRealTime is wrapped by errors saying why a real-time class cannot be
// used here (privilege, throttling off).
var ErrRealTime = errors.New("real-time class unavailable")

// RealTime is the real-time class of a workload's threads; the zero value
// is none (the fair class).
type RealTime struct {
	// Policy is RTRR or RTFIFO; "" (or RTNormal) is none.
	Policy string
}

// ParseRealTime parses a --sched value: normal (or ""), rr or fifo.
func ParseRealTime(s string) (RealTime, error) {
	switch s {
	case "", RTNormal:
		return RealTime{}, nil
	case RTRR, RTFIFO:
		return RealTime{Policy: s}, nil
	}
	return RealTime{}, fmt.Errorf("%w: scheduling class %q: use normal, rr or fifo", ErrInvalidResources, s)
}

// IsZero reports whether rt is the fair class.
func (rt RealTime) IsZero() bool { return rt.Policy == "" || rt.Policy == RTNormal }

// String is the --sched value of rt.
func (rt RealTime) String() string {
	if rt.IsZero() {
		return RTNormal
	}
	return rt.Policy
}

// attr is the sched_setattr(2) argument of rt (priority 1).
func (rt RealTime) attr() unix.SchedAttr {
	a := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_NORMAL}
	switch rt.Policy {
	case RTRR:
		a.Policy, a.Priority = unix.SCHED_RR, rtPriority
	case RTFIFO:
		a.Policy, a.Priority = unix.SCHED_FIFO, rtPriority
	}
	return a
}

// rtRuntimeFile holds the kernel's real-time throttling: the time of each
// period real-time tasks may use, -1 for all of it (sched(7), "Real-time
// throttling").
const rtRuntimeFile = "/proc/sys/kernel/sched_rt_runtime_us"

// CheckRealTime reports whether this process may start a workload in rt
// (nil for the fair class): it needs CAP_SYS_NICE or an RLIMIT_RTPRIO of
// at least 1, and the kernel's real-time throttling must be on, so that a
// workload that spins cannot take its CPUs from every fair task
// (kubelet, sshd, the node's own agents). Errors wrap ErrRealTime and
// say what to change.
func CheckRealTime(rt RealTime) error {
	if rt.IsZero() {
		return nil
	}
	if data, err := userfile.Read(rtRuntimeFile, 64); err == nil {
		if v, err := strconv.ParseInt(string(bytes.TrimSpace(data)), 10, 64); err == nil && v < 0 {
			return fmt.Errorf("%w: the kernel's real-time throttling is off (%s is %d), so a %s workload that spins would take its CPUs from every other task: set it back (sysctl kernel.sched_rt_runtime_us=950000) or leave --sched out",
				ErrRealTime, rtRuntimeFile, v, rt)
		}
	}
	if hasCapSysNice() {
		return nil
	}
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_RTPRIO, &lim); err == nil && lim.Cur >= rtPriority {
		return nil
	}
	return fmt.Errorf("%w: --sched %s needs CAP_SYS_NICE (root) or a real-time priority limit of at least %d (ulimit -r is %d here): run as root, raise it in /etc/security/limits.conf (rtprio), or leave --sched out",
		ErrRealTime, rt, rtPriority, lim.Cur)
}

// hasCapSysNice reports whether CAP_SYS_NICE is in this process's
// effective set.
func hasCapSysNice() bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return false
	}
	return data[unix.CAP_SYS_NICE/32].Effective&(1<<(unix.CAP_SYS_NICE%32)) != 0
}

// TaskClass returns the scheduling class of thread tid as --sched names
// it (normal for every fair or idle policy).
func TaskClass(tid int) (string, error) {
	a, err := unix.SchedGetAttr(tid, 0)
	if err != nil {
		return "", fmt.Errorf("reading the scheduling of thread %d: %w", tid, err)
	}
	switch a.Policy {
	case unix.SCHED_RR:
		return RTRR, nil
	case unix.SCHED_FIFO:
		return RTFIFO, nil
	}
	return RTNormal, nil
}

// SetRealTime puts every thread of process pid in rt (a zero rt: nothing
// to do); threads it creates meanwhile inherit the class from their
// creators. A thread that exits meanwhile is skipped.
func SetRealTime(pid int, rt RealTime) error {
	if rt.IsZero() {
		return nil
	}
	a := rt.attr()
	return eachThread(pid, func(tid int) error {
		if err := unix.SchedSetAttr(tid, &a, 0); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("putting thread %d of pid %d in the real-time class %s: %w", tid, pid, rt, err)
		}
		return nil
	})
}

// MakeRTRoom makes room, in the cgroup v1 cpu hierarchy mounted at mount,
// for group dir (a clean absolute path below the mount; it need not exist
// yet, as a container's before its runtime makes it) to hold share of each
// CPU's real-time time: its parent and their ancestors grow to the sum of
// their children's shares (a kubelet's pod and QoS groups hold none). It
// reports whether the kernel groups real-time time there at all
// (cpu.rt_runtime_us, CONFIG_RT_GROUP_SCHED): where it does not, it does
// nothing and the kernel's own throttling bounds the class.
func MakeRTRoom(mount, dir string, share float64) (grouped bool, err error) {
	if !path.IsAbs(dir) || path.Clean(dir) != dir || dir == "/" {
		return false, fmt.Errorf("%w: group %q: want a clean absolute path below the mount", ErrInvalidResources, dir)
	}
	if !(share > 0 && share <= MaxRTShare) {
		return false, fmt.Errorf("%w: real-time share %g outside (0, %g]", ErrInvalidResources, share, MaxRTShare)
	}
	h, err := openRootFS(mount)
	if err != nil {
		return false, err
	}
	defer h.r.Close()
	rel := strings.TrimPrefix(dir, "/")
	parent := path.Dir(rel)
	if ok, err := h.exists(path.Join(parent, v1RTRuntime)); err != nil || !ok {
		return false, err
	}
	if parent == "." {
		return true, nil // below the root group, which holds the kernel's own
	}
	return true, growRT(h, parent, rel, share)
}

// RTRuntimeOf is share of the real-time period corepin's groups use, in
// microseconds (a container's OCI linux.resources.cpu.realtimeRuntime,
// with RTPeriodMicros as its realtimePeriod).
func RTRuntimeOf(share float64) int64 { return int64(rtRuntime(share) / time.Microsecond) }

// RTPeriodMicros is the real-time period corepin's groups use, in
// microseconds.
const RTPeriodMicros = uint64(rtPeriod / time.Microsecond)
