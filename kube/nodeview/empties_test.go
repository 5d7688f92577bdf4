package nodeview

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/kube/nodestate"
)

// verdictsAsAlone fails t unless every node of nodes gets from c the
// verdict (unresolvable included) it gets decoded alone in a new cache,
// for LSE requests of 1 to 8 CPUs, judged anew and as a scheduler
// judges (View.Judge under the request's View.Key: the answers kept on
// a node's entry and on the empty state it shares).
func verdictsAsAlone(t *testing.T, c *View, nodes ...*corev1.Node) {
	t.Helper()
	for _, n := range nodes {
		alone := New()
		alone.SetNode(n)
		for cpus := 1; cpus <= 8; cpus++ {
			for _, bind := range []alloc.Bind{"", alloc.BindFullPCPUs} {
				req := alloc.Request{ID: "a/b", QoS: alloc.LSE, CPUs: cpus, TopologyPolicy: alloc.TopologySingleNUMANode, Bind: bind}
				want := judge(alone.get(n.Name), req, nil)
				if got := judge(c.get(n.Name), req, nil); got != want {
					t.Fatalf("%s, %d CPUs %s: verdict %+v in the cache, %+v decoded alone", n.Name, cpus, bind, got, want)
				}
				if got := c.Judge(n.Name, req, nil, c.Key(req)); got != want {
					t.Fatalf("%s, %d CPUs %s: verdict %+v judged under its key, %+v decoded alone", n.Name, cpus, bind, got, want)
				}
			}
		}
	}
}

// Issue 27 §2: the key of a shared empty state could lose the node's
// settings and no test noticed. Two nodes of one machine, one under
// full-pcpus-only and one under the kubelet engine, and a third with
// neither, each get their own empty state and their own answers: an
// odd CPU count is refused for good (unresolvable) under
// full-pcpus-only only.
func TestEmptyKeyHoldsSettings(t *testing.T) {
	topo := machine(t).Topology()
	state := func(set alloc.NodeSettings) *alloc.State {
		st, err := alloc.NewState(topo, set)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	nodes := []*corev1.Node{
		publish(t, baseNode("plain"), state(alloc.NodeSettings{}), alloc.TopologySingleNUMANode, map[string]string{}),
		publish(t, baseNode("full-pcpus"), state(alloc.NodeSettings{Options: []string{alloc.OptFullPCPUsOnly}}), alloc.TopologySingleNUMANode, map[string]string{}),
		publish(t, baseNode("kubelet"), state(alloc.NodeSettings{Policy: alloc.PolicyKubelet}), alloc.TopologySingleNUMANode, map[string]string{}),
	}
	if nodes[0].Annotations[nodestate.AnnotationTopology] != nodes[1].Annotations[nodestate.AnnotationTopology] {
		t.Fatal("the nodes publish different machines: the test needs one")
	}
	c := New()
	for _, n := range nodes {
		c.SetNode(n)
	}
	for i, a := range nodes {
		for _, b := range nodes[i+1:] {
			if ea, eb := c.get(a.Name).pub.empty, c.get(b.Name).pub.empty; ea == nil || ea == eb {
				t.Errorf("%s and %s (one machine, other settings) share the empty state %p", a.Name, b.Name, ea)
			}
		}
	}
	one := alloc.Request{ID: "a/b", QoS: alloc.LSE, CPUs: 1, TopologyPolicy: alloc.TopologySingleNUMANode}
	if v := judge(c.get("full-pcpus"), one, nil); v.OK || !v.Unresolvable {
		t.Errorf("1 CPU under full-pcpus-only: %+v, want refused for good", v)
	}
	if v := judge(c.get("plain"), one, nil); !v.OK {
		t.Errorf("1 CPU on the plain node: %+v, want taken", v)
	}
	verdictsAsAlone(t, c, nodes...)
}

// Issue 27 §3: the cache of shared empty states was never pruned: one
// node republishing its topology 3,000 times with one byte changed left
// 3,001 of them (+261 MiB heap). A state no node holds is dropped at once,
// and however many machines are in use at a time, at most
// MaxSharedEmpties are shared; every node still answers as decoded alone.
func TestSharedEmptiesBounded(t *testing.T) {
	st := machine(t)
	n := publish(t, baseNode("n1"), st, alloc.TopologySingleNUMANode, map[string]string{})
	doc := n.Annotations[nodestate.AnnotationTopology]
	c := New()
	for i := range 3000 {
		// Trailing blanks: the same machine, another document.
		n.Annotations[nodestate.AnnotationTopology] = doc + strings.Repeat(" ", i)
		c.SetNode(n.DeepCopy())
		if got := c.sharedEmpties(); got != 1 {
			t.Fatalf("after %d publications of n1: %d shared empty states, want 1", i+1, got)
		}
	}
	verdictsAsAlone(t, c, n)

	// More machines in use at once than the cap: each of the nodes,
	// shared or not, answers as decoded alone.
	var nodes []*corev1.Node
	for i := range MaxSharedEmpties + 20 {
		m := publish(t, baseNode(fmt.Sprintf("m%d", i)), st, alloc.TopologySingleNUMANode, map[string]string{})
		m.Annotations[nodestate.AnnotationTopology] += strings.Repeat(" ", i+1)
		c.SetNode(m)
		nodes = append(nodes, m)
		if got := c.sharedEmpties(); got > MaxSharedEmpties {
			t.Fatalf("after %d machines: %d shared empty states, want at most %d", i+1, got, MaxSharedEmpties)
		}
	}
	verdictsAsAlone(t, c, append(nodes, n)...)
	for _, m := range nodes {
		c.DeleteNode(m.Name)
	}
	c.DeleteNode(n.Name)
	if got := c.sharedEmpties(); got != 0 {
		t.Errorf("every node deleted: %d shared empty states, want 0", got)
	}
}
