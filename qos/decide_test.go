package qos

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/enforce"
)

var setCmp = cmp.Comparer(cpuset.CPUSet.Equals)

// eightCPUs: CPU 0 reserved, 1-2 LSE, 3-4 LSR, 5-7 the LS pool.
var eightCPUs = alloc.Pools{Reserved: cpuset.New(0), LSE: cpuset.New(1, 2), LSR: cpuset.New(3, 4), LS: cpuset.New(5, 6, 7)}

func TestPool(t *testing.T) {
	tests := []struct {
		name         string
		pools        alloc.Pools
		busy         cpuset.CPUSet
		want         cpuset.CPUSet
		wantFallback bool
	}{
		{name: "LS pool plus idle LSR", pools: eightCPUs, want: cpuset.New(3, 4, 5, 6, 7)},
		{name: "busy LSR CPU withheld", pools: eightCPUs, busy: cpuset.New(3), want: cpuset.New(4, 5, 6, 7)},
		{name: "every LSR busy, no LS, no reserved: busy LSR", pools: alloc.Pools{LSE: cpuset.New(0), LSR: cpuset.New(1, 2)}, busy: cpuset.New(1, 2), want: cpuset.New(1, 2), wantFallback: true},
		{name: "every CPU LSE but reserved: fallback", pools: alloc.Pools{Reserved: cpuset.New(0), LSE: cpuset.Range(1, 3)}, want: cpuset.New(0), wantFallback: true},
		{name: "LS pool overlapping LSE never yields LSE", pools: alloc.Pools{LSE: cpuset.New(1), LS: cpuset.New(1, 2)}, want: cpuset.New(2)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, fb := Pool(tc.pools, tc.busy)
			if !got.Equals(tc.want) || fb != tc.wantFallback {
				t.Errorf("Pool() = %s, %v; want %s, %v", got, fb, tc.want, tc.wantFallback)
			}
		})
	}
}

func TestDecide(t *testing.T) {
	cfg := DefaultConfig()
	quota := cfg
	quota.Mechanism = Quota
	usage := cfg
	usage.UsageOnly = true
	// eightCPUs: N = 8, threshold 0.65: budget = 5.2 - LS usage; pool 5.
	tests := []struct {
		name      string
		cfg       Config
		st        State
		sig       Signals
		wantState State
		wantCPUs  cpuset.CPUSet
		wantQuota time.Duration
		wantActs  []string
	}{
		{name: "first tick, idle LS: whole pool", cfg: cfg, sig: Signals{LSUsage: 0},
			wantState: State{Level: 5, Cap: 5}, wantCPUs: cpuset.New(3, 4, 5, 6, 7), wantActs: []string{ActHold}},
		{name: "LS load shrinks at once (Koordinator budget)", cfg: usage, st: State{Level: 5, Cap: 5}, sig: Signals{LSUsage: 3.2},
			wantState: State{Level: 2, Cap: 5}, wantCPUs: cpuset.New(3, 4), wantActs: []string{ActShrink}},
		{name: "budget below min keeps one CPU", cfg: usage, st: State{Level: 5, Cap: 5}, sig: Signals{LSUsage: 8},
			wantState: State{Level: 1, Cap: 5}, wantCPUs: cpuset.New(3), wantActs: []string{ActShrink}},
		{name: "grows by one step only", cfg: usage, st: State{Level: 1, Cap: 5}, sig: Signals{LSUsage: 0},
			wantState: State{Level: 1.5, Cap: 5}, wantCPUs: cpuset.New(3, 4), wantActs: []string{ActGrow}},
		{name: "hysteresis holds a small gap", cfg: usage, st: State{Level: 2, Cap: 5}, sig: Signals{LSUsage: 3},
			wantState: State{Level: 2, Cap: 5}, wantCPUs: cpuset.New(3, 4), wantActs: []string{ActHold}},
		{name: "PSI over the mark halves the cap", cfg: cfg, st: State{Level: 5, Cap: 5}, sig: Signals{PSI: 20},
			wantState: State{Level: 2.5, Cap: 2.5}, wantCPUs: cpuset.New(3, 4, 7), wantActs: []string{ActBackoff, ActShrink}},
		{name: "run-queue wait backs off", cfg: cfg, st: State{Level: 2, Cap: 2}, sig: Signals{RunqWait: 60 * time.Millisecond},
			wantState: State{Level: 1, Cap: 1}, wantCPUs: cpuset.New(3), wantActs: []string{ActBackoff, ActShrink}},
		{name: "throttling backs off", cfg: cfg, st: State{Level: 4, Cap: 4}, sig: Signals{Throttled: 0.5},
			wantState: State{Level: 2, Cap: 2}, wantCPUs: cpuset.New(3, 4), wantActs: []string{ActBackoff, ActShrink}},
		{name: "calm signals grow the cap, level follows slowly", cfg: cfg, st: State{Level: 1, Cap: 1}, sig: Signals{PSI: 1},
			wantState: State{Level: 1.5, Cap: 1.5}, wantCPUs: cpuset.New(3, 4), wantActs: []string{ActGrow}},
		{name: "middling signals hold the cap", cfg: cfg, st: State{Level: 2, Cap: 2}, sig: Signals{PSI: 7},
			wantState: State{Level: 2, Cap: 2}, wantCPUs: cpuset.New(3, 4), wantActs: []string{ActHold}},
		{name: "quota mode caps time on the whole pool", cfg: quota, st: State{Level: 5, Cap: 5}, sig: Signals{LSUsage: 2.7},
			wantState: State{Level: 2.5, Cap: 5}, wantCPUs: cpuset.New(3, 4, 5, 6, 7), wantQuota: 250 * time.Millisecond, wantActs: []string{ActShrink}},
		{name: "busy LSR CPU leaves the pool", cfg: usage, st: State{Level: 4, Cap: 5}, sig: Signals{LSRBusy: cpuset.New(3, 4)},
			wantState: State{Level: 3, Cap: 3}, wantCPUs: cpuset.New(5, 6, 7), wantActs: []string{ActShrink}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, p, err := Decide(tc.cfg, eightCPUs, tc.st, tc.sig)
			if err != nil {
				t.Fatalf("Decide() error: %v", err)
			}
			if diff := cmp.Diff(tc.wantState, st); diff != "" {
				t.Errorf("Decide() state (-want +got):\n%s", diff)
			}
			if !p.CPUs.Equals(tc.wantCPUs) || p.Quota != tc.wantQuota {
				t.Errorf("Decide() = cpus %s quota %v, want %s %v", p.CPUs, p.Quota, tc.wantCPUs, tc.wantQuota)
			}
			if diff := cmp.Diff(tc.wantActs, p.Actions); diff != "" {
				t.Errorf("Decide() actions (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecideNoCPUs(t *testing.T) {
	_, _, err := Decide(DefaultConfig(), alloc.Pools{LSE: cpuset.Range(0, 3)}, State{}, Signals{})
	if !errors.Is(err, ErrNoCPUs) {
		t.Fatalf("Decide(all LSE) error = %v, want ErrNoCPUs", err)
	}
}

func TestPlanResources(t *testing.T) {
	base := enforce.Resources{CPUs: cpuset.Range(0, 7), Idle: true}
	p := Plan{CPUs: cpuset.New(5), Quota: 30 * time.Millisecond, Period: enforce.DefaultPeriod}
	got := p.Resources(base)
	want := enforce.Resources{CPUs: cpuset.New(5), Idle: true, Quota: 30 * time.Millisecond, Period: enforce.DefaultPeriod}
	if diff := cmp.Diff(want, got, setCmp); diff != "" {
		t.Errorf("Resources() (-want +got):\n%s", diff)
	}
	if err := got.Validate(); err != nil {
		t.Errorf("Resources() = %+v, invalid: %v", got, err)
	}
}

func TestLSBurst(t *testing.T) {
	r := enforce.Resources{Quota: 50 * time.Millisecond}
	if got, ok := LSBurst(r, 0.2); !ok || got.Burst != r.Quota || got.Validate() != nil {
		t.Errorf("LSBurst(throttled) = %+v, %v; want burst = quota", got, ok)
	}
	if _, ok := LSBurst(r, 0); ok {
		t.Errorf("LSBurst(unthrottled) granted a burst")
	}
	if _, ok := LSBurst(enforce.Resources{}, 1); ok {
		t.Errorf("LSBurst(no quota) granted a burst")
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		mut  func(*Config)
		ok   bool
	}{
		{name: "defaults", mut: func(*Config) {}, ok: true},
		{name: "unknown mechanism", mut: func(c *Config) { c.Mechanism = "freeze" }},
		{name: "threshold above 1", mut: func(c *Config) { c.Threshold = 1.5 }},
		{name: "backoff 1 never backs off", mut: func(c *Config) { c.Backoff = 1 }},
		{name: "min below one CPU", mut: func(c *Config) { c.Min = 0.5 }},
		{name: "both onlys", mut: func(c *Config) { c.UsageOnly, c.InterferenceOnly = true, true }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.mut(&c)
			err := c.Validate()
			if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrInvalidConfig)) {
				t.Errorf("Validate() = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

// checkPlan asserts the two invariants: BE's cpuset is never empty and
// never holds an LSE (or, outside fallback, reserved) CPU; a quota is
// never below the kernel minimum.
func checkPlan(t *testing.T, pools alloc.Pools, p Plan) {
	t.Helper()
	if p.CPUs.IsEmpty() {
		t.Fatalf("BE cpuset empty: pools %+v", pools)
	}
	if p.CPUs.Intersects(pools.LSE) {
		t.Fatalf("BE cpuset %s touches LSE %s", p.CPUs, pools.LSE)
	}
	if !p.CPUs.IsSubsetOf(p.Pool) {
		t.Fatalf("BE cpuset %s outside its pool %s", p.CPUs, p.Pool)
	}
	if p.Quota != 0 && p.Quota < enforce.MinQuota {
		t.Fatalf("BE quota %v below %v", p.Quota, enforce.MinQuota)
	}
	if err := p.Resources(enforce.Resources{Idle: true}).Validate(); err != nil {
		t.Fatalf("plan resources invalid: %v", err)
	}
}

// modelPool is the BE pool the package documentation promises, written
// apart from Pool: the LS pool plus the idle LSR CPUs, less LSE and
// reserved CPUs; when that is empty (fallback), the reserved CPUs, then
// the busy LSR CPUs, never an LSE CPU.
func modelPool(pools alloc.Pools, lsrBusy cpuset.CPUSet) (pool cpuset.CPUSet, fallback bool) {
	var b cpuset.Builder
	for c := range pools.LS.Union(pools.LSR).All() {
		if (pools.LS.Contains(c) || !lsrBusy.Contains(c)) && !pools.LSE.Contains(c) && !pools.Reserved.Contains(c) {
			b.Add(c)
		}
	}
	if pool = b.Result(); !pool.IsEmpty() {
		return pool, false
	}
	if pool = pools.Reserved.Difference(pools.LSE); pool.IsEmpty() {
		pool = pools.LSR.Difference(pools.LSE)
	}
	return pool, true
}

// checkStep asserts, beyond checkPlan, what one Decide from prev under
// sig must give on pools (cfg with its defaults):
//   - the BE pool is modelPool's: reserved CPUs join it only in fallback,
//     and it loses the CPUs LSE or busy LSR owners take;
//   - BE shrinks at once: its level is never above its target, the usage
//     budget N x Threshold - LSUsage and the interference cap, clamped to
//     [Min, |pool|];
//   - BE grows back: with the target more than Hysteresis above the level,
//     the level rises by GrowStep or to the target;
//   - the plan applies the level: ceil(level) CPUs in cpuset mode, a quota
//     of level x period in quota mode (none at the whole pool).
func checkStep(t *testing.T, cfg Config, pools alloc.Pools, prev State, sig Signals, next State, p Plan) {
	t.Helper()
	checkPlan(t, pools, p)
	want, fallback := modelPool(pools, sig.LSRBusy)
	if !p.Pool.Equals(want) {
		t.Fatalf("BE pool %s, want %s (pools %+v, busy LSR %s)", p.Pool, want, pools, sig.LSRBusy)
	}
	if !fallback && p.CPUs.Union(p.Pool).Intersects(pools.Reserved) {
		t.Fatalf("BE cpuset %s (pool %s) holds reserved CPUs %s outside fallback", p.CPUs, p.Pool, pools.Reserved)
	}
	if fallback != slices.Contains(p.Actions, ActFallback) {
		t.Fatalf("fallback %v, actions %v", fallback, p.Actions)
	}
	const eps = 1e-9
	size := float64(want.Size())
	lo := min(cfg.Min, size)
	clamp := func(v, lo, hi float64) float64 {
		if math.IsNaN(v) {
			return lo
		}
		return min(max(v, lo), hi)
	}
	target := size
	if !cfg.InterferenceOnly {
		n := float64(pools.Reserved.Union(pools.LSE).Union(pools.LSR).Union(pools.LS).Size())
		target = n*cfg.Threshold - clamp(sig.LSUsage, 0, n)
	}
	if !cfg.UsageOnly {
		target = min(target, next.Cap)
	}
	target = clamp(target, lo, size)
	if next.Level > target+eps {
		t.Fatalf("BE level %v above its target %v (usage %v, cap %v, pool %d): BE did not shrink", next.Level, target, sig.LSUsage, next.Cap, want.Size())
	}
	from := prev.Level
	if !(from > 0) {
		from = size
	}
	from = clamp(from, lo, size)
	if target > from+cfg.Hysteresis+eps && next.Level < min(target, from+cfg.GrowStep)-eps {
		t.Fatalf("BE level %v -> %v with target %v: BE did not grow back", from, next.Level, target)
	}
	if cfg.Mechanism == Quota {
		wantQuota := time.Duration(0)
		if next.Level < size {
			wantQuota = max(time.Duration(next.Level*float64(cfg.Period)), enforce.MinQuota)
		}
		if p.Quota != wantQuota || !p.CPUs.Equals(want) {
			t.Fatalf("quota plan %v on %s for level %v of %s, want %v on the whole pool", p.Quota, p.CPUs, next.Level, want, wantQuota)
		}
	} else if n := min(max(int(math.Ceil(next.Level)), 1), want.Size()); p.CPUs.Size() != n || p.Quota != 0 {
		t.Fatalf("cpuset plan %s (quota %v) for level %v, want %d CPUs", p.CPUs, p.Quota, next.Level, n)
	}
}

// randomPools splits n CPUs at random into reserved, LSE, LSR and LS. As
// alloc's pools do without strict-cpu-reservation, the LS pool holds the
// reserved CPUs half the time.
func randomPools(r *rand.Rand, n int) alloc.Pools {
	var b [4][]int
	for c := range n {
		k := r.IntN(4)
		b[k] = append(b[k], c)
	}
	p := alloc.Pools{Reserved: cpuset.New(b[0]...), LSE: cpuset.New(b[1]...), LSR: cpuset.New(b[2]...), LS: cpuset.New(b[3]...)}
	if r.IntN(2) == 0 {
		p.LS = p.LS.Union(p.Reserved)
	}
	return p
}

// TestChurnInvariants drives the controller through random LS load churn:
// pools change as LSE/LSR workloads come and go, signals jump, for both
// mechanisms. At every step BE's cpuset is non-empty and LSE-free, and
// checkStep holds: reserved CPUs stay out of the BE pool outside
// fallback, BE shrinks as LS load and exclusive work grow and grows back
// as they go. Each run ends calm (the exclusive work gone, no LS load, no
// interference): BE must be back on its whole pool within the steps
// GrowStep allows.
func TestChurnInvariants(t *testing.T) {
	for _, mech := range []Mechanism{Cpuset, Quota} {
		t.Run(string(mech), func(t *testing.T) {
			r := rand.New(rand.NewPCG(11, uint64(len(mech))))
			cfg := DefaultConfig()
			cfg.Mechanism = mech
			for run := range 200 {
				n := 1 + r.IntN(16)
				pools := randomPools(r, n)
				var st State
				for step := range 100 {
					if r.IntN(10) == 0 { // a workload came or went
						pools = randomPools(r, n)
					}
					sig := Signals{LSUsage: r.Float64() * float64(n) * 1.2, PSI: r.Float64() * 40,
						RunqWait: time.Duration(r.Int64N(int64(200 * time.Millisecond))), Throttled: r.Float64() * 0.3,
						LSRBusy: randomSubset(r, pools.LSR)}
					next, p, err := Decide(cfg, pools, st, sig)
					if errors.Is(err, ErrNoCPUs) {
						if !pools.Reserved.Union(pools.LSR).Union(pools.LS).Difference(pools.LSE).IsEmpty() {
							t.Fatalf("run %d step %d: ErrNoCPUs with non-LSE CPUs in %+v", run, step, pools)
						}
						continue
					}
					if err != nil {
						t.Fatalf("run %d step %d: %v", run, step, err)
					}
					checkStep(t, cfg, pools, st, sig, next, p)
					if next.Level > st.Level && st.Level > 0 && next.Level-st.Level > cfg.GrowStep+1e-9 && float64(p.Pool.Size()) >= st.Level {
						t.Fatalf("run %d step %d: level grew %v -> %v, more than one step", run, step, st.Level, next.Level)
					}
					st = next
				}
				// Calm: the LSE and LSR work is gone, LS is idle.
				calm := alloc.Pools{Reserved: pools.Reserved, LS: pools.LS.Union(pools.LSE).Union(pools.LSR)}
				if calm.LS.IsEmpty() {
					continue
				}
				calmPool, _ := modelPool(calm, cpuset.CPUSet{})
				whole := float64(calmPool.Size())
				steps := 2 + int(math.Ceil(whole/cfg.GrowStep))*2 // the cap grows first, then the level
				var p Plan
				for step := range steps {
					next, plan, err := Decide(cfg, calm, st, Signals{})
					if err != nil {
						t.Fatalf("run %d calm step %d: %v", run, step, err)
					}
					checkStep(t, cfg, calm, st, Signals{}, next, plan)
					st, p = next, plan
				}
				// The whole pool, or what the usage budget of an idle node
				// (N x Threshold) leaves of it, up to the hysteresis.
				all := float64(calm.Reserved.Union(calm.LS).Size())
				wantLevel := max(min(whole, all*cfg.Threshold), min(cfg.Min, whole))
				if st.Level < wantLevel-cfg.Hysteresis-1e-9 {
					t.Fatalf("run %d: after %d calm steps BE level %v, want %v (pool %s): BE did not grow back", run, steps, st.Level, wantLevel, p.Pool)
				}
			}
		})
	}
}

func randomSubset(r *rand.Rand, s cpuset.CPUSet) cpuset.CPUSet {
	var out []int
	for c := range s.All() {
		if r.IntN(2) == 0 {
			out = append(out, c)
		}
	}
	return cpuset.New(out...)
}
