package podreq

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/kube/podmeta"
)

// Of returns the allocation request of pod as podmeta.Read decides
// it: its QoS class from the Koordinator label, else from kubelet's QoS
// (status.qosClass, or computed from requests and limits: Guaranteed with
// whole CPUs is LSE, Guaranteed with a fraction and Burstable are LS,
// BestEffort is BE); its bind and exclusive policies from the resource-spec
// annotation; its topology policy from AnnotationNUMAPolicy; its use of
// isolated CPUs from AnnotationIsolatedCPUs (LSE and LSR only). The CPU count
// is the pod's effective request (containers summed, or the largest init
// container if more). Errors wrap podmeta.ErrInvalid and name the pod and the label or
// annotation at fault.
func Of(pod *corev1.Pod) (alloc.Request, error) {
	if pod == nil {
		return alloc.Request{}, fmt.Errorf("%w: no pod", podmeta.ErrInvalid)
	}
	id := pod.Namespace + "/" + pod.Name
	class := pod.Status.QOSClass
	if class == "" {
		class = computeQoS(pod)
	}
	milli, err := podMilliCPU(pod)
	if err != nil {
		return alloc.Request{}, fmt.Errorf("pod %s: %w", id, err)
	}
	w, err := podmeta.Read(podmeta.Pod{Labels: pod.Labels, Annotations: pod.Annotations,
		Kubelet: podmeta.KubeletQoS(class), MilliCPUs: milli, NoCPULimit: !cpuLimited(pod)})
	if err != nil {
		return alloc.Request{}, fmt.Errorf("pod %s: %w", id, err)
	}
	r, err := w.RequestSpec().Request(id)
	if err != nil {
		return alloc.Request{}, fmt.Errorf("%w: pod %s: %w", podmeta.ErrInvalid, id, err)
	}
	return r, nil
}

// podMilliCPU is the pod's CPU in millicpus as its node's plugin admits
// it: the containers' limits (a container without one: its request)
// summed, or the largest init container's if that is more. A negative request or limit, or one above every CPU
// corepin can place (a value that does not even fit in 64 bits included,
// which Quantity.MilliValue would wrap), is an error naming the container
// and the value: it is never read as 0.
func podMilliCPU(pod *corev1.Pod) (int64, error) {
	var sum, init int64
	for _, cs := range []struct {
		what string
		list []corev1.Container
	}{{"container", pod.Spec.Containers}, {"init container", pod.Spec.InitContainers}} {
		for _, c := range cs.list {
			m, err := containerMilliCPU(c)
			if err != nil {
				return 0, fmt.Errorf("%w: %s %s: %w", podmeta.ErrInvalid, cs.what, c.Name, err)
			}
			if cs.what == "container" {
				sum += m // each at most MaxMilliCPUs: no overflow
			} else {
				init = max(init, m)
			}
		}
	}
	return max(sum, init), nil
}

// maxCPU is the largest CPU quantity a container may ask for: every CPU
// corepin can place.
var maxCPU = resource.NewMilliQuantity(podmeta.MaxMilliCPUs, resource.DecimalSI)

// containerMilliCPU is c's CPU limit, else its request, in millicpus, as
// the node's plugin sizes the container (nri.SpecOf): a shared-pool (LS)
// container holds its limit of the pool, so a scheduler counting only its
// request would bind a burst the node then refuses. (Guaranteed
// containers request what they limit; BE ones ask for nothing.) Either
// one present is checked, whether or not it is the one used.
func containerMilliCPU(c corev1.Container) (int64, error) {
	for _, r := range []struct {
		what string
		list corev1.ResourceList
	}{{"cpu request", c.Resources.Requests}, {"cpu limit", c.Resources.Limits}} {
		if q, ok := r.list[corev1.ResourceCPU]; ok {
			if q.Sign() < 0 {
				return 0, fmt.Errorf("%s %s is negative", r.what, q.String())
			}
			if q.Cmp(*maxCPU) > 0 {
				return 0, fmt.Errorf("%s %s is more than the %s CPUs corepin can place", r.what, q.String(), maxCPU.String())
			}
		}
	}
	if q, ok := c.Resources.Limits[corev1.ResourceCPU]; ok && !q.IsZero() {
		return q.MilliValue(), nil
	}
	if q, ok := c.Resources.Requests[corev1.ResourceCPU]; ok {
		return q.MilliValue(), nil
	}
	return 0, nil
}

// cpuLimited reports whether every container of pod, init containers
// included, has a CPU limit above 0: what the node's plugin needs of each
// container of an exclusive class.
func cpuLimited(pod *corev1.Pod) bool {
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			if q, ok := c.Resources.Limits[corev1.ResourceCPU]; !ok || q.Sign() <= 0 {
				return false
			}
		}
	}
	return true
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
