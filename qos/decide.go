package qos

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/enforce"
)

// ErrNoCPUs means no CPU may host best-effort work: every CPU is LSE and
// none is reserved. Decide returns it instead of an empty cpuset.
var ErrNoCPUs = errors.New("no CPU for best-effort work")

// ErrInvalidConfig means a Config value is out of range.
var ErrInvalidConfig = errors.New("invalid qos config")

// Mechanism is how the BE allowance is applied.
type Mechanism string

// Mechanisms.
const (
	// Cpuset shrinks BE's cpuset to ceil(level) CPUs.
	Cpuset Mechanism = "cpuset"
	// Quota caps BE at level x period of CPU time on its whole pool.
	Quota Mechanism = "quota"
)

// Config holds the controller's knobs. The zero value of a field means its
// default (DefaultConfig).
type Config struct {
	// Mechanism applies the level: Cpuset (default) or Quota.
	Mechanism Mechanism `yaml:"mechanism" json:"mechanism"`
	// Threshold is the share of the node's CPUs LS and BE may use
	// together before BE is suppressed (Koordinator's
	// cpuSuppressThresholdPercent / 100); default 0.65.
	Threshold float64 `yaml:"threshold" json:"threshold"`
	// Min is the least CPUs BE keeps while it has work; at least 1 in
	// cpuset mode (never an empty cpuset); default 1.
	Min float64 `yaml:"min_cpus" json:"min_cpus"`
	// GrowStep is how many CPUs the level and the interference cap may
	// grow per tick; default 0.5.
	GrowStep float64 `yaml:"grow_step" json:"grow_step"`
	// Hysteresis is how far the target must exceed the level before it
	// grows; default 0.25 CPUs.
	Hysteresis float64 `yaml:"hysteresis" json:"hysteresis"`
	// Backoff multiplies the interference cap when LS work feels BE;
	// default 0.5.
	Backoff float64 `yaml:"backoff" json:"backoff"`
	// PSIHigh is the LS "cpu some avg10" (percent) that counts as
	// interference; default 10.
	PSIHigh float64 `yaml:"psi_high" json:"psi_high"`
	// RunqHigh is the LS threads' run-queue wait per second of wall time
	// that counts as interference; default 50ms/s.
	RunqHigh time.Duration `yaml:"runq_high" json:"runq_high"`
	// ThrottleHigh is the share of LS CFS periods throttled that counts
	// as interference; default 0.1.
	ThrottleHigh float64 `yaml:"throttle_high" json:"throttle_high"`
	// Low is the interference level (a share of the high marks) below
	// which the cap grows; default 0.5.
	Low float64 `yaml:"low" json:"low"`
	// Period is BE's CFS period in quota mode; default enforce.DefaultPeriod.
	Period time.Duration `yaml:"period" json:"period"`
	// UsageOnly disables interference control (the cap stays at the pool
	// size); InterferenceOnly disables the usage budget.
	UsageOnly        bool `yaml:"usage_only" json:"usage_only"`
	InterferenceOnly bool `yaml:"interference_only" json:"interference_only"`
}

// DefaultConfig returns the defaults named on Config's fields.
func DefaultConfig() Config {
	return Config{Mechanism: Cpuset, Threshold: 0.65, Min: 1, GrowStep: 0.5, Hysteresis: 0.25, Backoff: 0.5,
		PSIHigh: 10, RunqHigh: 50 * time.Millisecond, ThrottleHigh: 0.1, Low: 0.5, Period: enforce.DefaultPeriod}
}

// WithDefaults returns c with zero fields set to DefaultConfig's.
func (c Config) WithDefaults() Config {
	d := DefaultConfig()
	c.Mechanism = cmp.Or(c.Mechanism, d.Mechanism)
	c.Threshold = cmp.Or(c.Threshold, d.Threshold)
	c.Min = cmp.Or(c.Min, d.Min)
	c.GrowStep = cmp.Or(c.GrowStep, d.GrowStep)
	c.Hysteresis = cmp.Or(c.Hysteresis, d.Hysteresis)
	c.Backoff = cmp.Or(c.Backoff, d.Backoff)
	c.PSIHigh = cmp.Or(c.PSIHigh, d.PSIHigh)
	c.RunqHigh = cmp.Or(c.RunqHigh, d.RunqHigh)
	c.ThrottleHigh = cmp.Or(c.ThrottleHigh, d.ThrottleHigh)
	c.Low = cmp.Or(c.Low, d.Low)
	c.Period = cmp.Or(c.Period, d.Period)
	return c
}

// Validate reports whether c (after WithDefaults) is in range; an error
// wraps ErrInvalidConfig and names the YAML key to fix.
func (c Config) Validate() error {
	bad := func(key string, v any, want string) error {
		return fmt.Errorf("%w: %s %v: %s", ErrInvalidConfig, key, v, want)
	}
	finite := func(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
	switch {
	case c.Mechanism != Cpuset && c.Mechanism != Quota:
		return bad("mechanism", c.Mechanism, "use cpuset or quota")
	case !finite(c.Threshold) || c.Threshold <= 0 || c.Threshold > 1:
		return bad("threshold", c.Threshold, "must be in (0, 1]")
	case !finite(c.Min) || c.Min < 1 || c.Min > 4096:
		return bad("min_cpus", c.Min, "must be between 1 and 4096")
	case !finite(c.GrowStep) || c.GrowStep <= 0 || c.GrowStep > 4096:
		return bad("grow_step", c.GrowStep, "must be in (0, 4096]")
	case !finite(c.Hysteresis) || c.Hysteresis < 0 || c.Hysteresis > 4096:
		return bad("hysteresis", c.Hysteresis, "must be in [0, 4096]")
	case !finite(c.Backoff) || c.Backoff <= 0 || c.Backoff >= 1:
		return bad("backoff", c.Backoff, "must be in (0, 1)")
	case !finite(c.PSIHigh) || c.PSIHigh <= 0 || c.PSIHigh > 100:
		return bad("psi_high", c.PSIHigh, "must be in (0, 100]")
	case c.RunqHigh <= 0 || c.RunqHigh > time.Second:
		return bad("runq_high", c.RunqHigh, "must be in (0, 1s]")
	case !finite(c.ThrottleHigh) || c.ThrottleHigh <= 0 || c.ThrottleHigh > 1:
		return bad("throttle_high", c.ThrottleHigh, "must be in (0, 1]")
	case !finite(c.Low) || c.Low <= 0 || c.Low >= 1:
		return bad("low", c.Low, "must be in (0, 1)")
	case c.Period < enforce.MinPeriod || c.Period > enforce.MaxPeriod:
		return bad("period", c.Period, fmt.Sprintf("must be in [%v, %v]", enforce.MinPeriod, enforce.MaxPeriod))
	case c.UsageOnly && c.InterferenceOnly:
		return bad("usage_only", true, "and interference_only exclude each other")
	}
	return nil
}

// Signals are what the controller sees in one tick. Rates are over the
// tick.
type Signals struct {
	// LSUsage is the CPUs every non-BE workload used (LS, LSR, LSE and
	// system), in CPUs.
	LSUsage float64
	// LSRBusy are the LSR CPUs whose owners ran; the others are lent to BE.
	LSRBusy cpuset.CPUSet
	// PSI is "cpu some avg10" (percent) of the LS groups or the system.
	PSI float64
	// RunqWait is the LS threads' run-queue wait per second of wall time.
	RunqWait time.Duration
	// Throttled is the share of LS CFS periods that were throttled.
	Throttled float64
}

// State is what the controller carries between ticks. The zero value
// starts BE at its whole pool.
type State struct {
	// Level is BE's allowance in CPUs (0 before the first tick).
	Level float64 `json:"level"`
	// Cap is the interference cap in CPUs (0 before the first tick).
	Cap float64 `json:"cap"`
}

// Action kinds, as counted in metrics.
const (
	ActShrink   = "shrink"   // the level went down
	ActGrow     = "grow"     // the level went up
	ActHold     = "hold"     // nothing changed
	ActBackoff  = "backoff"  // interference cut the cap
	ActFallback = "fallback" // the BE pool was empty: reserved or busy LSR CPUs
)

// Plan is what Decide wants applied to the BE groups.
type Plan struct {
	// Pool is the BE pool this tick (never empty).
	Pool cpuset.CPUSet
	// CPUs is BE's cpuset (never empty, never an LSE CPU).
	CPUs cpuset.CPUSet
	// Quota is BE's CFS quota per Period (0: none).
	Quota, Period time.Duration
	// Suppression is 1 - Level/|Pool|: 0 when BE has its whole pool.
	Suppression float64
	// Actions are the kinds of what happened, for metrics.
	Actions []string
}

// Resources returns base with the plan's cpuset and quota; base's other
// settings (idle, weight) stay. A quota on an idle group is valid.
func (p Plan) Resources(base enforce.Resources) enforce.Resources {
	base.CPUs = p.CPUs
	base.Quota, base.Period, base.Burst = p.Quota, p.Period, 0
	if p.Quota == 0 {
		base.Period = 0
	}
	return base
}

// Pool returns the BE pool of pools given the busy LSR CPUs: the LS pool
// plus the idle LSR CPUs, never an LSE CPU. When that is empty (fallback),
// BE falls back to the reserved CPUs, and without those to the busy LSR
// CPUs, where its idle priority still yields to their owners; it is empty
// only when every CPU is LSE.
func Pool(pools alloc.Pools, lsrBusy cpuset.CPUSet) (pool cpuset.CPUSet, fallback bool) {
	pool = pools.LS.Union(pools.LSR.Difference(lsrBusy)).Difference(pools.LSE).Difference(pools.Reserved)
	if pool.IsEmpty() {
		pool = pools.Reserved.Difference(pools.LSE)
		if pool.IsEmpty() {
			pool = pools.LSR.Difference(pools.LSE) // busy, but BE is idle there
		}
		return pool, true
	}
	return pool, false
}

// Decide is the control law of the package documentation: from the pools,
// the previous state and this tick's signals, the next state and the plan.
// It is pure and deterministic. cfg must be valid (Validate after
// WithDefaults).
func Decide(cfg Config, pools alloc.Pools, st State, sig Signals) (State, Plan, error) {
	pool, fallback := Pool(pools, sig.LSRBusy)
	if pool.IsEmpty() {
		return st, Plan{}, fmt.Errorf("deciding the BE pool: %w: every CPU is LSE", ErrNoCPUs)
	}
	size := float64(pool.Size())
	lo := min(cfg.Min, size)
	var acts []string
	if fallback {
		acts = append(acts, ActFallback)
	}
	prev := st.Level
	if !(st.Level > 0) { // first tick, or a NaN
		st.Level = size
	}
	st.Level = clampF(st.Level, lo, size)
	if !(st.Cap > 0) {
		st.Cap = size
	}
	st.Cap = clampF(st.Cap, lo, size)
	target := size
	if !cfg.InterferenceOnly {
		n := float64(pools.Reserved.Union(pools.LSE).Union(pools.LSR).Union(pools.LS).Size())
		target = n*cfg.Threshold - clampF(sig.LSUsage, 0, n)
	}
	if !cfg.UsageOnly {
		e := max(sig.PSI/cfg.PSIHigh, float64(sig.RunqWait)/float64(cfg.RunqHigh), sig.Throttled/cfg.ThrottleHigh)
		switch {
		case math.IsNaN(e) || e >= 1:
			st.Cap = max(lo, st.Cap*cfg.Backoff)
			acts = append(acts, ActBackoff)
		case e <= cfg.Low:
			st.Cap = min(size, st.Cap+cfg.GrowStep)
		}
		target = min(target, st.Cap)
	}
	target = clampF(target, lo, size)
	switch {
	case target < st.Level:
		st.Level = target
	case target > st.Level+cfg.Hysteresis:
		st.Level = min(target, st.Level+cfg.GrowStep)
	}
	switch {
	case prev > 0 && st.Level < prev:
		acts = append(acts, ActShrink)
	case prev > 0 && st.Level > prev:
		acts = append(acts, ActGrow)
	default:
		acts = append(acts, ActHold)
	}
	p := Plan{Pool: pool, CPUs: pool, Suppression: 1 - st.Level/size, Actions: acts}
	if cfg.Mechanism == Quota {
		if st.Level < size {
			p.Period = cfg.Period
			p.Quota = max(time.Duration(st.Level*float64(cfg.Period)), enforce.MinQuota)
		}
	} else {
		p.CPUs = pick(pool, pools.LSR, int(math.Ceil(st.Level)))
	}
	return st, p, nil
}

// pick returns n CPUs of pool: lent LSR CPUs first, then the others from
// the highest down. n is clamped to [1, |pool|].
func pick(pool, lsr cpuset.CPUSet, n int) cpuset.CPUSet {
	n = min(max(n, 1), pool.Size())
	order := append(pool.Intersection(lsr).List(), reversed(pool.Difference(lsr).List())...)
	return cpuset.New(order[:n]...)
}

func reversed(xs []int) []int { slices.Reverse(xs); return xs }

func clampF(v, lo, hi float64) float64 {
	if math.IsNaN(v) {
		return lo
	}
	return min(max(v, lo), hi)
}

// LSBurst returns an LS group's settings with CFS burst (cpu.cfs_burst_us,
// cpu.max.burst) granted while its periods are throttled: burst = quota,
// the most the kernel takes. Without a quota, or unthrottled, r is
// returned unchanged. It reports whether it granted one.
func LSBurst(r enforce.Resources, throttled float64) (enforce.Resources, bool) {
	if r.Quota == 0 || throttled <= 0 || r.Burst == r.Quota {
		return r, false
	}
	r.Burst = r.Quota
	return r, true
}
