package alloc

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestTrimChangesNothingHeld: a State trimmed (Trim) holds what it held
// (Holds names each id, no other), keeps no room past its records, and
// answers the next requests, on itself and on a Clone, as the State
// untrimmed does.
func TestTrimChangesNothingHeld(t *testing.T) {
	topos := propertyTopologies(t)
	for ti, name := range slices.Sorted(maps.Keys(topos)) {
		topo := topos[name]
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(ti), 7))
			cfg := randomConfig(rng, topo)
			s, err := NewState(topo, cfg)
			if errors.Is(err, ErrInvalid) {
				t.Skipf("settings %+v refused on this machine", cfg)
			}
			if err != nil {
				t.Fatal(err)
			}
			for i := range 40 {
				if _, err := s.Admit(randomRequest(rng, cfg, i, topo.Online().Size())); err != nil {
					continue // a refusal leaves the state as it was
				}
			}
			untrimmed, trimmed := s.Clone(), s.Clone()
			trimmed.Trim()
			if diff := cmp.Diff(snap(untrimmed), snap(trimmed), snapOpts); diff != "" {
				t.Fatalf("Trim changed the state (-before +after):\n%s", diff)
			}
			if cap(trimmed.recs) != len(trimmed.recs) {
				t.Errorf("trimmed records: len %d, cap %d; want no room", len(trimmed.recs), cap(trimmed.recs))
			}
			for _, a := range untrimmed.Assignments() {
				if !trimmed.Holds(a.ID) {
					t.Errorf("Holds(%q) = false after Trim", a.ID)
				}
			}
			if trimmed.Holds("never/held") {
				t.Error(`Holds("never/held") = true`)
			}
			for i := range 20 {
				r := randomRequest(rng, cfg, 100+i, topo.Online().Size())
				want, werr := untrimmed.Clone().Admit(r)
				got, gerr := trimmed.Clone().Admit(r)
				if fmt.Sprint(gerr) != fmt.Sprint(werr) || !cmp.Equal(want, got, snapOpts) {
					t.Fatalf("Admit(%+v) on a clone: trimmed %+v, %v; untrimmed %+v, %v", r, got, gerr, want, werr)
				}
				want, werr = untrimmed.Admit(r)
				got, gerr = trimmed.Admit(r)
				if fmt.Sprint(gerr) != fmt.Sprint(werr) || !cmp.Equal(want, got, snapOpts) {
					t.Fatalf("Admit(%+v): trimmed %+v, %v; untrimmed %+v, %v", r, got, gerr, want, werr)
				}
			}
		})
	}
}
