package plugin

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/corepin/corepin/kube/nodeview"
)

var _ fwk.EnqueueExtensions = (*Plugin)(nil)

// EventsToRegister names the cluster events after which a pod the plugin
// refused may fit, each with a hint that passes only the changes that
// could help: a node added; a node whose corepin annotations (or, for a
// node judged by its NodeResourceTopology object, its Koordinator labels)
// changed; a pod deleted from a node (its CPUs are free again); and, when
// the plugin reads them, a NodeResourceTopology object added or changed.
// A heartbeat, a label or condition change, a pod deleted before it was
// bound leaves the refused pods where they are.
func (p *Plugin) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	evs := []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeAnnotation | fwk.UpdateNodeLabel},
			QueueingHintFn: nodeChangeHelps},
		{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Delete}, QueueingHintFn: podDeleteHelps},
	}
	if p.nrt != "" {
		evs = append(evs, fwk.ClusterEventWithHint{
			Event: fwk.ClusterEvent{Resource: p.nrt, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: always})
	}
	return evs, nil
}

// nodeChangeHelps queues a pod the plugin refused when a node is added,
// or when what a node publishes for corepin changed.
func nodeChangeHelps(_ klog.Logger, _ *corev1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	n, ok := newObj.(*corev1.Node)
	if !ok {
		return fwk.Queue, fmt.Errorf("node event of a %T", newObj)
	}
	if oldObj == nil {
		return fwk.Queue, nil // added
	}
	old, ok := oldObj.(*corev1.Node)
	if !ok {
		return fwk.Queue, fmt.Errorf("node event of a %T", oldObj)
	}
	if nodeview.Changed(old, n) {
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}

// podDeleteHelps queues a pod the plugin refused when a pod bound to a
// node is deleted (or ends): its CPUs are free again.
func podDeleteHelps(_ klog.Logger, _ *corev1.Pod, oldObj, _ any) (fwk.QueueingHint, error) {
	pod, ok := oldObj.(*corev1.Pod)
	if !ok {
		return fwk.Queue, fmt.Errorf("pod event of a %T", oldObj)
	}
	if pod.Spec.NodeName == "" {
		return fwk.QueueSkip, nil
	}
	return fwk.Queue, nil
}

func always(klog.Logger, *corev1.Pod, any, any) (fwk.QueueingHint, error) { return fwk.Queue, nil }
