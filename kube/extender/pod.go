package extender

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/kube/podmeta"
)

// Pod metadata corepin reads: podmeta's names (the NRI plugin reads the
// same).
const (
	// LabelQoSClass is Koordinator's QoS class label: LSE, LSR, LS or BE.
	LabelQoSClass = podmeta.LabelQoSClass
	// AnnotationResourceSpec is Koordinator's CPU binding wish, JSON with
	// preferredCPUBindPolicy and preferredCPUExclusivePolicy.
	AnnotationResourceSpec = podmeta.AnnotationResourceSpec
	// AnnotationNUMAPolicy is the pod's topology policy: none,
	// best-effort, restricted or single-numa-node.
	AnnotationNUMAPolicy = podmeta.AnnotationNUMAPolicy
)

// ErrPod is wrapped by errors about a pod's corepin metadata. It is
// podmeta.ErrInvalid (and so the NRI plugin's nri.ErrInvalid).
var ErrPod = podmeta.ErrInvalid

// RequestOf returns the allocation request of pod as podmeta.Read decides
// it: its QoS class from the Koordinator label, else from kubelet's QoS
// (status.qosClass, or computed from requests and limits: Guaranteed with
// whole CPUs is LSE, Guaranteed with a fraction and Burstable are LS,
// BestEffort is BE); its bind and exclusive policies from the resource-spec
// annotation; its topology policy from AnnotationNUMAPolicy. The CPU count
// is the pod's effective request (containers summed, or the largest init
// container if more). Errors wrap ErrPod and name the pod and the label or
// annotation at fault.
func RequestOf(pod *corev1.Pod) (alloc.Request, error) {
	if pod == nil {
		return alloc.Request{}, fmt.Errorf("%w: no pod", ErrPod)
	}
	id := pod.Namespace + "/" + pod.Name
	class := pod.Status.QOSClass
	if class == "" {
		class = computeQoS(pod)
	}
	w, err := podmeta.Read(podmeta.Pod{Labels: pod.Labels, Annotations: pod.Annotations,
		Kubelet: podmeta.KubeletQoS(class), MilliCPUs: podMilliCPU(pod)})
	if err != nil {
		return alloc.Request{}, fmt.Errorf("pod %s: %w", id, err)
	}
	r, err := w.RequestSpec().Request(id)
	if err != nil {
		return alloc.Request{}, fmt.Errorf("%w: pod %s: %w", ErrPod, id, err)
	}
	return r, nil
}

// podMilliCPU is the pod's effective CPU request in millicpus, as the
// scheduler counts it: the containers' requests summed, or the largest init
// container's if that is more. A container with a limit and no request
// requests its limit.
func podMilliCPU(pod *corev1.Pod) int64 {
	var sum int64
	for _, c := range pod.Spec.Containers {
		sum += min(containerMilliCPU(c), 1<<40)
	}
	for _, c := range pod.Spec.InitContainers {
		sum = max(sum, min(containerMilliCPU(c), 1<<40))
	}
	return min(sum, 1<<40)
}

func containerMilliCPU(c corev1.Container) int64 {
	if q, ok := c.Resources.Requests[corev1.ResourceCPU]; ok {
		return max(q.MilliValue(), 0)
	}
	if q, ok := c.Resources.Limits[corev1.ResourceCPU]; ok {
		return max(q.MilliValue(), 0)
	}
	return 0
}

// computeQoS follows the kubelet's rule on cpu and memory: Guaranteed when
// every container limits both and requests what it limits, BestEffort when
// none asks for either, Burstable otherwise.
func computeQoS(pod *corev1.Pod) corev1.PodQOSClass {
	any, all := false, true
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				lim, hasLim := c.Resources.Limits[r]
				req, hasReq := c.Resources.Requests[r]
				any = any || hasLim || hasReq
				if !hasLim || (hasReq && req.Cmp(lim) != 0) {
					all = false
				}
			}
		}
	}
	switch {
	case !any:
		return corev1.PodQOSBestEffort
	case all:
		return corev1.PodQOSGuaranteed
	}
	return corev1.PodQOSBurstable
}
