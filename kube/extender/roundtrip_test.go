package extender

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/kube/nrt"
	"github.com/corepin/corepin/topology"
)

// freePerNode is, per NUMA node with CPUs, the CPUs an exclusive request
// could still take in st.
func freePerNode(st *alloc.State) map[topology.NodeID]int {
	t, p := st.Topology(), st.Pools()
	m := map[topology.NodeID]int{}
	for _, n := range t.NodesWithCPUs() {
		m[n] = t.NodeCPUs(n).Intersection(t.Allowed()).Difference(p.Reserved).Difference(p.LSE).Difference(p.LSR).Size()
	}
	return m
}

// published is the node whose NRI plugin published st, as the extender
// decodes it.
func published(t *testing.T, e *Extender, st *alloc.State) *nodeState {
	t.Helper()
	ann, _, err := nrt.NodeAnnotations(st, "")
	if err != nil {
		t.Fatalf("NodeAnnotations: %v", err)
	}
	m := map[string]string{}
	for k, v := range ann {
		if v != nil {
			m[k] = *v
		}
	}
	n := node("n", m)
	ns, _ := e.stateOf(&n)
	if ns == nil || ns.err != nil || ns.st == nil {
		t.Fatalf("the extender cannot read what the plugin published (%v): %+v", m, ns)
	}
	return ns
}

// TestPublishedStateDecodesToTheNodesAnswers: what the NRI plugin publishes
// for a node's state (nrt.NodeAnnotations), decoded by the extender, gives
// the same free CPUs per NUMA node and the same answer to every request as
// the node's own state.
func TestPublishedStateDecodesToTheNodesAnswers(t *testing.T) {
	twoNodes := topology.Shape{Sockets: 2, NodesPerSocket: 1, L3PerNode: 1, CoresPerL3: 4, ThreadsPerCore: 2}
	fourNodes := topology.Shape{Sockets: 2, NodesPerSocket: 2, L3PerNode: 1, CoresPerL3: 4, ThreadsPerCore: 2}
	states := []struct {
		name  string
		shape topology.Shape
		cfg   alloc.Config
		held  []alloc.Request
	}{
		{name: "empty, nothing reserved", shape: twoNodes},
		{name: "reserved core and mixed workloads", shape: twoNodes, cfg: alloc.Config{Reserved: cpuset.New(0, 8)}, held: []alloc.Request{
			{ID: "ns/a", CPUs: 4, QoS: alloc.LSE, Bind: alloc.BindFullPCPUs},
			{ID: "ns/b", CPUs: 1, QoS: alloc.LSR, Exclusive: alloc.ExclusivePCPULevel},
			{ID: "ns/c", MilliCPUs: 2500, QoS: alloc.LS},
			{ID: "ns/d", MilliCPUs: 100, QoS: alloc.BE},
		}},
		{name: "four nodes, NUMA-level exclusive", shape: fourNodes, cfg: alloc.Config{Reserved: cpuset.New(0)}, held: []alloc.Request{
			{ID: "ns/a", CPUs: 3, QoS: alloc.LSE, Exclusive: alloc.ExclusiveNUMANodeLevel, TopologyPolicy: alloc.TopologySingleNUMANode},
			{ID: "ns/b", CPUs: 6, QoS: alloc.LSE, TopologyPolicy: alloc.TopologyRestricted},
		}},
	}
	var asks []alloc.Request
	for _, n := range []int{1, 2, 3, 4, 6, 7, 9} {
		for _, tp := range []alloc.TopologyPolicy{"", alloc.TopologySingleNUMANode, alloc.TopologyRestricted} {
			for _, b := range []alloc.Bind{"", alloc.BindFullPCPUs, alloc.BindSpreadByPCPUs} {
				for _, x := range []alloc.Exclusive{"", alloc.ExclusivePCPULevel, alloc.ExclusiveNUMANodeLevel} {
					asks = append(asks, alloc.Request{ID: fmt.Sprintf("new/%d-%s-%s-%s", n, tp, b, x), CPUs: n, QoS: alloc.LSE, Bind: b, TopologyPolicy: tp, Exclusive: x})
				}
			}
		}
	}
	asks = append(asks, alloc.Request{ID: "new/lsr", CPUs: 2, QoS: alloc.LSR})
	for _, tc := range states {
		t.Run(tc.name, func(t *testing.T) {
			st, err := alloc.NewState(topology.MustSynthetic(tc.shape), tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range tc.held {
				if _, err := st.Allocate(r); err != nil {
					t.Fatalf("holding %s: %v", r.ID, err)
				}
			}
			ns := published(t, New(), st)
			if diff := cmp.Diff(freePerNode(st), freePerNode(ns.st)); diff != "" {
				t.Errorf("free CPUs per NUMA node (-node +extender):\n%s", diff)
			}
			for _, r := range asks {
				want, werr := st.Clone().Allocate(r)
				got, gerr := ns.st.Clone().Allocate(r)
				if (werr == nil) != (gerr == nil) || (werr != nil && Reason(r, werr) != Reason(r, gerr)) {
					t.Errorf("%s: node says %v, extender %v", r.ID, werr, gerr)
					continue
				}
				if werr == nil && !want.CPUs.Equals(got.CPUs) {
					t.Errorf("%s: node places on %s, extender on %s", r.ID, want.CPUs, got.CPUs)
				}
			}
		})
	}
	t.Run("coarse fallback", func(t *testing.T) {
		big := topology.MustSynthetic(topology.Shape{Sockets: 8, NodesPerSocket: 2, L3PerNode: 2, CoresPerL3: 48, ThreadsPerCore: 2})
		st, err := alloc.NewState(big, alloc.Config{Reserved: cpuset.New(0, 1)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Allocate(alloc.Request{ID: "a", CPUs: 100, QoS: alloc.LSE}); err != nil {
			t.Fatal(err)
		}
		ann, coarse, err := nrt.NodeAnnotations(st, "")
		if err != nil || !coarse {
			t.Fatalf("NodeAnnotations: coarse %v, %v; want the fallback", coarse, err)
		}
		ns := decodeNUMAFree(*ann[AnnotationNUMAFree], ann[AnnotationAllocator])
		if ns.err != nil {
			t.Fatal(ns.err)
		}
		if diff := cmp.Diff(freePerNode(st), freePerNode(ns.st)); diff != "" {
			t.Errorf("free CPUs per NUMA node (-node +extender):\n%s", diff)
		}
	})
}
