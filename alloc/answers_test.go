package alloc

import (
	"crypto/sha256"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var updateAnswers = flag.Bool("update", false, "rewrite testdata/TestAnswersUnchanged.golden from the current allocator")

// TestAnswersUnchanged pins the allocator's answers: on every property
// topology, random node settings and a random sequence of requests and
// releases (on a kept State, then on a fresh State rebuilt from its
// assignments, as the scheduler extender and plugin judge a node), every
// placement (CPUs, quota, quality, NUMA nodes) or error is hashed per
// topology and compared with the golden digests made by the allocator
// before its speed work (issue 27 §5). A change to a decision shows as the
// topology whose digest moved; rerun with -update only for a change of
// answers meant and explained.
func TestAnswersUnchanged(t *testing.T) {
	topos := propertyTopologies(t)
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range topos {
			if !yield(n) {
				return
			}
		}
	})
	var got strings.Builder
	decisions := 0
	for ti, name := range names {
		topo := topos[name]
		rng := rand.New(rand.NewPCG(27, uint64(ti)))
		h := sha256.New()
		ncpu := topo.Online().Size()
		for trial := range 12 {
			cfg := randomConfig(rng, topo)
			s, err := NewState(topo, cfg)
			if err != nil {
				fmt.Fprintf(h, "trial %d: %v\n", trial, err)
				continue
			}
			answer := func(st *State, r Request) {
				decisions++
				p, err := st.Admit(r)
				if err != nil {
					fmt.Fprintf(h, "%s: %v\n", r.ID, err)
					return
				}
				fmt.Fprintf(h, "%s: %s %d %+v %s\n", r.ID, p.CPUs, p.MilliCPUs, p.Quality, p.NUMANodes)
			}
			var held []string
			for i := range 24 {
				if len(held) > 0 && rng.IntN(4) == 0 {
					k := rng.IntN(len(held))
					if err := s.Release(held[k]); err != nil {
						t.Fatalf("%s: Release(%s): %v", name, held[k], err)
					}
					held = slices.Delete(held, k, k+1)
					continue
				}
				r := randomRequest(rng, cfg, i, ncpu)
				answer(s, r)
				if s.Holds(r.ID) {
					held = append(held, r.ID)
				}
			}
			fresh, err := NewState(topo, NodeSettings{Policy: cfg.Policy, Options: cfg.Options, Reserved: s.Reserved()})
			if err != nil {
				t.Fatalf("%s: rebuilding: %v", name, err)
			}
			for _, a := range s.Assignments() {
				if err := fresh.Assign(a); err != nil {
					t.Fatalf("%s: rebuilding: Assign(%s): %v", name, a.ID, err)
				}
			}
			for i := range 8 {
				r := randomRequest(rng, cfg, 100+i, ncpu)
				answer(fresh, r)
				if fresh.Holds(r.ID) {
					if err := fresh.Release(r.ID); err != nil {
						t.Fatalf("%s: Release(%s): %v", name, r.ID, err)
					}
				}
			}
		}
		fmt.Fprintf(&got, "%s %x\n", name, h.Sum(nil))
	}
	path := filepath.Join("testdata", t.Name()+".golden")
	if *updateAnswers {
		if err := os.WriteFile(path, []byte(got.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Compared per topology: a fixture added later is not in the file.
	digests := map[string]string{}
	for line := range strings.Lines(got.String()) {
		name, sum, _ := strings.Cut(strings.TrimSpace(line), " ")
		digests[name] = sum
	}
	compared := 0
	for line := range strings.Lines(string(want)) {
		name, sum, _ := strings.Cut(strings.TrimSpace(line), " ")
		switch g, ok := digests[name]; {
		case !ok:
			t.Errorf("topology %s of %s not found", name, path)
		case g != sum:
			t.Errorf("answers on %s differ from %s: digest %s, want %s", name, path, g, sum)
		default:
			compared++
		}
	}
	if compared < 10 {
		t.Errorf("only %d topologies compared, want at least 10", compared)
	}
	if decisions < 1000 {
		t.Errorf("only %d decisions compared, want at least 1000", decisions)
	}
}
