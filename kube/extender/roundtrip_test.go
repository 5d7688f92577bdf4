package extender

import (
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/kube/nodestate"
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

// publishedNode is the Node whose NRI plugin, of default topology policy
// topologyPolicy, published st.
func publishedNode(t *testing.T, name string, st *alloc.State, topologyPolicy string) corev1.Node {
	t.Helper()
	return publishedNodeWithPods(t, name, st, topologyPolicy, nil)
}

// publishedNodeWithPods is publishedNode whose plugin names the pod of
// each assignment (pod UID by assignment id; nil: it names none).
func publishedNodeWithPods(t *testing.T, name string, st *alloc.State, topologyPolicy string, pods map[string]string) corev1.Node {
	t.Helper()
	ann, _, err := nodestate.NodeAnnotations(st, alloc.TopologyPolicy(topologyPolicy), pods)
	if err != nil {
		t.Fatalf("NodeAnnotations: %v", err)
	}
	m := map[string]string{}
	for k, v := range ann {
		if v != nil {
			m[k] = *v
		}
	}
	return node(name, m)
}

// published sets in e's node view the node "n" whose NRI plugin published
// st and topologyPolicy, and returns that node's state as the view decodes
// it (kube/nodestate).
func published(t *testing.T, e *Extender, st *alloc.State, topologyPolicy string) nodestate.Judged {
	t.Helper()
	n := publishedNode(t, "n", st, topologyPolicy)
	e.setNode(&n)
	var set *string
	if v, ok := n.Annotations[AnnotationAllocator]; ok {
		set = &v
	}
	pub, err := nodestate.DecodeTopology(n.Annotations[AnnotationTopology], n.Annotations[AnnotationAssigned], set)
	if err != nil {
		t.Fatalf("the extender cannot read what the plugin published (%v): %v", n.Annotations, err)
	}
	j, err := nodestate.JudgeTopology(pub)
	if err != nil || j.State == nil || !e.view.Known("n") {
		t.Fatalf("the extender cannot judge what the plugin published (%v): %v", n.Annotations, err)
	}
	return j
}

// nodeAdmits is the node's own answer to a pod asking r: the NRI plugin's
// (nodecore.Containers.Admit gives a request naming no topology policy the
// node's default, places it and refuses what starves the shared pools).
func nodeAdmits(st *alloc.State, r alloc.Request, topologyPolicy string) (alloc.Placement, error) {
	if r.TopologyPolicy == "" {
		r.TopologyPolicy = alloc.TopologyPolicy(topologyPolicy)
	}
	return st.Clone().Admit(r)
}

// TestPublishedStateDecodesToTheNodesAnswers: what the NRI plugin publishes
// for a node's state and settings (nodestate.NodeAnnotations), decoded by the
// extender, gives the same free CPUs per NUMA node and the same answer to
// every request as the node's own state under its own settings: policy,
// options and default topology policy (given to the asks that name none;
// the others keep theirs, as on the node).
func TestPublishedStateDecodesToTheNodesAnswers(t *testing.T) {
	twoNodes := topology.Shape{Sockets: 2, NodesPerSocket: 1, L3PerNode: 1, CoresPerL3: 4, ThreadsPerCore: 2}
	fourNodes := topology.Shape{Sockets: 2, NodesPerSocket: 2, L3PerNode: 1, CoresPerL3: 4, ThreadsPerCore: 2}
	mixed := []alloc.Request{
		{ID: "ns/a", CPUs: 4, QoS: alloc.LSE, Bind: alloc.BindFullPCPUs},
		{ID: "ns/b", CPUs: 2, QoS: alloc.LSR, Exclusive: alloc.ExclusivePCPULevel},
		{ID: "ns/c", MilliCPUs: 2500, QoS: alloc.LS},
		{ID: "ns/d", MilliCPUs: 100, QoS: alloc.BE},
	}
	// The kubelet engine takes no bind or exclusive policy.
	plain := []alloc.Request{
		{ID: "ns/a", CPUs: 4, QoS: alloc.LSE},
		{ID: "ns/b", CPUs: 2, QoS: alloc.LSR},
		{ID: "ns/c", MilliCPUs: 2500, QoS: alloc.LS},
		{ID: "ns/d", MilliCPUs: 100, QoS: alloc.BE},
	}
	fullPCPUs := []string{alloc.OptFullPCPUsOnly}
	states := []struct {
		name  string
		shape topology.Shape
		cfg   alloc.NodeSettings
		// topologyPolicy is the node's default (the NRI plugin's).
		topologyPolicy string
		held           []alloc.Request
	}{
		{name: "empty, nothing reserved", shape: twoNodes},
		{name: "reserved core and mixed workloads", shape: twoNodes, cfg: alloc.NodeSettings{Reserved: cpuset.New(0, 8)}, held: []alloc.Request{
			{ID: "ns/a", CPUs: 4, QoS: alloc.LSE, Bind: alloc.BindFullPCPUs},
			{ID: "ns/b", CPUs: 1, QoS: alloc.LSR, Exclusive: alloc.ExclusivePCPULevel},
			{ID: "ns/c", MilliCPUs: 2500, QoS: alloc.LS},
			{ID: "ns/d", MilliCPUs: 100, QoS: alloc.BE},
		}},
		{name: "four nodes, NUMA-level exclusive", shape: fourNodes, cfg: alloc.NodeSettings{Reserved: cpuset.New(0)}, held: []alloc.Request{
			{ID: "ns/a", CPUs: 3, QoS: alloc.LSE, Exclusive: alloc.ExclusiveNUMANodeLevel, TopologyPolicy: alloc.TopologySingleNUMANode},
			{ID: "ns/b", CPUs: 6, QoS: alloc.LSE, TopologyPolicy: alloc.TopologyRestricted},
		}},
		// One CPU of a core reserved: kubelet's full-pcpus-only counts its
		// sibling as taken, so the extender must know it is reserved, not
		// held.
		{name: "kubelet, full-pcpus-only, a reserved CPU", shape: twoNodes,
			cfg: alloc.NodeSettings{Policy: alloc.PolicyKubelet, Options: fullPCPUs, Reserved: cpuset.New(0)}, held: plain[:1]},
		{name: "kubelet, full-pcpus-only, reserved by count", shape: fourNodes,
			cfg: alloc.NodeSettings{Policy: alloc.PolicyKubelet, Options: fullPCPUs, ReservedCount: 2}, held: plain},
		{name: "kubelet, strict-cpu-reservation and distribute-cpus-across-numa", shape: fourNodes,
			cfg: alloc.NodeSettings{Policy: alloc.PolicyKubelet, Options: []string{alloc.OptStrictCPUReservation, alloc.OptDistributeAcrossNUMA}, Reserved: cpuset.New(0, 16)}, held: plain},
		{name: "corepin, full-pcpus-only", shape: twoNodes,
			cfg: alloc.NodeSettings{Options: fullPCPUs, Reserved: cpuset.New(0, 8)}, held: mixed},
		{name: "node default single-numa-node", shape: twoNodes, topologyPolicy: "single-numa-node",
			cfg: alloc.NodeSettings{Reserved: cpuset.New(0)}, held: mixed[:2]},
		{name: "kubelet, node default restricted", shape: fourNodes, topologyPolicy: "restricted",
			// 3 CPUs free on each of nodes 1 to 3: 9 fit on three nodes,
			// not on the two restricted asks for.
			cfg: alloc.NodeSettings{Policy: alloc.PolicyKubelet, Reserved: cpuset.New(0, 16)}, held: append(slices.Clone(plain[:2]),
				alloc.Request{ID: "ns/e", CPUs: 5, QoS: alloc.LSE, TopologyPolicy: alloc.TopologySingleNUMANode},
				alloc.Request{ID: "ns/f", CPUs: 5, QoS: alloc.LSE, TopologyPolicy: alloc.TopologySingleNUMANode},
				alloc.Request{ID: "ns/g", CPUs: 5, QoS: alloc.LSE, TopologyPolicy: alloc.TopologySingleNUMANode})},
	}
	var asks []alloc.Request
	for _, n := range []int{1, 2, 3, 4, 6, 7, 9} {
		for _, tp := range []alloc.TopologyPolicy{"", alloc.TopologyNone, alloc.TopologySingleNUMANode, alloc.TopologyRestricted} {
			for _, b := range []alloc.Bind{"", alloc.BindFullPCPUs, alloc.BindSpreadByPCPUs} {
				for _, x := range []alloc.Exclusive{"", alloc.ExclusivePCPULevel, alloc.ExclusiveNUMANodeLevel} {
					asks = append(asks, alloc.Request{ID: fmt.Sprintf("new/%d-%s-%s-%s", n, tp, b, x), CPUs: n, QoS: alloc.LSE, Bind: b, TopologyPolicy: tp, Exclusive: x})
				}
			}
		}
	}
	asks = append(asks, alloc.Request{ID: "new/lsr", CPUs: 2, QoS: alloc.LSR},
		alloc.Request{ID: "new/lsr-one-node", CPUs: 5, QoS: alloc.LSR, TopologyPolicy: alloc.TopologySingleNUMANode},
		alloc.Request{ID: "new/ls", MilliCPUs: 9500, QoS: alloc.LS},
		alloc.Request{ID: "new/ls-huge", MilliCPUs: 15500, QoS: alloc.LS},
		alloc.Request{ID: "new/be", MilliCPUs: 500, QoS: alloc.BE})
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
			e := New()
			j := published(t, e, st, tc.topologyPolicy)
			if diff := cmp.Diff(freePerNode(st), freePerNode(j.State)); diff != "" {
				t.Errorf("free CPUs per NUMA node (-node +extender):\n%s", diff)
			}
			if got, want := j.State.Policy(), st.Policy(); got != want {
				t.Errorf("extender's engine %s, node's %s", got, want)
			}
			if diff := cmp.Diff(st.Pools(), j.State.Pools(), cmp.Comparer(cpuset.CPUSet.Equals)); diff != "" {
				t.Errorf("pools (-node +extender):\n%s", diff)
			}
			refused, byDefault := 0, 0
			for _, r := range asks {
				want, werr := nodeAdmits(st, r, tc.topologyPolicy)
				got, gerr := nodeAdmits(j.State, r, string(j.Settings.TopologyPolicy))
				if (werr == nil) != (gerr == nil) || (werr != nil && werr.Error() != gerr.Error()) {
					t.Errorf("%s: node says %v, extender %v", r.ID, werr, gerr)
					continue
				}
				if werr == nil && !want.CPUs.Equals(got.CPUs) {
					t.Errorf("%s: node places on %s, extender on %s", r.ID, want.CPUs, got.CPUs)
				}
				if v := e.view.Judge("n", r, nil, e.view.Key(r)); v.OK != (werr == nil) {
					t.Errorf("%s: node says %v, extender's verdict %+v", r.ID, werr, v)
				}
				if werr != nil {
					refused++
					if _, err := st.Clone().Allocate(r); r.TopologyPolicy == "" && err == nil {
						byDefault++ // refused for the node's default alone
					}
				}
			}
			if refused == 0 || refused == len(asks) {
				t.Errorf("the node refuses %d of %d asks: the state tells nothing apart", refused, len(asks))
			}
			if tc.topologyPolicy != "" && byDefault == 0 {
				t.Errorf("no ask is refused for the node's default topology policy alone: the case shows nothing")
			}
		})
	}
	t.Run("coarse fallback", func(t *testing.T) {
		big := topology.MustSynthetic(topology.Shape{Sockets: 8, NodesPerSocket: 2, L3PerNode: 2, CoresPerL3: 48, ThreadsPerCore: 2})
		st, err := alloc.NewState(big, alloc.NodeSettings{Reserved: cpuset.New(0, 1)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Allocate(alloc.Request{ID: "a", CPUs: 100, QoS: alloc.LSE}); err != nil {
			t.Fatal(err)
		}
		ann, coarse, err := nodestate.NodeAnnotations(st, "", nil)
		if err != nil || !coarse {
			t.Fatalf("NodeAnnotations: coarse %v, %v; want the fallback", coarse, err)
		}
		pub, err := nodestate.DecodeNUMAFree(*ann[AnnotationNUMAFree], ann[AnnotationAllocator])
		if err != nil {
			t.Fatal(err)
		}
		j, err := nodestate.JudgeFree(pub.Free, AnnotationNUMAFree, pub.Settings)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(freePerNode(st), freePerNode(j.State)); diff != "" {
			t.Errorf("free CPUs per NUMA node (-node +extender):\n%s", diff)
		}
	})
}
