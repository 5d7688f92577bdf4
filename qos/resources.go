package qos

import (
	"math"
	"time"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/enforce"
)

// Mode is how a workload's CPU share is enforced (the concurrency
// studies' terms).
type Mode string

// Enforcement modes.
const (
	// ModePinned gives each job an exclusive cpuset of K CPUs from the allocator.
	ModePinned Mode = "pinned"
	// ModeQuota time-slices jobs over the shared pool with a CFS quota of K CPUs.
	ModeQuota Mode = "quota"
	// ModeBurst is ModeQuota with twice the quota: short bursts above K are allowed.
	ModeBurst Mode = "burst"
	// ModeUnbounded shares the pool by weight only (proportional to K).
	ModeUnbounded Mode = "unbounded"
)

// The smallest quota share: a quota of K x the default period must reach
// enforce.MinQuota (1 ms of 100 ms).
const (
	// MinQuotaCPUs is the smallest K of the quota and burst modes (and of
	// an LS workload).
	MinQuotaCPUs = float64(enforce.MinQuota) / float64(enforce.DefaultPeriod)
	// MinQuotaMilliCPUs is MinQuotaCPUs in milli-CPUs (10), the unit of
	// alloc's requests.
	MinQuotaMilliCPUs = int64(1000 * enforce.MinQuota / enforce.DefaultPeriod)
)

// Resources is the one mapping from an enforcement mode and a QoS class to
// group settings, for a workload given k CPUs on cpus (its exclusive set
// when pinned, the shared pool otherwise) with memory nodes mems:
//
//   - pinned: cpuset = cpus, mems = mems, no quota, default weight;
//   - quota: quota = k x period; burst: quota = 2k x period;
//   - unbounded: no quota, weight = 100 x k (clamped to 1..10000);
//   - BE, whatever the mode: idle (cpu.idle, SCHED_IDLE without cgroups)
//     and no weight, since the kernel takes no weight on an idle group.
//
// A quota is rounded to the nanosecond and never falls below
// enforce.MinQuota. period 0 means enforce.DefaultPeriod. `corepin run`,
// the agent and the NRI plugin all map a class through it (the plugin
// translates the result into the runtime's fields).
func Resources(mode Mode, q alloc.QoS, k float64, cpus, mems cpuset.CPUSet, period time.Duration) enforce.Resources {
	if period == 0 {
		period = enforce.DefaultPeriod
	}
	res := enforce.Resources{CPUs: cpus}
	switch mode {
	case ModePinned:
		res.Mems = mems
	case ModeQuota:
		res.Period = period
		res.Quota = max(time.Duration(math.Round(k*float64(period))), enforce.MinQuota)
	case ModeBurst:
		res.Period = period
		res.Quota = max(time.Duration(math.Round(2*k*float64(period))), enforce.MinQuota)
	case ModeUnbounded:
		res.Weight = uint64(math.Min(enforce.MaxWeight, math.Max(1, math.Round(k*enforce.DefaultWeight))))
	}
	if q == alloc.BE {
		res.Weight = 0
		res.Idle = true
	}
	return res
}

// ClassMode is the enforcement mode a QoS class gets when none is asked
// for: BE unbounded (idle), LS quota, the bound classes (SYSTEM, LSE, LSR)
// pinned.
func ClassMode(q alloc.QoS) Mode {
	switch q {
	case alloc.BE:
		return ModeUnbounded
	case alloc.LS:
		return ModeQuota
	default:
		return ModePinned
	}
}

// ClassResources is Resources in q's own mode (ClassMode) at the default
// period: the settings of a workload of class q given k CPUs, on cpus (its
// bound set, or the pool its class draws from) with memory nodes mems.
func ClassResources(q alloc.QoS, k float64, cpus, mems cpuset.CPUSet) enforce.Resources {
	return Resources(ClassMode(q), q, k, cpus, mems, 0)
}

// MaxRTShare bounds a workload's real-time share of each CPU (the LS
// real-time route): at least a tenth of every CPU stays with fair work
// (the node's system work), even for a workload as large as its pool.
const MaxRTShare = 0.9

// RTShare is the real-time share of each CPU of a pool of pool CPUs that
// an LS workload of k CPUs may use: k over the pool's size, at most
// MaxRTShare. Spread over the pool it is the workload's CPUs' worth of
// time, as its quota would be for fair threads (which the quota of a
// real-time thread is not). 0 for an empty pool.
func RTShare(k float64, pool int) float64 {
	if pool < 1 || !(k > 0) {
		return 0
	}
	return min(k/float64(pool), MaxRTShare)
}
