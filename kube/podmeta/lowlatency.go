package podmeta

import (
	"fmt"

	"github.com/corepin/corepin/alloc"
)

// Pod annotations of the low-latency switches (issue 31 §3), after
// CRI-O's cpu-load-balancing.crio.io and cpu-quota.crio.io, but with
// corepin's own names and values: "false" asks, "true" is the default
// spelled out, anything else is refused. Only exclusive pods (LSE, LSR)
// take "false": a shared pod's CPUs are not its own.
const (
	// AnnotationLoadBalance "false" takes an exclusive pod's containers'
	// CPUs out of the scheduler's load balancing while they hold them.
	AnnotationLoadBalance = "corepin.io/load-balance"
	// AnnotationCPUQuota "false" removes the CFS quota the kubelet puts
	// on an exclusive pod's containers (its CPU limit), which would
	// throttle a burst of its threads on CPUs nobody else may use.
	AnnotationCPUQuota = "corepin.io/cpu-quota"
)

// LowLatency is what a pod's low-latency annotations ask.
type LowLatency struct {
	// NoLoadBalance: AnnotationLoadBalance "false".
	NoLoadBalance bool
	// NoCPUQuota: AnnotationCPUQuota "false".
	NoCPUQuota bool
}

// ReadLowLatency reads AnnotationLoadBalance and AnnotationCPUQuota from
// annotations for a pod of class q (as Read decided it): each "true" or
// "false", exactly; "false" only for LSE and LSR. Errors wrap ErrInvalid
// and say what to change.
func ReadLowLatency(annotations map[string]string, q alloc.QoS) (LowLatency, error) {
	var ll LowLatency
	for _, a := range []struct {
		key string
		off *bool
		why string
	}{
		{AnnotationLoadBalance, &ll.NoLoadBalance, "takes CPUs of the pod's own out of the scheduler's balancing"},
		{AnnotationCPUQuota, &ll.NoCPUQuota, "lifts the quota on CPUs of the pod's own"},
	} {
		v, ok := annotations[a.key]
		if !ok {
			continue
		}
		switch v {
		case "true":
		case "false":
			if q != alloc.LSE && q != alloc.LSR {
				return LowLatency{}, fmt.Errorf("%w: annotation %s false %s; this pod is %s and shares its CPUs: make it Guaranteed with whole CPUs or label it LSE or LSR",
					ErrInvalid, a.key, a.why, q)
			}
			*a.off = true
		default:
			return LowLatency{}, fmt.Errorf("%w: annotation %s %.20q: use \"false\" (or \"true\", the default)", ErrInvalid, a.key, v)
		}
	}
	return ll, nil
}
