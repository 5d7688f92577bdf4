package alloc

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/corepin/corepin/topology"
)

// freshBudget bounds what one decision on a fresh State allocates, in
// bytes: the records of a node of some 30 pods made once (not again at
// the decision's own record) at 48 bytes each (MilliCPUs as an int32),
// as many as fill one size class (recordsHint), their index by id as a
// table of byte slots (not a map, nor int32 slots), the free counters as
// int32 (not int: 608 bytes, not 1216, on the benchmark machine), and the
// exclusive-level counters left unmade where nothing holds CPUs at those
// levels: 3.75 KiB.
const freshBudget = 15 << 8

// TestFreshStateBytes: a decision on a fresh State (NewState, the 32
// Assigns of the benchmark machine at 50% occupancy, then Allocate), as
// the scheduler extender and plugin build one per node and decision,
// allocates at most freshBudget bytes, in at most maxAllocs allocations.
// Every byte is garbage the moment the decision is made: fewer bytes mean
// fewer collections and fewer page faults, two of the things found in the
// tail of BenchmarkDecisionSizeFresh (issue 27 §5), and every allocation
// costs time in the decision. The State's own blocks (itself, its bitsets,
// counters, records and index) are 5, the placement's answer (its cpuset
// and nodes) 2; the kubelet engine's result is one more, on the kubelet
// policy and where corepin's guard asks it (at 64 CPUs). The engines'
// working buffers (the corepin engine's node choice among them) are the
// topology's, reused, and the request is never one: handed to the engines
// by reference, it moved to the heap.
func TestFreshStateBytes(t *testing.T) {
	if raceEnabled {
		t.Skip("skipping: under the race detector sync.Pool drops what it is given at random, so the buffers a decision borrows are made again")
	}
	topo := topology.MustSynthetic(benchShape)
	var occ []Assignment
	for j, set := range randomOccupancy(topo, 1) {
		occ = append(occ, Assignment{ID: fmt.Sprintf("busy-%d", j), CPUs: set})
	}
	for _, tc := range []struct {
		name      string
		policy    Policy
		cpus      int
		maxAllocs float64
	}{
		{name: "corepin/cpus=4", policy: PolicyCorepin, cpus: 4, maxAllocs: 7},
		{name: "corepin/cpus=64", policy: PolicyCorepin, cpus: 64, maxAllocs: 8},
		{name: "kubelet/cpus=4", policy: PolicyKubelet, cpus: 4, maxAllocs: 8},
		{name: "kubelet/cpus=64", policy: PolicyKubelet, cpus: 64, maxAllocs: 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			decide := func() {
				s, err := NewState(topo, NodeSettings{Policy: tc.policy})
				if err != nil {
					t.Fatal(err)
				}
				for _, a := range occ {
					if err := s.Assign(a); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := s.Allocate(Request{ID: "fresh", CPUs: tc.cpus}); err != nil {
					t.Fatal(err)
				}
			}
			decide() // the topology's index and pools, made once
			const n = 200
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			for range n {
				decide()
			}
			runtime.ReadMemStats(&m1)
			if per := (m1.TotalAlloc - m0.TotalAlloc) / n; per > freshBudget {
				t.Errorf("a decision on a fresh State allocated %d bytes, want at most %d", per, freshBudget)
			}
			if got := testing.AllocsPerRun(n, decide); got > tc.maxAllocs {
				t.Errorf("a decision on a fresh State made %v allocations, want at most %v", got, tc.maxAllocs)
			}
		})
	}
}
