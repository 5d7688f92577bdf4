package nri

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/containerd/nri/pkg/api"
)

// RouteIdleParent: the plugin moved the BE container's cgroup under an
// idle parent it owns (IdleGroup, a child of the kubelet's kubepods group
// with cpu.idle 1), through NRI's cgroups path adjustment. There the BE
// pods meet the other pods' groups at kubepods as one idle entity: what
// the host path does with its top-level cpu.idle group, and what
// SCHED_IDLE on the tasks can not do (their idleness counts only inside
// their own pod group).
const RouteIdleParent BERoute = "idle-parent"

// IdleGroup is the name of the idle parent under kubepods. It must not
// contain "pod": the kubelet takes every child of kubepods whose name
// contains "pod" for a Guaranteed pod's group and removes those of pods
// it does not know (pkg/kubelet/cm pod_container_manager_linux.go
// GetAllPodsFromCgroups, kubelet_pods.go cleanupOrphanedPodCgroups).
// The kubelet writes only to its QoS groups (besteffort, burstable) and
// kubepods itself, never to another child of kubepods.
const IdleGroup = "corepin-be"

// Errors of the idle-parent route: the plugin falls back to the
// SCHED_IDLE routes and logs the reason (so it does on
// enforce.ErrNoCPUIdle, a kernel without cpu.idle).
var (
	// ErrSystemdPath is a cgroups path of the systemd cgroup driver
	// ("slice:prefix:name"), which the route does not handle: systemd
	// owns the slices and may rewrite their weight, which the kernel
	// refuses on an idle group.
	ErrSystemdPath = errors.New("cgroups path of the systemd cgroup driver (slice:prefix:name): the idle parent needs the kubelet's cgroupfs driver")
	// ErrNotBestEffort is a cgroups path that is not the kubelet's
	// .../kubepods/besteffort/pod<uid>/<container> form.
	ErrNotBestEffort = errors.New("cgroups path not of the form .../kubepods/besteffort/pod<uid>/<container>")
)

// IdlePath rewrites a BE container's cgroups path, as the runtime gives
// it at creation (cgroupfs driver: /<root>/kubepods/besteffort/pod<uid>/<id>,
// on cgroup v1 and v2 alike), to its place under the idle parent
// (/<root>/kubepods/corepin-be/pod<uid>/<id>), and returns that parent
// and the pod's group name. Any other form is refused with the reason.
func IdlePath(cgroupsPath string) (moved, parent, pod string, err error) {
	if cgroupsPath == "" {
		return "", "", "", errors.New("the runtime gave no cgroups path")
	}
	if strings.Contains(cgroupsPath, ":") {
		return "", "", "", fmt.Errorf("%q: %w", cgroupsPath, ErrSystemdPath)
	}
	if !path.IsAbs(cgroupsPath) || path.Clean(cgroupsPath) != cgroupsPath {
		return "", "", "", fmt.Errorf("%q: %w (it is not a clean absolute path)", cgroupsPath, ErrNotBestEffort)
	}
	el := strings.Split(cgroupsPath[1:], "/")
	n := len(el)
	if n < 4 || el[n-4] != "kubepods" || el[n-3] != "besteffort" || len(el[n-2]) <= len("pod") || !strings.HasPrefix(el[n-2], "pod") {
		return "", "", "", fmt.Errorf("%q: %w", cgroupsPath, ErrNotBestEffort)
	}
	parent = "/" + path.Join(append(slices.Clone(el[:n-3]), IdleGroup)...)
	return path.Join(parent, el[n-2], el[n-1]), parent, el[n-2], nil
}

// IdleParentOf is the idle parent for a pod sandbox's cgroup parent
// (/<root>/kubepods/besteffort/pod<uid>) and the pod's group name; ok is
// false for another form (not a BestEffort pod of the cgroupfs driver).
func IdleParentOf(podCgroup string) (parent, pod string, ok bool) {
	_, parent, pod, err := IdlePath(podCgroup + "/c")
	return parent, pod, err == nil
}

// kubepodsParent is the idle parent beside the pods of the kubelet's
// kubepods group that a pod's cgroup parent (cgroupfs driver: .../kubepods/
// pod<uid>, .../kubepods/burstable/pod<uid> or .../kubepods/besteffort/
// pod<uid>) lies in; ok is false for another form.
func kubepodsParent(podCgroup string) (string, bool) {
	if !path.IsAbs(podCgroup) || path.Clean(podCgroup) != podCgroup || strings.Contains(podCgroup, ":") {
		return "", false
	}
	el := strings.Split(podCgroup[1:], "/")
	for i := len(el) - 2; i >= 0 && i >= len(el)-3; i-- {
		if el[i] == "kubepods" && strings.HasPrefix(el[len(el)-1], "pod") {
			return "/" + path.Join(append(slices.Clone(el[:i+1]), IdleGroup)...), true
		}
	}
	return "", false
}

// placeIdle moves BE container ctr under the idle parent (RouteIdleParent)
// when the plugin keeps one. Where its cgroups path has another form, or
// the parent can not be made, the container stays where the runtime puts
// it, the reason is logged, and StartContainer takes a SCHED_IDLE route.
// Callers hold p.mu.
func (p *Plugin) placeIdle(adj *api.ContainerAdjustment, pod *api.PodSandbox, ctr *api.Container) {
	if p.idle == nil {
		return
	}
	moved, parent, _, err := IdlePath(ctr.GetLinux().GetCgroupsPath())
	if err == nil {
		err = p.idle.Ensure(parent)
	}
	if err != nil {
		p.log.Warn("BE container not under the idle parent", "id", ctr.GetId(), "pod", pod.GetNamespace()+"/"+pod.GetName(), "why", err)
		return
	}
	adj.SetLinuxCgroupsPath(moved)
	p.placed[ctr.GetId()] = moved
}

// idleHolds reports (nil) whether container id runs under an idle parent
// that holds. Callers hold p.mu.
func (p *Plugin) idleHolds(id string) error {
	moved, ok := p.placed[id]
	if p.idle == nil || !ok {
		return errors.New("not created under the idle parent")
	}
	return p.idle.Contains(moved)
}

// syncIdleParents, at Synchronize, notes the live containers under an
// idle parent, makes or repairs (cpu.idle 1) the idle parent of every
// kubepods group the runtime's pods are in, and removes the pod groups
// there of pods the runtime no longer has (gone while the plugin was
// away). Callers hold p.mu.
func (p *Plugin) syncIdleParents(pods []*api.PodSandbox, running map[string]*api.Container) {
	if p.idle == nil {
		return
	}
	parents, live := map[string]bool{}, map[string]bool{}
	for _, pod := range pods {
		if parent, ok := kubepodsParent(pod.GetLinux().GetCgroupParent()); ok {
			parents[parent] = true
			live[path.Base(pod.GetLinux().GetCgroupParent())] = true
		}
	}
	p.placed = map[string]string{}
	for id, ctr := range running {
		cg := ctr.GetLinux().GetCgroupsPath()
		if parent := path.Dir(path.Dir(cg)); path.Base(parent) == IdleGroup && path.IsAbs(cg) {
			p.placed[id] = cg
			parents[parent] = true
		}
	}
	for _, parent := range slices.Sorted(maps.Keys(parents)) {
		if err := p.idle.Ensure(parent); err != nil {
			p.log.Warn("making the idle parent", "parent", parent, "err", err)
			continue
		}
		groups, err := p.idle.Pods(parent)
		if err != nil {
			p.log.Warn("listing the idle parent", "parent", parent, "err", err)
		}
		for _, g := range groups {
			if live[g] {
				continue
			}
			if err := p.idle.RemovePod(parent, g); err != nil {
				p.log.Warn("removing the group of a pod that is gone", "parent", parent, "group", g, "err", err)
			} else {
				p.log.Info("removed the group of a pod that is gone", "parent", parent, "group", g)
			}
		}
	}
}

// StopPodSandbox removes the pod's group under the idle parent, where
// the runtime has removed its containers' groups already.
func (p *Plugin) StopPodSandbox(ctx context.Context, pod *api.PodSandbox) error {
	p.removeIdlePod(pod, false)
	return nil
}

// RemovePodSandbox removes the pod's group under the idle parent (if
// StopPodSandbox could not).
func (p *Plugin) RemovePodSandbox(ctx context.Context, pod *api.PodSandbox) error {
	p.removeIdlePod(pod, true)
	return nil
}

// removeIdlePod removes pod's group under the idle parent; last says the
// pod is being removed (a failure is then worth a warning: Synchronize
// is the next try).
func (p *Plugin) removeIdlePod(pod *api.PodSandbox, last bool) {
	if p.idle == nil {
		return
	}
	parent, g, ok := IdleParentOf(pod.GetLinux().GetCgroupParent())
	if !ok {
		return
	}
	err := p.idle.RemovePod(parent, g)
	switch {
	case err != nil && last:
		p.log.Warn("removing a pod's group under the idle parent", "pod", pod.GetNamespace()+"/"+pod.GetName(), "err", err)
	case err != nil:
		p.log.Debug("a pod's group under the idle parent stays until its removal", "pod", pod.GetNamespace()+"/"+pod.GetName(), "err", err)
	}
}
