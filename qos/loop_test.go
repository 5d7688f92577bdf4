package qos

import (
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/enforce"
)

// recGroup is an enforce.Group that records every Update.
type recGroup struct {
	name  string
	mu    sync.Mutex
	ups   []enforce.Resources
	stats enforce.Stats
}

func (g *recGroup) Name() string { return g.name }
func (g *recGroup) Update(r enforce.Resources) error {
	if err := r.Validate(); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.ups = append(g.ups, r)
	return nil
}
func (g *recGroup) AddProc(int) error             { return nil }
func (g *recGroup) Stats() (enforce.Stats, error) { return g.stats, nil }
func (g *recGroup) Remove() error                 { return nil }

func TestSignals(t *testing.T) {
	t0 := time.Unix(1000, 0)
	lsr := &recGroup{name: "lsr"}
	a := sample{at: t0, busy: 10 * time.Second, be: map[string]time.Duration{"be": 4 * time.Second},
		wait: map[int]time.Duration{7: time.Second, 8: time.Second}, periods: map[string]uint64{"ls": 100}, throttled: map[string]uint64{"ls": 10},
		psi: map[string]time.Duration{"ls": time.Second}, lsrBusy: map[string]time.Duration{"lsr": 0}}
	// pid 8 exited and pid 9 started with an hour of wait behind it, a
	// BE group came with an hour of use: neither counts.
	b := sample{at: t0.Add(time.Second), busy: 11500 * time.Millisecond, be: map[string]time.Duration{"be": 5 * time.Second, "new-be": time.Hour},
		wait: map[int]time.Duration{7: 1100 * time.Millisecond, 9: time.Hour}, periods: map[string]uint64{"ls": 110}, throttled: map[string]uint64{"ls": 12},
		psi: map[string]time.Duration{"ls": 1200 * time.Millisecond}, lsrBusy: map[string]time.Duration{"lsr": 500 * time.Millisecond}}
	got := signals(a, b, []Member{{Group: lsr, CPUs: cpuset.New(3), LSR: true}})
	want := Signals{LSUsage: 0.5, RunqWait: 100 * time.Millisecond, Throttled: 0.2, PSI: 20, LSRBusy: cpuset.New(3)}
	if !got.LSRBusy.Equals(want.LSRBusy) || got.RunqWait != want.RunqWait || !near(got.LSUsage, want.LSUsage) ||
		!near(got.Throttled, want.Throttled) || !near(got.PSI, want.PSI) {
		t.Errorf("signals() = %+v, want %+v", got, want)
	}
	if z := signals(sample{}, b, nil); z.LSUsage != 0 || z.PSI != 0 {
		t.Errorf("signals(first sample) = %+v, want zero", z)
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

// TestLoopChurnInvariants runs the real loop (real /proc counters) with
// recording BE and LS groups, fresh for each mechanism, while LSE and LSR
// workloads come and go at random. After every step: what BE was written
// is the plan (non-empty, LSE-free), and checkStep holds on the tick's
// pools and signals (reserved CPUs outside the BE pool but in fallback,
// BE shrinking to its target and growing back); a throttled tick grants
// the LS group its burst, in quota mode as in cpuset mode.
func TestLoopChurnInvariants(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var mu sync.Mutex
	for _, mech := range []Mechanism{Cpuset, Quota} {
		// As alloc's pools without strict-cpu-reservation: the LS pool
		// holds the reserved CPU.
		pools := alloc.Pools{Reserved: cpuset.New(0), LS: cpuset.Range(0, 7)}
		be := []*recGroup{{name: "be-1"}, {name: "be-2"}}
		ls := &recGroup{name: "ls"}
		lsRes := enforce.Resources{Quota: 50 * time.Millisecond}
		base := enforce.Resources{Idle: true}
		l := &Loop{Config: Config{Mechanism: mech}, Proc: os.DirFS("/proc"),
			Pools: func() alloc.Pools { mu.Lock(); defer mu.Unlock(); return pools },
			BE: func() ([]enforce.Group, enforce.Resources) {
				return []enforce.Group{be[0], be[1]}, base
			},
			LS: func() []Member {
				return []Member{{Group: ls, Resources: lsRes}}
			},
			Burst: true,
		}
		cfg := l.Config.WithDefaults()
		var prev State
		for step := range 300 {
			mu.Lock()
			if r.IntN(5) == 0 { // an LSE/LSR workload came or went
				lse := cpuset.New()
				lsr := cpuset.New()
				for c := 1; c < 8; c++ {
					switch r.IntN(3) {
					case 0:
						lse = lse.Union(cpuset.New(c))
					case 1:
						lsr = lsr.Union(cpuset.New(c))
					}
				}
				pools = alloc.Pools{Reserved: cpuset.New(0), LSE: lse, LSR: lsr, LS: cpuset.Range(0, 7).Difference(lse).Difference(lsr)}
			}
			p := pools
			mu.Unlock()
			ls.stats.NrPeriods += 10
			ls.stats.NrThrottled += uint64(r.IntN(3))
			lsUps := len(ls.ups)
			rep := l.Step()
			if rep.Err != nil {
				t.Fatalf("%s step %d: %v", mech, step, rep.Err)
			}
			for _, g := range be {
				u := g.ups[len(g.ups)-1]
				if u.CPUs.IsEmpty() || u.CPUs.Intersects(p.LSE) {
					t.Fatalf("%s step %d: BE cpuset %q with LSE %s", mech, step, u.CPUs, p.LSE)
				}
				if !u.Idle {
					t.Fatalf("%s step %d: BE lost its idle base: %+v", mech, step, u)
				}
				if want := rep.Plan.Resources(base); !u.CPUs.Equals(want.CPUs) || u.Quota != want.Quota || u.Period != want.Period {
					t.Fatalf("%s step %d: BE written %+v, the plan is %+v", mech, step, u, want)
				}
			}
			checkStep(t, cfg, p, prev, rep.Signals, rep.State, rep.Plan)
			prev = rep.State
			bursts := ls.ups[lsUps:]
			if rep.Signals.Throttled > 0 {
				if len(bursts) != 1 || bursts[0].Burst != lsRes.Quota || rep.Bursts != 1 {
					t.Fatalf("%s step %d: LS throttled %v, written %+v (%d bursts reported), want one burst of %v",
						mech, step, rep.Signals.Throttled, bursts, rep.Bursts, lsRes.Quota)
				}
			} else if len(bursts) != 0 || rep.Bursts != 0 {
				t.Fatalf("%s step %d: LS unthrottled, written %+v", mech, step, bursts)
			}
		}
		if len(ls.ups) == 0 {
			t.Errorf("%s: throttled LS never got a burst", mech)
		}
	}
}
