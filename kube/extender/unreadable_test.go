package extender

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/kube/nodestate"
	"github.com/corepin/corepin/kube/nodestate/nodestatetest"
	"github.com/corepin/corepin/kube/podmeta"
)

// Issue 27 §3: a malformed NodeResourceTopology object left its node
// unjudged, so every pod passed it, while a malformed annotation failed
// the node for every pod. One rule for both: a node whose published state
// does not read takes no pod that needs aligned CPUs (pinned, exclusive or
// under a topology policy), which fails it for good with the reason;
// pods that need nothing of corepin still pass.
func TestUnreadableStateFailsAlignedPodsOnly(t *testing.T) {
	s := NewNRTStore(10, slog.New(slog.DiscardHandler))
	badZones := nodestatetest.NRT(t, "nrt-zones", 4, 4)
	badZones.Object["zones"] = "nope"
	s.onSet(badZones)
	badPolicy := nodestatetest.NRT(t, "nrt-policy", 4, 4)
	badPolicy.Object["topologyPolicies"] = []any{"Sometimes"}
	delete(badPolicy.Object, "attributes")
	s.onSet(badPolicy)
	s.onSet(nodestatetest.NRT(t, "nrt-good", 4, 4))
	e := New(WithNRT(s))
	nodes := []corev1.Node{
		node("nrt-zones", nil), node("nrt-policy", nil), node("nrt-good", nil),
		node("annotation", map[string]string{nodestate.AnnotationTopology: "{"}),
	}
	bad := map[string]string{
		"nrt-zones":  "the node's NodeResourceTopology does not read: invalid NodeResourceTopology zones: zones is not a list",
		"nrt-policy": `the node's NodeResourceTopology does not read: `,
		"annotation": nodestate.AnnotationTopology,
	}
	numa := map[string]string{podmeta.AnnotationNUMAPolicy: string(alloc.TopologySingleNUMANode)}
	tests := []struct {
		name    string
		pod     *corev1.Pod
		aligned bool
	}{
		{name: "pinned (Guaranteed, whole CPUs)", pod: guaranteedPod("pinned", "2", nil, nil), aligned: true},
		{name: "shared under a topology policy", pod: withCPU(guaranteedPod("ls-numa", "2", numa, nil), "500m", "-"), aligned: true},
		{name: "shared (Burstable)", pod: withCPU(guaranteedPod("ls", "2", nil, nil), "500m", "-")},
		{name: "best effort", pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "be", Namespace: "bench"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := filter(t, e.Handler(), args(t, tc.pod, nodes...))
			want := []string{"nrt-zones", "nrt-policy", "nrt-good", "annotation"}
			if tc.aligned {
				want = []string{"nrt-good"}
			}
			if diff := cmp.Diff(want, names(res.Nodes)); diff != "" {
				t.Fatalf("kept (-want +got):\n%s\nfailed: %v", diff, failedAll(res))
			}
			for name, msg := range bad {
				reason, failed := res.FailedAndUnresolvableNodes[name]
				if tc.aligned != failed || (failed && !strings.Contains(reason, msg)) {
					t.Errorf("%s: failed for good %v (%q), want %v saying %q", name, failed, reason, tc.aligned, msg)
				}
			}
		})
	}
}
