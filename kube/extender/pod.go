package extender

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/kube/podmeta"
	"github.com/corepin/corepin/kube/podreq"
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

// RequestOf returns the allocation request of pod (podreq.Of: the QoS
// class from the Koordinator label, else from kubelet's QoS; the bind and
// exclusive policies from the resource-spec annotation; the topology
// policy from AnnotationNUMAPolicy; the pod's effective CPU request).
// Errors wrap ErrPod and name the pod and the label or annotation at
// fault.
func RequestOf(pod *corev1.Pod) (alloc.Request, error) { return podreq.Of(pod) }
