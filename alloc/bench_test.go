package alloc

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/topology"
)

// benchShape is the reference machine: 2 sockets x 64 cores x 2
// threads, 8 NUMA nodes (4 per socket), 2 L3 groups per node.
var benchShape = topology.Shape{Sockets: 2, NodesPerSocket: 4, L3PerNode: 2, CoresPerL3: 8, ThreadsPerCore: 2}

// benchOccupancy holds half the CPUs, chosen at random with a fixed seed,
// in groups of 4 (32 workloads).
func benchOccupancy(topo *topology.Topology) []cpuset.CPUSet { return randomOccupancy(topo, 7) }

// randomOccupancy holds half the CPUs, chosen at random from seed, in
// groups of 4.
func randomOccupancy(topo *topology.Topology, seed uint64) []cpuset.CPUSet {
	rng := rand.New(rand.NewPCG(seed, 7))
	cpus := topo.Online().List()
	rng.Shuffle(len(cpus), func(i, j int) { cpus[i], cpus[j] = cpus[j], cpus[i] })
	half := cpus[:len(cpus)/2]
	var out []cpuset.CPUSet
	for i := 0; i < len(half); i += 4 {
		out = append(out, cpuset.New(half[i:i+4]...))
	}
	return out
}

// benchSizes is the fixed sequence of request sizes every engine decides.
func benchSizes(n int) []int {
	rng := rand.New(rand.NewPCG(11, 11))
	out := make([]int, n)
	for i := range out {
		out[i] = 1 + rng.IntN(16)
	}
	return out
}

func benchState(b *testing.B, topo *topology.Topology, policy Policy, extra int) *State {
	b.Helper()
	s, err := NewState(topo, NodeSettings{Policy: policy})
	if err != nil {
		b.Fatal(err)
	}
	for i, set := range benchOccupancy(topo) {
		if err := s.Assign(Assignment{ID: fmt.Sprintf("busy-%d", i), CPUs: set}); err != nil {
			b.Fatal(err)
		}
	}
	// Extra LS workloads: many assignments that no exclusive decision needs
	// to look at, to show a decision's cost does not grow with them.
	for i := range extra {
		if err := s.Assign(Assignment{ID: fmt.Sprintf("ls-%d", i), QoS: LS, MilliCPUs: 1}); err != nil {
			b.Fatal(err)
		}
	}
	return s
}

// runDecisions allocates and releases each size in turn, timing Allocate
// alone, and reports p50 and p99 per decision over all timed decisions.
func runDecisions(b *testing.B, s *State) { runSizes(b, s, benchSizes(1024)) }

func runSizes(b *testing.B, s *State, sizes []int) {
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		r := Request{ID: "bench", CPUs: sizes[i%len(sizes)]}
		t0 := time.Now()
		_, err := s.Allocate(r)
		lat = append(lat, time.Since(t0))
		if err != nil {
			b.Fatalf("Allocate(%d): %v", r.CPUs, err)
		}
		if err := s.Release("bench"); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
}

// BenchmarkDecision is one placement decision (plus its release) on the
// reference machine at 50% random occupancy.
func BenchmarkDecision(b *testing.B) {
	topo := topology.MustSynthetic(benchShape)
	for _, policy := range []Policy{PolicyCorepin, PolicyKubelet} {
		b.Run(string(policy), func(b *testing.B) { runDecisions(b, benchState(b, topo, policy, 0)) })
	}
}

// BenchmarkDecisionAssignments shows that a decision's time and memory do
// not grow with the number of assignments held.
func BenchmarkDecisionAssignments(b *testing.B) {
	topo := topology.MustSynthetic(benchShape)
	for _, extra := range []int{0, 1000, 10000} {
		b.Run(fmt.Sprintf("assignments=%d", 32+extra), func(b *testing.B) { runDecisions(b, benchState(b, topo, PolicyCorepin, extra)) })
	}
}

// BenchmarkDecisionSize is issue 8's speed target: decisions of 4, 16 and
// 64 CPUs on the reference machine (2 sockets x 64 cores x 2 threads, 8
// NUMA nodes, 16 L3 groups), each on one of 64 states at 50% random
// occupancy, kubelet guard included. It reports p50 and p99 of the
// decision's wall time and of its thread CPU time (clock_gettime(2),
// CLOCK_THREAD_CPUTIME_ID), which a loaded machine's preemptions do not
// inflate, and p99-state: each state's fastest decision (states repeat
// every 64 iterations), at the 99th percentile over states, the decision's
// own cost on the worst states without the noise of other work on the
// machine. The target is a p99 under 50 us for every size up to 64 CPUs.
func BenchmarkDecisionSize(b *testing.B) {
	topo := topology.MustSynthetic(benchShape)
	for _, policy := range []Policy{PolicyCorepin, PolicyKubelet} {
		for _, n := range []int{4, 16, 64} {
			b.Run(fmt.Sprintf("%s/cpus=%d", policy, n), func(b *testing.B) {
				states := make([]*State, 64)
				for i := range states {
					s, err := NewState(topo, NodeSettings{Policy: policy})
					if err != nil {
						b.Fatal(err)
					}
					for j, set := range randomOccupancy(topo, uint64(i)) {
						if err := s.Assign(Assignment{ID: fmt.Sprintf("busy-%d", j), CPUs: set}); err != nil {
							b.Fatal(err)
						}
					}
					states[i] = s
				}
				timeDecisions(b, len(states), func(i int) error {
					_, err := states[i].Allocate(Request{ID: "bench", CPUs: n})
					return err
				}, func(i int) error { return states[i].Release("bench") })
			})
		}
	}
}

// timeDecisions runs decide b.N times over states states in turn (decide
// gets the state's index), timing each call, then after untimed (when not
// nil), and reports p50 and p99 of the wall times, the thread CPU times and
// each state's fastest CPU time, as BenchmarkDecisionSize describes.
func timeDecisions(b *testing.B, states int, decide, after func(i int) error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	wall := make([]time.Duration, 0, b.N)
	cpu := make([]time.Duration, 0, b.N)
	fastest := make([]time.Duration, states)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		k := i % states
		c0, t0 := threadCPU(b), time.Now()
		err := decide(k)
		wall, cpu = append(wall, time.Since(t0)), append(cpu, threadCPU(b)-c0)
		if d := cpu[len(cpu)-1]; fastest[k] == 0 || d < fastest[k] {
			fastest[k] = d
		}
		if err != nil {
			b.Fatalf("deciding on state %d: %v", k, err)
		}
		if after != nil {
			if err := after(k); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	fastest = fastest[:min(b.N, states)]
	for _, m := range []struct {
		name string
		xs   []time.Duration
	}{{"wall", wall}, {"cpu", cpu}, {"state", fastest}} {
		slices.Sort(m.xs)
		b.ReportMetric(float64(m.xs[len(m.xs)/2].Nanoseconds()), "p50-"+m.name+"-ns")
		b.ReportMetric(float64(m.xs[len(m.xs)*99/100].Nanoseconds()), "p99-"+m.name+"-ns")
	}
}

// threadCPU is the calling thread's CPU time (the caller locks its
// goroutine to its thread).
func threadCPU(tb testing.TB) time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ts.Nano())
}

// BenchmarkDecisionSizeFresh is BenchmarkDecisionSize on a fresh State per
// decision, as the scheduler extender and a scheduler plugin judge a node
// after every binding: each iteration builds a new State on the machine's
// topology from one of 64 occupancies (NewState plus its 32 Assigns), then
// decides, and the time counted is all of it. It reports the same p50 and
// p99 (wall, thread CPU time, and per state the fastest) under the same
// target: a p99 under 50 us for every size up to 64 CPUs.
func BenchmarkDecisionSizeFresh(b *testing.B) {
	topo := topology.MustSynthetic(benchShape)
	for _, policy := range []Policy{PolicyCorepin, PolicyKubelet} {
		for _, n := range []int{4, 16, 64} {
			b.Run(fmt.Sprintf("%s/cpus=%d", policy, n), func(b *testing.B) {
				occ := make([][]Assignment, 64)
				for i := range occ {
					for j, set := range randomOccupancy(topo, uint64(i)) {
						occ[i] = append(occ[i], Assignment{ID: fmt.Sprintf("busy-%d", j), CPUs: set})
					}
				}
				cfg := NodeSettings{Policy: policy}
				timeDecisions(b, len(occ), func(i int) error {
					s, err := NewState(topo, cfg)
					if err != nil {
						return err
					}
					for _, a := range occ[i] {
						if err := s.Assign(a); err != nil {
							return err
						}
					}
					_, err = s.Allocate(Request{ID: "bench", CPUs: n})
					return err
				}, nil)
			})
		}
	}
}
