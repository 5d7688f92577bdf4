package nri

import (
	"fmt"

	"github.com/containerd/nri/pkg/api"

	"github.com/corepin/corepin/kube/podmeta"
	"github.com/corepin/corepin/nodecore"
)

// The low-latency annotations (issue 31 §3), podmeta's names, beside
// CRI-O's cpu-load-balancing.crio.io and cpu-quota.crio.io.
const (
	// AnnotationLoadBalance "false" asks for an exclusive pod's CPUs out
	// of the scheduler's load balancing. The plugin refuses it for now
	// (lowLatency says why).
	AnnotationLoadBalance = podmeta.AnnotationLoadBalance
	// AnnotationCPUQuota "false" removes the CFS quota of an exclusive
	// pod's containers (the OCI linux.resources.cpu.quota -1, which the
	// runtime writes as cpu.max "max" or cpu.cfs_quota_us -1).
	AnnotationCPUQuota = podmeta.AnnotationCPUQuota
)

// noQuota is the OCI runtime spec's and the kernel's "no CFS quota".
const noQuota = -1

// lowLatency reads pod's low-latency annotations for wish w into s
// (cpu_quota false; refused on a shared class) and returns w's reason
// with them. AnnotationLoadBalance "false" is refused: the container's
// cgroup is the runtime's, and its ancestors (kubepods, the pod's group)
// the kubelet's, all of which an isolated partition needs to list its
// CPUs (cpuset.cpus.exclusive); the plugin does not write them yet.
// Errors wrap ErrInvalid.
func lowLatency(s *nodecore.Spec, pod *api.PodSandbox, w podmeta.Wish) (string, error) {
	ll, err := podmeta.ReadLowLatency(pod.GetAnnotations(), w.QoS)
	if err != nil {
		return "", err
	}
	why := w.Why
	if ll.NoLoadBalance {
		return "", fmt.Errorf("%w: annotation %s false: corepin's NRI plugin cannot take a container's CPUs out of load balancing yet (an isolated partition needs cpuset.cpus.exclusive on the kubelet's pod groups above it); "+
			"under CRI-O use its cpu-load-balancing.crio.io: disable (high-performance runtime class), or run the workload through corepin run or the agent (load_balance false)",
			ErrInvalid, AnnotationLoadBalance)
	}
	if ll.NoCPUQuota {
		s.CPUQuota = new(false)
		why += ", annotation " + AnnotationCPUQuota + " false"
	}
	return why, nil
}
