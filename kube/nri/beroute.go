package nri

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/containerd/nri/pkg/api"

	"github.com/corepin/corepin/enforce"
)

// BERoute is how the plugin keeps a BE container out of the way of the
// node's other containers: the lever that won on the host (`corepin run
// --qos BE`, a group with cpu.idle) reached by what a pod allows.
//
// The kernel ranks a task against another by its own SCHED_IDLE policy
// wherever the two run (a waking normal task preempts an idle one at
// once), but by a group's cpu.idle only where the two tasks' group
// hierarchies meet. For pods they meet at the kubelet's kubepods group,
// between the besteffort group and the other pod: cpu.idle on a BE
// container's or pod's group would rank it among its own pod only. On the
// besteffort group itself it would do what the host path does, but the
// kernel then refuses cpu.shares there (EINVAL), which the kubelet writes
// at every start and every minute (pkg/kubelet/cm
// qos_container_manager_linux.go: a failed start update stops the
// kubelet). So the best route is a group with cpu.idle of the plugin's
// own beside the pods under kubepods (RouteIdleParent), where the plugin
// keeps one; then SCHED_IDLE for the container's tasks, by whoever can
// set it, and the minimal weight (BEShares) where nobody can.
type BERoute string

// The routes, best first.
const (
	// RouteRuntimeIdle: the runtime applied the SCHED_IDLE the plugin asks
	// for in the container's adjustment (NRI SetLinuxScheduler, the OCI
	// linux.scheduler field: runc >= 1.2 or crun; runc 1.1 ignores it).
	RouteRuntimeIdle BERoute = "runtime-sched-idle"
	// RoutePluginIdle: the runtime did not, and the plugin put the
	// container's process in SCHED_IDLE itself (NRI StartContainer: the
	// process exists and has not run the container's command yet, so the
	// command and everything it starts inherit the policy). The plugin
	// needs the host's PID namespace, and CAP_SYS_NICE for a container
	// that runs as another user than the plugin.
	RoutePluginIdle BERoute = "plugin-sched-idle"
	// RouteMinWeight: neither; the container has only cpu.shares 2
	// (BEShares), the kubelet's own weight for BestEffort.
	RouteMinWeight BERoute = "min-weight"
)

// Routes are the routes, best first (the labels of the plugin's
// corepin_nri_be_protection metric, with RouteUnchecked).
var Routes = []BERoute{RouteIdleParent, RouteRuntimeIdle, RoutePluginIdle, RouteMinWeight}

// RouteUnchecked labels, in the metric, a BE container the plugin did not
// see start (it ran before the plugin connected): its policy is whatever
// it started with.
const RouteUnchecked BERoute = "unchecked"

// Tasks is the kernel's view of a container's process, as the choice of
// a route needs it: KernelTasks on the node, a fake in tests.
type Tasks interface {
	// Cgroups returns the process's /proc/<pid>/cgroup as the plugin sees
	// it (each line names the container's group, whatever the plugin's
	// cgroup namespace shows above it).
	Cgroups(pid int) (string, error)
	// Idle reports whether the process's main thread is SCHED_IDLE.
	Idle(pid int) (bool, error)
	// SetIdle puts every thread of the process in SCHED_IDLE.
	SetIdle(pid int) error
	// Class is the main thread's class: enforce.RTRR, RTFIFO or RTNormal.
	Class(pid int) (string, error)
	// SetRealTime puts every thread of the process in rt.
	SetRealTime(pid int, rt enforce.RealTime) error
}

// KernelTasks reads /proc and sets the policy with sched_setattr(2)
// (enforce.SetThreadSched), for the processes the plugin's PID namespace
// shows.
type KernelTasks struct{}

var _ Tasks = KernelTasks{}

// Cgroups reads /proc/<pid>/cgroup.
func (KernelTasks) Cgroups(pid int) (string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	return string(b), err
}

// Idle reads the main thread's policy with sched_getattr(2).
func (KernelTasks) Idle(pid int) (bool, error) {
	_, idle, err := enforce.TaskSlice(pid)
	return idle, err
}

// SetIdle sets SCHED_IDLE on every thread of pid.
func (KernelTasks) SetIdle(pid int) error {
	return enforce.SetThreadSched(pid, enforce.ThreadSched{Idle: true})
}

// Class reads the main thread's class with sched_getattr(2).
func (KernelTasks) Class(pid int) (string, error) { return enforce.TaskClass(pid) }

// SetRealTime sets rt on every thread of pid (enforce.SetRealTime).
func (KernelTasks) SetRealTime(pid int, rt enforce.RealTime) error {
	return enforce.SetRealTime(pid, rt)
}

// ownProcess says why pid cannot be taken for container id's process
// (nil when it can): the runtime named none, or the plugin's PID
// namespace shows another process, or none, under that number.
func ownProcess(tk Tasks, pid int, id string) error {
	if pid <= 0 {
		return errors.New("the runtime named no process of the container")
	}
	if id == "" {
		return errors.New("the runtime named no container id")
	}
	cg, err := tk.Cgroups(pid)
	if err != nil {
		return fmt.Errorf("reading the cgroups of process %d: %w (run the plugin in the host's PID namespace: hostPID)", pid, err)
	}
	if !inContainer(cg, id) {
		return fmt.Errorf("process %d is not container %.12s's (run the plugin in the host's PID namespace: hostPID)", pid, id)
	}
	return nil
}

// ProtectBE chooses and applies the route of container id, whose process
// (as the runtime names it at NRI StartContainer) is pid: the runtime's
// SCHED_IDLE when the process has it already, else the plugin's own when
// it can set it and reads it back, else the minimal weight with the
// reason the better routes were passed over. It changes the process only
// after making sure the pid is the container's (its cgroups name the
// container id): a plugin outside the host's PID namespace sees another
// process, or none, under that number.
func ProtectBE(tk Tasks, pid int, id string) (BERoute, error) {
	if err := ownProcess(tk, pid, id); err != nil {
		return RouteMinWeight, err
	}
	idle, err := tk.Idle(pid)
	if err != nil {
		return RouteMinWeight, err
	}
	if idle {
		return RouteRuntimeIdle, nil
	}
	if err := tk.SetIdle(pid); err != nil {
		return RouteMinWeight, fmt.Errorf("setting SCHED_IDLE on the container's process %d: %w (a container of another user needs CAP_SYS_NICE)", pid, err)
	}
	if idle, err := tk.Idle(pid); err != nil || !idle {
		return RouteMinWeight, fmt.Errorf("SCHED_IDLE set on process %d did not hold (read back idle=%v: %v)", pid, idle, err)
	}
	return RoutePluginIdle, nil
}

// inContainer reports whether a /proc/<pid>/cgroup file names container
// id as the process's own group: the last element of a line's path holds
// the id (cgroupfs: the id itself; systemd: cri-containerd-<id>.scope,
// crio-<id>.scope).
func inContainer(cgroups, id string) bool {
	for _, line := range strings.Split(cgroups, "\n") {
		if _, path, ok := strings.Cut(line, ":"); ok {
			if _, path, ok = strings.Cut(path, ":"); ok && strings.Contains(path[strings.LastIndexByte(path, '/')+1:], id) {
				return true
			}
		}
	}
	return false
}

// idleScheduler is the scheduler a BE container's adjustment asks the
// runtime for (RouteRuntimeIdle).
func idleScheduler() *api.LinuxScheduler {
	return &api.LinuxScheduler{Policy: api.LinuxSchedulerPolicy_SCHED_IDLE}
}
