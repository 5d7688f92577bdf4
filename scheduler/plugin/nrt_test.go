package plugin

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/kube/nodestate/nodestatetest"
)

// nrtObjectFor is the NodeResourceTopology object (v1alpha2, as corepin
// nri --publish-nrt builds it) of a node with free[i] free CPUs on NUMA
// node i of 8, default topology policy single-numa-node, at resource
// version rv.
func nrtObjectFor(t *testing.T, node, rv string, free ...int) *unstructured.Unstructured {
	t.Helper()
	u := nodestatetest.NRT(t, node, free...)
	u.SetResourceVersion(rv)
	return u
}

// TestNRTNode: a node publishing no corepin annotations is judged by its
// NodeResourceTopology object, as the extender judges it (its default
// topology policy included); a pod reserved there takes its CPUs until
// the object changes after the pod was bound; a node publishing
// annotations is judged by them, not by its object.
func TestNRTNode(t *testing.T) {
	c := NewCache()
	c.SetNRT(nrtObjectFor(t, "n1", "1", 4, 3))
	if c.get("n1") != nil {
		t.Fatal("an object judged before its Node is known")
	}
	c.SetNode(baseNode("n1"))
	four := alloc.Request{ID: "default/p", CPUs: 4, QoS: alloc.LSE} // no policy of its own: the object's single-numa-node
	if v := judge(c.get("n1"), four, nil); !v.ok {
		t.Fatalf("4 CPUs on a node with 4 free on NUMA node 0: refused: %s", v.reason)
	}
	if err := c.Reserve("uid-p1", "n1", four); err != nil {
		t.Fatal(err)
	}
	want := "no NUMA node with 4 free CPUs (the node's default topology policy single-numa-node)"
	v := judge(c.get("n1"), four, nil)
	if v.ok || v.reason != want+" (counting pods bound there and not yet admitted)" {
		t.Fatalf("second 4-CPU pod: ok %v, reason %q, want %q and the pods on their way", v.ok, v.reason, want)
	}
	// The object changes before p1 is bound: p1 stays reserved.
	c.SetNRT(nrtObjectFor(t, "n1", "2", 4, 3))
	if got := c.Reserved(); got != 1 {
		t.Fatalf("Reserved() = %d after a change before binding, want 1", got)
	}
	// p1 is bound, then the object shows it held.
	c.Bound("uid-p1")
	c.SetNRT(nrtObjectFor(t, "n1", "3", 0, 3))
	if got := c.Reserved(); got != 0 {
		t.Fatalf("Reserved() = %d after the object changed past the binding, want 0", got)
	}
	if v := judge(c.get("n1"), four, nil); v.ok || v.reason != want {
		t.Fatalf("4 CPUs on a node with 0 and 3 free: ok %v, reason %q, want %q", v.ok, v.reason, want)
	}
	// Annotations win over the object.
	c.SetNode(publish(t, baseNode("n1"), machine(t), "", map[string]string{}))
	if v := judge(c.get("n1"), four, nil); !v.ok {
		t.Fatalf("a node publishing 8 free CPUs in annotations refused 4: %s", v.reason)
	}
	c.DeleteNRT("n1")
	if c.get("n1") == nil {
		t.Fatal("deleting the object forgot a node judged by its annotations")
	}
}
