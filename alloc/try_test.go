package alloc

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestTryAnswersAsAdmitOnAClone: on every property machine, under random
// settings and churned states (LS quotas near the pool's size included,
// so that GuardPools refuses some), Try answers each random request of
// every kind exactly as Admit on a Clone does (placement, quality,
// NUMA nodes, the refusal's words), and leaves the state as it was.
func TestTryAnswersAsAdmitOnAClone(t *testing.T) {
	topos := propertyTopologies(t)
	names := slices.Sorted(maps.Keys(topos))
	steps := 120
	if testing.Short() || raceEnabled {
		steps = 30
	}
	tried, refused, guarded := 0, 0, 0
	for ti, name := range names {
		topo := topos[name]
		for round := range 3 {
			rng := rand.New(rand.NewPCG(uint64(ti), uint64(100+round)))
			cfg := randomConfig(rng, topo)
			s, err := NewState(topo, cfg)
			if errors.Is(err, ErrInvalid) {
				continue // settings this machine refuses (reserved CPUs not whole cores)
			}
			if err != nil {
				t.Fatalf("%s: NewState(%+v): %v", name, cfg, err)
			}
			for i := range steps {
				r := randomRequest(rng, cfg, i, topo.Online().Size())
				switch rng.IntN(8) {
				case 0:
					r.Isolated = []IsolatedPolicy{IsolatedPrefer, IsolatedRequire}[rng.IntN(2)]
				case 1:
					if as := s.Assignments(); len(as) > 0 {
						r.ID = as[rng.IntN(len(as))].ID // an id already held
					}
				}
				before := snap(s)
				want, werr := s.Clone().Admit(r)
				got, gerr := s.Try(r)
				tried++
				if fmt.Sprint(gerr) != fmt.Sprint(werr) {
					t.Fatalf("%s round %d step %d: Try(%+v) error %v, Admit on a clone %v", name, round, i, r, gerr, werr)
				}
				if diff := cmp.Diff(want, got, snapOpts); diff != "" {
					t.Fatalf("%s round %d step %d: Try(%+v) placement differs from Admit on a clone (-admit +try):\n%s", name, round, i, r, diff)
				}
				if diff := cmp.Diff(before, snap(s), snapOpts); diff != "" {
					t.Fatalf("%s: Try(%+v) changed the state (-before +after):\n%s", name, r, diff)
				}
				if werr != nil {
					refused++
					if _, aerr := s.Clone().Allocate(r); aerr == nil {
						guarded++ // placed, then refused by GuardPools
					}
					continue
				}
				if rng.IntN(3) > 0 {
					if _, err := s.Admit(r); err != nil {
						t.Fatalf("%s: Admit(%+v) after Try placed it: %v", name, r, err)
					}
				} else if as := s.Assignments(); len(as) > 0 {
					if err := s.Release(as[rng.IntN(len(as))].ID); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	}
	if refused == 0 || guarded == 0 {
		t.Fatalf("of %d requests tried, %d refused, %d by GuardPools: want some of each", tried, refused, guarded)
	}
	t.Logf("%d requests tried, %d refused, %d of them by GuardPools", tried, refused, guarded)
}

// TestTryConcurrent: Try from many goroutines on one state, as a
// scheduler's Filter runs on a node's cached state, gives each the answer
// it gives alone (run with -race: Try only reads the state).
func TestTryConcurrent(t *testing.T) {
	topos := propertyTopologies(t)
	topo := topos["128arm-2pa2n8cluster4co"]
	if topo == nil {
		t.Fatal("fixture 128arm-2pa2n8cluster4co missing")
	}
	s, err := NewState(topo, NodeSettings{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		_, _ = s.Admit(Request{ID: fmt.Sprintf("held/%d", i), QoS: LSE, CPUs: 1 + i%5})
	}
	reqs := make([]Request, 16)
	want := make([]string, len(reqs))
	for i := range reqs {
		reqs[i] = Request{ID: "try", QoS: LSE, CPUs: 2 + i, TopologyPolicy: TopologySingleNUMANode}
		p, err := s.Clone().Admit(reqs[i])
		want[i] = fmt.Sprint(p.CPUs, p.Quality, err)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for k := range 50 {
				i := (g + k) % len(reqs)
				p, err := s.Try(reqs[i])
				if got := fmt.Sprint(p.CPUs, p.Quality, err); got != want[i] {
					t.Errorf("Try(%d cpus) concurrently = %s, alone %s", reqs[i].CPUs, got, want[i])
					return
				}
			}
		})
	}
	wg.Wait()
}
