package plugin

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/kube/nodestate"
	"github.com/corepin/corepin/kube/nodeview"
)

// TestRequeueHints: a pod the plugin refused is retried after a node is
// added, a node's corepin state or Koordinator labels change, or a pod
// bound to a node is deleted; not after a heartbeat, another annotation
// or label, or a pod deleted before it was bound. NodeResourceTopology
// events are registered only when the plugin reads the objects.
func TestRequeueHints(t *testing.T) {
	own := machine(t)
	node := publish(t, baseNode("n1"), own, "", map[string]string{})
	node.Labels = map[string]string{"zone": "a"}
	if _, err := own.Admit(alloc.Request{ID: "default/p1", CPUs: 2, QoS: alloc.LSE}); err != nil {
		t.Fatal(err)
	}
	changed := publish(t, node, own, "", map[string]string{"default/p1": "uid-p1"})
	changed.Labels = node.Labels
	beat := node.DeepCopy()
	beat.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	otherAnn := node.DeepCopy()
	otherAnn.Annotations["example.com/x"] = "1"
	otherLabel := node.DeepCopy()
	otherLabel.Labels["zone"] = "b"
	koord := node.DeepCopy()
	koord.Labels[nodestate.LabelKoordCPUBindPolicy] = "FullPCPUs"
	bound, pending := guaranteed("b", 2), guaranteed("p", 2)
	bound.Spec.NodeName = "n1"

	p := NewWithView(nodeview.New())
	hints := map[fwk.EventResource]fwk.QueueingHintFn{}
	evs, err := p.EventsToRegister(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		hints[e.Event.Resource] = e.QueueingHintFn
	}
	for _, tc := range []struct {
		name     string
		res      fwk.EventResource
		old, new any
		want     fwk.QueueingHint
	}{
		{"node added", fwk.Node, nil, node, fwk.Queue},
		{"node's corepin state changed", fwk.Node, node, changed, fwk.Queue},
		{"node's Koordinator label changed", fwk.Node, node, koord, fwk.Queue},
		{"heartbeat", fwk.Node, node, beat, fwk.QueueSkip},
		{"another annotation", fwk.Node, node, otherAnn, fwk.QueueSkip},
		{"another label", fwk.Node, node, otherLabel, fwk.QueueSkip},
		{"bound pod deleted", fwk.Pod, bound, nil, fwk.Queue},
		{"pending pod deleted", fwk.Pod, pending, nil, fwk.QueueSkip},
	} {
		fn := hints[tc.res]
		if fn == nil {
			t.Fatalf("%s: no %s event registered", tc.name, tc.res)
		}
		got, err := fn(klog.Background(), pending, tc.old, tc.new)
		if err != nil || got != tc.want {
			t.Errorf("%s: hint %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
	if len(evs) != 2 {
		t.Errorf("%d events registered without NodeResourceTopology objects, want 2 (node, pod)", len(evs))
	}
	p.nrt = "noderesourcetopologies.v1alpha2.topology.node.k8s.io"
	evs, _ = p.EventsToRegister(context.Background())
	found := false
	for _, e := range evs {
		found = found || e.Event.Resource == p.nrt
	}
	if !found {
		t.Error("the NodeResourceTopology objects the plugin reads are no requeue event")
	}
}
