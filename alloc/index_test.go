package alloc

import (
	"cmp"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"
	"weak"

	"github.com/corepin/corepin/topology"
)

// TestIndexSharedByTopology checks that States built on one topology share
// its derived index, and that the cache lets the index go with the
// topology (the extender builds a topology per node change).
func TestIndexSharedByTopology(t *testing.T) {
	topo := topology.MustSynthetic(benchShape)
	a, err := NewState(topo, NodeSettings{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewState(topo, NodeSettings{Policy: PolicyKubelet})
	if err != nil {
		t.Fatal(err)
	}
	if a.ix.topoIndex != b.ix.topoIndex {
		t.Errorf("two States on one topology derived its index twice")
	}
	if a.Topology() != topo || b.Topology() != topo {
		t.Errorf("Topology() is not the topology the State was built on")
	}
	other := topology.MustSynthetic(benchShape)
	c, err := NewState(other, NodeSettings{})
	if err != nil {
		t.Fatal(err)
	}
	if c.ix.topoIndex == a.ix.topoIndex {
		t.Errorf("States on two topologies share one index")
	}

	key := weak.Make(other)
	if _, ok := topoIndexes.Load(key); !ok {
		t.Fatalf("no cached index for a topology in use")
	}
	c, other = nil, nil
	_ = c
	// Cleanups run on their own goroutine after a collection: poll.
	deadline := time.Now().Add(time.Minute)
	for {
		runtime.GC()
		if _, ok := topoIndexes.Load(key); !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cached index outlived its topology")
		}
		time.Sleep(10 * time.Millisecond)
	}
	runtime.KeepAlive(a)
	runtime.KeepAlive(b)
}

// TestByFree checks byFree, counting sort included, against the order it
// promises: free count ascending, then id.
func TestByFree(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var buf []int
	for i := range 2000 {
		n := rng.IntN(300)
		free := make([]int, 400)
		for j := range free {
			free[j] = rng.IntN(1 + []int{2, 16, 17, 1000}[i%4])
		}
		ids := rng.Perm(400)[:n]
		if i%2 == 0 {
			slices.Sort(ids) // the usual, ascending input
		}
		want := slices.Clone(ids)
		slices.SortFunc(want, func(a, b int) int { return cmp.Or(cmp.Compare(free[a], free[b]), cmp.Compare(a, b)) })
		buf = byFree(ids, free, buf)
		if !slices.Equal(ids, want) {
			t.Fatalf("byFree = %v, want %v", ids, want)
		}
	}
}

// TestFewestNodes checks fewestNodes, counting included, against its
// definition: the fewest of caps, largest first, whose sum reaches n.
func TestFewestNodes(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range 5000 {
		caps := make([]int, rng.IntN(150))
		for j := range caps {
			caps[j] = rng.IntN(1 + []int{1, 2, 16, 40}[i%4])
		}
		n := rng.IntN(200) - 3
		sorted := slices.Sorted(slices.Values(caps))
		slices.Reverse(sorted)
		want, sum := 0, 0
		for k, c := range sorted {
			sum += c
			if sum >= n {
				want = k + 1
				break
			}
		}
		if got := fewestNodes(caps, n); got != want {
			t.Fatalf("fewestNodes(%v, %d) = %d, want %d", caps, n, got, want)
		}
	}
}
