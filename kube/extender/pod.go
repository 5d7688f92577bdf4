package extender

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/corepin/corepin/alloc"
)

// Pod metadata corepin reads (design.md, the NRI plugin's contract).
const (
	// LabelQoSClass is Koordinator's QoS class label: LSE, LSR, LS or BE.
	LabelQoSClass = "koordinator.sh/qosClass"
	// AnnotationResourceSpec is Koordinator's CPU binding wish, JSON with
	// preferredCPUBindPolicy and preferredCPUExclusivePolicy.
	AnnotationResourceSpec = "scheduling.koordinator.sh/resource-spec"
	// AnnotationNUMAPolicy is the pod's topology policy: none,
	// best-effort, restricted or single-numa-node.
	AnnotationNUMAPolicy = "corepin.io/numa-policy"
)

// ErrPod is wrapped by errors about a pod's corepin metadata.
var ErrPod = errors.New("invalid pod metadata")

// maxSpecBytes bounds the resource-spec annotation decoded.
const maxSpecBytes = 4096

// resourceSpec is the part of Koordinator's resource-spec annotation corepin
// honours.
type resourceSpec struct {
	PreferredCPUBindPolicy      string `json:"preferredCPUBindPolicy,omitempty"`
	RequiredCPUBindPolicy       string `json:"requiredCPUBindPolicy,omitempty"`
	PreferredCPUExclusivePolicy string `json:"preferredCPUExclusivePolicy,omitempty"`
}

// RequestOf returns the allocation request of pod: its QoS class from the
// Koordinator label, else from kubelet's QoS (Guaranteed with whole CPUs is
// LSE, Guaranteed with a fraction and Burstable are LS, BestEffort is BE);
// its bind and exclusive policies from the resource-spec annotation; its
// topology policy from AnnotationNUMAPolicy. The CPU count is the pod's
// effective request (containers summed, or the largest init container if
// more). Errors wrap ErrPod and name the label or annotation at fault.
func RequestOf(pod *corev1.Pod) (alloc.Request, error) {
	if pod == nil {
		return alloc.Request{}, fmt.Errorf("%w: no pod", ErrPod)
	}
	id := pod.Namespace + "/" + pod.Name
	milli := podMilliCPU(pod)
	spec := alloc.RequestSpec{TopologyPolicy: pod.Annotations[AnnotationNUMAPolicy]}
	qos, ok := pod.Labels[LabelQoSClass]
	if !ok {
		qos = kubeletQoS(pod, milli)
	}
	switch alloc.QoS(qos) {
	case alloc.LSE, alloc.LSR:
		if milli == 0 || milli%1000 != 0 {
			return alloc.Request{}, fmt.Errorf("%w: pod %s of class %s requests %s cpu; exclusive classes need whole CPUs", ErrPod, id, qos, strconv.FormatFloat(float64(milli)/1000, 'f', -1, 64))
		}
	case alloc.LS:
		if milli == 0 {
			qos = string(alloc.BE) // nothing to reserve in the shared pool
		}
	}
	spec.QoS = qos
	if raw, ok := pod.Annotations[AnnotationResourceSpec]; ok {
		rs, err := decodeResourceSpec(raw)
		if err != nil {
			return alloc.Request{}, fmt.Errorf("%w: annotation %s of pod %s: %w", ErrPod, AnnotationResourceSpec, id, err)
		}
		spec.Bind = rs.PreferredCPUBindPolicy
		if rs.RequiredCPUBindPolicy != "" {
			spec.Bind = rs.RequiredCPUBindPolicy
		}
		spec.Exclusive = rs.PreferredCPUExclusivePolicy
	}
	cpus := float64(milli) / 1000
	spec.CPUs = &cpus
	r, err := spec.Request(id)
	if err != nil {
		return alloc.Request{}, fmt.Errorf("%w: pod %s: %w", ErrPod, id, err)
	}
	return r, nil
}

func decodeResourceSpec(raw string) (resourceSpec, error) {
	var rs resourceSpec
	if len(raw) > maxSpecBytes {
		return rs, fmt.Errorf("longer than %d bytes", maxSpecBytes)
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rs); err != nil {
		return rs, fmt.Errorf("parsing: %w", err)
	}
	if dec.More() {
		return rs, errors.New("parsing: trailing data after the JSON object")
	}
	return rs, nil
}

// podMilliCPU is the pod's effective CPU request in millicpus, as the
// scheduler counts it: the containers' requests summed, or the largest init
// container's if that is more. A container with a limit and no request
// requests its limit.
func podMilliCPU(pod *corev1.Pod) int {
	var sum int64
	for _, c := range pod.Spec.Containers {
		sum += min(containerMilliCPU(c), 1<<40)
	}
	for _, c := range pod.Spec.InitContainers {
		sum = max(sum, min(containerMilliCPU(c), 1<<40))
	}
	return int(min(sum, 1<<40))
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

// kubeletQoS maps the pod's kubelet QoS class (status.qosClass as the API
// server sets it, else computed from requests and limits) to corepin's.
func kubeletQoS(pod *corev1.Pod, milli int) string {
	class := pod.Status.QOSClass
	if class == "" {
		class = computeQoS(pod)
	}
	switch class {
	case corev1.PodQOSGuaranteed:
		if milli > 0 && milli%1000 == 0 {
			return string(alloc.LSE)
		}
		return string(alloc.LS)
	case corev1.PodQOSBurstable:
		return string(alloc.LS)
	}
	return string(alloc.BE)
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
