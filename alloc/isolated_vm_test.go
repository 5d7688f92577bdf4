package alloc

import (
	"errors"
	"strings"
	"testing"

	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/internal/testutil"
	"github.com/corepin/corepin/topology"
)

// TestIsolatedOnVMDumps places on a real kernel's machines with isolated
// CPUs (topology/testdata/vm: 2 sockets x 2 SMT cores, isolcpus=6,7
// nohz_full=6,7 on Linux 6.12; the second with CPUs 4-5 in a cgroup v2
// isolated partition, which corepin, outside it, may not use): the shared
// pools never include an isolated CPU, the default keeps exclusive work off
// them while the other CPUs suffice, a request requiring them gets them,
// and one requiring more than are free is refused with the count, holding
// nothing.
func TestIsolatedOnVMDumps(t *testing.T) {
	for _, tc := range []struct {
		dump        string
		isolated    string // IsolatedCPUs: the ones corepin may hand out
		others      int    // allowed CPUs outside them
		partitioned string // in a partition: never placed
	}{
		{dump: "qemu-2s2c2t-isolcpus6-7", isolated: "6-7", others: 6},
		{dump: "qemu-2s2c2t-isolcpus6-7-partition4-5", isolated: "6-7", others: 4, partitioned: "4-5"},
	} {
		for _, policy := range []Policy{PolicyCorepin, PolicyKubelet} {
			t.Run(tc.dump+"/"+string(policy), func(t *testing.T) {
				topo, err := topology.Discover(testutil.VMDump(t, tc.dump))
				if err != nil {
					t.Fatal(err)
				}
				iso, apart := cpuset.MustParse(tc.isolated), cpuset.New()
				if tc.partitioned != "" {
					apart = cpuset.MustParse(tc.partitioned)
				}
				if got := IsolatedCPUs(topo); !got.Equals(iso) {
					t.Fatalf("IsolatedCPUs = %s, want %s", got, iso)
				}
				s, err := NewState(topo, NodeSettings{Policy: policy})
				if err != nil {
					t.Fatal(err)
				}
				place := func(r Request) cpuset.CPUSet {
					t.Helper()
					got := mustAllocate(t, s, r)
					if got.Intersects(apart) {
						t.Errorf("%s placed on %s, in the isolated partition %s", r.ID, got, apart)
					}
					return got
				}
				pools := func(when string) {
					t.Helper()
					p := s.Pools()
					if p.LS.Intersects(iso) || p.BE.Intersects(iso) || p.LS.Intersects(apart) || p.BE.Intersects(apart) {
						t.Errorf("%s: pools LS %s BE %s include isolated CPUs %s or partitioned %s", when, p.LS, p.BE, iso, apart)
					}
				}
				pools("empty")
				for _, r := range []Request{{ID: "ls", QoS: LS, MilliCPUs: 1500}, {ID: "be", QoS: BE, MilliCPUs: 500}} {
					if got := place(r); got.Intersects(iso) {
						t.Errorf("%s placed on %s, which holds isolated CPUs %s", r.ID, got, iso)
					}
				}
				// The default keeps off the isolated CPUs while the
				// others suffice: two CPUs fewer than the others, so the
				// shared pool keeps two.
				if got := place(Request{ID: "default", QoS: LSE, CPUs: tc.others - 2}); got.Intersects(iso) {
					t.Errorf("default LSE of %d = %s, want no isolated CPU", tc.others-2, got)
				}
				pools("with the default LSE")
				before := s.Pools()
				_, err = s.Allocate(Request{ID: "three", QoS: LSE, CPUs: 3, Isolated: IsolatedRequire})
				var rej Rejection
				if !errors.As(err, &rej) || rej.Constraint != "isolated CPUs" ||
					!strings.Contains(rej.Reason, `request "three" requires 3 isolated CPUs; 2 of the isolated CPUs 6-7 are free`) {
					t.Errorf("requiring 3 of 2 isolated CPUs: err %v, want a refusal with the count", err)
				}
				if after := s.Pools(); !after.LSE.Equals(before.LSE) || len(s.Assignments()) != 3 {
					t.Errorf("the refusal changed the state: LSE %s -> %s, %d assignments", before.LSE, after.LSE, len(s.Assignments()))
				}
				if got := place(Request{ID: "two", QoS: LSE, CPUs: 2, Isolated: IsolatedRequire}); !got.Equals(iso) {
					t.Errorf("requiring 2 isolated CPUs = %s, want %s", got, iso)
				}
				pools("with the isolated CPUs held")
				if _, err := s.Allocate(Request{ID: "one", QoS: LSR, CPUs: 1, Isolated: IsolatedRequire}); !errors.Is(err, ErrRejected) ||
					!strings.Contains(err.Error(), "0 of the isolated CPUs 6-7 are free") {
					t.Errorf("requiring 1 isolated CPU with none free: err %v, want a refusal saying none is free", err)
				}
				checkInvariants(t, s)
			})
		}
	}
}

// mustAllocate places r on s, failing the test where it is refused, and
// returns its CPUs.
func mustAllocate(t *testing.T, s *State, r Request) cpuset.CPUSet {
	t.Helper()
	p, err := s.Allocate(r)
	if err != nil {
		t.Fatalf("Allocate(%+v): %v", r, err)
	}
	return p.CPUs
}
