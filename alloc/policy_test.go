package alloc

import (
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/topology"
)

// small is 2 sockets x 1 NUMA node x 2 L3 groups x 4 cores x 2 threads.
// CPU c and c+16 are siblings; node 0 is CPUs 0-7,16-23 with L3 0 = cores
// 0-3 and L3 1 = cores 4-7; node 1 is CPUs 8-15,24-31.
var small = topology.Shape{Sockets: 2, NodesPerSocket: 1, L3PerNode: 2, CoresPerL3: 4, ThreadsPerCore: 2}

func TestPolicyOptions(t *testing.T) {
	tests := []struct {
		name       string
		cfg        NodeSettings
		assigned   []Assignment
		req        Request
		want       string // cpuset, when placed
		wantReject string // constraint, when refused
	}{
		{name: "FullPCPUs takes whole cores", req: Request{CPUs: 4, Bind: BindFullPCPUs}, want: "0-1,16-17"},
		{name: "FullPCPUs refuses an odd count", req: Request{CPUs: 3, Bind: BindFullPCPUs}, wantReject: "FullPCPUs"},
		{name: "FullPCPUs skips a half-used core",
			assigned: []Assignment{{ID: "x", CPUs: cpuset.New(0)}}, req: Request{CPUs: 2, Bind: BindFullPCPUs}, want: "1,17"},
		{name: "full-pcpus-only makes every request whole cores",
			cfg: NodeSettings{Options: []string{OptFullPCPUsOnly}}, req: Request{CPUs: 3}, wantReject: OptFullPCPUsOnly},
		{name: "SpreadByPCPUs takes one thread per core", req: Request{CPUs: 3, Bind: BindSpreadByPCPUs}, want: "0-2"},
		{name: "SpreadByPCPUs takes second threads only when out of cores",
			assigned: []Assignment{{ID: "x", CPUs: cpuset.MustParse("4-15,20-31")}}, req: Request{CPUs: 6, Bind: BindSpreadByPCPUs}, want: "0-3,16-17"},
		{name: "default bind shares a core when nothing else is left",
			assigned: []Assignment{{ID: "x", CPUs: cpuset.MustParse("0-15,24-31"), Exclusive: ExclusivePCPULevel}},
			req:      Request{CPUs: 4}, want: "16-19"},
		{name: "PCPULevel avoids cores of another PCPULevel workload",
			assigned: []Assignment{{ID: "x", CPUs: cpuset.MustParse("0-15,24-31"), Exclusive: ExclusivePCPULevel}},
			req:      Request{CPUs: 4, Exclusive: ExclusivePCPULevel}, wantReject: "PCPULevel"},
		{name: "NUMANodeLevel moves to a node without another NUMANodeLevel workload",
			assigned: []Assignment{{ID: "x", CPUs: cpuset.New(0, 1), Exclusive: ExclusiveNUMANodeLevel}},
			req:      Request{CPUs: 2, Exclusive: ExclusiveNUMANodeLevel}, want: "8,24"},
		{name: "without NUMANodeLevel it packs next to the other workload",
			assigned: []Assignment{{ID: "x", CPUs: cpuset.New(0, 1), Exclusive: ExclusiveNUMANodeLevel}},
			req:      Request{CPUs: 2}, want: "2,18"},
		{name: "MostAllocated packs into the fuller node",
			assigned: []Assignment{{ID: "x", CPUs: cpuset.MustParse("0-3,16-19")}}, req: Request{CPUs: 2, NUMA: MostAllocated}, want: "4,20"},
		{name: "LeastAllocated spreads to the emptier node",
			assigned: []Assignment{{ID: "x", CPUs: cpuset.MustParse("0-3,16-19")}}, req: Request{CPUs: 2, NUMA: LeastAllocated}, want: "8,24"},
		{name: "DistributeEvenly keeps a request that fits one node on it",
			req: Request{CPUs: 12, NUMA: DistributeEvenly}, want: "0-5,16-21"},
		{name: "DistributeEvenly splits over two nodes",
			req: Request{CPUs: 20, NUMA: DistributeEvenly}, want: "0-4,8-12,16-20,24-28"},
		{name: "MostAllocated fills one node before the next",
			req: Request{CPUs: 20, NUMA: MostAllocated}, want: "0-9,16-25"},
		{name: "distribute-cpus-across-numa is DistributeEvenly",
			cfg: NodeSettings{Options: []string{OptDistributeAcrossNUMA}}, req: Request{CPUs: 20}, want: "0-4,8-12,16-20,24-28"},
		{name: "L3-aware: a request that fits one L3 stays in it",
			assigned: []Assignment{{ID: "x", CPUs: cpuset.MustParse("0-1,16-17")}}, req: Request{CPUs: 6}, want: "4-6,20-22"},
		{name: "restricted refuses when more nodes than needed would be spanned",
			assigned: []Assignment{{ID: "x", CPUs: cpuset.MustParse("0-4,8-12,16-20,24-28")}}, req: Request{CPUs: 8, TopologyPolicy: TopologyRestricted}, wantReject: "restricted"},
		{name: "best-effort spans the nodes it needs",
			assigned: []Assignment{{ID: "x", CPUs: cpuset.MustParse("0-4,8-12,16-20,24-28")}}, req: Request{CPUs: 8, TopologyPolicy: TopologyBestEffort}, want: "5-7,13,21-23,29"},
		{name: "single-numa-node refuses a split",
			assigned: []Assignment{{ID: "x", CPUs: cpuset.MustParse("0-4,8-12,16-20,24-28")}}, req: Request{CPUs: 8, TopologyPolicy: TopologySingleNUMANode}, wantReject: "single-numa-node"},
		{name: "kubelet restricted takes the hinted node",
			cfg:      NodeSettings{Policy: PolicyKubelet},
			assigned: []Assignment{{ID: "x", CPUs: cpuset.MustParse("0-5,16-21")}}, req: Request{CPUs: 6, TopologyPolicy: TopologyRestricted}, want: "8-10,24-26"},
		{name: "kubelet without a topology policy packs into the fuller node first",
			cfg:      NodeSettings{Policy: PolicyKubelet},
			assigned: []Assignment{{ID: "x", CPUs: cpuset.MustParse("0-5,16-21")}}, req: Request{CPUs: 6}, want: "6-8,22-24"},
		{name: "kubelet single-numa-node refuses a split",
			cfg:      NodeSettings{Policy: PolicyKubelet},
			assigned: []Assignment{{ID: "x", CPUs: cpuset.MustParse("0-4,8-12,16-20,24-28")}}, req: Request{CPUs: 8, TopologyPolicy: TopologySingleNUMANode}, wantReject: "single-numa-node"},
		{name: "reserved cpus are never handed out",
			cfg: NodeSettings{Reserved: cpuset.New(0, 16)}, req: Request{CPUs: 2}, want: "1,17"},
		{name: "SYSTEM gets the reserved cpus",
			cfg: NodeSettings{Reserved: cpuset.New(0, 16)}, req: Request{CPUs: 2, QoS: SYSTEM}, want: "0,16"},
		{name: "SYSTEM without reserved cpus is refused", req: Request{CPUs: 1, QoS: SYSTEM}, wantReject: "SYSTEM"},
		{name: "LS shares the pool left by exclusive sets",
			cfg: NodeSettings{Reserved: cpuset.New(0, 16)}, assigned: []Assignment{{ID: "x", CPUs: cpuset.New(1, 17)}}, req: Request{MilliCPUs: 1500, QoS: LS}, want: "0,2-16,18-31"},
		{name: "strict-cpu-reservation keeps LS off the reserved cpus",
			cfg: NodeSettings{Reserved: cpuset.New(0, 16), Options: []string{OptStrictCPUReservation}}, req: Request{MilliCPUs: 500, QoS: LS}, want: "1-15,17-31"},
		{name: "LS quota beyond the pool is refused",
			assigned: []Assignment{{ID: "x", CPUs: cpuset.MustParse("0-23")}}, req: Request{MilliCPUs: 8500, QoS: LS}, wantReject: "LS pool"},
		{name: "BE may borrow LSR cpus",
			assigned: []Assignment{{ID: "x", CPUs: cpuset.MustParse("0-15"), QoS: LSE}, {ID: "y", CPUs: cpuset.MustParse("16-23"), QoS: LSR}}, req: Request{MilliCPUs: 100, QoS: BE}, want: "16-31"},
	}
	topo := topology.MustSynthetic(small)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewState(topo, tc.cfg)
			if err != nil {
				t.Fatalf("NewState: %v", err)
			}
			for _, a := range tc.assigned {
				if err := s.Assign(a); err != nil {
					t.Fatalf("Assign(%s): %v", a.ID, err)
				}
			}
			tc.req.ID = "req"
			p, err := s.Allocate(tc.req)
			if tc.wantReject != "" {
				var rej Rejection
				if !errors.As(err, &rej) || rej.Constraint != tc.wantReject {
					t.Fatalf("Allocate = %s, %v; want a %s rejection", p.CPUs, err, tc.wantReject)
				}
				if rej.Reason == "" {
					t.Fatalf("rejection %v gives no reason", rej)
				}
				return
			}
			if err != nil {
				t.Fatalf("Allocate: %v", err)
			}
			if want := cpuset.MustParse(tc.want); !p.CPUs.Equals(want) {
				t.Fatalf("Allocate = %s, want %s", p.CPUs, want)
			}
		})
	}
}

func TestRejectionNamesWhatWouldFit(t *testing.T) {
	topo := topology.MustSynthetic(topology.Shape{Sockets: 2, NodesPerSocket: 1, L3PerNode: 1, CoresPerL3: 8, ThreadsPerCore: 2})
	s, err := NewState(topo, NodeSettings{})
	if err != nil {
		t.Fatal(err)
	}
	// node 0: 16 CPUs, 12 taken leaves 4; node 1: 16 free.
	if err := s.Assign(Assignment{ID: "x", CPUs: cpuset.MustParse("0-5,16-21")}); err != nil {
		t.Fatal(err)
	}
	_, err = s.Allocate(Request{ID: "big", CPUs: 18, TopologyPolicy: TopologySingleNUMANode})
	want := "single-numa-node: 18 CPUs needed on one NUMA node, but the largest node has 16 CPUs; use best-effort or a smaller request"
	if err == nil || err.Error() != want {
		t.Errorf("err = %v, want %q", err, want)
	}
	if err := s.Assign(Assignment{ID: "y", CPUs: cpuset.MustParse("8-9,24-25")}); err != nil {
		t.Fatal(err)
	}
	_, err = s.Allocate(Request{ID: "mid", CPUs: 14, TopologyPolicy: TopologySingleNUMANode})
	want = "single-numa-node: 14 CPUs needed on one NUMA node; the most free on any node is 12 (node 1)"
	if err == nil || err.Error() != want {
		t.Errorf("err = %v, want %q", err, want)
	}
}

func TestConfigRejectsKubeletConflicts(t *testing.T) {
	topo := topology.MustSynthetic(small)
	for _, opts := range [][]string{
		{OptFullPCPUsOnly, OptDistributeAcrossCores},
		{OptDistributeAcrossNUMA, OptDistributeAcrossCores},
		{OptPreferAlignByUncoreCache, OptDistributeAcrossCores},
		{OptPreferAlignByUncoreCache, OptDistributeAcrossNUMA},
		{"no-such-option"},
	} {
		if _, err := NewState(topo, NodeSettings{Policy: PolicyKubelet, Options: opts}); !errors.Is(err, ErrInvalid) {
			t.Errorf("NewState(%v) error = %v, want ErrInvalid", opts, err)
		}
	}
	multi := topology.MustSynthetic(topology.Shape{Sockets: 2, NodesPerSocket: 1, L3PerNode: 1, CoresPerL3: 2, ThreadsPerCore: 2})
	s, err := NewState(multi, NodeSettings{Policy: PolicyKubelet, Options: []string{OptAlignBySocket}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Allocate(Request{ID: "a", CPUs: 1, TopologyPolicy: TopologySingleNUMANode}); !errors.Is(err, ErrInvalid) {
		t.Errorf("align-by-socket with single-numa-node: error = %v, want ErrInvalid", err)
	}
}

// TestManyNUMANodesStayFast places and releases on 16 and 32 NUMA node
// machines with every topology policy: an engine that enumerated node
// subsets would not finish. The bound is on this thread's CPU time
// (threadCPU), which a loaded machine does not stretch as it does wall time.
func TestManyNUMANodesStayFast(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for _, shape := range []topology.Shape{
		{Sockets: 2, NodesPerSocket: 8, L3PerNode: 1, CoresPerL3: 8, ThreadsPerCore: 2},
		{Sockets: 4, NodesPerSocket: 8, L3PerNode: 1, CoresPerL3: 4, ThreadsPerCore: 2},
	} {
		topo := topology.MustSynthetic(shape)
		for _, policy := range []Policy{PolicyCorepin, PolicyKubelet} {
			s, err := NewState(topo, NodeSettings{Policy: policy})
			if err != nil {
				t.Fatal(err)
			}
			start := threadCPU(t)
			placed := 0
			for i := range 60 {
				r := Request{ID: itoa(i), CPUs: 1 + (i*7)%40, TopologyPolicy: []TopologyPolicy{TopologyBestEffort, TopologyRestricted, TopologySingleNUMANode}[i%3]}
				if _, err := s.Allocate(r); err == nil {
					placed++
				}
			}
			if el := threadCPU(t) - start; el > 2*time.Second {
				t.Errorf("%v %s: 60 decisions took %v of CPU", shape, policy, el)
			}
			if placed < 10 {
				t.Errorf("%v %s: only %d of 60 placed", shape, policy, placed)
			}
		}
	}
}

// TestAdmitReleasesWhatStarvesThePools: Admit refuses an exclusive
// placement that would leave a running BE workload no CPU, with the guard's
// rejection, and leaves the state as it was; one that leaves a CPU is
// admitted.
func TestAdmitReleasesWhatStarvesThePools(t *testing.T) {
	topo := topology.MustSynthetic(topology.Shape{Sockets: 1, NodesPerSocket: 1, L3PerNode: 1, CoresPerL3: 4, ThreadsPerCore: 1})
	st, err := NewState(topo, NodeSettings{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Assign(Assignment{ID: "batch", QoS: BE, MilliCPUs: 1000}); err != nil {
		t.Fatal(err)
	}
	before := snap(st)
	_, err = st.Admit(Request{ID: "all", CPUs: 4, QoS: LSE})
	var rj Rejection
	if !errors.As(err, &rj) || rj.Constraint != "BE pool" {
		t.Fatalf("Admit(4 CPUs) = %v, want the BE pool guard's rejection", err)
	}
	if diff := cmp.Diff(before, snap(st), snapOpts); diff != "" {
		t.Fatalf("a refused Admit changed the state (-before +after):\n%s", diff)
	}
	if _, err := st.Admit(Request{ID: "three", CPUs: 3, QoS: LSE}); err != nil {
		t.Fatalf("Admit(3 CPUs) = %v, want it admitted: one CPU stays for BE", err)
	}
}
