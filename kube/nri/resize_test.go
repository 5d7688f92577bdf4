package nri

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/nodecore"
	"github.com/corepin/corepin/topology"
)

// resize sends ctr the kubelet's UpdateContainerResources for a
// Guaranteed container of cpus CPUs (shares and quota, as the kubelet
// writes them with cpuManagerPolicy none), applies the answer as a runtime
// does, and returns the cpuset answered for ctr.
func (f *fakeRuntime) resize(ctr *api.Container, cpus int) (string, error) {
	f.t.Helper()
	f.mu.Lock()
	pod := f.pods[ctr.PodSandboxId]
	f.mu.Unlock()
	res := &api.LinuxResources{Cpu: &api.LinuxCPU{Cpus: "0-15", Shares: api.UInt64(uint64(1024 * cpus)),
		Quota: api.Int64(int64(100000 * cpus)), Period: api.UInt64(uint64(100000))}}
	rsp, err := f.r.UpdateContainer(context.Background(), &api.UpdateContainerRequest{Pod: pod, Container: ctr, LinuxResources: res})
	if err != nil {
		return "", err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.apply(rsp.GetUpdate())
	for _, u := range rsp.GetUpdate() {
		if u.GetContainerId() == ctr.Id {
			return u.GetLinux().GetResources().GetCpu().GetCpus(), nil
		}
	}
	return "", nil
}

// TestUpdateContainerResizesInPlace (issue 21 §2): an in-place resize of
// a pinned Guaranteed pod (2 -> 4 -> 2 CPUs) extends its cpuset on its
// NUMA node in whole cores, never moving the CPUs it had, and shrinks back
// to exactly the CPUs it was created on; a resize that cannot be placed,
// or that would change its class, is refused with the reason and changes
// nothing; the shared containers' pool follows.
func TestUpdateContainerResizesInPlace(t *testing.T) {
	f, p := connected(t, alloc.NodeSettings{Options: []string{alloc.OptFullPCPUsOnly}})
	ctr := f.mustCreate(podSpec{name: "g2", shares: 2048, quota: 200000})
	ls := f.mustCreate(ls1500)
	first := cpuset.MustParse(ctr.Linux.Resources.Cpu.Cpus)
	topo := topology.MustSynthetic(twoNodes)

	got, err := f.resize(ctr, 4)
	if err != nil {
		t.Fatalf("resize to 4: %v", err)
	}
	grown := cpuset.MustParse(got)
	if grown.Size() != 4 || !first.IsSubsetOf(grown) {
		t.Fatalf("resize to 4 answered %q, want 4 CPUs holding %s", got, first)
	}
	wholeCoresOnOneNode(t, grown)
	if sets := f.cpusets(); cpuset.MustParse(sets[ls.Id]).Intersects(grown) {
		t.Errorf("the LS container's pool %s still holds CPUs of the grown %s", sets[ls.Id], grown)
	}

	before := f.cpusets()
	for _, tc := range []struct {
		name string
		cpus int
		want string
	}{
		{name: "more than fits", cpus: 16, want: "corepin: resizing container main of pod default/g2"},
		{name: "half a core", cpus: 5, want: "whole number of cores"},
	} {
		if _, err := f.resize(ctr, tc.cpus); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: resize to %d = %v, want an error containing %q", tc.name, tc.cpus, err, tc.want)
		}
	}
	if ca, err := p.Containers().Get(ctr.Id); err != nil || !ca.CPUs.Equals(grown) {
		t.Errorf("after the refusals the assignment is %s (%v), want %s", ca.CPUs, err, grown)
	}
	if got := f.cpusets(); got[ctr.Id] != before[ctr.Id] || got[ls.Id] != before[ls.Id] {
		t.Errorf("refused resizes changed cpusets: %v, want %v", got, before)
	}

	if got, err := f.resize(ctr, 2); err != nil || got != first.String() {
		t.Fatalf("resize back to 2 answered %q (%v), want the CPUs it was created on, %s", got, err, first)
	}
	if sets := f.cpusets(); !cpuset.MustParse(sets[ls.Id]).IsSubsetOf(topo.Online().Difference(first)) || cpuset.MustParse(sets[ls.Id]).Size() != 14 {
		t.Errorf("after the shrink the LS pool is %s, want the 14 CPUs besides %s", sets[ls.Id], first)
	}
}

// TestCreateContainerSetsTheEnvironment (issue 21 §3): a container learns
// its cpuset and thread count from its environment.
func TestCreateContainerSetsTheEnvironment(t *testing.T) {
	f, _ := connected(t, alloc.NodeSettings{})
	for _, tc := range []struct {
		ps      podSpec
		threads string
	}{
		{ps: lse4, threads: "4"},
		{ps: ls1500, threads: "2"},
	} {
		_, rsp, err := f.create(tc.ps)
		if err != nil {
			t.Fatal(err)
		}
		env := map[string]string{}
		for _, kv := range rsp.GetAdjust().GetEnv() {
			env[kv.GetKey()] = kv.GetValue()
		}
		cpus := rsp.GetAdjust().GetLinux().GetResources().GetCpu().GetCpus()
		if env[EnvCPUSet] != cpus || env[EnvThreads] != tc.threads {
			t.Errorf("%s: env %s=%q %s=%q, want %q and %q", tc.ps.name, EnvCPUSet, env[EnvCPUSet], EnvThreads, env[EnvThreads], cpus, tc.threads)
		}
	}
}

// withInfoDir is a runtime and a plugin on twoNodes keeping its
// containers' files in the directory it returns; not yet connected.
func withInfoDir(t *testing.T) (*fakeRuntime, *Plugin, string) {
	t.Helper()
	info := t.TempDir()
	f := newRuntime(t, socketDir(t))
	t.Cleanup(f.r.Stop)
	p, err := New(Options{State: filepath.Join(t.TempDir(), "state.db"), Topology: topology.MustSynthetic(twoNodes), InfoDir: info})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return f, p, info
}

// TestInfoFilesFollowResizes (issue 21 §3): with an InfoDir, a container
// gets its directory mounted read-only at InfoMount, and the files there
// follow a resize of its own and a change of its shared pool; they go
// with the container.
func TestInfoFilesFollowResizes(t *testing.T) {
	f, p, info := withInfoDir(t)
	f.connect(p)
	read := func(id, file string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(info, nodecore.ContainerName(id), file))
		if err != nil {
			return err.Error()
		}
		return strings.TrimSpace(string(b))
	}

	ls, rsp, err := f.create(ls1500)
	if err != nil {
		t.Fatal(err)
	}
	mounts := rsp.GetAdjust().GetMounts()
	if len(mounts) != 1 || mounts[0].Destination != InfoMount || mounts[0].Source != filepath.Join(info, nodecore.ContainerName(ls.Id)) ||
		!slices.Contains(mounts[0].Options, "ro") {
		t.Fatalf("mounts = %v, want %s's directory read-only at %s", mounts, ls.Id, InfoMount)
	}
	if got := read(ls.Id, InfoCPUSet); got != "0-15" || read(ls.Id, InfoThreads) != "2" {
		t.Errorf("LS files: cpuset %q threads %q, want 0-15 and 2", got, read(ls.Id, InfoThreads))
	}
	g := f.mustCreate(podSpec{name: "g2", shares: 2048, quota: 200000})
	if _, err := f.resize(g, 4); err != nil {
		t.Fatal(err)
	}
	sets := f.cpusets()
	for id, want := range map[string]string{g.Id: sets[g.Id], ls.Id: sets[ls.Id]} {
		if got := read(id, InfoCPUSet); got != want {
			t.Errorf("%s's cpuset file says %q, its cpuset is %q", id, got, want)
		}
	}
	if got := read(g.Id, InfoThreads); got != "4" {
		t.Errorf("the resized container's threads file says %q, want 4", got)
	}
	f.mu.Lock()
	pod := f.pods[g.PodSandboxId]
	f.mu.Unlock()
	if err := f.r.RemoveContainer(context.Background(), &api.RemoveContainerRequest{Pod: pod, Container: g}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(info, nodecore.ContainerName(g.Id))); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the removed container's directory: %v, want it gone", err)
	}
}

// TestSynchronizeFollowsADroppedResize: the plugin recorded a resize
// (2 -> 4) that the runtime then dropped (it gives up on a plugin that
// answers late and applies the kubelet's resources alone), and the kubelet
// resized back to 2 while the plugin was away. On reconnect the record
// follows the container's resources again: the container keeps the CPUs
// it has, no update moves it, and its cpuset and threads files say what it
// has. A container whose dropped grow the kubelet kept gets the grown set.
func TestSynchronizeFollowsADroppedResize(t *testing.T) {
	f, p, info := withInfoDir(t)
	s := f.connect(p)
	back := f.mustCreate(podSpec{name: "back", shares: 2048, quota: 200000})
	kept := f.mustCreate(podSpec{name: "kept", shares: 2048, quota: 200000})
	sets := f.cpusets()
	for _, ctr := range []*api.Container{back, kept} {
		f.mu.Lock()
		pod := f.pods[ctr.PodSandboxId]
		f.mu.Unlock()
		// The plugin answers the grow; the runtime never applies the answer.
		res := &api.LinuxResources{Cpu: &api.LinuxCPU{Cpus: "0-15", Shares: api.UInt64(4096), Quota: api.Int64(400000), Period: api.UInt64(100000)}}
		if _, err := p.UpdateContainer(context.Background(), pod, ctr, res); err != nil {
			t.Fatalf("UpdateContainer %s to 4: %v", ctr.Id, err)
		}
	}
	s.Stop()
	f.mu.Lock()
	setCPU(kept, &api.LinuxCPU{Shares: api.UInt64(4096), Quota: api.Int64(400000)}) // the kubelet's grow, applied alone
	f.mu.Unlock()
	f.connect(p)

	now := f.cpusets()
	if now[back.Id] != sets[back.Id] {
		t.Errorf("the container resized back to 2 while the plugin was away: cpuset %q, want the %q it kept", now[back.Id], sets[back.Id])
	}
	grown := cpuset.MustParse(now[kept.Id])
	if grown.Size() != 4 || !cpuset.MustParse(sets[kept.Id]).IsSubsetOf(grown) {
		t.Errorf("the container the kubelet grew to 4: cpuset %q, want 4 CPUs holding %s", now[kept.Id], sets[kept.Id])
	}
	if grown.Intersects(cpuset.MustParse(now[back.Id])) {
		t.Errorf("cpusets overlap: %v", now)
	}
	for _, tc := range []struct {
		ctr            *api.Container
		cpuset, thread string
	}{{back, now[back.Id], "2"}, {kept, now[kept.Id], "4"}} {
		dir := filepath.Join(info, nodecore.ContainerName(tc.ctr.Id))
		c, _ := os.ReadFile(filepath.Join(dir, InfoCPUSet))
		th, _ := os.ReadFile(filepath.Join(dir, InfoThreads))
		if strings.TrimSpace(string(c)) != tc.cpuset || strings.TrimSpace(string(th)) != tc.thread {
			t.Errorf("%s's files say cpuset %q threads %q, want %q and %s", tc.ctr.Id, c, th, tc.cpuset, tc.thread)
		}
	}
}

// TestHostileCPUResources (issue 27 §3.3, §3.4): an LSE pod without a CPU
// limit got exclusive CPUs by its request, an LSE pod with CFS quota -5
// was admitted as one without a limit, and updates with shares 0 (and a
// quota), shares 1 or quota -100 were answered as if valid. Each is
// refused with its reason and changes nothing; an update of the cpuset
// alone (containerd's explicit 0 shares and quota) is still answered with
// the pin.
func TestHostileCPUResources(t *testing.T) {
	f, p := connected(t, alloc.NodeSettings{})
	lse := map[string]string{LabelQoSClass: "LSE"}
	for _, tc := range []struct {
		name string
		ps   podSpec
		want string
	}{
		{name: "LSE without a CPU limit", ps: podSpec{name: "nolimit", labels: lse, shares: 2048},
			want: "corepin: container main of pod default/nolimit: invalid pod metadata: class LSE (label koordinator.sh/qosClass) needs exclusive whole CPUs sized by a CPU limit: " +
				"set limits.cpu = requests.cpu to an integer, or label the pod LS to share the pool; it asks for 2 CPU with no CPU limit"},
		{name: "LSE with quota -5", ps: podSpec{name: "minus5", labels: lse, shares: 2048, quota: -5},
			want: "corepin: container main of pod default/minus5: invalid pod metadata: cfs quota -5: the kernel takes -1 (no limit) or a positive number of microseconds per period"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := f.create(tc.ps); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("CreateContainer = %v, want a refusal saying %q", err, tc.want)
			}
			if as, err := p.Containers().List(); err != nil || len(as) != 0 {
				t.Errorf("after the refusal the node holds %v (%v), want nothing", as, err)
			}
		})
	}

	ctr := f.mustCreate(podSpec{name: "g2", labels: lse, shares: 2048, quota: 200000})
	pinned := ctr.Linux.Resources.Cpu.Cpus
	f.mu.Lock()
	pod := f.pods[ctr.PodSandboxId]
	f.mu.Unlock()
	update := func(cpu *api.LinuxCPU) ([]*api.ContainerUpdate, error) {
		cpu.Cpus = "0-15"
		rsp, err := f.r.UpdateContainer(context.Background(), &api.UpdateContainerRequest{Pod: pod, Container: ctr, LinuxResources: &api.LinuxResources{Cpu: cpu}})
		return rsp.GetUpdate(), err
	}
	for _, tc := range []struct {
		name string
		cpu  *api.LinuxCPU
		want string
	}{
		{name: "shares 0 with a quota", cpu: &api.LinuxCPU{Shares: api.UInt64(0), Quota: api.Int64(400000), Period: api.UInt64(100000)}, want: "cpu shares 0: the kernel takes 2 or more"},
		{name: "shares 1", cpu: &api.LinuxCPU{Shares: api.UInt64(1), Quota: api.Int64(400000), Period: api.UInt64(100000)}, want: "cpu shares 1: the kernel takes 2 or more"},
		{name: "quota -100", cpu: &api.LinuxCPU{Shares: api.UInt64(4096), Quota: api.Int64(-100), Period: api.UInt64(100000)},
			want: "corepin: resizing container main of pod default/g2: invalid pod metadata: cfs quota -100: the kernel takes -1 (no limit) or a positive number of microseconds per period"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := update(tc.cpu); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("UpdateContainer = %v, want a refusal saying %q", err, tc.want)
			}
			if ca, err := p.Containers().Get(ctr.Id); err != nil || ca.CPUs.String() != pinned {
				t.Errorf("after the refusal the assignment is %s (%v), want %s", ca.CPUs, err, pinned)
			}
		})
	}
	ups, err := update(&api.LinuxCPU{Shares: api.UInt64(0), Quota: api.Int64(0), Period: api.UInt64(0)})
	if err != nil || len(ups) == 0 || ups[0].GetLinux().GetResources().GetCpu().GetCpus() != pinned {
		t.Errorf("a cpuset-only update = %v, %v; want the pin %s", ups, err, pinned)
	}
}
