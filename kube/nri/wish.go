package nri

import (
	"fmt"

	"github.com/containerd/nri/pkg/api"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/kube/podmeta"
	"github.com/corepin/corepin/nodecore"
	"github.com/corepin/corepin/qos"
)

// Pod metadata corepin honours: podmeta's names (the scheduler extender
// reads the same).
const (
	// LabelQoSClass is the pod label naming the QoS class: LSE, LSR, LS or
	// BE (Koordinator's SYSTEM is the reserved CPUs and not admitted).
	LabelQoSClass = podmeta.LabelQoSClass
	// AnnotationResourceSpec is the pod annotation holding a ResourceSpec
	// as JSON.
	AnnotationResourceSpec = podmeta.AnnotationResourceSpec
	// AnnotationNUMAPolicy is the pod annotation naming the topology policy
	// of its containers (none, best-effort, restricted, single-numa-node);
	// without it the node's configured default applies.
	AnnotationNUMAPolicy = podmeta.AnnotationNUMAPolicy
	// AnnotationIsolatedCPUs is the pod annotation asking for isolated
	// CPUs for its exclusive containers: prefer or require.
	AnnotationIsolatedCPUs = podmeta.AnnotationIsolatedCPUs
	// AnnotationSched is the pod annotation putting an LS pod's containers
	// in the real-time route: rr or fifo (normal: the fair class).
	AnnotationSched = podmeta.AnnotationSched
	// AnnotationIRQIsolate is the pod annotation keeping device
	// interrupts off its exclusive containers' CPUs ("true"), or opting
	// out of a node that does it for every exclusive pod ("false"); see
	// IRQMode.
	AnnotationIRQIsolate = podmeta.AnnotationIRQIsolate
	// AnnotationRequiredPlugins is the pod annotation that makes the
	// runtime refuse to start the pod's containers while the named NRI
	// plugins are not connected (with containerd's default validator
	// enabled): '["corepin"]'. NRI is fail-open without it.
	AnnotationRequiredPlugins = podmeta.AnnotationRequiredPlugins
)

// MaxResourceSpec bounds the resource-spec annotation.
const MaxResourceSpec = podmeta.MaxResourceSpec

// ErrInvalid means a pod's metadata or resources can not be read as a
// corepin request; the container is refused (the runtime reports the
// error) rather than started unpinned against its owner's wish. It is
// podmeta.ErrInvalid (and so the extender's ErrPod).
var ErrInvalid = podmeta.ErrInvalid

// ResourceSpec is the part of Koordinator's resource-spec annotation that
// corepin honours (podmeta.ResourceSpec).
type ResourceSpec = podmeta.ResourceSpec

// ParseResourceSpec reads the resource-spec annotation strictly
// (podmeta.ParseResourceSpec). Errors wrap ErrInvalid.
func ParseResourceSpec(s string) (ResourceSpec, error) { return podmeta.ParseResourceSpec(s) }

// CPU resources as the kubelet writes them (pkg/kubelet/cm: MilliCPUToShares,
// MilliCPUToQuota).
const (
	minShares     = 2
	sharesPerCPU  = 1024
	defaultPeriod = 100000 // microseconds
	// maxMilli bounds what a container's resources may ask (1<<20 CPUs).
	maxMilli = 1 << 30
)

// sharesOf is the kubelet's cpu.shares for a request of milli CPUs.
func sharesOf(milli int64) uint64 {
	if milli <= 0 {
		return minShares
	}
	return uint64(max(milli*sharesPerCPU/1000, minShares))
}

// cpuOf reads the request (from cpu.shares) and limit (from the CFS
// quota, 0 if none) of a container's CPU resources cpu in millicpus. It
// refuses what the kernel would not take as written: shares below 2
// (cpu.shares' minimum, which the kubelet writes for a container that
// asks for no CPU; absent shares read as none asked) and a quota below 0
// other than -1 (the kernel's "no limit"). Errors wrap ErrInvalid.
func cpuOf(cpu *api.LinuxCPU) (req, limit int64, shares uint64, err error) {
	if q := cpu.GetQuota(); q != nil && q.GetValue() < -1 {
		return 0, 0, 0, fmt.Errorf("%w: cfs quota %d: the kernel takes -1 (no limit) or a positive number of microseconds per period", ErrInvalid, q.GetValue())
	}
	if s := cpu.GetShares(); s != nil && s.GetValue() < minShares {
		return 0, 0, 0, fmt.Errorf("%w: cpu shares %d: the kernel takes %d or more (the kubelet writes %d for a container that asks for no CPU)",
			ErrInvalid, s.GetValue(), minShares, minShares)
	}
	shares = cpu.GetShares().GetValue()
	shares = min(shares, sharesOf(maxMilli))
	req = int64((shares*1000 + sharesPerCPU/2) / sharesPerCPU)
	if shares <= minShares {
		req = 0
	}
	if q := cpu.GetQuota().GetValue(); q > 0 {
		period := int64(defaultPeriod)
		if p := cpu.GetPeriod().GetValue(); p >= 1000 && p <= 1000000 { // the kernel's range: 1ms..1s
			period = int64(p)
		}
		q = min(q, maxMilli*period/1000) // no overflow below
		limit = (q*1000 + period - 1) / period
	}
	return min(req, maxMilli), min(limit, maxMilli), shares, nil
}

// noCPUSize reports whether cpu carries no CPU size: neither shares nor
// a quota other than 0. containerd passes on an update of the cpuset
// alone (the kubelet's static CPU manager sends them) that way: its CRI
// conversion writes the CRI's unset 0s as values (fromCRILinuxResources).
func noCPUSize(cpu *api.LinuxCPU) bool {
	return cpu.GetShares().GetValue() == 0 && cpu.GetQuota().GetValue() == 0
}

// SpecOf is the request for container ctr of pod, as podmeta.Read
// decides it: the QoS class from the koordinator.sh/qosClass label, bind and
// exclusive policies from the resource-spec annotation, the topology policy
// from corepin.io/numa-policy (absent: the node's default), the use of
// isolated CPUs of an LSE or LSR container from corepin.io/isolated-cpus
// (prefer or require; a shared container never gets them), else the
// kubelet's semantics from the container's CPU resources (Guaranteed with
// whole CPUs: LSE; Guaranteed with a fraction and Burstable: LS;
// BestEffort: BE). The size is the CPU limit where there is one, else the
// request. The string says why that class. Errors wrap ErrInvalid.
func SpecOf(pod *api.PodSandbox, ctr *api.Container) (nodecore.Spec, string, error) {
	req, limit, shares, err := cpuOf(ctr.GetLinux().GetResources().GetCpu())
	if err != nil {
		return nodecore.Spec{}, "", err
	}
	milli := limit
	if milli == 0 {
		milli = req
	}
	class := podmeta.Burstable
	switch {
	case limit > 0 && sharesOf(limit) == shares:
		class = podmeta.Guaranteed
	case limit == 0 && shares <= minShares:
		class = podmeta.BestEffort
	}
	w, err := podmeta.Read(podmeta.Pod{Labels: pod.GetLabels(), Annotations: pod.GetAnnotations(), Kubelet: class, MilliCPUs: milli,
		NoCPULimit: limit == 0})
	if err != nil {
		return nodecore.Spec{}, "", err
	}
	switch w.QoS {
	case alloc.LS:
		// The kernel's shortest quota, which the kubelet also raises a
		// smaller limit to (a 5m sidecar is an everyday pod; the agent's
		// API refuses such a size instead, as its caller can change it).
		w.MilliCPUs = max(w.MilliCPUs, qos.MinQuotaMilliCPUs)
	case alloc.BE:
		w.MilliCPUs = max(w.MilliCPUs, 1) // at least present
	}
	rs := w.RequestSpec()
	s := nodecore.Spec{QoS: rs.QoS, CPUs: rs.CPUs, Bind: rs.Bind, Exclusive: rs.Exclusive, TopologyPolicy: rs.TopologyPolicy, Isolated: rs.Isolated,
		Sched: w.Sched}
	why, err := lowLatency(&s, pod, w)
	if err != nil {
		return nodecore.Spec{}, "", err
	}
	return s, why, nil
}
