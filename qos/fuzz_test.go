package qos

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
)

// FuzzDecide feeds Decide arbitrary pools (as 64-bit masks split four
// ways), states and signals, NaN and infinities included, and checks the
// invariants of checkStep (checkPlan's among them: reserved CPUs outside
// the BE pool but in fallback, BE shrinking to its target and growing
// back) and that the state stays within the pool.
func FuzzDecide(f *testing.F) {
	f.Add(uint64(0x1), uint64(0x6), uint64(0x18), uint64(0xe0), 0.0, 0.0, 0.0, 0.0, int64(0), 0.0, uint64(0), false)
	f.Add(uint64(0), uint64(0xf), uint64(0), uint64(0), 5.0, 5.0, 3.0, 50.0, int64(time.Second), 1.0, uint64(0), true)
	// The LS pool holding the reserved CPU, as alloc's does without
	// strict-cpu-reservation; LS load over the budget (BE shrinks), in
	// both mechanisms; an idle node below its target (BE grows back).
	f.Add(uint64(0x1), uint64(0x6), uint64(0x18), uint64(0xff), 5.0, 5.0, 4.0, 0.0, int64(0), 0.0, uint64(0x8), false)
	f.Add(uint64(0x1), uint64(0x6), uint64(0x18), uint64(0xff), 5.0, 5.0, 4.0, 0.0, int64(0), 0.0, uint64(0x8), true)
	f.Add(uint64(0x1), uint64(0), uint64(0), uint64(0xffff), 2.0, 16.0, 0.0, 0.0, int64(0), 0.0, uint64(0), false)
	f.Fuzz(func(t *testing.T, res, lse, lsr, ls uint64, level, capv, usage, psi float64, runq int64, thr float64, busy uint64, quota bool) {
		mask := func(m uint64) cpuset.CPUSet {
			var cs []int
			for c := range 64 {
				if m&(1<<c) != 0 {
					cs = append(cs, c)
				}
			}
			return cpuset.New(cs...)
		}
		pools := alloc.Pools{Reserved: mask(res), LSE: mask(lse), LSR: mask(lsr), LS: mask(ls)}
		cfg := DefaultConfig()
		if quota {
			cfg.Mechanism = Quota
		}
		st, p, err := Decide(cfg, pools, State{Level: level, Cap: capv},
			Signals{LSUsage: usage, PSI: psi, RunqWait: time.Duration(runq), Throttled: thr, LSRBusy: mask(busy)})
		if errors.Is(err, ErrNoCPUs) {
			if !pools.Reserved.Union(pools.LSR).Union(pools.LS).Difference(pools.LSE).IsEmpty() {
				t.Fatalf("ErrNoCPUs with non-LSE CPUs in %+v", pools)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		sig := Signals{LSUsage: usage, PSI: psi, RunqWait: time.Duration(runq), Throttled: thr, LSRBusy: mask(busy)}
		checkStep(t, cfg, pools, State{Level: level, Cap: capv}, sig, st, p)
		n := float64(p.Pool.Size())
		if math.IsNaN(st.Level) || st.Level < 1 || st.Level > n || math.IsNaN(st.Cap) || st.Cap > n {
			t.Fatalf("state %+v outside [1, %v]", st, n)
		}
	})
}
