package alloc

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/topology"
)

// twoNodes is a 2-socket machine, one NUMA node and one L3 each, 4 cores
// of 2 threads per node, numbered as x86 Linux does: core c is CPUs c and
// c+8, node 0 holds CPUs 0-3,8-11 and node 1 CPUs 4-7,12-15.
var twoNodes = topology.Shape{Sockets: 2, NodesPerSocket: 1, L3PerNode: 1, CoresPerL3: 4, ThreadsPerCore: 2}

func resizeState(t *testing.T, cfg NodeSettings, held ...Assignment) *State {
	t.Helper()
	s, err := NewState(topology.MustSynthetic(twoNodes), cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range held {
		if err := s.Assign(a); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func held(s *State, id string) Assignment {
	for _, a := range s.Assignments() {
		if a.ID == id {
			return a
		}
	}
	return Assignment{}
}

func TestResize(t *testing.T) {
	set := cpuset.MustParse
	for _, tc := range []struct {
		name string
		cfg  NodeSettings
		held []Assignment
		// steps resize "w" in turn; each wants a cpuset, or an error
		// containing wantErr (and then the state unchanged).
		steps []Request
		want  []string
	}{{
		name:  "grows onto its own core's sibling first",
		held:  []Assignment{{ID: "w", QoS: LSE, CPUs: set("0")}},
		steps: []Request{{CPUs: 2}},
		want:  []string{"0,8"},
	}, {
		name:  "then a whole core of its node, never moving what it had",
		held:  []Assignment{{ID: "w", QoS: LSE, CPUs: set("2,10")}, {ID: "o", QoS: LSE, CPUs: set("0")}},
		steps: []Request{{CPUs: 4}, {CPUs: 6}},
		want:  []string{"1-2,9-10", "1-3,9-11"},
	}, {
		name:  "a whole core before a half-held one",
		held:  []Assignment{{ID: "w", QoS: LSE, CPUs: set("0,8")}, {ID: "o", QoS: LSE, CPUs: set("1")}},
		steps: []Request{{CPUs: 4}},
		want:  []string{"0,2,8,10"},
	}, {
		name:  "beyond its node under topology policy none",
		held:  []Assignment{{ID: "w", QoS: LSE, CPUs: set("0,8")}, {ID: "o", QoS: LSE, CPUs: set("1-3,9-11")}},
		steps: []Request{{CPUs: 4, TopologyPolicy: TopologyBestEffort}},
		want:  []string{"0,4,8,12"},
	}, {
		name:  "restricted keeps it on its node",
		held:  []Assignment{{ID: "w", QoS: LSE, CPUs: set("0,8")}, {ID: "o", QoS: LSE, CPUs: set("1-3,9-11")}},
		steps: []Request{{CPUs: 4, TopologyPolicy: TopologyRestricted}},
		want:  []string{"error:topology policy restricted keeps it there"},
	}, {
		name: "shrinks the last added first, never below its promised CPUs",
		held: []Assignment{{ID: "w", QoS: LSE, CPUs: set("0,8")}},
		steps: []Request{{CPUs: 4}, {CPUs: 6}, {CPUs: 4}, {CPUs: 1}, {CPUs: 2},
			{CPUs: 3}, {CPUs: 2}},
		want: []string{"0-1,8-9", "0-2,8-10", "0-1,8-9", "error:fewer than the 2 it was placed with (0,8)", "0,8",
			"0-1,8", "0,8"},
	}, {
		name:  "full-pcpus-only takes whole cores",
		cfg:   NodeSettings{Options: []string{OptFullPCPUsOnly}},
		held:  []Assignment{{ID: "w", QoS: LSE, CPUs: set("0,8")}, {ID: "o", QoS: LSE, CPUs: set("1")}},
		steps: []Request{{CPUs: 3}, {CPUs: 4}},
		want:  []string{"error:not a whole number of cores", "0,2,8,10"},
	}, {
		name:  "FullPCPUs finds no whole core",
		held:  []Assignment{{ID: "w", QoS: LSE, CPUs: set("0,8")}, {ID: "o", QoS: LSE, CPUs: set("1-7")}},
		steps: []Request{{CPUs: 4, Bind: BindFullPCPUs}, {CPUs: 4}},
		want:  []string{"error:CPUs in free whole cores qualify", "0,8-10"},
	}, {
		name:  "the kubelet engine grows the same way",
		cfg:   NodeSettings{Policy: PolicyKubelet},
		held:  []Assignment{{ID: "w", QoS: LSE, CPUs: set("5")}},
		steps: []Request{{CPUs: 2}, {CPUs: 4}, {Bind: BindFullPCPUs, CPUs: 6}},
		want:  []string{"5,13", "4-5,12-13", "error:the kubelet policy has no bind"},
	}, {
		name: "PCPULevel stays off the cores of other PCPULevel work",
		held: []Assignment{{ID: "w", QoS: LSE, CPUs: set("0"), Exclusive: ExclusivePCPULevel},
			{ID: "o", QoS: LSE, CPUs: set("9"), Exclusive: ExclusivePCPULevel}},
		steps: []Request{{CPUs: 3}},
		want:  []string{"0,2,8"},
	}, {
		name: "the pool guard keeps the LS quota's CPUs",
		held: []Assignment{{ID: "w", QoS: LSE, CPUs: set("0,8")}, {ID: "ls", QoS: LS, MilliCPUs: 12000}},
		// 16 CPUs, 2 held: 14 shared for 12 CPUs of quota, room for 2 more.
		steps: []Request{{CPUs: 6}, {CPUs: 4}},
		want:  []string{"error:LS pool", "0-1,8-9"},
	}, {
		name:  "a different class is wrong as written",
		held:  []Assignment{{ID: "w", QoS: LSE, CPUs: set("0")}},
		steps: []Request{{CPUs: 2, QoS: LSR}},
		want:  []string{"error:keeps the qos class LSE"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			s := resizeState(t, tc.cfg, tc.held...)
			promised := held(s, "w").CPUs
			for i, r := range tc.steps {
				r.ID = "w"
				before := snap(s)
				p, err := s.Resize(r)
				want := tc.want[i]
				if msg, ok := strings.CutPrefix(want, "error:"); ok {
					if err == nil || !strings.Contains(err.Error(), msg) {
						t.Fatalf("step %d: Resize(%+v) = %s, %v; want an error containing %q", i, r, p.CPUs, err, msg)
					}
					if diff := cmp.Diff(before, snap(s), snapOpts); diff != "" {
						t.Fatalf("step %d: a refused Resize changed the state:\n%s", i, diff)
					}
					continue
				}
				if err != nil {
					t.Fatalf("step %d: Resize(%+v): %v", i, r, err)
				}
				if got := p.CPUs.String(); got != want {
					t.Fatalf("step %d: Resize(%+v) = %s, want %s", i, r, got, want)
				}
				a := held(s, "w")
				if !a.CPUs.Equals(p.CPUs) || !a.Promised().Equals(promised) {
					t.Fatalf("step %d: held %s promised %s, want %s promised %s", i, a.CPUs, a.Promised(), p.CPUs, promised)
				}
				checkInvariants(t, s)
			}
		})
	}
}

func TestResizeQuota(t *testing.T) {
	s := resizeState(t, NodeSettings{}, Assignment{ID: "x", QoS: LSE, CPUs: cpuset.MustParse("0-3")},
		Assignment{ID: "ls", QoS: LS, MilliCPUs: 2000}, Assignment{ID: "other", QoS: LS, MilliCPUs: 1000}, Assignment{ID: "be", QoS: BE, MilliCPUs: 500})
	// 12 shared CPUs, 1000 millicpus held by other: ls may grow to 11000.
	p, err := s.Resize(Request{ID: "ls", MilliCPUs: 11000})
	if err != nil || p.MilliCPUs != 11000 || p.CPUs.Size() != 12 {
		t.Fatalf("Resize(ls, 11000) = %d on %s, %v; want 11000 on 12 CPUs", p.MilliCPUs, p.CPUs, err)
	}
	before := snap(s)
	if _, err := s.Resize(Request{ID: "ls", MilliCPUs: 11001}); !errors.Is(err, ErrRejected) {
		t.Fatalf("Resize(ls, 11001) = %v, want a rejection", err)
	}
	if diff := cmp.Diff(before, snap(s), snapOpts); diff != "" {
		t.Fatalf("a refused Resize changed the state:\n%s", diff)
	}
	if _, err := s.Resize(Request{ID: "ls", MilliCPUs: 500}); err != nil {
		t.Fatal(err)
	}
	if p, err := s.Resize(Request{ID: "be", CPUs: 3}); err != nil || p.MilliCPUs != 3000 {
		t.Fatalf("Resize(be, 3 cpus) = %d, %v; want 3000", p.MilliCPUs, err)
	}
	if s.lsMilli != 1500 {
		t.Fatalf("LS millicpus committed = %d, want 1500", s.lsMilli)
	}
	checkInvariants(t, s)
	if _, err := s.Resize(Request{ID: "nobody", CPUs: 2}); !errors.Is(err, ErrUnknownID) {
		t.Fatalf("Resize(nobody) = %v, want ErrUnknownID", err)
	}
}

// TestAssignAdded: an assignment loaded with its added CPUs keeps them
// apart from its promised ones, and a record that marks CPUs it does not
// hold, or all of them, is refused.
func TestAssignAdded(t *testing.T) {
	s := resizeState(t, NodeSettings{}, Assignment{ID: "w", QoS: LSE, CPUs: cpuset.MustParse("0-1,8-9"), Added: []int{1, 9}})
	if got := held(s, "w").Promised().String(); got != "0,8" {
		t.Fatalf("Promised() = %s, want 0,8", got)
	}
	for _, a := range []Assignment{
		{ID: "a", QoS: LSE, CPUs: cpuset.MustParse("2"), Added: []int{3}},
		{ID: "b", QoS: LSE, CPUs: cpuset.MustParse("2-3"), Added: []int{3, 2}},
		{ID: "c", QoS: LSE, CPUs: cpuset.MustParse("2-3"), Added: []int{3, 3}},
		{ID: "d", QoS: LS, MilliCPUs: 100, Added: []int{3}},
	} {
		if err := s.Assign(a); !errors.Is(err, ErrInvalid) {
			t.Errorf("Assign(%+v) = %v, want ErrInvalid", a, err)
		}
	}
}

// TestResizeCloneIndependence (issue 27 §2.4): a state and its Clone
// share each assignment's Added slice until one resizes it; a resize
// appends to it in place (into spare capacity), so without the copy
// setAdded stores it would write the CPU it added into the other's Added
// too. Grown, or grown and shrunk,
// then cloned, then grown differently in each (the clone first gives the
// CPU the original takes to another workload), each must end as the same
// steps give without a clone.
func TestResizeCloneIndependence(t *testing.T) {
	type step struct {
		assign *Assignment // else resize w to cpus
		cpus   int
	}
	grow := func(n int) step { return step{cpus: n} }
	run := func(t *testing.T, s *State, steps []step) {
		t.Helper()
		for _, st := range steps {
			var err error
			if st.assign != nil {
				err = s.Assign(*st.assign)
			} else {
				_, err = s.Resize(Request{ID: "w", QoS: LSE, CPUs: st.cpus})
			}
			if err != nil {
				t.Fatalf("step %+v: %v", st, err)
			}
		}
	}
	show := func(s *State) string {
		var b strings.Builder
		for _, a := range s.Assignments() {
			fmt.Fprintf(&b, "%s cpus %s added %v promised %s; ", a.ID, a.CPUs, a.Added, a.Promised())
		}
		return b.String()
	}
	start := Assignment{ID: "w", QoS: LSE, CPUs: cpuset.MustParse("0")}
	for _, tc := range []struct {
		name   string
		before []step // before the clone
		taken  string // the CPU the clone gives to o before both grow
		to     int    // both then grow w to this size
	}{
		// 5 CPUs added at once: Added gets capacity 6, one spare.
		{name: "grown", before: []step{grow(6)}, taken: "3", to: 7},
		{name: "grown, then shrunk", before: []step{grow(6), grow(5)}, taken: "10", to: 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			block := step{assign: &Assignment{ID: "o", QoS: LSE, CPUs: cpuset.MustParse(tc.taken)}}
			// What each must end as: the same steps without a clone.
			alone := resizeState(t, NodeSettings{}, start)
			run(t, alone, append(tc.before, grow(tc.to)))
			blocked := resizeState(t, NodeSettings{}, start)
			run(t, blocked, append(tc.before, block, grow(tc.to)))
			if held(alone, "w").Added[len(held(alone, "w").Added)-1] == held(blocked, "w").Added[len(held(blocked, "w").Added)-1] {
				t.Fatalf("the two growths add the same CPU (%s, %s): the test shows nothing", show(alone), show(blocked))
			}

			s := resizeState(t, NodeSettings{}, start)
			run(t, s, tc.before)
			c := s.Clone()
			run(t, s, []step{grow(tc.to)})
			run(t, c, []step{block, grow(tc.to)})
			if got, want := show(s), show(alone); got != want {
				t.Errorf("original after both grew:\n got %s\nwant %s", got, want)
			}
			if got, want := show(c), show(blocked); got != want {
				t.Errorf("clone after both grew:\n got %s\nwant %s", got, want)
			}
		})
	}
}

// TestAssignRefusesTakenCPUs: an assignment naming a CPU another one holds,
// or a reserved CPU, is refused by name and leaves the state as it was,
// whichever word of a wide machine the CPU sits in.
func TestAssignRefusesTakenCPUs(t *testing.T) {
	topo := topology.MustSynthetic(topology.Shape{Sockets: 2, NodesPerSocket: 1, L3PerNode: 1, CoresPerL3: 40, ThreadsPerCore: 2})
	s, err := NewState(topo, NodeSettings{Reserved: cpuset.MustParse("0,100")})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []Assignment{{ID: "low", CPUs: cpuset.MustParse("2-3")}, {ID: "high", CPUs: cpuset.MustParse("70,130")}} {
		if err := s.Assign(a); err != nil {
			t.Fatal(err)
		}
	}
	before, pools := s.Assignments(), s.Pools()
	for _, tc := range []struct {
		cpus, want string
	}{
		{"3-4", `cpu 3 is already assigned to low`},
		{"66,130", `cpu 130 is already assigned to high`},
		{"70", `cpu 70 is already assigned to high`},
		{"5,100", `cpu 100 is reserved`},
		{"0-1", `cpu 0 is reserved`},
	} {
		err := s.Assign(Assignment{ID: "new", CPUs: cpuset.MustParse(tc.cpus)})
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Assign(cpus %s) = %v, want ErrInvalid saying %q", tc.cpus, err, tc.want)
		}
	}
	if b, a := fmt.Sprintf("%+v %+v", before, pools), fmt.Sprintf("%+v %+v", s.Assignments(), s.Pools()); a != b {
		t.Errorf("refused assignments changed the state:\n%s\nwas\n%s", a, b)
	}
	checkInvariants(t, s)
}

// FuzzResize resizes random assignments of a random state on a random
// machine, either engine and its options, and checks after each step: no
// CPU is held twice and the counters equal a recount (checkInvariants),
// an assignment keeps the CPUs it was placed on and, when it grows, every
// CPU it had, a refusal changes nothing, and a success has the size asked.
func FuzzResize(f *testing.F) {
	f.Add(uint8(2), uint8(1), uint8(4), uint8(2), uint8(0), false, uint64(1), uint8(6))
	f.Add(uint8(1), uint8(2), uint8(3), uint8(2), uint8(1), true, uint64(7), uint8(12))
	f.Add(uint8(2), uint8(2), uint8(2), uint8(1), uint8(8), false, uint64(3), uint8(20))
	f.Add(uint8(1), uint8(1), uint8(4), uint8(4), uint8(17), true, uint64(9), uint8(30))
	f.Fuzz(func(t *testing.T, sockets, nps, cores, threads, optBits uint8, kubelet bool, seed uint64, steps uint8) {
		topo, err := topology.Synthetic(topology.Shape{Sockets: 1 + int(sockets%3), NodesPerSocket: 1 + int(nps%3),
			L3PerNode: 1, CoresPerL3: 1 + int(cores%5), ThreadsPerCore: 1 + int(threads%2)})
		if err != nil {
			t.Skip(err)
		}
		cfg := NodeSettings{Policy: PolicyCorepin}
		if kubelet {
			cfg.Policy = PolicyKubelet
		}
		for i, name := range knownOptions {
			if optBits&(1<<i) != 0 {
				cfg.Options = append(cfg.Options, name)
			}
		}
		s, err := NewState(topo, cfg)
		if errors.Is(err, ErrInvalid) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(seed, 2))
		ncpu := topo.Online().Size()
		promised := map[string]cpuset.CPUSet{}
		for i := range 1 + rng.IntN(6) {
			r := randomRequest(rng, cfg, i, ncpu)
			if _, err := s.Admit(r); err == nil {
				promised[r.ID] = held(s, r.ID).CPUs
			}
		}
		ids := s.Assignments()
		if len(ids) == 0 {
			return
		}
		for range int(steps % 40) {
			a := ids[rng.IntN(len(ids))]
			cur := held(s, a.ID)
			r := Request{ID: a.ID, CPUs: 1 + rng.IntN(ncpu), TopologyPolicy: []TopologyPolicy{TopologyNone, TopologyBestEffort, TopologyRestricted, TopologySingleNUMANode}[rng.IntN(4)]}
			if a.QoS == LS || a.QoS == BE {
				r.CPUs, r.MilliCPUs = 0, 1+rng.IntN(ncpu*1000)
			}
			if cfg.Policy == PolicyCorepin && rng.IntN(3) == 0 {
				r.Bind = BindFullPCPUs
			}
			before := snap(s)
			p, err := s.Resize(r)
			if err != nil {
				if diff := cmp.Diff(before, snap(s), snapOpts); diff != "" {
					t.Fatalf("Resize(%+v) failed (%v) and changed the state:\n%s", r, err, diff)
				}
				if !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrRejected) {
					t.Fatalf("Resize(%+v) = %v, neither ErrInvalid nor a Rejection", r, err)
				}
				continue
			}
			after := held(s, a.ID)
			switch a.QoS {
			case LSE, LSR:
				if after.CPUs.Size() != r.CPUs || !after.CPUs.Equals(p.CPUs) {
					t.Fatalf("Resize(%+v) = %s, holds %s; want %d CPUs", r, p.CPUs, after.CPUs, r.CPUs)
				}
				if !promised[a.ID].IsSubsetOf(after.CPUs) || !after.Promised().Equals(promised[a.ID]) {
					t.Fatalf("Resize(%+v): %s promised %s, placed on %s", r, after.CPUs, after.Promised(), promised[a.ID])
				}
				if r.CPUs >= cur.CPUs.Size() && !cur.CPUs.IsSubsetOf(after.CPUs) {
					t.Fatalf("Resize(%+v) grew %s to %s, moving some", r, cur.CPUs, after.CPUs)
				}
			default:
				if after.MilliCPUs != r.MilliCPUs {
					t.Fatalf("Resize(%+v): quota %d, want %d", r, after.MilliCPUs, r.MilliCPUs)
				}
			}
			checkInvariants(t, s)
			if err := s.GuardPools(LSE); err != nil {
				t.Fatalf("after Resize(%+v) the pools are starved: %v", r, err)
			}
		}
		// Releasing everything leaves an empty machine, as before.
		for _, a := range s.Assignments() {
			if err := s.Release(a.ID); err != nil {
				t.Fatal(err)
			}
		}
		if got := s.used.toSet(); !got.IsEmpty() {
			t.Fatalf("after releasing everything %s are held", got)
		}
		checkInvariants(t, s)
	})
}
