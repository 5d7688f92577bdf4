package nri

import (
	"context"
	"errors"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"

	"github.com/corepin/corepin/topology"
)

func TestIdlePathRewritesTheKubeletsBestEffortPath(t *testing.T) {
	const id = "0123abcd"
	for _, tc := range []struct {
		name               string
		in                 string
		moved, parent, pod string
		wantErr            error  // errors.Is, nil: none
		wantWhy            string // part of the error
	}{
		{name: "cgroupfs, the kubelet's default root", in: "/kubepods/besteffort/pod1234-56/" + id,
			moved: "/kubepods/corepin-be/pod1234-56/" + id, parent: "/kubepods/corepin-be", pod: "pod1234-56"},
		{name: "cgroupfs under a --cgroup-root (the e2e node's), v1 or v2 alike", in: "/kl-99/kubepods/besteffort/podab/" + id,
			moved: "/kl-99/kubepods/corepin-be/podab/" + id, parent: "/kl-99/kubepods/corepin-be", pod: "podab"},
		{name: "systemd driver", in: "kubepods-besteffort-pod12.slice:cri-containerd:" + id, wantErr: ErrSystemdPath},
		{name: "burstable pod", in: "/kubepods/burstable/pod12/" + id, wantErr: ErrNotBestEffort},
		{name: "guaranteed pod", in: "/kubepods/pod12/" + id, wantErr: ErrNotBestEffort},
		{name: "besteffort outside kubepods", in: "/other/besteffort/pod12/" + id, wantErr: ErrNotBestEffort},
		{name: "pod group without uid", in: "/kubepods/besteffort/pod/" + id, wantErr: ErrNotBestEffort},
		{name: "relative", in: "kubepods/besteffort/pod12/" + id, wantErr: ErrNotBestEffort},
		{name: "dot-dot", in: "/kubepods/besteffort/pod12/../pod13/" + id, wantErr: ErrNotBestEffort},
		{name: "trailing slash", in: "/kubepods/besteffort/pod12/" + id + "/", wantErr: ErrNotBestEffort},
		{name: "the pod's own group", in: "/kubepods/besteffort/pod12", wantErr: ErrNotBestEffort},
		{name: "none", in: "", wantWhy: "no cgroups path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			moved, parent, pod, err := IdlePath(tc.in)
			if tc.wantErr == nil && tc.wantWhy == "" {
				if err != nil || moved != tc.moved || parent != tc.parent || pod != tc.pod {
					t.Errorf("IdlePath(%q) = %q, %q, %q, %v; want %q, %q, %q", tc.in, moved, parent, pod, err, tc.moved, tc.parent, tc.pod)
				}
				return
			}
			if err == nil || (tc.wantErr != nil && !errors.Is(err, tc.wantErr)) || !strings.Contains(err.Error(), tc.wantWhy) {
				t.Errorf("IdlePath(%q) = %q, %v; want error %v %q", tc.in, moved, err, tc.wantErr, tc.wantWhy)
			}
		})
	}
}

func TestKubepodsParentFindsTheIdleParentOfAnyPod(t *testing.T) {
	for in, want := range map[string]string{
		"/kubepods/pod1":                "/kubepods/corepin-be",
		"/r/kubepods/burstable/pod1":    "/r/kubepods/corepin-be",
		"/r/kubepods/besteffort/pod1":   "/r/kubepods/corepin-be",
		"/r/kubepods/besteffort/x/pod1": "",
		"kubepods-pod1.slice":           "",
		"/r/kubepods/besteffort/pod1/":  "",
		"":                              "",
	} {
		if got, ok := kubepodsParent(in); got != want || ok != (want != "") {
			t.Errorf("kubepodsParent(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
}

// FuzzIdlePath checks the rewrite of every cgroups path the runtime may
// give: it never panics, and an accepted path moves only its QoS element,
// to the idle parent it returns, keeping the pod and container groups.
func FuzzIdlePath(f *testing.F) {
	f.Add("/kubepods/besteffort/pod12/abc")
	f.Add("/r/kubepods/besteffort/pod12/abc")
	f.Add("kubepods-besteffort-pod12.slice:cri-containerd:abc")
	f.Add("/kubepods/besteffort/pod12/../abc")
	f.Add("/")
	f.Fuzz(func(t *testing.T, in string) {
		moved, parent, pod, err := IdlePath(in)
		if err != nil {
			return
		}
		if path.Clean(moved) != moved || !path.IsAbs(moved) || path.Dir(path.Dir(moved)) != parent || path.Base(parent) != IdleGroup ||
			path.Base(path.Dir(parent)) != "kubepods" || path.Base(path.Dir(moved)) != pod || path.Base(moved) != path.Base(in) {
			t.Errorf("IdlePath(%q) = %q, %q, %q: not the container's group under the idle parent", in, moved, parent, pod)
		}
		if back := path.Join(path.Dir(parent), "besteffort", pod, path.Base(moved)); back != in {
			t.Errorf("IdlePath(%q) = %q: moving it back gives %q", in, moved, back)
		}
	})
}

// mount is a cgroup mount in a temp dir: files seeded, as a kernel
// would show them.
func mount(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for f, v := range files {
		p := filepath.Join(dir, f)
		if strings.HasSuffix(f, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// v1Node is the e2e node's layout: cgroup v1, cpu and cpuacct mounted
// apart, the kubelet's kubepods under a --cgroup-root, and the idle
// parent's control files as a kernel >= 5.15 shows them in a new group
// (package enforce's tests cover its making).
var v1Node = map[string]string{
	"cpu/r/kubepods/cpu.shares":                "1024",
	"cpu/r/kubepods/corepin-be/cpu.idle":       "0",
	"cpuset/r/kubepods/corepin-be/cpuset.cpus": "",
	"cpuset/r/kubepods/corepin-be/cpuset.mems": "",
	"cpuacct/r/kubepods/":                      "",
	"cpuset/r/kubepods/cpuset.cpus":            "0-15",
	"cpuset/r/kubepods/cpuset.mems":            "0-1",
	"memory/r/kubepods/memory.limit_in_bytes":  "1000",
	"unified/cgroup.procs":                     "",
}

// TestBEContainerGoesUnderTheIdleParent drives the plugin through the
// runtime's library: a BE container's adjustment moves its cgroups path
// under the idle parent (made, cpu.idle 1), an LS one's stays, the route
// recorded is idle-parent once the runtime made the group there, the
// pod's group goes with the pod, and a group of a pod that went while the
// plugin was away goes at the next Synchronize.
func TestBEContainerGoesUnderTheIdleParent(t *testing.T) {
	dir := mount(t, v1Node)
	f := newRuntime(t, socketDir(t))
	t.Cleanup(f.r.Stop)
	tasks := &fakeTasks{cgroups: map[int]string{}, idle: map[int]bool{}}
	p, err := New(Options{State: filepath.Join(t.TempDir(), "state.db"), Topology: topology.MustSynthetic(twoNodes), Tasks: tasks, IdleParentMount: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	f.connect(p)
	ctx := context.Background()
	run := func(name, qos string, shares uint64) (*api.PodSandbox, *api.Container, *api.CreateContainerResponse) {
		t.Helper()
		pod := &api.PodSandbox{Id: "sb-" + name, Name: name, Namespace: "default", Uid: "uid-" + name,
			Linux: &api.LinuxPodSandbox{CgroupParent: "/r/kubepods/" + qos + "/pod" + name}}
		ctr := &api.Container{Id: "ctr-" + name, PodSandboxId: pod.Id, Name: "main", State: api.ContainerState_CONTAINER_CREATED,
			Linux: &api.LinuxContainer{CgroupsPath: pod.Linux.CgroupParent + "/ctr-" + name,
				Resources: &api.LinuxResources{Cpu: &api.LinuxCPU{Shares: api.UInt64(shares), Cpus: "0-15", Mems: "0-1"}}}}
		if err := f.r.RunPodSandbox(ctx, &api.RunPodSandboxRequest{Pod: pod}); err != nil {
			t.Fatalf("RunPodSandbox: %v", err)
		}
		rsp, err := f.r.CreateContainer(ctx, &api.CreateContainerRequest{Pod: pod, Container: ctr})
		if err != nil {
			t.Fatalf("CreateContainer %s: %v", name, err)
		}
		return pod, ctr, rsp
	}
	bePod, bec, rsp := run("be1", "besteffort", 2)
	if got, want := rsp.GetAdjust().GetLinux().GetCgroupsPath(), "/r/kubepods/corepin-be/podbe1/ctr-be1"; got != want {
		t.Fatalf("BE adjustment's cgroups path = %q, want %q", got, want)
	}
	if got := read(t, filepath.Join(dir, "cpu/r/kubepods/corepin-be/cpu.idle")); got != "1" {
		t.Errorf("idle parent's cpu.idle = %q after the BE container's creation, want 1", got)
	}
	_, _, lsRsp := run("ls1", "burstable", 1024)
	if got := lsRsp.GetAdjust().GetLinux().GetCgroupsPath(); got != "" {
		t.Errorf("LS adjustment's cgroups path = %q, want none", got)
	}

	// The runtime (runc) makes the container's groups where it was told.
	for _, h := range []string{"cpu", "cpuacct", "cpuset", "memory"} {
		os.MkdirAll(filepath.Join(dir, h, "r/kubepods/corepin-be/podbe1/ctr-be1"), 0o755)
	}
	bec.Pid = 100
	if err := f.r.StartContainer(ctx, &api.StartContainerRequest{Pod: bePod, Container: bec}); err != nil {
		t.Fatalf("StartContainer: %v", err)
	}
	if ca, err := p.Containers().Get(bec.Id); err != nil || ca.BERoute != string(RouteIdleParent) {
		t.Errorf("BE container's recorded route = %q (%v), want %s", ca.BERoute, err, RouteIdleParent)
	}
	if len(tasks.sets) > 0 {
		t.Errorf("the plugin set SCHED_IDLE on %v: the idle parent needs no process of the container", tasks.sets)
	}
	// A BE container the runtime did not put there (it ignored the
	// path): a SCHED_IDLE route, not idle-parent.
	be2Pod, be2, _ := run("be2", "besteffort", 2)
	be2.Pid = 200
	tasks.cgroups[200] = "0::/r/kubepods/besteffort/podbe2/ctr-be2\n"
	if err := f.r.StartContainer(ctx, &api.StartContainerRequest{Pod: be2Pod, Container: be2}); err != nil {
		t.Fatalf("StartContainer: %v", err)
	}
	if ca, err := p.Containers().Get(be2.Id); err != nil || ca.BERoute != string(RoutePluginIdle) {
		t.Errorf("route of a BE container outside the idle parent = %q (%v), want %s", ca.BERoute, err, RoutePluginIdle)
	}

	// The pod goes: the runtime removes the container's groups, then the pod.
	for _, h := range []string{"cpu", "cpuacct", "cpuset", "memory"} {
		os.Remove(filepath.Join(dir, h, "r/kubepods/corepin-be/podbe1/ctr-be1"))
	}
	if err := f.r.StopPodSandbox(ctx, &api.StopPodSandboxRequest{Pod: bePod}); err != nil {
		t.Fatal(err)
	}
	if err := f.r.RemovePodSandbox(ctx, &api.RemovePodSandboxRequest{Pod: bePod}); err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"cpu", "cpuacct", "cpuset", "memory"} {
		if _, err := os.Stat(filepath.Join(dir, h, "r/kubepods/corepin-be/podbe1")); err == nil {
			t.Errorf("%s: the removed pod's group is still under the idle parent", h)
		}
	}

	// A pod gone while the plugin was away; the idle parent reset.
	os.MkdirAll(filepath.Join(dir, "cpu/r/kubepods/corepin-be/podgone"), 0o755)
	os.MkdirAll(filepath.Join(dir, "cpu/r/kubepods/corepin-be/podls1"), 0o755) // a live pod's: kept
	os.WriteFile(filepath.Join(dir, "cpu/r/kubepods/corepin-be/cpu.idle"), []byte("0"), 0o644)
	f.mu.Lock()
	f.pods["sb-ls1"] = &api.PodSandbox{Id: "sb-ls1", Name: "ls1", Namespace: "default", Uid: "uid-ls1",
		Linux: &api.LinuxPodSandbox{CgroupParent: "/r/kubepods/burstable/podls1"}}
	f.mu.Unlock()
	p2, err := New(Options{State: filepath.Join(t.TempDir(), "state2.db"), Topology: topology.MustSynthetic(twoNodes), IdleParentMount: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p2.Close() })
	p.Close()
	f.connect(p2)
	if _, err := os.Stat(filepath.Join(dir, "cpu/r/kubepods/corepin-be/podgone")); err == nil {
		t.Errorf("Synchronize left the group of a pod that is gone")
	}
	if _, err := os.Stat(filepath.Join(dir, "cpu/r/kubepods/corepin-be/podls1")); err != nil {
		t.Errorf("Synchronize removed a live pod's group: %v", err)
	}
	if got := read(t, filepath.Join(dir, "cpu/r/kubepods/corepin-be/cpu.idle")); got != "1" {
		t.Errorf("Synchronize left the idle parent's cpu.idle at %q, want 1", got)
	}
}

func TestUnusableMountFallsBackToSchedIdle(t *testing.T) {
	f := newRuntime(t, socketDir(t))
	t.Cleanup(f.r.Stop)
	p, err := New(Options{State: filepath.Join(t.TempDir(), "state.db"), Topology: topology.MustSynthetic(twoNodes),
		Tasks: &fakeTasks{cgroups: map[int]string{}, idle: map[int]bool{}}, IdleParentMount: filepath.Join(t.TempDir(), "none")})
	if err != nil {
		t.Fatalf("New with an unusable mount: %v, want the plugin without the route", err)
	}
	t.Cleanup(func() { p.Close() })
	f.connect(p)
	pod := &api.PodSandbox{Id: "sb", Name: "be", Namespace: "default", Uid: "u", Linux: &api.LinuxPodSandbox{CgroupParent: "/kubepods/besteffort/podu"}}
	ctr := &api.Container{Id: "c", PodSandboxId: "sb", Name: "main", Linux: &api.LinuxContainer{CgroupsPath: "/kubepods/besteffort/podu/c",
		Resources: &api.LinuxResources{Cpu: &api.LinuxCPU{Shares: api.UInt64(2)}}}}
	if err := f.r.RunPodSandbox(context.Background(), &api.RunPodSandboxRequest{Pod: pod}); err != nil {
		t.Fatal(err)
	}
	rsp, err := f.r.CreateContainer(context.Background(), &api.CreateContainerRequest{Pod: pod, Container: ctr})
	if err != nil {
		t.Fatal(err)
	}
	if got := rsp.GetAdjust().GetLinux().GetCgroupsPath(); got != "" {
		t.Errorf("cgroups path = %q without a usable mount, want none", got)
	}
	if got := rsp.GetAdjust().GetLinux().GetScheduler().GetPolicy(); got != api.LinuxSchedulerPolicy_SCHED_IDLE {
		t.Errorf("scheduler = %v, want SCHED_IDLE (the fallback)", got)
	}
}
