package plugin

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/kube/nodestate"
	"github.com/corepin/corepin/kube/nodestate/nodestatetest"
	"github.com/corepin/corepin/kube/podmeta"
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

// Issue 27 §3: a malformed NodeResourceTopology object left its node
// unjudged, so every pod passed it, while a malformed annotation failed
// the node. One rule for both, as the extender has it: a node whose
// published state does not read fails for good (with the reason) the pods
// that need aligned CPUs, and keeps those that need nothing of corepin.
func TestUnreadableStateFailsAlignedPodsOnly(t *testing.T) {
	c := NewCache()
	p := NewWithCache(c)
	badZones := nrtObjectFor(t, "nrt-zones", "1", 4, 4)
	badZones.Object["zones"] = "nope"
	badPolicy := nrtObjectFor(t, "nrt-policy", "1", 4, 4)
	badPolicy.Object["topologyPolicies"] = []any{"Sometimes"}
	delete(badPolicy.Object, "attributes")
	for _, u := range []*unstructured.Unstructured{badZones, badPolicy, nrtObjectFor(t, "nrt-good", "1", 4, 4)} {
		c.SetNode(baseNode(u.GetName()))
		c.SetNRT(u)
	}
	annotated := baseNode("annotation")
	annotated.Annotations = map[string]string{nodestate.AnnotationTopology: "{"}
	c.SetNode(annotated)
	nodes := map[string]*corev1.Node{"annotation": annotated}
	for _, name := range []string{"nrt-zones", "nrt-policy", "nrt-good"} {
		nodes[name] = baseNode(name)
	}
	bad := map[string]string{
		"nrt-zones":  "the node's NodeResourceTopology does not read: invalid NodeResourceTopology zones: zones is not a list",
		"nrt-policy": "the node's NodeResourceTopology does not read: ",
		"annotation": nodestate.AnnotationTopology,
	}
	shared := func(name string, ann map[string]string) *corev1.Pod {
		pod := guaranteed(name, 2)
		pod.Annotations = ann
		c := &pod.Spec.Containers[0].Resources
		c.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}
		c.Limits = nil
		return pod
	}
	bestEffort := guaranteed("be", 1)
	bestEffort.Annotations = nil
	bestEffort.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
	tests := []struct {
		name    string
		pod     *corev1.Pod
		aligned bool
	}{
		{name: "pinned (Guaranteed, whole CPUs)", pod: guaranteed("pinned", 2), aligned: true},
		{name: "shared under a topology policy", pod: shared("ls-numa", map[string]string{podmeta.AnnotationNUMAPolicy: string(alloc.TopologySingleNUMANode)}), aligned: true},
		{name: "shared (Burstable)", pod: shared("ls", nil)},
		{name: "best effort", pod: bestEffort},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			state := framework.NewCycleState()
			if _, s := p.PreFilter(context.Background(), state, tc.pod, nil); !s.IsSuccess() {
				t.Fatalf("PreFilter: %v", s)
			}
			for name, node := range nodes {
				ni := framework.NewNodeInfo()
				ni.SetNode(node)
				s := p.Filter(context.Background(), state, tc.pod, ni)
				msg, isBad := bad[name]
				switch {
				case !tc.aligned || !isBad:
					if !s.IsSuccess() {
						t.Errorf("%s: %v, want kept", name, s)
					}
				case s.Code() != fwk.UnschedulableAndUnresolvable || !strings.Contains(s.Message(), msg):
					t.Errorf("%s: %v, want UnschedulableAndUnresolvable saying %q", name, s, msg)
				}
			}
		})
	}
}
