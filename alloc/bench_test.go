package alloc

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/topology"
)

// benchShape is the reference machine: 2 sockets x 64 cores x 2
// threads, 8 NUMA nodes (4 per socket), 2 L3 groups per node.
var benchShape = topology.Shape{Sockets: 2, NodesPerSocket: 4, L3PerNode: 2, CoresPerL3: 8, ThreadsPerCore: 2}

// benchOccupancy holds half the CPUs, chosen at random with a fixed seed,
// in groups of 4 (32 workloads).
func benchOccupancy(topo *topology.Topology) []cpuset.CPUSet {
	rng := rand.New(rand.NewPCG(7, 7))
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
	s, err := NewState(topo, Config{Policy: policy})
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
func runDecisions(b *testing.B, s *State) {
	sizes := benchSizes(1024)
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
