package nri

import (
	"fmt"
	"maps"

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
	if p.idle == nil || p.idle.V1CPUMount() == "" {
		return nil // cgroup v2: no real-time group scheduling to feed
	}
	share := qos.RTShare(float64(ca.MilliCPUs)/1000, ca.CPUs.Size())
	dir := ctr.GetLinux().GetCgroupsPath()
	grouped, err := enforce.MakeRTRoom(p.idle.V1CPUMount(), dir, share)
	if err != nil {
		return fmt.Errorf("making room for its real-time share (%.2f of each CPU) above %s: %w", share, dir, err)
	}
	if grouped {
		adj.SetLinuxCPURealtimePeriod(enforce.RTPeriodMicros)
		adj.SetLinuxCPURealtimeRuntime(enforce.RTRuntimeOf(share))
	}
	return nil
}

// RTRoute is how an LS container of the real-time route got its class,
// checked when it starts (Plugin.StartContainer).
type RTRoute string

// The real-time routes, best first (the labels of the plugin's
// corepin_nri_realtime_starts_total metric).
const (
	// RTRouteRuntime: the runtime applied the class the adjustment asks
	// for (OCI process.scheduler: runc >= 1.2, crun).
	RTRouteRuntime RTRoute = "runtime"
	// RTRoutePlugin: the runtime ignored it (runc 1.1 does, silently) and
	// the plugin set it on the container's process itself before the
	// container's command ran (the host's PID namespace and CAP_SYS_NICE).
	RTRoutePlugin RTRoute = "plugin"
	// RTRouteNone: neither; the container runs in the fair class, and the
	// plugin logs why.
	RTRouteNone RTRoute = "none"
)

// RTRoutes are the real-time routes, best first.
var RTRoutes = []RTRoute{RTRouteRuntime, RTRoutePlugin, RTRouteNone}

// EnsureRealTime checks that the process pid of container id (as the
// runtime names it at NRI StartContainer) runs in rt's class, and sets it
// there when the runtime did not (RTRoutePlugin), reading it back; the
// error says why the container is left in the fair class (RTRouteNone)
// and what to change. It touches the process only once its cgroups name
// the container.
func EnsureRealTime(tk Tasks, pid int, id string, rt enforce.RealTime) (RTRoute, error) {
	if err := ownProcess(tk, pid, id); err != nil {
		return RTRouteNone, fmt.Errorf("checking the real-time class: %w", err)
	}
	class, err := tk.Class(pid)
	if err != nil {
		return RTRouteNone, err
	}
	if class == rt.Policy {
		return RTRouteRuntime, nil
	}
	ignored := fmt.Sprintf("the runtime left process %d in the %s class instead of %s (runc before 1.2 ignores the OCI process.scheduler: use runc >= 1.2 or crun)", pid, class, rt)
	if err := tk.SetRealTime(pid, rt); err != nil {
		return RTRouteNone, fmt.Errorf("%s, and the plugin could not set it: %w (it needs the host's PID namespace and CAP_SYS_NICE)", ignored, err)
	}
	if class, err := tk.Class(pid); err != nil || class != rt.Policy {
		return RTRouteNone, fmt.Errorf("%s, and the class the plugin set did not hold (read back %q: %v)", ignored, class, err)
	}
	return RTRoutePlugin, nil
}

// ensureRealTime is EnsureRealTime for an LS container whose pod asks for
// the real-time route, counted by route and logged; it never fails the
// start. Called with p.mu held.
func (p *Plugin) ensureRealTime(pod *api.PodSandbox, ctr *api.Container) {
	rt, err := enforce.ParseRealTime(pod.GetAnnotations()[AnnotationSched])
	if err != nil || rt.IsZero() || p.tasks == nil {
		return // refused at creation, or not asked for
	}
	route, why := EnsureRealTime(p.tasks, int(ctr.GetPid()), ctr.GetId(), rt)
	if p.rtStarts == nil {
		p.rtStarts = map[RTRoute]int{}
	}
	p.rtStarts[route]++
	if why != nil {
		p.log.Warn("LS container left in the fair class", "id", ctr.GetId(), "pod", pod.GetNamespace()+"/"+pod.GetName(), "sched", rt.String(), "why", why)
		return
	}
	p.log.Info("LS container in the real-time route", "id", ctr.GetId(), "pod", pod.GetNamespace()+"/"+pod.GetName(), "sched", rt.String(), "route", route)
}

// RTStarts counts the real-time route's container starts by route since
// the plugin started.
func (p *Plugin) RTStarts() map[RTRoute]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.rtStarts)
}
