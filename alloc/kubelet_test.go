package alloc

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/internal/testutil"
	"github.com/corepin/corepin/topology"
)

// kubeCase is one allocation case published in kubelet's own tests
// (cpu_assignment_test.go, policy_static_test.go), with the topology it
// runs on described in the `corepin topo` JSON form.
type kubeCase struct {
	Name          string   `json:"name"`
	From          string   `json:"from"`
	Topology      string   `json:"topology"`
	Options       []string `json:"options"`
	Free          string   `json:"free"`
	Reserved      string   `json:"reserved"`
	ReservedCount int      `json:"reserved_count"`
	CPUs          int      `json:"cpus"`
	NUMAHint      string   `json:"numa_hint"`
	Want          string   `json:"want"`
	WantError     string   `json:"want_error"`
}

type kubeCaseFile struct {
	Source     string `json:"source"`
	Topologies map[string]struct {
		CPUs []topology.CPU `json:"cpus"`
	} `json:"topologies"`
	Cases []kubeCase `json:"cases"`
}

func loadKubeCases(t *testing.T) (kubeCaseFile, map[string]*topology.Topology) {
	t.Helper()
	data, err := os.ReadFile("testdata/kubelet_cases.json")
	if err != nil {
		t.Fatal(err)
	}
	var f kubeCaseFile
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	topos := map[string]*topology.Topology{}
	for name, tj := range f.Topologies {
		topo, err := topology.New(tj.CPUs, nil)
		if err != nil {
			t.Fatalf("topology %s: %v", name, err)
		}
		topos[name] = topo
	}
	return f, topos
}

// kubeState builds the State a kubelet case starts from: CPUs outside its
// free set (and outside the reserved CPUs) held by a placeholder workload.
func kubeState(t *testing.T, topo *topology.Topology, c kubeCase, policy Policy) *State {
	t.Helper()
	cfg := NodeSettings{Policy: policy, Options: c.Options, Reserved: cpuset.MustParse(c.Reserved), ReservedCount: c.ReservedCount}
	s, err := NewState(topo, cfg)
	if err != nil {
		t.Fatalf("NewState: %v", err)
	}
	free := cpuset.MustParse(c.Free)
	occupied := topo.Online().Difference(free).Difference(s.Reserved())
	if !occupied.IsEmpty() {
		if err := s.Assign(Assignment{ID: "(taken)", QoS: LSE, CPUs: occupied}); err != nil {
			t.Fatalf("Assign: %v", err)
		}
	}
	return s
}

func kubeRequest(c kubeCase) Request {
	r := Request{ID: "req", CPUs: c.CPUs}
	for n := range cpuset.MustParse(c.NUMAHint).All() {
		r.Hint = append(r.Hint, topology.NodeID(n))
	}
	return r
}

func TestKubeletPublishedCases(t *testing.T) {
	f, topos := loadKubeCases(t)
	if len(f.Cases) < 50 {
		t.Fatalf("only %d kubelet cases loaded", len(f.Cases))
	}
	for _, c := range f.Cases {
		t.Run(c.From+"/"+c.Name, func(t *testing.T) {
			s := kubeState(t, topos[c.Topology], c, PolicyKubelet)
			p, err := s.Allocate(kubeRequest(c))
			if c.WantError != "" {
				if err == nil {
					t.Fatalf("Allocate = %s, want error %q", p.CPUs, c.WantError)
				}
				if !errors.Is(err, ErrRejected) || !strings.Contains(err.Error(), c.WantError) {
					t.Fatalf("Allocate error = %v, want a rejection containing %q", err, c.WantError)
				}
				return
			}
			if err != nil {
				t.Fatalf("Allocate: %v (want %s)", err, c.Want)
			}
			if want := cpuset.MustParse(c.Want); !p.CPUs.Equals(want) {
				t.Fatalf("Allocate = %s, want %s (kubelet)", p.CPUs, want)
			}
		})
	}
}

// TestKubeletUnevenDumps checks the kubelet engine against kubelet's fix for
// kubernetes issue #140495 (PR #140498, first released in v1.38.0-beta.0) on
// real machines' dumps whose cores or sockets differ in size.
//
// The rule is kubelet's takeByTopologyNUMAPacked (pkg/kubelet/cm/cpumanager/
// cpu_assignment.go): isCoreFree and isSocketFree now compare a unit's free
// CPUs with the CPUs that unit has (CPUDetails.CPUsInCores(core).Size(),
// CPUsInSockets(socket).Size()), no longer with the machine-wide averages
// CPUsPerCore() and CPUsPerSocket(). Sockets, then cores, are walked fewest
// free CPUs first, then lowest id (sortAvailableSockets, sortAvailableCores);
// a whole unit is claimed while the request needs at least its size, and
// takeRemainingCPUs then takes single CPUs in core order. Without
// --reserved-cpus, NewStaticPolicy reserves takeByTopology(all CPUs, n);
// Allocate runs takeByTopology over every CPU but the reserved and used ones.
//
// 20em64t-hybrid-1p6c2t+2ca4co1t: one package, node and L3, six P-cores of
// two threads (0+1 ... 10+11), eight one-thread E-cores (12-19); the average
// is 20/14 = 1 CPU per core. With everything free every core is whole and the
// E-cores (one free CPU) sort before the P-cores (two): reserved counts take
// E-cores 12.., then whole P-cores 0+1, 2+3 ..., an odd last CPU being the
// next P-core's first thread. The unfixed rule reserves the same sets (the
// E-cores as whole cores, the P-core CPUs one by one in the same order). The
// fix shows in what is placed next: a P-core with one reserved thread is no
// longer whole. Unfixed, kubelet counted it whole (1 free CPU = the average)
// and claimed both threads, the reserved one too (the "0-1"); corepin,
// claiming only free CPUs, took its free thread and the next CPU.
//
// 16em64t-4s2c2t-offlines: 12 of 16 CPUs online, sockets {0,4,8,12}, {1,9},
// {3,7,11,15}, {6,10}, cores of 2 CPUs except 6 and 10; averages 12/4 = 3 per
// socket, 12/7 = 1 per core. Unfixed, no socket was ever whole and only cores
// 6 and 10 were.
//
// Every expectation was checked against kubelet's own takeByTopologyNUMAPacked
// built from v1.37.2 with PR #140498's two lines applied (and, for the hybrid
// dump's reserved sets, from v1.38.0-beta.0) on the same topologies.
func TestKubeletUnevenDumps(t *testing.T) {
	const (
		hybrid   = "20em64t-hybrid-1p6c2t+2ca4co1t"
		offlines = "16em64t-4s2c2t-offlines"
	)
	tests := []struct {
		name          string
		dump          string
		reserved      string // --reserved-cpus
		reservedCount int    // --kube-reserved cpu, without --reserved-cpus
		used          string // held by another container
		wantReserved  string
		cpus          int // the exclusive request placed next, if any
		want          string
	}{
		{name: "reserve 1: the first E-core", dump: hybrid, reservedCount: 1, wantReserved: "12", cpus: 2, want: "13-14"},
		{name: "reserve 4: E-cores before P-cores", dump: hybrid, reservedCount: 4, wantReserved: "12-15"},
		{name: "reserve 8: every E-core", dump: hybrid, reservedCount: 8, wantReserved: "12-19", cpus: 2, want: "0-1"},
		{name: "reserve 9: E-cores and one P-core thread", dump: hybrid, reservedCount: 9, wantReserved: "0,12-19"},
		{name: "reserve 10: E-cores and a whole P-core", dump: hybrid, reservedCount: 10, wantReserved: "0-1,12-19", cpus: 2, want: "2-3"},
		{name: "reserve 11", dump: hybrid, reservedCount: 11, wantReserved: "0-2,12-19"},
		// A half-reserved P-core is not whole (unfixed kubelet 0-1, corepin before 1-2).
		{name: "reserve 9, then 2 cpus", dump: hybrid, reservedCount: 9, wantReserved: "0,12-19", cpus: 2, want: "2-3"},
		// Whole core 2+3, then the single CPU of the most allocated core,
		// CPU 1 (fixed and unfixed alike).
		{name: "reserve 9, then 3 cpus", dump: hybrid, reservedCount: 9, wantReserved: "0,12-19", cpus: 3, want: "1-3"},
		// Two whole cores (unfixed kubelet 0-3, corepin before 1-4).
		{name: "reserve 9, then 4 cpus", dump: hybrid, reservedCount: 9, wantReserved: "0,12-19", cpus: 4, want: "2-5"},
		// Core 2+3 is half reserved now (unfixed kubelet 2-3, corepin before 3-4).
		{name: "reserve 11, then 2 cpus", dump: hybrid, reservedCount: 11, wantReserved: "0-2,12-19", cpus: 2, want: "4-5"},
		// The issue's own case, --reserved-cpus=0: the E-cores are the
		// first whole cores (unfixed kubelet 0-1, corepin before 1,12).
		{name: "reserved-cpus 0, then 2 cpus", dump: hybrid, reserved: "0", wantReserved: "0", cpus: 2, want: "12-13"},
		// Eight E-cores; no whole P-core fits the last CPU, which comes from
		// the most allocated core: CPU 1.
		{name: "reserved-cpus 0, then 9 cpus", dump: hybrid, reserved: "0", wantReserved: "0", cpus: 9, want: "1,12-19"},
		// Whole socket {1,9} (unfixed: the one-CPU cores, 6,10).
		{name: "offlines: 2 cpus", dump: offlines, cpus: 2, want: "1,9"},
		{name: "offlines: reserve 2", dump: offlines, reservedCount: 2, wantReserved: "1,9"},
		// Socket 1, then the first core of socket 3 (unfixed 1,6,10).
		{name: "offlines: reserve 3", dump: offlines, reservedCount: 3, wantReserved: "1,6,9"},
		// With 0 and 8 used, socket 0 ({4,12} free) sorts first but is not
		// whole; socket 1 is. Sockets judged by the average (3) and cores by
		// their size would take core {4,12}; unfixed kubelet 6,10.
		{name: "offlines: 2 cpus beside 0,8", dump: offlines, used: "0,8", cpus: 2, want: "1,9"},
		{name: "offlines: 3 cpus beside 0,8", dump: offlines, used: "0,8", cpus: 3, want: "1,6,9"},
	}
	topos := map[string]*topology.Topology{}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			topo := topos[tc.dump]
			if topo == nil {
				var err error
				if topo, err = topology.Discover(testutil.SysfsFromTarBz2(t, tc.dump), topology.WithoutCgroup()); err != nil {
					t.Fatal(err)
				}
				topos[tc.dump] = topo
			}
			s, err := NewState(topo, NodeSettings{Policy: PolicyKubelet, Reserved: cpuset.MustParse(tc.reserved), ReservedCount: tc.reservedCount})
			if err != nil {
				t.Fatalf("NewState: %v", err)
			}
			if got, want := s.Reserved(), cpuset.MustParse(tc.wantReserved); !got.Equals(want) {
				t.Fatalf("Reserved() = %s, want %s (kubelet)", got, want)
			}
			if used := cpuset.MustParse(tc.used); !used.IsEmpty() {
				if err := s.Assign(Assignment{ID: "(used)", QoS: LSE, CPUs: used}); err != nil {
					t.Fatalf("Assign: %v", err)
				}
			}
			if tc.cpus == 0 {
				return
			}
			p, err := s.Allocate(Request{ID: "req", CPUs: tc.cpus})
			if err != nil {
				t.Fatalf("Allocate(%d): %v", tc.cpus, err)
			}
			if want := cpuset.MustParse(tc.want); !p.CPUs.Equals(want) {
				t.Fatalf("Allocate(%d) = %s, want %s (kubelet)", tc.cpus, p.CPUs, want)
			}
		})
	}
}
