package alloc

import (
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestKubeAccCountsFromState: the kubelet engine's accumulator over a
// State's free CPUs, with its counts copied from the State's (the path
// kubeAllocate takes without a hint), holds the same free CPUs and the
// same free counts per core, socket, node and uncore cache as one that
// counts them CPU by CPU, on every property machine and churned states.
func TestKubeAccCountsFromState(t *testing.T) {
	topos := propertyTopologies(t)
	type counts struct {
		Free                                       string
		FreeCore, FreeSocket, FreeNode, FreeUncore []int
	}
	of := func(a *kubeAcc) counts {
		defer a.done()
		// Copies: a goes back to the pool, whose next user clears it.
		return counts{a.free.toSet().String(), slices.Clone(a.freeCore), slices.Clone(a.freeSocket),
			slices.Clone(a.freeNode), slices.Clone(a.freeUncore)}
	}
	copied := 0
	for _, name := range slices.Sorted(maps.Keys(topos)) {
		topo := topos[name]
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(3, 3))
			cfg := randomConfig(rng, topo)
			s, err := NewState(topo, cfg)
			if err != nil {
				t.Fatal(err)
			}
			ix := s.ix.topoIndex
			if !ix.allL3 || ix.kube.socketNodes == nil {
				t.Skip("the counts are not copied on this machine")
			}
			for i := range 40 {
				r := randomRequest(rng, cfg, i, topo.Online().Size())
				if _, err := s.Allocate(r); err == nil && i%3 == 0 {
					if err := s.Release(r.ID); err != nil {
						t.Fatal(err)
					}
				}
				free := s.freeBits()
				want := of(newKubeAcc(ix, free, 1, false, nil))
				got := of(newKubeAcc(ix, free, 1, false, s))
				copied++
				if diff := cmp.Diff(want, got); diff != "" {
					t.Fatalf("after %d requests: counts copied from the state differ from counted ones (-counted +copied):\n%s", i+1, diff)
				}
			}
		})
	}
	if copied == 0 {
		t.Fatal("no machine took the copied counts")
	}
}
