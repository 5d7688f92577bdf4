package nodestate

import (
	"testing"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/internal/testutil"
	"github.com/corepin/corepin/topology"
)

// TestIsolatedCPUsPublishedAndJudged: a node with isolated CPUs (a real
// kernel's, isolcpus=6,7 nohz_full=6,7: topology/testdata/vm) publishes
// them in its topology annotation, and a scheduler judging from the
// annotations answers a pod requiring isolated CPUs as the node's own
// allocator does: refused with one reason while another pod holds them
// (the same on a node that has none), placed on them once that pod is
// preempted; a pod without the wish keeps off them, and the two pods'
// answers are kept apart (Shape).
func TestIsolatedCPUsPublishedAndJudged(t *testing.T) {
	topo, err := topology.Discover(testutil.VMDump(t, "qemu-2s2c2t-isolcpus6-7"))
	if err != nil {
		t.Fatal(err)
	}
	iso := cpuset.New(6, 7)
	node, err := alloc.NewState(topo, alloc.NodeSettings{})
	if err != nil {
		t.Fatal(err)
	}
	require := alloc.Request{ID: "ns/b", CPUs: 2, QoS: alloc.LSE, Isolated: alloc.IsolatedRequire}
	plain := alloc.Request{ID: "ns/c", CPUs: 2, QoS: alloc.LSE}
	if p, err := node.Allocate(alloc.Request{ID: "ns/a", CPUs: 2, QoS: alloc.LSE, Isolated: alloc.IsolatedRequire}); err != nil || !p.CPUs.Equals(iso) {
		t.Fatalf("the node's pod requiring isolated CPUs: %v, %v; want %s", p.CPUs, err, iso)
	}
	ann, _, err := NodeAnnotations(node, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := DecodeTopology(*ann[AnnotationTopology], *ann[AnnotationAssigned], ann[AnnotationAllocator])
	if err != nil {
		t.Fatal(err)
	}
	if !pub.Topology.Isolated().Equals(iso) || !pub.Topology.NohzFull().Equals(iso) {
		t.Fatalf("published isolated %s, nohz_full %s; want %s", pub.Topology.Isolated(), pub.Topology.NohzFull(), iso)
	}
	j, err := JudgeTopology(pub)
	if err != nil {
		t.Fatal(err)
	}
	const want = "fewer than 2 free isolated CPUs (the pod requires them)"
	_, errNode := node.Clone().Allocate(require)
	_, errJudged := j.State.Clone().Allocate(require)
	if got, gotNode := Reason(require, errJudged), Reason(require, errNode); got != want || gotNode != want {
		t.Errorf("pod requiring isolated CPUs, all held: judged %q, node %q; want %q", got, gotNode, want)
	}
	if p, err := j.Empty.Clone().Allocate(require); err != nil || !p.CPUs.Equals(iso) {
		t.Errorf("pod requiring isolated CPUs with the node's pods preempted: %v, %v; want %s", p.CPUs, err, iso)
	}
	if p, err := j.State.Clone().Allocate(plain); err != nil || p.CPUs.Intersects(iso) {
		t.Errorf("pod without the wish: %v, %v; want 2 CPUs off %s", p.CPUs, err, iso)
	}
	if ShapeOf(require) == ShapeOf(plain) {
		t.Errorf("Shape %+v is the same for a pod requiring isolated CPUs and one without", ShapeOf(require))
	}
	none, err := alloc.NewState(topology.MustSynthetic(twoNodes), alloc.NodeSettings{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := none.Allocate(require); Reason(require, err) != want {
		t.Errorf("pod requiring isolated CPUs on a node without any: %q, want %q", Reason(require, err), want)
	}
}
