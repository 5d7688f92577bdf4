package nri

import (
	"fmt"
	"path/filepath"

	"github.com/containerd/nri/pkg/api"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/enforce"
	"github.com/corepin/corepin/nodecore"
	"github.com/corepin/corepin/qos"
)

// realTime gives an LS container of the real-time route (annotation
// corepin.io/sched) its class through the adjustment (OCI
// linux.scheduler, which the runtime applies to the container's process:
// runc >= 1.2, crun), bounded like a host workload's: on cgroup v1 with
// real-time group scheduling the container's group gets its real-time
// share of each CPU (OCI cpu.realtimeRuntime, which the runtime writes
// before the process joins) and its pod and QoS groups grow to hold it,
// which the plugin does itself (the kubelet gives them none). Without
// the plugin's view of the cgroup mount the class is still set, and a
// kernel that groups real-time time refuses it (the container fails to
// start, the runtime says why).
func (p *Plugin) realTime(adj *api.ContainerAdjustment, ctr *api.Container, s nodecore.Spec, ca nodecore.ContainerAssignment) error {
	rt, err := enforce.ParseRealTime(s.Sched)
	if err != nil || rt.IsZero() || ca.QoS != alloc.LS {
		return err
	}
	policy := api.LinuxSchedulerPolicy_SCHED_RR
	if rt.Policy == enforce.RTFIFO {
		policy = api.LinuxSchedulerPolicy_SCHED_FIFO
	}
	adj.SetLinuxScheduler(&api.LinuxScheduler{Policy: policy, Priority: 1})
	if p.idle == nil || p.idle.cpu == "." {
		return nil // cgroup v2: no real-time group scheduling to feed
	}
	share := qos.RTShare(float64(ca.MilliCPUs)/1000, ca.CPUs.Size())
	dir := ctr.GetLinux().GetCgroupsPath()
	grouped, err := enforce.MakeRTRoom(filepath.Join(p.idle.root.Name(), p.idle.cpu), dir, share)
	if err != nil {
		return fmt.Errorf("making room for its real-time share (%.2f of each CPU) above %s: %w", share, dir, err)
	}
	if grouped {
		adj.SetLinuxCPURealtimePeriod(enforce.RTPeriodMicros)
		adj.SetLinuxCPURealtimeRuntime(enforce.RTRuntimeOf(share))
	}
	return nil
}
