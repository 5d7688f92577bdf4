package alloc

import (
	"errors"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"

	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/internal/testutil"
	"github.com/corepin/corepin/topology"
)

// isolatedMachine is the real dual-socket dump 8em64t-2s2ca2c (CPUs 0-7)
// booted as in issue 18: isolcpus=6,7 nohz_full=6,7, the kernel's files
// added to the dump.
func isolatedMachine(t *testing.T, isolated, nohz string) *topology.Topology {
	t.Helper()
	m := fstest.MapFS{}
	for k, v := range testutil.SysfsFromTarBz2(t, "8em64t-2s2ca2c") {
		m[k] = v
	}
	m["sys/devices/system/cpu/isolated"] = &fstest.MapFile{Data: []byte(isolated + "\n")}
	m["sys/devices/system/cpu/nohz_full"] = &fstest.MapFile{Data: []byte(nohz + "\n")}
	topo, err := topology.Discover(m, topology.WithoutCgroup())
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

// TestSharedPoolsLeaveIsolatedCPUs: LS and BE (their placements and the
// pools the agent and the NRI plugin enforce) never include an isolated or
// nohz_full CPU, on both engines and whatever the exclusive work holds.
func TestSharedPoolsLeaveIsolatedCPUs(t *testing.T) {
	for _, tc := range []struct {
		name, isolated, nohz, apart string
	}{
		{"isolcpus=6,7 nohz_full=6,7", "6-7", "6-7", "6-7"},
		{"isolcpus=7 only", "7", "(null)", "7"},
		{"nohz_full=5-7 only", "", "5-7", "5-7"},
	} {
		topo := isolatedMachine(t, tc.isolated, tc.nohz)
		apart := cpuset.MustParse(tc.apart)
		if got := IsolatedCPUs(topo); !got.Equals(apart) {
			t.Fatalf("%s: IsolatedCPUs = %s, want %s", tc.name, got, apart)
		}
		for _, policy := range []Policy{PolicyCorepin, PolicyKubelet} {
			s, err := NewState(topo, NodeSettings{Policy: policy})
			if err != nil {
				t.Fatal(err)
			}
			check := func(when string) {
				t.Helper()
				p := s.Pools()
				if p.LS.Intersects(apart) || p.BE.Intersects(apart) {
					t.Errorf("%s %s %s: pools LS %s BE %s include isolated cpus %s", tc.name, policy, when, p.LS, p.BE, apart)
				}
			}
			check("empty")
			for _, r := range []Request{{ID: "ls", QoS: LS, MilliCPUs: 1500}, {ID: "be", QoS: BE, MilliCPUs: 500}} {
				p, err := s.Allocate(r)
				if err != nil {
					t.Fatalf("%s %s: %s: %v", tc.name, policy, r.ID, err)
				}
				if p.CPUs.Intersects(apart) || p.CPUs.IsEmpty() {
					t.Errorf("%s %s: %s placed on %s, want outside %s", tc.name, policy, r.ID, p.CPUs, apart)
				}
			}
			if _, err := s.Allocate(Request{ID: "lsr", QoS: LSR, CPUs: 2, Isolated: IsolatedRequire}); err != nil && apart.Size() >= 2 {
				t.Fatalf("%s %s: LSR on isolated cpus: %v", tc.name, policy, err)
			}
			check("with an LSR on isolated cpus (BE may borrow LSR cpus, never those)")
		}
	}
}

// TestIsolatedRequests: an LSE request avoids isolated CPUs by default
// (taking them only when the rest cannot hold it), takes them first with
// prefer, and only them with require, or gets a clear refusal that changes
// nothing.
func TestIsolatedRequests(t *testing.T) {
	topo := isolatedMachine(t, "6-7", "6-7")
	iso := cpuset.New(6, 7)
	for _, policy := range []Policy{PolicyCorepin, PolicyKubelet} {
		t.Run(string(policy), func(t *testing.T) {
			s, err := NewState(topo, NodeSettings{Policy: policy})
			if err != nil {
				t.Fatal(err)
			}
			alloc := func(r Request) cpuset.CPUSet {
				t.Helper()
				return mustAllocate(t, s, r)
			}
			if got := alloc(Request{ID: "default", CPUs: 2}); got.Intersects(iso) {
				t.Errorf("default LSE = %s, want no isolated cpu while others are free", got)
			}
			if got := alloc(Request{ID: "prefer", CPUs: 1, Isolated: IsolatedPrefer}); !got.IsSubsetOf(iso) {
				t.Errorf("prefer LSE = %s, want an isolated cpu", got)
			}
			if got := alloc(Request{ID: "require", CPUs: 1, Isolated: IsolatedRequire}); !got.IsSubsetOf(iso) {
				t.Errorf("require LSE = %s, want an isolated cpu", got)
			}
			// Both isolated CPUs are held now: require is refused, with
			// the numbers, and the state is unchanged.
			before := snap(s)
			_, err = s.Allocate(Request{ID: "require2", CPUs: 1, Isolated: IsolatedRequire})
			var rej Rejection
			if !errors.As(err, &rej) || rej.Constraint != "isolated CPUs" || !strings.Contains(rej.Reason, "0 of the isolated CPUs 6-7 are free") {
				t.Errorf("require with no isolated cpu free: err %v, want a rejection saying none of 6-7 is free", err)
			}
			if d := cmp.Diff(before, snap(s), snapOpts); d != "" {
				t.Errorf("a refused require changed the state:\n%s", d)
			}
			// prefer falls back to the other CPUs.
			if got := alloc(Request{ID: "prefer2", CPUs: 2, Isolated: IsolatedPrefer}); got.Size() != 2 || got.Intersects(iso) {
				t.Errorf("prefer with isolated cpus held = %s, want 2 other cpus", got)
			}
			checkInvariants(t, s)
		})
	}
}

// TestIsolatedDefaultFallsBack: an exclusive request the non-isolated CPUs
// cannot hold takes isolated ones rather than fail (exclusive CPUs are what
// isolated CPUs are for).
func TestIsolatedDefaultFallsBack(t *testing.T) {
	topo := isolatedMachine(t, "6-7", "6-7")
	s, err := NewState(topo, NodeSettings{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Allocate(Request{ID: "big", CPUs: 7})
	if err != nil {
		t.Fatalf("7 of 8 cpus: %v", err)
	}
	if !p.CPUs.Intersects(cpuset.New(6, 7)) || p.CPUs.Size() != 7 {
		t.Errorf("placed %s, want 7 cpus including isolated ones", p.CPUs)
	}
}

// TestIsolatedBadRequests: isolated policies are checked where written.
func TestIsolatedBadRequests(t *testing.T) {
	plain := isolatedMachine(t, "", "(null)")
	s, err := NewState(plain, NodeSettings{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		r    Request
		want error
		msg  string
	}{
		{Request{ID: "a", QoS: LS, MilliCPUs: 500, Isolated: IsolatedRequire}, ErrInvalid, "for exclusive requests"},
		{Request{ID: "b", QoS: BE, Isolated: IsolatedPrefer}, ErrInvalid, "for exclusive requests"},
		{Request{ID: "c", CPUs: 1, Isolated: "always"}, ErrInvalid, "unknown isolated policy"},
		{Request{ID: "d", CPUs: 1, Isolated: IsolatedRequire}, ErrRejected, "this machine has none"},
	} {
		_, err := s.Allocate(tc.r)
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("Allocate(%+v): err %v, want %v containing %q", tc.r, err, tc.want, tc.msg)
		}
	}
	if len(s.Assignments()) != 0 {
		t.Errorf("refused requests left assignments: %v", s.Assignments())
	}
	one := 1.0
	if _, err := (RequestSpec{CPUs: &one, Isolated: "sometimes"}).Request("x"); !errors.Is(err, ErrInvalid) {
		t.Errorf("RequestSpec isolated sometimes: err %v, want ErrInvalid", err)
	}
	if r, err := (RequestSpec{CPUs: &one, QoS: "LSE", Isolated: "require"}).Request("x"); err != nil || r.Isolated != IsolatedRequire {
		t.Errorf("RequestSpec isolated require = %+v, %v", r, err)
	}
}

// TestSharedCPUsAllIsolated: where every allowed CPU is isolated the shared
// pools keep them all (shared work must run somewhere).
func TestSharedCPUsAllIsolated(t *testing.T) {
	topo := isolatedMachine(t, "0-7", "(null)")
	if got := SharedCPUs(topo); !got.Equals(topo.Allowed()) {
		t.Errorf("SharedCPUs = %s, want every allowed cpu %s", got, topo.Allowed())
	}
	s, err := NewState(topo, NodeSettings{})
	if err != nil {
		t.Fatal(err)
	}
	if p := s.Pools(); !p.LS.Equals(topo.Allowed()) {
		t.Errorf("LS pool = %s, want %s", p.LS, topo.Allowed())
	}
}
