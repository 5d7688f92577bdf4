package alloc

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/internal/testutil"
	"github.com/corepin/corepin/topology"
)

// propertyTopologies are the machines the property tests churn on: every
// real-machine fixture plus synthetic shapes up to 32 NUMA nodes.
func propertyTopologies(t *testing.T) map[string]*topology.Topology {
	t.Helper()
	out := map[string]*topology.Topology{}
	for _, name := range testutil.Fixtures(t) {
		topo, err := topology.Discover(testutil.SysfsFromTarBz2(t, name), topology.WithoutCgroup())
		if err != nil {
			t.Fatalf("fixture %s: %v", name, err)
		}
		out[name] = topo
	}
	for _, s := range []topology.Shape{
		{Sockets: 2, NodesPerSocket: 4, L3PerNode: 2, CoresPerL3: 8, ThreadsPerCore: 2},
		{Sockets: 1, NodesPerSocket: 1, L3PerNode: 4, CoresPerL3: 4, ThreadsPerCore: 2, SiblingsAdjacent: true},
		{Sockets: 4, NodesPerSocket: 8, L3PerNode: 1, CoresPerL3: 2, ThreadsPerCore: 2},
		{Sockets: 2, NodesPerSocket: 1, L3PerNode: 1, CoresPerL3: 6, ThreadsPerCore: 1},
		{Sockets: 1, NodesPerSocket: 2, L3PerNode: 1, CoresPerL3: 4, ThreadsPerCore: 4},
	} {
		out[s.String()] = topology.MustSynthetic(s)
	}
	return out
}

// randomConfig picks a policy and a set of options kubelet accepts together.
func randomConfig(rng *rand.Rand, topo *topology.Topology) NodeSettings {
	cfg := NodeSettings{Policy: PolicyCorepin}
	if rng.IntN(2) == 0 {
		cfg.Policy = PolicyKubelet
	}
	combos := [][]string{nil, {OptFullPCPUsOnly}, {OptDistributeAcrossNUMA}, {OptFullPCPUsOnly, OptDistributeAcrossNUMA},
		{OptPreferAlignByUncoreCache}, {OptDistributeAcrossCores}, {OptStrictCPUReservation, OptFullPCPUsOnly}}
	cfg.Options = combos[rng.IntN(len(combos))]
	if cfg.Policy == PolicyKubelet && len(topo.NodesWithCPUs()) > 16 && slices.Contains(cfg.Options, OptDistributeAcrossNUMA) {
		cfg.Options = nil
	}
	if r := rng.IntN(3); r > 0 {
		cfg.ReservedCount = r
	}
	return cfg
}

func randomRequest(rng *rand.Rand, cfg NodeSettings, i, ncpu int) Request {
	r := Request{ID: fmt.Sprintf("w%d", i), CPUs: 1 + rng.IntN(max(1, ncpu/4))}
	switch rng.IntN(10) {
	case 0:
		r.QoS, r.CPUs, r.MilliCPUs = LS, 0, 100+rng.IntN(3000)
	case 1:
		r.QoS, r.CPUs, r.MilliCPUs = BE, 0, rng.IntN(2000)
	case 2:
		r.QoS = LSR
	default:
		r.QoS = LSE
	}
	r.TopologyPolicy = []TopologyPolicy{TopologyNone, TopologyBestEffort, TopologyRestricted, TopologySingleNUMANode}[rng.IntN(4)]
	if cfg.Policy == PolicyCorepin {
		r.Bind = []Bind{BindDefault, BindFullPCPUs, BindSpreadByPCPUs}[rng.IntN(3)]
		r.Exclusive = []Exclusive{ExclusiveNone, ExclusivePCPULevel, ExclusiveNUMANodeLevel}[rng.IntN(3)]
		r.NUMA = []NUMAStrategy{MostAllocated, LeastAllocated, DistributeEvenly}[rng.IntN(3)]
	}
	return r
}

// snapshot is everything observable about a State, plus its counters.
type snapshot struct {
	Assignments                []Assignment
	Pools                      Pools
	Frag                       Quality
	FreeCore, FreeL3, FreeNode []int32
	PCPU, NUMAExcl             []int
	LSMilli                    int
	Used                       string
}

func snap(s *State) snapshot {
	return snapshot{s.Assignments(), s.Pools(), s.Fragmentation(), slices.Clone(s.freeCore), slices.Clone(s.freeL3),
		slices.Clone(s.freeNode), orZeros(s.pcpuCore, len(s.freeCore)), orZeros(s.numaExcl, len(s.freeNode)), s.lsMilli, s.used.toSet().String()}
}

// orZeros is a copy of xs, or n zeros for a nil xs (a State makes its
// exclusive-level counters on their first use).
func orZeros(xs []int, n int) []int {
	if xs == nil {
		return make([]int, n)
	}
	return slices.Clone(xs)
}

var snapOpts = cmp.Comparer(func(a, b cpuset.CPUSet) bool { return a.Equals(b) })

func checkInvariants(t *testing.T, s *State) {
	t.Helper()
	var all cpuset.CPUSet
	for _, a := range s.Assignments() {
		if a.QoS != LSE && a.QoS != LSR {
			continue
		}
		if all.Intersects(a.CPUs) {
			t.Fatalf("exclusive set of %s (%s) overlaps another exclusive set (%s)", a.ID, a.CPUs, all.Intersection(a.CPUs))
		}
		if !a.CPUs.IsSubsetOf(s.ix.topo.Allowed()) || a.CPUs.Intersects(s.Reserved()) {
			t.Fatalf("%s holds %s, outside the allowed, unreserved cpus", a.ID, a.CPUs)
		}
		all = all.Union(a.CPUs)
	}
	// The incremental counters must equal a recount from scratch.
	fresh := s.Clone()
	fresh.recount()
	if diff := cmp.Diff(snap(fresh), snap(s), snapOpts); diff != "" {
		t.Fatalf("counters drifted from a recount (-recount +state):\n%s", diff)
	}
}

func TestPropertyChurn(t *testing.T) {
	topos := propertyTopologies(t)
	names := make([]string, 0, len(topos))
	for n := range topos {
		names = append(names, n)
	}
	slices.Sort(names)
	steps := 150
	if testing.Short() || raceEnabled {
		steps = 40
	}
	for ti, name := range names {
		topo := topos[name]
		for trial := range 3 {
			t.Run(fmt.Sprintf("%s/%d", name, trial), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(ti), uint64(trial)))
				cfg := randomConfig(rng, topo)
				s, err := NewState(topo, cfg)
				if err != nil {
					t.Fatalf("NewState(%+v): %v", cfg, err)
				}
				var live []string
				for i := range steps {
					if len(live) > 0 && rng.IntN(3) == 0 {
						k := rng.IntN(len(live))
						if err := s.Release(live[k]); err != nil {
							t.Fatalf("Release(%s): %v", live[k], err)
						}
						live = slices.Delete(live, k, k+1)
						checkInvariants(t, s)
						continue
					}
					r := randomRequest(rng, cfg, i, topo.Online().Size())
					before := snap(s)
					twin := s.Clone()
					p, err := s.Allocate(r)
					p2, err2 := twin.Allocate(r)
					if fmt.Sprint(err) != fmt.Sprint(err2) || !p.CPUs.Equals(p2.CPUs) || p.Quality != p2.Quality {
						t.Fatalf("not deterministic for %+v: %s/%v then %s/%v", r, p.CPUs, err, p2.CPUs, err2)
					}
					if err != nil {
						if diff := cmp.Diff(before, snap(s), snapOpts); diff != "" {
							t.Fatalf("a rejected Allocate changed the state:\n%s", diff)
						}
						continue
					}
					if (r.QoS == LSE || r.QoS == LSR) && p.CPUs.Size() != r.CPUs {
						t.Fatalf("Allocate(%+v) = %s, %d cpus, want %d", r, p.CPUs, p.CPUs.Size(), r.CPUs)
					}
					checkInvariants(t, s)
					// Release restores the state exactly; then take it again.
					if err := s.Release(r.ID); err != nil {
						t.Fatal(err)
					}
					if diff := cmp.Diff(before, snap(s), snapOpts); diff != "" {
						t.Fatalf("Release(%s) did not restore the state (-before +after):\n%s", r.ID, diff)
					}
					if _, err := s.Allocate(r); err != nil {
						t.Fatalf("re-Allocate after Release: %v", err)
					}
					live = append(live, r.ID)
				}
			})
		}
	}
}
