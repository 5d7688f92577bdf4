package nri

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
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
// SCHED_IDLE routes and logs the reason.
var (
	// ErrSystemdPath is a cgroups path of the systemd cgroup driver
	// ("slice:prefix:name"), which the route does not handle: systemd
	// owns the slices and may rewrite their weight, which the kernel
	// refuses on an idle group.
	ErrSystemdPath = errors.New("cgroups path of the systemd cgroup driver (slice:prefix:name): the idle parent needs the kubelet's cgroupfs driver")
	// ErrNotBestEffort is a cgroups path that is not the kubelet's
	// .../kubepods/besteffort/pod<uid>/<container> form.
	ErrNotBestEffort = errors.New("cgroups path not of the form .../kubepods/besteffort/pod<uid>/<container>")
	// ErrNoCPUIdle is a kernel without cpu.idle (Linux < 5.15).
	ErrNoCPUIdle = errors.New("the kernel has no cpu.idle (Linux >= 5.15 has it)")
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

// Cgroup files the idle parent needs.
const (
	// cpuIdleFile is cpu.idle: 1 makes the group an idle entity among
	// its siblings (Linux 5.15, commit 304000390f88; cgroup v1 and v2).
	// https://docs.kernel.org/admin-guide/cgroup-v2.html#cpu-interface-files
	cpuIdleFile = "cpu.idle"
	// cgroupControllers marks the cgroup v2 root.
	cgroupControllers = "cgroup.controllers"
	// cpusetCPUs and cpusetMems of a new cgroup v1 cpuset group start
	// empty; a task can join only once both are set (cpuset(7)).
	cpusetCPUs = "cpuset.cpus"
	cpusetMems = "cpuset.mems"
)

// IdleParents makes, repairs and cleans the idle parents in a cgroup
// mount (the host's /sys/fs/cgroup as the plugin sees it): cgroup v2, or
// v1 with one directory per hierarchy. All paths stay inside the mount
// (os.Root).
type IdleParents struct {
	root *os.Root
	// cpu is the cpu controller's hierarchy directory (v2: ".", the
	// unified one); cpuset that of v1's cpuset controller ("" on v2,
	// where a new group's cpuset needs no setting).
	cpu, cpuset string
	// all are the directories of every hierarchy (v2: ".").
	all []string
}

// OpenIdleParents opens the cgroup mount dir and finds its hierarchies.
func OpenIdleParents(dir string) (*IdleParents, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("opening the cgroup mount: %w", err)
	}
	ip := &IdleParents{root: r}
	if _, err := r.Stat(cgroupControllers); err == nil {
		ip.cpu, ip.all = ".", []string{"."}
		return ip, nil
	}
	ents, err := fs.ReadDir(r.FS(), ".")
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("reading the cgroup mount: %w", err)
	}
	for _, e := range ents {
		st, err := r.Stat(e.Name())
		if err != nil || !st.IsDir() || e.Type()&fs.ModeSymlink != 0 {
			continue // cpu -> cpu,cpuacct: the hierarchy once
		}
		ip.all = append(ip.all, e.Name())
		for _, c := range strings.Split(e.Name(), ",") {
			switch c {
			case "cpu":
				ip.cpu = e.Name()
			case "cpuset":
				ip.cpuset = e.Name()
			}
		}
	}
	if ip.cpu == "" {
		r.Close()
		return nil, fmt.Errorf("%s: neither a cgroup v2 mount nor a v1 mount with a cpu hierarchy", dir)
	}
	return ip, nil
}

// Close closes the mount.
func (ip *IdleParents) Close() error { return ip.root.Close() }

// cpuDir is parent's directory in the cpu controller's hierarchy.
func (ip *IdleParents) cpuDir(parent string) string {
	return path.Join(ip.cpu, parent)
}

// Ensure makes the idle parent (a path of IdlePath) and sets its cpu.idle
// to 1 where it is not; on cgroup v1 it also gives its cpuset group its
// own parent's CPUs and memory nodes where they are empty (the BE
// containers' cpusets below change with the BE pool, always within the
// kubepods group's). Its own parent (kubepods) must exist.
func (ip *IdleParents) Ensure(parent string) error {
	if path.Base(parent) != IdleGroup || !path.IsAbs(parent) || path.Clean(parent) != parent {
		return fmt.Errorf("idle parent %q: want an absolute clean path ending in %s", parent, IdleGroup)
	}
	if ip.cpuset != "" {
		if err := ip.mkdir(path.Join(ip.cpuset, parent)); err != nil {
			return err
		}
		for _, f := range []string{cpusetCPUs, cpusetMems} {
			if err := ip.inherit(path.Join(ip.cpuset, parent), f); err != nil {
				return err
			}
		}
	}
	dir := ip.cpuDir(parent)
	if err := ip.mkdir(dir); err != nil {
		return err
	}
	if err := ip.Holds(parent); err == nil || errors.Is(err, ErrNoCPUIdle) {
		return err
	}
	if err := ip.root.WriteFile(path.Join(dir, cpuIdleFile), []byte("1"), 0); err != nil {
		return fmt.Errorf("setting cpu.idle of the idle parent: %w", err)
	}
	return ip.Holds(parent)
}

// Holds reports (nil) whether the idle parent exists with cpu.idle 1.
func (ip *IdleParents) Holds(parent string) error {
	b, err := ip.root.ReadFile(path.Join(ip.cpuDir(parent), cpuIdleFile))
	if errors.Is(err, fs.ErrNotExist) {
		if _, serr := ip.root.Stat(ip.cpuDir(parent)); serr == nil {
			return ErrNoCPUIdle
		}
	}
	if err != nil {
		return fmt.Errorf("reading cpu.idle of the idle parent: %w", err)
	}
	if v := strings.TrimSpace(string(b)); v != "1" {
		return fmt.Errorf("the idle parent %s has cpu.idle %s, want 1", parent, v)
	}
	return nil
}

// mkdir makes dir (one level: its parent must exist, as kubepods does
// while the kubelet runs).
func (ip *IdleParents) mkdir(dir string) error {
	if err := ip.root.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("making the idle parent: %w", err)
	}
	return nil
}

// inherit copies file f of dir's parent into dir where dir's is empty.
func (ip *IdleParents) inherit(dir, f string) error {
	own, err := ip.root.ReadFile(path.Join(dir, f))
	if err != nil && !errors.Is(err, fs.ErrNotExist) { // not there: empty
		return fmt.Errorf("reading the idle parent's %s: %w", f, err)
	}
	if strings.TrimSpace(string(own)) != "" {
		return nil
	}
	up, err := ip.root.ReadFile(path.Join(path.Dir(dir), f))
	if err != nil {
		return fmt.Errorf("reading kubepods' %s: %w", f, err)
	}
	if err := ip.root.WriteFile(path.Join(dir, f), up, 0); err != nil {
		return fmt.Errorf("setting the idle parent's %s: %w", f, err)
	}
	return nil
}

// Pods lists the pod groups (pod<uid>) under the idle parent.
func (ip *IdleParents) Pods(parent string) ([]string, error) {
	ents, err := fs.ReadDir(ip.root.FS(), ip.cpuDir(parent))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing the idle parent: %w", err)
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() && strings.HasPrefix(e.Name(), "pod") {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// RemovePod removes the group of pod (pod<uid>) under the idle parent in
// every hierarchy. The runtime removes the containers' groups inside it
// when it deletes them; a group still holding one is left (the error
// says which) for a later call.
func (ip *IdleParents) RemovePod(parent, pod string) error {
	if !strings.HasPrefix(pod, "pod") || strings.ContainsAny(pod, "/.") {
		return fmt.Errorf("pod group %q: want pod<uid>", pod)
	}
	var errs []error
	for _, h := range ip.all {
		d := path.Join(h, parent, pod)
		if err := ip.root.Remove(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("removing pod group %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}

// Contains reports (nil) whether the container group moved (a path of
// IdlePath) exists in the cpu hierarchy under an idle parent that holds.
func (ip *IdleParents) Contains(moved string) error {
	if err := ip.Holds(path.Dir(path.Dir(moved))); err != nil {
		return err
	}
	if _, err := ip.root.Stat(ip.cpuDir(moved)); err != nil {
		return fmt.Errorf("the container's group under the idle parent: %w", err)
	}
	return nil
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
