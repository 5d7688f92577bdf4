package alloc

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corepin/corepin/topology"
)

// TestKubeAccCountsFromState: the kubelet engine's accumulator over a
// State's free CPUs, with its counts copied from the State's (the path
// kubeAllocate takes without a hint), holds the same free CPUs and the
// same free counts per core, socket, node and uncore cache as one that
// counts them CPU by CPU, on every property machine and churned states;
// and taking every other whole free core in one step (takeCore) leaves it
// as taking their CPUs one by one does.
func TestKubeAccCountsFromState(t *testing.T) {
	topos := propertyTopologies(t)
	type counts struct {
		Free, Result                               string
		Needed                                     int
		FreeCore, FreeSocket, FreeNode, FreeUncore []int
	}
	of := func(a *kubeAcc) counts {
		defer a.done()
		// Copies: a goes back to the pool, whose next user clears it.
		return counts{a.free.toSet().String(), a.result.toSet().String(), a.needed, slices.Clone(a.freeCore), slices.Clone(a.freeSocket),
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
				one, each := newKubeAcc(ix, free, len(ix.cpus), false, s), newKubeAcc(ix, free, len(ix.cpus), false, s)
				for core, cpus := range ix.coreCPUs {
					if core%2 == 0 && one.freeCore[core] == len(cpus) {
						one.takeCore(core)
						each.take(cpus)
					}
				}
				if diff := cmp.Diff(of(each), of(one)); diff != "" {
					t.Fatalf("after %d requests: whole cores taken in one step differ from their CPUs taken one by one (-one by one +in one step):\n%s", i+1, diff)
				}
			}
		})
	}
	if copied == 0 {
		t.Fatal("no machine took the copied counts")
	}
}

// TestIDIndex: a State's index of ids, through Assign and Release in a
// random order (ids placed, released, placed again; the last record moved
// into each freed place), finds every id held at its record and none
// released, as a map kept beside it says, across the table's growth.
func TestIDIndex(t *testing.T) {
	topo := topology.MustSynthetic(topology.Shape{Sockets: 1, NodesPerSocket: 1, L3PerNode: 1, CoresPerL3: 2, ThreadsPerCore: 1})
	s, err := NewState(topo, NodeSettings{})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 5))
	want := map[string]bool{}
	for step := range 5000 {
		id := fmt.Sprintf("w%d", rng.IntN(300))
		if want[id] {
			if err := s.Release(id); err != nil {
				t.Fatalf("step %d: Release(%s): %v", step, id, err)
			}
			delete(want, id)
		} else {
			if err := s.Assign(Assignment{ID: id, QoS: BE}); err != nil {
				t.Fatalf("step %d: Assign(%s): %v", step, id, err)
			}
			want[id] = true
		}
		if s.ids.n != len(want) || len(s.recs) != len(want) {
			t.Fatalf("step %d: index holds %d ids and %d records, want %d", step, s.ids.n, len(s.recs), len(want))
		}
		for k := range 300 {
			id := fmt.Sprintf("w%d", k)
			i, ok := s.ids.lookup(s.recs, id)
			if ok != want[id] {
				t.Fatalf("step %d: lookup(%s) found %v, want %v", step, id, ok, want[id])
			}
			if ok && s.recs[i].id != id {
				t.Fatalf("step %d: lookup(%s) = record %d, which holds %s", step, id, i, s.recs[i].id)
			}
		}
	}
}

// TestIDIndexWidths: the index keeps a table of at most smallTable slots
// in bytes and a larger one in int32s, and finds every id held through
// the growth from one to the other (600 ids placed, every one looked up
// after each 25th) and through their release in a random order.
func TestIDIndexWidths(t *testing.T) {
	topo := topology.MustSynthetic(topology.Shape{Sockets: 1, NodesPerSocket: 1, L3PerNode: 1, CoresPerL3: 2, ThreadsPerCore: 1})
	s, err := NewState(topo, NodeSettings{})
	if err != nil {
		t.Fatal(err)
	}
	check := func(when string, held []string) {
		t.Helper()
		if small := s.ids.small != nil; small != (s.ids.size() <= smallTable) || (s.ids.slots != nil) == small {
			t.Fatalf("%s: a table of %d slots keeps them in bytes: %v, in int32s: %v", when, s.ids.size(), s.ids.small != nil, s.ids.slots != nil)
		}
		for _, id := range held {
			if i, ok := s.ids.lookup(s.recs, id); !ok || s.recs[i].id != id {
				t.Fatalf("%s: lookup(%s) = %d, %v", when, id, i, ok)
			}
		}
	}
	var held []string
	for k := range 600 {
		id := fmt.Sprintf("w%d", k)
		if err := s.Assign(Assignment{ID: id, QoS: BE}); err != nil {
			t.Fatal(err)
		}
		held = append(held, id)
		if k%25 == 0 {
			check(fmt.Sprintf("after %d ids", k+1), held)
		}
	}
	check("after 600 ids", held)
	rand.New(rand.NewPCG(7, 7)).Shuffle(len(held), func(i, j int) { held[i], held[j] = held[j], held[i] })
	for len(held) > 0 {
		if err := s.Release(held[0]); err != nil {
			t.Fatal(err)
		}
		held = held[1:]
		if len(held)%25 == 0 {
			check(fmt.Sprintf("with %d ids left", len(held)), held)
		}
	}
}
