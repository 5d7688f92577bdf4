// Package qos is corepin's QoS controller: it keeps best-effort (BE) work
// soaking up the CPU that latency-sensitive (LS) work leaves idle, and takes
// it back before the LS work feels it.
//
// # Pools
//
// Pools derives the BE pool from alloc's pools: the LS shared pool plus the
// LSR CPUs whose owners are idle, never an LSE CPU and never a reserved
// (SYSTEM) CPU. When that is empty the BE pool falls back to the reserved
// CPUs, then to the busy LSR CPUs (where BE's idle priority still yields),
// and only when every CPU is LSE does Decide refuse (ErrNoCPUs): it never
// hands BE an empty cpuset, the bug class nri-plugins shipped
// (containers/nri-plugins, balloons/topology-aware writing "" into cpuset.cpus).
//
// # Control law
//
// Decide is a pure function, Signals in, Plan out; Loop reads the signals
// through package measure and writes the plan through package enforce. The
// BE allowance A (in CPUs) is the minimum of two limits:
//
//  1. Usage budget, Koordinator's suppression rule:
//     U = N x Threshold - LSUsage, where N is the node's CPUs (every pool)
//     and LSUsage every non-BE CPU use (LS, LSR, LSE and system).
//  2. Interference cap C, an AIMD loop on what LS work feels:
//     e = max(PSI/PSIHigh, RunqWait/RunqHigh, Throttled/ThrottleHigh)
//     where PSI is the LS groups' "cpu some" stall share over the tick
//     (the avg10 quantity, at tick resolution, from cpu.pressure totals),
//     RunqWait the run-queue wait of LS threads per second of wall time
//     (schedstat field 2), Throttled the share of LS CFS periods throttled.
//     On cgroup v1 groups have no pressure file; the system-wide
//     /proc/pressure/cpu stands in only with Loop.SystemPSI, since it
//     counts BE's own waiting tasks and reads high under any saturating
//     batch. RunqWait is v1's per-LS signal: the same stall, per thread.
//     If e >= 1: C = max(Min, C x Backoff) (multiplicative decrease);
//     if e <= Low: C = C + GrowStep (additive increase); otherwise C holds.
//
// The applied level L moves towards the target T = clamp(min(U, C), Min,
// |BE pool|) asymmetrically: down at once (shrink fast), up by at most
// GrowStep per tick and only when T exceeds L by more than Hysteresis (grow
// slowly), so the level does not flap on noise around a boundary.
//
// L is applied in one of two ways (Config.Mechanism): as a cpuset of
// ceil(L) CPUs from the BE pool (idle LSR CPUs first, then the LS pool from
// its highest CPU down, so BE leaves the CPUs LS work is placed on first),
// or as a CFS quota of L x period on the whole BE pool. Both keep BE's
// cpuset non-empty (Min is at least one CPU, MinQuota at least 1 ms).
//
// CFS burst (cpu.cfs_burst_us, cpu.max.burst) is granted to a bursty LS
// group whose periods are throttled (LSBurst).
//
// # Class settings
//
// Resources is the one rule from an enforcement mode and a QoS class to
// group settings (ClassResources: in the class's own mode): LSE and LSR
// pinned to their CPUs and memory nodes, LS a CFS quota of its size, BE
// idle. `corepin run`, the agent and the NRI plugin all map a class
// through it; the plugin translates the result into the runtime's fields.
//
// # Kernel levers
//
// Probe reports, once per process and tri-state (cilium's FeatureTest), which
// of the newer levers this kernel takes: cpu.idle, the minimal weight,
// SCHED_IDLE per thread and, on EEVDF kernels (Linux 6.12+), a shorter
// requested slice set with sched_setattr(2) (sched_runtime is the slice on
// SCHED_OTHER). BestLever picks the best BE priority lever available and
// says why the others were not used. Loop.Slice asks a short slice for LS
// threads (they win the CPU sooner after waking); Loop.BESlice asks the
// kernel's minimum for BE threads in an idle group: an idle entity still
// gets a pick now and then, and holds the CPU for its whole slice, which
// on a 2-CPU machine is a few milliseconds of a service's tail. Linux 6.18
// keeps the default slice for SCHED_IDLE threads, so BESlice acts on BE
// run under cpu.idle, not under per-thread SCHED_IDLE.
package qos
