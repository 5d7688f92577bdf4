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
	"github.com/corepin/corepin/kube/nodeview"
	"github.com/corepin/corepin/kube/podmeta"
)

// Issue 27 §3: a malformed NodeResourceTopology object left its node
// unjudged, so every pod passed it, while a malformed annotation failed
// the node. One rule for both, as the extender has it: a node whose
// published state does not read fails for good (with the reason) the pods
// that need aligned CPUs, and keeps those that need nothing of corepin.
func TestUnreadableStateFailsAlignedPodsOnly(t *testing.T) {
	c := nodeview.New()
	p := NewWithView(c)
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
