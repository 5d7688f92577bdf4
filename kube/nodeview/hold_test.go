package nodeview

import (
	"fmt"
	"strings"
	"testing"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/kube/nodestate"
)

// four is a 4-CPU single-numa-node request: the node of machine() has two
// NUMA nodes of 4 CPUs.
var four = alloc.Request{ID: "default/p", CPUs: 4, QoS: alloc.LSE, TopologyPolicy: alloc.TopologySingleNUMANode}

// TestHoldBeforeTheNodeIsKnown: a pod bound to a node the view has not
// seen yet (the extender learns nodes from its calls, pods from a watch)
// is placed on the node's state once the view learns it, stays there
// until what the node publishes names it, and goes when forgotten.
func TestHoldBeforeTheNodeIsKnown(t *testing.T) {
	own := machine(t)
	vw := New()
	vw.Hold("uid-p1", "n1", four, false)
	vw.Hold("uid-p2", "n1", four, false)
	if got := vw.Reserved(); got != 2 || vw.Known("n1") {
		t.Fatalf("Reserved() = %d, Known = %v; want 2 held on a node not known", got, vw.Known("n1"))
	}
	node := publish(t, baseNode("n1"), own, "", map[string]string{})
	vw.SetNode(node)
	want := "no NUMA node with 4 free CPUs" + nodestate.ComingSuffix
	if v := vw.Judge("n1", four, nil, vw.Key(four)); v.OK || v.Reason != want {
		t.Fatalf("a third 4-CPU pod beside two held: %+v, want refused with %q", v, want)
	}
	// Held again with the same request: nothing changes.
	vw.Hold("uid-p1", "n1", four, false)
	if got := vw.Reserved(); got != 2 {
		t.Fatalf("after holding p1 again: Reserved() = %d, want 2", got)
	}
	// The node admits p1 and publishes it by UID: p2 stays held.
	if _, err := own.Admit(alloc.Request{ID: "default/p1", CPUs: 4, QoS: alloc.LSE, TopologyPolicy: alloc.TopologySingleNUMANode}); err != nil {
		t.Fatal(err)
	}
	vw.SetNode(publish(t, node, own, "", map[string]string{"default/p1": "uid-p1"}))
	if got := vw.Reserved(); got != 1 {
		t.Fatalf("after the node published p1: Reserved() = %d, want 1 (p2)", got)
	}
	if v := vw.Judge("n1", four, nil, vw.Key(four)); v.OK || v.Reason != want {
		t.Fatalf("with p1 published and p2 held: %+v, want refused with %q", v, want)
	}
	// Holding p1 again now that the node names it does not count it twice.
	vw.Hold("uid-p1", "n1", four, false)
	if got := vw.Reserved(); got != 1 {
		t.Fatalf("p1 held again once published: Reserved() = %d, want 1", got)
	}
	vw.Forget("uid-p2")
	if v := vw.Judge("n1", four, nil, vw.Key(four)); !v.OK {
		t.Fatalf("p2 forgotten: %+v, want the free NUMA node taken", v)
	}
}

// TestHoldOnAnObject: a NodeResourceTopology object names no pods: a pod
// bound before the view started (before) is taken to be in it, a pod
// bound after the object's version stays placed until a later version.
func TestHoldOnAnObject(t *testing.T) {
	vw := New()
	vw.SetNRT(nrtObjectFor(t, "n1", "1", 4, 4))
	vw.SetNode(baseNode("n1"))
	vw.Hold("uid-old", "n1", four, true)
	if got := vw.Reserved(); got != 0 {
		t.Fatalf("a pod listed at start: Reserved() = %d, want 0 (in the object)", got)
	}
	vw.Hold("uid-new", "n1", four, false)
	eight := four
	eight.TopologyPolicy = ""
	eight.CPUs = 8
	if v := vw.Judge("n1", eight, nil, vw.Key(eight)); v.OK || !strings.HasPrefix(v.Reason, "no NUMA node with 8 free CPUs") {
		t.Fatalf("8 CPUs beside a pod held on 4+4: %+v, want refused", v)
	}
	// The same version again (a label change of the Node, a resync):
	// the pod stays.
	vw.SetNRT(nrtObjectFor(t, "n1", "1", 4, 4))
	vw.SetNode(baseNode("n1"))
	if got := vw.Reserved(); got != 1 {
		t.Fatalf("the same object again: Reserved() = %d, want 1", got)
	}
	// A later version shows it held.
	vw.SetNRT(nrtObjectFor(t, "n1", "2", 0, 4))
	if got := vw.Reserved(); got != 0 {
		t.Fatalf("a later version: Reserved() = %d, want 0", got)
	}
	if v := vw.Judge("n1", eight, nil, vw.Key(eight)); v.OK || strings.Contains(v.Reason, nodestate.ComingSuffix) {
		t.Fatalf("8 CPUs on 0+4: %+v, want refused by the object alone", v)
	}
}

// TestSameStateShared: nodes publishing the same annotations share one
// decoded state, dropped when no node publishes it.
func TestSameStateShared(t *testing.T) {
	own := machine(t)
	vw := New()
	a := publish(t, baseNode("a"), own, "", map[string]string{})
	b := publish(t, baseNode("b"), own, "", map[string]string{})
	vw.SetNode(a)
	vw.SetNode(b)
	if vw.get("a").pub != vw.get("b").pub || len(vw.decoded) != 1 {
		t.Fatalf("two nodes publishing the same: one state %v, %d states decoded; want one shared", vw.get("a").pub == vw.get("b").pub, len(vw.decoded))
	}
	// One of them holds a pod: its entry places it, the shared state is
	// untouched.
	if err := vw.Reserve("uid-p", "a", four); err != nil {
		t.Fatal(err)
	}
	if v := vw.Judge("b", four, nil, vw.Key(four)); !v.OK {
		t.Fatalf("b after a pod reserved on a: %+v", v)
	}
	vw.DeleteNode("a")
	vw.DeleteNode("b")
	if len(vw.decoded) != 0 || vw.sharedEmpties() != 0 || vw.bytes != 0 {
		t.Fatalf("every node deleted: %d states, %d empty states, %d bytes kept; want none", len(vw.decoded), vw.sharedEmpties(), vw.bytes)
	}
}

// TestMaxBytesBound: a view fed by calls (WithMaxBytes) never holds more
// than its bound (plus the one entry that alone passes it), answers every
// node as a view without a bound does, keeps the pods held across the
// states it forgets, and remembers nothing of a node publishing nothing.
func TestMaxBytesBound(t *testing.T) {
	own := machine(t)
	probe := New()
	probe.SetNode(publish(t, baseNode("x"), own, "", map[string]string{}))
	one := probe.bytes
	bound := 3 * one
	vw, free := New(WithMaxBytes(bound)), New()
	vw.Hold("uid-p", "n0", four, false)
	free.Hold("uid-p", "n0", four, false)
	for round := range 3 {
		for i := range 10 {
			st := own.Clone()
			if i%2 == 1 { // half the nodes hold 2 CPUs: distinct states
				if _, err := st.Admit(alloc.Request{ID: fmt.Sprintf("x/w%d", i), CPUs: 2, QoS: alloc.LSE}); err != nil {
					t.Fatal(err)
				}
			}
			node := publish(t, baseNode(fmt.Sprintf("n%d", i)), st, "", map[string]string{})
			vw.SetNode(node)
			free.SetNode(node)
			if vw.bytes > bound+2*one {
				t.Fatalf("round %d, node %d: %d bytes held, bound %d", round, i, vw.bytes, bound)
			}
			for _, r := range []alloc.Request{four, {ID: "a/b", CPUs: 6, QoS: alloc.LSE}, {ID: "a/b", CPUs: 1, QoS: alloc.LSE}} {
				if got, want := vw.Judge(node.Name, r, nil, vw.Key(r)), free.Judge(node.Name, r, nil, free.Key(r)); got != want {
					t.Fatalf("round %d, %s, %d CPUs: %+v bounded, %+v unbounded", round, node.Name, r.CPUs, got, want)
				}
			}
		}
	}
	if got := vw.Reserved(); got != 1 {
		t.Errorf("Reserved() = %d after the bound forgot states, want 1", got)
	}
	vw.SetNode(baseNode("plain"))
	if _, ok := vw.plain["plain"]; ok {
		t.Error("a view fed by calls remembers a node publishing nothing")
	}
}
