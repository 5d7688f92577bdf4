package alloc

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/topology"
)

// TestShortcutsDecideAlike: the corepin engine's shortcuts (kubeletFirst:
// kubelet's placement made first and kept where it provably wins the
// guard, its span handed to the placement's quality; lightCaps: the first
// pass counted per node and L3 group only) decide exactly as the full path
// does (testHooks.slow), placement, quality and rejection alike, on every
// property machine and the reference machine with isolated CPUs (placed
// with them hidden as held, where a span counts their cores as shared) at
// several occupancies, for plain requests of every size and for random
// ones under random options; and kubeletFirst settles some of them (else
// this shows nothing).
func TestShortcutsDecideAlike(t *testing.T) {
	topos := propertyTopologies(t)
	topos["2s-4n-2l3-8c-2t isolcpus=128-135"] = isolatedShape(t, benchShape, "128-135")
	won := 0
	testHooks.won = func() { won++ }
	t.Cleanup(func() { testHooks.won, testHooks.slow = nil, false })
	for ti, name := range slices.Sorted(maps.Keys(topos)) {
		topo := topos[name]
		t.Run(name, func(t *testing.T) {
			ncpu := topo.Online().Size()
			for trial := range 6 {
				rng := rand.New(rand.NewPCG(uint64(ti), uint64(trial)))
				cfg := randomConfig(rng, topo)
				cfg.Policy = PolicyCorepin
				if trial < 3 {
					cfg.Options, cfg.ReservedCount = nil, 0
				}
				s, err := NewState(topo, cfg)
				if err != nil && cfg.ReservedCount > 0 {
					// Under full-pcpus-only the corepin engine reserves
					// whole cores only.
					cfg.ReservedCount = 0
					s, err = NewState(topo, cfg)
				}
				if err != nil {
					t.Fatalf("NewState(%+v): %v", cfg, err)
				}
				// Hold a random share of the unreserved CPUs, in groups
				// of 1 to 4.
				cpus := topo.Online().Difference(s.Reserved()).List()
				rng.Shuffle(len(cpus), func(i, j int) { cpus[i], cpus[j] = cpus[j], cpus[i] })
				held := cpus[:len(cpus)*(2+trial%3)/6]
				for i := 0; i < len(held); {
					g := min(1+rng.IntN(4), len(held)-i)
					if err := s.Assign(Assignment{ID: fmt.Sprintf("busy-%d", i), CPUs: cpuset.New(held[i : i+g]...)}); err != nil {
						t.Fatal(err)
					}
					i += g
				}
				var reqs []Request
				for n := 1; n <= ncpu; n += 1 + n/8 {
					reqs = append(reqs, Request{ID: "plain", CPUs: n})
				}
				for i := range 20 {
					r := randomRequest(rng, cfg, i, ncpu)
					r.ID = "random"
					reqs = append(reqs, r)
				}
				for _, r := range reqs {
					fast, slow := s.Clone(), s.Clone()
					p, err := fast.Allocate(r)
					testHooks.slow = true
					before := won
					p2, err2 := slow.Allocate(r)
					testHooks.slow = false
					if won != before {
						t.Fatalf("trial %d, %+v: kubeletFirst settled a decision with the shortcuts off", trial, r)
					}
					if fmt.Sprint(err) != fmt.Sprint(err2) || !p.CPUs.Equals(p2.CPUs) || p.Quality != p2.Quality || !p.NUMANodes.Equals(p2.NUMANodes) {
						t.Fatalf("trial %d, %+v: shortcuts decided %s (%v) of quality %+v on nodes %s, the full path %s (%v) of quality %+v on nodes %s",
							trial, r, p.CPUs, err, p.Quality, p.NUMANodes, p2.CPUs, err2, p2.Quality, p2.NUMANodes)
					}
				}
			}
		})
	}
	if won == 0 {
		t.Error("kubeletFirst settled no decision: nothing was compared")
	}
	t.Logf("kubeletFirst settled %d decisions", won)
}

// TestRecordCodes: qosCode and exclCode give each class's and policy's
// index in qosCodes and exclCodes, which a record stores, and -1 for a
// name those do not hold, so that a record reads back what was assigned.
func TestRecordCodes(t *testing.T) {
	for i, q := range qosCodes {
		if got := qosCode(q); got != i {
			t.Errorf("qosCode(%s) = %d, want %d", q, got, i)
		}
	}
	for i, e := range exclCodes {
		if got := exclCode(e); got != i {
			t.Errorf("exclCode(%s) = %d, want %d", e, got, i)
		}
	}
	if got := qosCode("LSX"); got != -1 {
		t.Errorf("qosCode(LSX) = %d, want -1", got)
	}
	if got := exclCode("CoreLevel"); got != -1 {
		t.Errorf("exclCode(CoreLevel) = %d, want -1", got)
	}
}

// isolatedShape is the synthetic machine of shape s with isolcpus=cpus.
func isolatedShape(t *testing.T, s topology.Shape, cpus string) *topology.Topology {
	t.Helper()
	topo, err := topology.MustSynthetic(s).WithIsolation(topology.Isolation{Isolcpus: cpuset.MustParse(cpus)})
	if err != nil {
		t.Fatal(err)
	}
	return topo
}
