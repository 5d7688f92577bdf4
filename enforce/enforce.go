package enforce

import (
	"errors"
	"fmt"
	"time"

	"github.com/corepin/corepin/cpuset"
)

// Sentinel errors. Every error a driver returns for one of these conditions
// wraps the sentinel, so callers test with errors.Is.
var (
	// ErrNotSupported means the kernel, the mounted hierarchies or the
	// driver lack what a Resources value asks for (for example a quota on
	// the affinity-only driver, or a burst on a kernel without
	// cpu.cfs_burst_us).
	ErrNotSupported = errors.New("not supported")
	// ErrInvalidName means a group or root name failed ValidateName.
	ErrInvalidName = errors.New("invalid group name")
	// ErrInvalidResources means a Resources value is inconsistent on its
	// own, whatever the driver.
	ErrInvalidResources = errors.New("invalid resources")
)

// Driver names, as returned by Driver.Name.
const (
	NameV1       = "cgroup-v1"
	NameV2       = "cgroup-v2"
	NameAffinity = "affinity"
)

// Driver creates corepin's groups in one enforcement mechanism. All groups
// live under one corepin root per hierarchy. A Driver is safe for
// concurrent use.
type Driver interface {
	// Name is NameV1, NameV2 or NameAffinity.
	Name() string
	// Create makes the group name (see ValidateName) with resources r.
	// The group's directory carries the owning process's pid and start
	// time, so Cleanup in a later run can tell whether its owner is alive.
	Create(name string, r Resources) (Group, error)
	// Cleanup removes the groups left behind by corepin processes that
	// have died, and returns the names of the directories it removed.
	// It never kills a task: a stale group that still has tasks is left
	// in place and reported in the error.
	Cleanup() (removed []string, err error)
	// Limitations says, one sentence each, what this driver cannot
	// enforce on this machine (empty when everything in Resources is
	// enforced as documented).
	Limitations() []string
}

// Group is one enforcement group: a cgroup directory per hierarchy, or for
// the affinity-only driver a remembered set of processes.
type Group interface {
	// Name is the name given to Driver.Create.
	Name() string
	// Update makes the group's settings exactly r.
	Update(r Resources) error
	// AddProc moves every thread of process pid into the group. To
	// confine a process before it runs code of its own, use Start.
	AddProc(pid int) error
	// Stats reads the group's CPU accounting.
	Stats() (Stats, error)
	// Remove deletes the group. The group must have no tasks left
	// (cgroupfs refuses rmdir with EBUSY otherwise).
	Remove() error
}

// cgroupDirOpener is the optional ability of a cgroup v2 group to be the
// target of CLONE_INTO_CGROUP: OpenDir returns the group's directory,
// opened O_RDONLY|O_DIRECTORY, for syscall.SysProcAttr.CgroupFD. The caller
// closes it.
type cgroupDirOpener interface {
	OpenDir() (dirFile, error)
}

// Resources are the settings of one group. The zero value means: every CPU
// and memory node of corepin's root, no quota, default weight, not idle.
// Update applies a Resources value as a whole, so zero fields reset to
// those defaults.
type Resources struct {
	// CPUs the group may run on (cpuset.cpus). Empty means every CPU of
	// corepin's root group; the drivers write that set explicitly.
	CPUs cpuset.CPUSet
	// Mems are the memory (NUMA) nodes the group may allocate from
	// (cpuset.mems), in the same list format as CPUs. Empty means every
	// node of corepin's root group.
	Mems cpuset.CPUSet
	// Quota is the CPU time the group may use per Period, summed over
	// its CPUs (cpu.cfs_quota_us, cpu.max). 0 means no limit. Must be at
	// least 1ms. Truncated to whole microseconds.
	Quota time.Duration
	// Period is the CFS bandwidth period; 0 means DefaultPeriod. Between
	// 1ms and 1s.
	Period time.Duration
	// Burst is the unused quota a group may accumulate and spend above
	// Quota in a later period (cpu.cfs_burst_us, cpu.max.burst; Linux 5.14).
	// Requires a Quota; at most Quota.
	Burst time.Duration
	// Weight is the group's share of contended CPU time against its
	// siblings, on the cgroup v2 scale 1..10000 (cpu.weight); 0 means the
	// default 100. On cgroup v1 it becomes cpu.shares = weight*1024/100,
	// the kernel's own mapping (100 <-> 1024).
	Weight uint64
	// Idle makes the group SCHED_IDLE-like against its siblings
	// (cpu.idle, Linux 5.15): it runs only when they leave CPU time
	// unused. Idle and Weight are exclusive: the kernel rejects a weight
	// on an idle group.
	Idle bool
	// RTShare is the share of each CPU's time, per real-time period, the
	// group's real-time threads may use (the LS real-time route, RealTime):
	// on cgroup v1 with real-time group scheduling it becomes
	// cpu.rt_runtime_us (and corepin's root group grows to hold it), the
	// kernel throttling the group's real-time threads beyond it; elsewhere
	// the kernel's own throttling bounds them (kernel.sched_rt_runtime_us)
	// and it is not written. 0: none (a new v1 group's own default, under
	// which no real-time thread may join it). At most MaxRTShare.
	RTShare float64
	// NoLoadBalance takes the group's CPUs out of the scheduler's load
	// balancing while the group holds them, for an exclusive workload
	// whose threads stay where they were put: on cgroup v2 the group
	// becomes an isolated partition (cpuset.cpus.partition, with the CPUs
	// listed in cpuset.cpus.exclusive of every ancestor below the root on
	// Linux 6.7 and later), on cgroup v1 its cpuset.sched_load_balance is
	// 0. Where the kernel or the cgroup layout cannot do it, Create and
	// Update fail with ErrLoadBalance, the kernel's reason quoted, and
	// nothing of it stays; Update without it, Remove, and the Cleanup of
	// a dead run's group give the CPUs back. Needs CPUs; the
	// affinity-only driver refuses it (ErrNotSupported).
	//
	// There is no field for "no CFS quota": a Resources without Quota
	// writes none (cpu.cfs_quota_us -1, cpu.max "max"), as every pinned
	// group of corepin's has.
	NoLoadBalance bool
}

// Limits of Resources, from kernel/sched/core.c (tg_set_cfs_bandwidth) and
// Documentation/admin-guide/cgroup-v2.rst ("cpu.weight").
const (
	DefaultPeriod = 100 * time.Millisecond
	MinPeriod     = time.Millisecond
	MaxPeriod     = time.Second
	MinQuota      = time.Millisecond
	DefaultWeight = 100
	MaxWeight     = 10000
)

// Validate reports whether r is consistent on its own. Drivers call it
// before writing anything; an error wraps ErrInvalidResources.
func (r Resources) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidResources}, args...)...)
	}
	if r.Quota < 0 || r.Period < 0 || r.Burst < 0 {
		return bad("negative quota, period or burst")
	}
	if r.Quota != 0 && r.Quota < MinQuota {
		return bad("quota %v below %v", r.Quota, MinQuota)
	}
	if r.Period != 0 && (r.Period < MinPeriod || r.Period > MaxPeriod) {
		return bad("period %v outside [%v, %v]", r.Period, MinPeriod, MaxPeriod)
	}
	if r.Burst != 0 && r.Quota == 0 {
		return bad("burst %v without a quota", r.Burst)
	}
	if r.Burst > r.Quota {
		return bad("burst %v above quota %v", r.Burst, r.Quota)
	}
	if r.Weight > MaxWeight {
		return bad("weight %d above %d", r.Weight, MaxWeight)
	}
	if r.Idle && r.Weight != 0 {
		return bad("weight %d on an idle group", r.Weight)
	}
	if !(r.RTShare >= 0 && r.RTShare <= MaxRTShare) {
		return bad("real-time share %g outside [0, %g]", r.RTShare, MaxRTShare)
	}
	if r.NoLoadBalance && r.CPUs.IsEmpty() {
		return bad("no load balancing without cpus: name the CPUs to take out of it")
	}
	if r.Idle && r.RTShare > 0 {
		return bad("real-time share %g on an idle group", r.RTShare)
	}
	return nil
}

// period returns r.Period or DefaultPeriod.
func (r Resources) period() time.Duration {
	if r.Period == 0 {
		return DefaultPeriod
	}
	return r.Period
}

// weight returns r.Weight or DefaultWeight.
func (r Resources) weight() uint64 {
	if r.Weight == 0 {
		return DefaultWeight
	}
	return r.Weight
}

// usec formats d in whole microseconds, the unit of every CFS bandwidth file.
func usec(d time.Duration) string {
	return fmt.Sprint(int64(d / time.Microsecond))
}

// SharesFromWeight converts a cgroup v2 cpu.weight (1..10000) to cgroup v1
// cpu.shares the way the kernel relates the two (both become the task
// group's load weight; weight 100 = 1024 shares), rounded to nearest and
// clamped to the v1 range [2, 262144]. This is not runc's mapping, which
// sends weight 100 to 2597 shares.
func SharesFromWeight(w uint64) uint64 {
	s := (w*1024 + 50) / 100
	return min(max(s, 2), 262144)
}

// Stats is a group's CPU accounting. Fields a kernel does not provide stay
// zero (burst counters before Linux 5.14, throttling without
// CONFIG_CFS_BANDWIDTH).
type Stats struct {
	// Usage is the CPU time used by the group's tasks
	// (cpuacct.usage; cpu.stat usage_usec).
	Usage time.Duration
	// User and System split Usage (cpuacct.usage_user/_sys;
	// cpu.stat user_usec/system_usec).
	User, System time.Duration
	// NrPeriods counts enforcement periods in which the group ran with a
	// quota; NrThrottled those in which it ran out; ThrottledTime sums the
	// time its runnable tasks waited for the next period.
	NrPeriods, NrThrottled uint64
	ThrottledTime          time.Duration
	// NrBursts counts periods in which the group used burst; BurstTime
	// sums the CPU time used above quota (Linux 5.14).
	NrBursts  uint64
	BurstTime time.Duration
}
