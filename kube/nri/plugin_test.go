package nri

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/rest"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/internal/testutil"
	"github.com/corepin/corepin/kube/nodestate"
	"github.com/corepin/corepin/kube/publish"
	"github.com/corepin/corepin/plan"
	"github.com/corepin/corepin/topology"
)

// twoNodes is a 2-socket machine, one NUMA node each, 4 cores of 2 SMT
// threads per node: node 0 holds CPUs 0-3,8-11, node 1 4-7,12-15.
var twoNodes = topology.Shape{Sockets: 2, NodesPerSocket: 1, L3PerNode: 1, CoresPerL3: 4, ThreadsPerCore: 2}

// fakeRuntime is an in-process NRI runtime (pkg/adaptation, the library
// containerd embeds) over a real unix socket, holding pods and containers
// with the CPU resources it last applied.
type fakeRuntime struct {
	t    *testing.T
	r    *adaptation.Adaptation
	sock string

	mu     sync.Mutex
	pods   map[string]*api.PodSandbox
	ctrs   map[string]*api.Container
	syncs  [][]*api.ContainerUpdate // what each Synchronize answered
	synced chan struct{}            // receives after each Synchronize
	pushed chan []*api.ContainerUpdate
}

func newRuntime(t *testing.T, dir string) *fakeRuntime {
	t.Helper()
	f := &fakeRuntime{t: t, sock: filepath.Join(dir, "nri.sock"), pods: map[string]*api.PodSandbox{}, ctrs: map[string]*api.Container{},
		synced: make(chan struct{}, 8), pushed: make(chan []*api.ContainerUpdate, 8)}
	f.start(dir)
	return f
}

// start starts the runtime (again: a containerd restart keeps the
// containers).
func (f *fakeRuntime) start(dir string) {
	f.t.Helper()
	r, err := adaptation.New("fake-runtime", "0.0.1", f.sync, f.update, adaptation.WithSocketPath(f.sock),
		adaptation.WithPluginPath(filepath.Join(dir, "plugins")), adaptation.WithPluginConfigPath(filepath.Join(dir, "conf.d")))
	if err != nil {
		f.t.Fatalf("adaptation.New: %v", err)
	}
	if err := r.Start(); err != nil {
		f.t.Fatalf("starting the runtime: %v", err)
	}
	// Start synchronises the (no) pre-installed plugins at once: that is
	// not a plugin's Synchronize.
	<-f.synced
	f.mu.Lock()
	f.syncs = nil
	f.mu.Unlock()
	f.r = r
}

func (f *fakeRuntime) sync(ctx context.Context, cb adaptation.SyncCB) error {
	f.mu.Lock()
	var pods []*api.PodSandbox
	var ctrs []*api.Container
	for _, p := range f.pods {
		pods = append(pods, p)
	}
	for _, c := range f.ctrs {
		ctrs = append(ctrs, c)
	}
	f.mu.Unlock()
	ups, err := cb(ctx, pods, ctrs)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.apply(ups)
	f.syncs = append(f.syncs, ups)
	f.mu.Unlock()
	f.synced <- struct{}{}
	return nil
}

func (f *fakeRuntime) update(ctx context.Context, ups []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) {
	f.mu.Lock()
	f.apply(ups)
	f.mu.Unlock()
	f.pushed <- ups
	return nil, nil
}

// apply applies updates the way a runtime writes them to the cgroup.
// An update that names no container the runtime holds fails the test: a
// runtime drops it, and the kubelet's values stand, as Koordinator's
// unnamed replies let the kubelet revert cpusets (koordinator #3129).
// Callers hold f.mu.
func (f *fakeRuntime) apply(ups []*api.ContainerUpdate) {
	for _, u := range ups {
		c, ok := f.ctrs[u.GetContainerId()]
		if !ok {
			f.t.Errorf("the plugin sent an update for container %q, which the runtime does not hold: a runtime drops it (cpus %q)",
				u.GetContainerId(), u.GetLinux().GetResources().GetCpu().GetCpus())
			continue
		}
		setCPU(c, u.GetLinux().GetResources().GetCpu())
	}
}

// setCPU merges the set fields of cpu into c's resources.
func setCPU(c *api.Container, cpu *api.LinuxCPU) {
	if cpu == nil {
		return
	}
	cur := c.Linux.Resources.Cpu
	if cpu.Cpus != "" {
		cur.Cpus = cpu.Cpus
	}
	if cpu.Mems != "" {
		cur.Mems = cpu.Mems
	}
	if cpu.Shares != nil {
		cur.Shares = cpu.Shares
	}
	if cpu.Quota != nil {
		cur.Quota = cpu.Quota
	}
	if cpu.Period != nil {
		cur.Period = cpu.Period
	}
}

// connect starts a stub for p and waits for its Synchronize.
func (f *fakeRuntime) connect(p *Plugin) stub.Stub {
	f.t.Helper()
	s, err := p.NewStub(stub.WithSocketPath(f.sock))
	if err != nil {
		f.t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		f.t.Fatalf("starting the stub: %v", err)
	}
	f.t.Cleanup(s.Stop)
	f.waitSync()
	f.r.BlockPluginSync().Unblock()
	return s
}

func (f *fakeRuntime) waitSync() {
	f.t.Helper()
	select {
	case <-f.synced:
	case <-time.After(testutil.Patience):
		f.t.Fatalf("no Synchronize within %v", testutil.Patience)
	}
}

// podSpec describes a test pod with one container.
type podSpec struct {
	name        string
	labels      map[string]string
	annotations map[string]string
	// shares, quota: the container's CPU resources as the kubelet writes them.
	shares uint64
	quota  int64
}

// create runs the pod and creates its container, applying the
// adjustment and the updates to other containers as a runtime does.
func (f *fakeRuntime) create(ps podSpec) (*api.Container, *api.CreateContainerResponse, error) {
	f.t.Helper()
	pod := &api.PodSandbox{Id: "pod-" + ps.name, Name: ps.name, Namespace: "default", Uid: "uid-" + ps.name,
		Labels: ps.labels, Annotations: ps.annotations}
	cpu := &api.LinuxCPU{Shares: api.UInt64(ps.shares), Cpus: "0-15", Mems: "0-1"}
	if ps.quota != 0 {
		cpu.Quota, cpu.Period = api.Int64(ps.quota), api.UInt64(uint64(100000))
	}
	ctr := &api.Container{Id: "ctr-" + ps.name, PodSandboxId: pod.Id, Name: "main", State: api.ContainerState_CONTAINER_CREATED,
		Linux: &api.LinuxContainer{Resources: &api.LinuxResources{Cpu: cpu}}}
	ctx := context.Background()
	if err := f.r.RunPodSandbox(ctx, &api.RunPodSandboxRequest{Pod: pod}); err != nil {
		f.t.Fatalf("RunPodSandbox: %v", err)
	}
	rsp, err := f.r.CreateContainer(ctx, &api.CreateContainerRequest{Pod: pod, Container: ctr})
	if err != nil {
		return nil, nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	setCPU(ctr, rsp.GetAdjust().GetLinux().GetResources().GetCpu())
	ctr.State = api.ContainerState_CONTAINER_RUNNING
	f.pods[pod.Id], f.ctrs[ctr.Id] = pod, ctr
	f.apply(rsp.GetUpdate())
	return ctr, rsp, nil
}

func (f *fakeRuntime) mustCreate(ps podSpec) *api.Container {
	f.t.Helper()
	c, _, err := f.create(ps)
	if err != nil {
		f.t.Fatalf("CreateContainer %s: %v", ps.name, err)
	}
	return c
}

// cpusets is each container's applied cpuset.
func (f *fakeRuntime) cpusets() map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := map[string]string{}
	for id, c := range f.ctrs {
		m[id] = c.Linux.Resources.Cpu.Cpus
	}
	return m
}

// connected is a runtime with a plugin on a fresh state file, synchronised.
func connected(t *testing.T, cfg alloc.NodeSettings) (*fakeRuntime, *Plugin) {
	t.Helper()
	f := newRuntime(t, socketDir(t))
	t.Cleanup(f.r.Stop)
	p := newPlugin(t, filepath.Join(t.TempDir(), "state.db"), cfg)
	f.connect(p)
	return f, p
}

// socketDir is a short directory for unix sockets (t.TempDir paths can
// pass the 108-byte limit).
func socketDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "nri-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func newPlugin(t *testing.T, state string, cfg alloc.NodeSettings) *Plugin {
	t.Helper()
	p, err := New(Options{State: state, Topology: topology.MustSynthetic(twoNodes), Alloc: cfg})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

var (
	lse4 = podSpec{name: "lse", labels: map[string]string{LabelQoSClass: "LSE"},
		annotations: map[string]string{AnnotationResourceSpec: `{"preferredCPUBindPolicy":"FullPCPUs"}`}, shares: 4096, quota: 400000}
	be     = podSpec{name: "be", shares: 2}
	ls1500 = podSpec{name: "ls", shares: 1024, quota: 150000}
)

// wholeCoresOnOneNode checks that set is whole cores of twoNodes on one
// NUMA node, and returns that node as a set.
func wholeCoresOnOneNode(t *testing.T, set cpuset.CPUSet) cpuset.CPUSet {
	t.Helper()
	topo := topology.MustSynthetic(twoNodes)
	var nodes []int
	for _, id := range set.List() {
		c, _ := topo.CPU(id)
		nodes = append(nodes, int(c.NUMA))
		if core := topo.CoreCPUs(c.Core); !core.IsSubsetOf(set) {
			t.Errorf("cpuset %s holds CPU %d but not all of its core %s", set, id, core)
		}
	}
	if n := cpuset.New(nodes...); n.Size() != 1 {
		t.Errorf("cpuset %s spans NUMA nodes %s, want one", set, n)
	}
	return cpuset.New(nodes...)
}

func TestCreateLSEFullPCPUsGetsWholeCoresOnOneNode(t *testing.T) {
	f, _ := connected(t, alloc.NodeSettings{Reserved: cpuset.New(0)})
	ctr := f.mustCreate(lse4)
	cpu := ctr.Linux.Resources.Cpu
	set, err := cpuset.Parse(cpu.Cpus)
	if err != nil || set.Size() != 4 {
		t.Fatalf("cpuset = %q (%v), want 4 CPUs", cpu.Cpus, err)
	}
	if want := wholeCoresOnOneNode(t, set).String(); cpu.Mems != want {
		t.Errorf("mems = %q, want %q (memory follows the CPUs)", cpu.Mems, want)
	}
	if set.Contains(0) {
		t.Errorf("cpuset %s holds reserved CPU 0", set)
	}
	if got := cpu.Shares.GetValue(); got != 4096 {
		t.Errorf("shares = %d, want 4096", got)
	}
}

func TestCreateBEGetsBEPoolWithIdleWeight(t *testing.T) {
	f := newRuntime(t, socketDir(t))
	t.Cleanup(f.r.Stop)
	// strict-cpu-reservation keeps the reserved CPUs out of the shared
	// pools (as kubelet's option does).
	p := newPlugin(t, filepath.Join(t.TempDir(), "state.db"), alloc.NodeSettings{Reserved: cpuset.New(0, 8), Options: []string{"strict-cpu-reservation"}})
	f.connect(p)
	bec := f.mustCreate(be)
	if got, want := bec.Linux.Resources.Cpu.Cpus, "1-7,9-15"; got != want {
		t.Errorf("BE cpuset = %q, want the BE pool %q", got, want)
	}
	if got := bec.Linux.Resources.Cpu.Shares.GetValue(); got != BEShares {
		t.Errorf("BE shares = %d, want %d", got, BEShares)
	}
	if got, want := bec.Linux.Resources.Cpu.Mems, "0-1"; got != want {
		t.Errorf("BE mems = %q, want %q", got, want)
	}
	// An exclusive admission shrinks the BE pool: the runtime is told in
	// the same CreateContainer answer.
	lse := f.mustCreate(lse4)
	lseSet, _ := cpuset.Parse(lse.Linux.Resources.Cpu.Cpus)
	beSet, _ := cpuset.Parse(f.cpusets()[bec.Id])
	if want := cpuset.New(1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 14, 15).Difference(lseSet); !beSet.Equals(want) {
		t.Errorf("BE cpuset after LSE %s = %s, want %s", lseSet, beSet, want)
	}
}

func TestCreateLSGetsSharesAndQuota(t *testing.T) {
	f, _ := connected(t, alloc.NodeSettings{})
	c := f.mustCreate(ls1500)
	cpu := c.Linux.Resources.Cpu
	if cpu.Cpus != "0-15" || cpu.Shares.GetValue() != 1536 || cpu.Quota.GetValue() != 150000 || cpu.Period.GetValue() != 100000 {
		t.Errorf("LS cpu = cpus %q shares %d quota %d period %d, want 0-15, 1536, 150000, 100000",
			cpu.Cpus, cpu.Shares.GetValue(), cpu.Quota.GetValue(), cpu.Period.GetValue())
	}
}

func TestPluginRestartResynchronisesWithoutMoving(t *testing.T) {
	dir := socketDir(t)
	f := newRuntime(t, dir)
	t.Cleanup(f.r.Stop)
	state := filepath.Join(t.TempDir(), "state.db")
	p := newPlugin(t, state, alloc.NodeSettings{Reserved: cpuset.New(0)})
	s := f.connect(p)
	f.mustCreate(lse4)
	f.mustCreate(ls1500)
	f.mustCreate(be)
	before := f.cpusets()
	want, err := p.Containers().List()
	if err != nil {
		t.Fatal(err)
	}
	s.Stop()
	p.Close()

	tests := []struct {
		name  string
		state string
	}{
		{name: "same state file", state: state},
		// The state file was lost: the live exclusive container keeps
		// the cores it holds.
		{name: "state file lost", state: filepath.Join(t.TempDir(), "fresh.db")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p2 := newPlugin(t, tc.state, alloc.NodeSettings{Reserved: cpuset.New(0)})
			s2 := f.connect(p2)
			defer s2.Stop()
			f.mu.Lock()
			last := f.syncs[len(f.syncs)-1]
			f.mu.Unlock()
			if len(last) != 0 {
				t.Errorf("Synchronize answered %d updates, want none: %v", len(last), last)
			}
			if diff := cmp.Diff(before, f.cpusets()); diff != "" {
				t.Errorf("live cpusets changed (-before +after):\n%s", diff)
			}
			got, err := p2.Containers().List()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got, cmp.Comparer(cpuset.CPUSet.Equals)); diff != "" {
				t.Errorf("assignments changed (-before +after):\n%s", diff)
			}
		})
	}
}

func TestSynchronizeRepairsAMovedContainer(t *testing.T) {
	dir := socketDir(t)
	f := newRuntime(t, dir)
	t.Cleanup(f.r.Stop)
	state := filepath.Join(t.TempDir(), "state.db")
	p := newPlugin(t, state, alloc.NodeSettings{})
	s := f.connect(p)
	lse := f.mustCreate(lse4)
	pinned := lse.Linux.Resources.Cpu.Cpus
	s.Stop()
	f.mu.Lock()
	lse.Linux.Resources.Cpu.Cpus = "0-15" // someone (kubelet) overwrote it while the plugin was away
	f.mu.Unlock()
	f.connect(p)
	if got := f.cpusets()[lse.Id]; got != pinned {
		t.Errorf("cpuset after resync = %q, want the pin %q back", got, pinned)
	}
}

func TestUpdateContainerAnsweredWithPin(t *testing.T) {
	f, _ := connected(t, alloc.NodeSettings{})
	lse := f.mustCreate(lse4)
	pinned := lse.Linux.Resources.Cpu.Cpus
	f.mu.Lock()
	pod := f.pods[lse.PodSandboxId]
	f.mu.Unlock()
	rsp, err := f.r.UpdateContainer(context.Background(), &api.UpdateContainerRequest{Pod: pod, Container: lse,
		LinuxResources: &api.LinuxResources{Cpu: &api.LinuxCPU{Cpus: "0-15", Shares: api.UInt64(uint64(4096)), Quota: api.Int64(400000), Period: api.UInt64(100000)}}})
	if err != nil {
		t.Fatalf("UpdateContainer: %v", err)
	}
	var got string
	for _, u := range rsp.GetUpdate() {
		if u.GetContainerId() == lse.Id {
			got = u.GetLinux().GetResources().GetCpu().GetCpus()
		}
	}
	if got != pinned {
		t.Errorf("UpdateContainer answered cpuset %q for %s, want the pin %q (updates: %v)", got, lse.Id, pinned, rsp.GetUpdate())
	}
}

func TestRemoveContainerReleases(t *testing.T) {
	f, p := connected(t, alloc.NodeSettings{})
	full := podSpec{name: "all", labels: map[string]string{LabelQoSClass: "LSE"}, shares: 16384, quota: 1600000}
	c := f.mustCreate(full)
	if _, _, err := f.create(podSpec{name: "second", labels: map[string]string{LabelQoSClass: "LSE"}, shares: 1024, quota: 100000}); err == nil {
		t.Fatal("a second LSE container was admitted on a full node")
	}
	f.mu.Lock()
	pod := f.pods[c.PodSandboxId]
	f.mu.Unlock()
	if err := f.r.RemoveContainer(context.Background(), &api.RemoveContainerRequest{Pod: pod, Container: c}); err != nil {
		t.Fatalf("RemoveContainer: %v", err)
	}
	if got, err := p.Containers().List(); err != nil || len(got) != 0 {
		t.Fatalf("assignments after remove = %v (%v), want none", got, err)
	}
	f.mustCreate(podSpec{name: "third", labels: map[string]string{LabelQoSClass: "LSE"}, shares: 16384, quota: 1600000})
}

func TestRunReconnectsAfterRuntimeRestart(t *testing.T) {
	dir := socketDir(t)
	f := newRuntime(t, dir)
	p := newPlugin(t, filepath.Join(t.TempDir(), "state.db"), alloc.NodeSettings{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	// The in-process runtime's Stop leaves external plugins' connections
	// open (a real containerd exits, which closes them): record them to
	// close them at the "restart".
	var conns []net.Conn
	var mu sync.Mutex
	dial := stub.WithDialer(func(path string) (net.Conn, error) {
		c, err := net.Dial("unix", path)
		if err == nil {
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
		return c, err
	})
	go func() { done <- p.Run(ctx, stub.WithSocketPath(f.sock), dial) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	f.waitSync()
	f.r.BlockPluginSync().Unblock()
	lse := f.mustCreate(lse4)
	pinned := lse.Linux.Resources.Cpu.Cpus

	f.r.Stop() // containerd stops; the containers keep running
	mu.Lock()
	for _, c := range conns {
		c.Close()
	}
	mu.Unlock()
	f.start(dir)
	t.Cleanup(func() { f.r.Stop() })
	f.waitSync() // the plugin came back by itself
	f.mu.Lock()
	last := f.syncs[len(f.syncs)-1]
	f.mu.Unlock()
	if len(last) != 0 {
		t.Errorf("Synchronize after the restart answered %d updates, want none", len(last))
	}
	if got := f.cpusets()[lse.Id]; got != pinned {
		t.Errorf("cpuset after the restart = %q, want %q", got, pinned)
	}
	f.r.BlockPluginSync().Unblock()
	second := f.mustCreate(podSpec{name: "after", labels: map[string]string{LabelQoSClass: "LSE"}, shares: 2048, quota: 200000})
	a, _ := cpuset.Parse(pinned)
	b, _ := cpuset.Parse(second.Linux.Resources.Cpu.Cpus)
	if b.Size() != 2 || !a.Intersection(b).IsEmpty() {
		t.Errorf("container created after the restart got %s, want 2 CPUs apart from %s", b, a)
	}
}

// TestPolicyKubeletGivesKubeletCpusets shows that a node migrating from
// kubelet's static CPU manager gets the cpusets kubelet's engine (alloc
// PolicyKubelet, parity-tested in alloc) gives the same Guaranteed
// containers, in order, with the same reserved CPUs.
func TestPolicyKubeletGivesKubeletCpusets(t *testing.T) {
	cfg := alloc.NodeSettings{Policy: alloc.PolicyKubelet, Reserved: cpuset.New(0)}
	f, _ := connected(t, cfg)
	want, err := alloc.NewState(topology.MustSynthetic(twoNodes), cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range []int{3, 2, 5, 1} {
		name := fmt.Sprintf("g%d", i)
		c := f.mustCreate(podSpec{name: name, shares: uint64(n * 1024), quota: int64(n * 100000)})
		pl, err := want.Allocate(alloc.Request{ID: name, CPUs: n})
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Linux.Resources.Cpu.Cpus; got != pl.CPUs.String() {
			t.Errorf("Guaranteed %d-CPU container %s got %q, kubelet's static policy gives %q", n, name, got, pl.CPUs)
		}
	}
}

// Run publishes the pools (a NodeResourceTopology) at start and after an
// admission changed them.
func TestRunPublishesPoolsAfterChanges(t *testing.T) {
	dir := socketDir(t)
	f := newRuntime(t, dir)
	t.Cleanup(f.r.Stop)
	published := make(chan alloc.Pools, 16)
	runPlugin(t, f, Options{Publish: func(_ context.Context, pl alloc.Pools) error { published <- pl; return nil }})
	lse := f.mustCreate(lse4)
	deadline := time.After(testutil.Patience)
	for {
		select {
		case pl := <-published:
			if pl.LSE.String() == lse.Linux.Resources.Cpu.Cpus {
				return
			}
		case <-deadline:
			t.Fatalf("no publication showing the LSE container's CPUs %s within %v", lse.Linux.Resources.Cpu.Cpus, testutil.Patience)
		}
	}
}

// TestNUMAPolicyAnnotationAlignsTheContainer shows that the plugin honours
// the pod annotation corepin.io/numa-policy as the container's topology
// policy (issue 13: the extender filtered nodes for single-numa-node and the
// node then placed the pod across NUMA nodes). Under the kubelet policy
// with no default topology policy, a 4-CPU container after a 5-CPU one is
// spread over both nodes; annotated single-numa-node it gets node 1 only.
// A bad value is refused with a message naming the annotation.
func TestNUMAPolicyAnnotationAlignsTheContainer(t *testing.T) {
	cfg := alloc.NodeSettings{Policy: alloc.PolicyKubelet, Reserved: cpuset.New(0)}
	topo := topology.MustSynthetic(twoNodes)
	nodesOf := func(set string) map[topology.NodeID]bool {
		s, err := cpuset.Parse(set)
		if err != nil {
			t.Fatalf("cpuset %q: %v", set, err)
		}
		m := map[topology.NodeID]bool{}
		for _, id := range s.List() {
			c, _ := topo.CPU(id)
			m[c.NUMA] = true
		}
		return m
	}
	five := podSpec{name: "five", shares: 5 * 1024, quota: 500000}
	tests := []struct {
		name      string
		policy    map[string]string
		wantNodes int
	}{
		{name: "no annotation: the node's default spreads it", wantNodes: 2},
		{name: "single-numa-node", policy: map[string]string{AnnotationNUMAPolicy: "single-numa-node"}, wantNodes: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, _ := connected(t, cfg)
			f.mustCreate(five)
			c := f.mustCreate(podSpec{name: "four", annotations: tc.policy, shares: 4 * 1024, quota: 400000})
			set := c.Linux.Resources.Cpu.Cpus
			if got := nodesOf(set); len(got) != tc.wantNodes || cpuset.MustParse(set).Size() != 4 {
				t.Errorf("4-CPU container got %s on NUMA nodes %v, want 4 CPUs on %d node(s)", set, got, tc.wantNodes)
			}
		})
	}
	t.Run("bad value refused", func(t *testing.T) {
		f, p := connected(t, cfg)
		_, _, err := f.create(podSpec{name: "bad", annotations: map[string]string{AnnotationNUMAPolicy: "single"}, shares: 2048, quota: 200000})
		want := `annotation corepin.io/numa-policy "single" is not one of none, best-effort, restricted, single-numa-node`
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("CreateContainer with a bad numa-policy = %v, want an error containing %q", err, want)
		}
		if got, err := p.Containers().List(); err != nil || len(got) != 0 {
			t.Errorf("assignments after the refusal = %v (%v), want none", got, err)
		}
	})
}

// Run keeps the node's annotations (publish.Annotator, a JSON merge patch of
// the Node) up to date: after an admission the published assignments hold
// the container's CPUs.
func TestRunAnnotatesTheNodeAfterChanges(t *testing.T) {
	type patch struct {
		Metadata struct {
			Annotations map[string]*string `json:"annotations"`
		} `json:"metadata"`
	}
	patches := make(chan patch, 16)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p patch
		if r.Method != http.MethodPatch || r.URL.Path != "/api/v1/nodes/n1" || r.Header.Get("Content-Type") != "application/merge-patch+json" ||
			json.NewDecoder(r.Body).Decode(&p) != nil {
			http.Error(w, "unexpected", http.StatusBadRequest)
			return
		}
		patches <- p
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1"}}`)
	}))
	defer api.Close()
	f := newRuntime(t, socketDir(t))
	t.Cleanup(f.r.Stop)
	pub, err := publish.New(&rest.Config{Host: api.URL})
	if err != nil {
		t.Fatal(err)
	}
	a := &publish.Annotator{Publisher: pub, Node: "n1"}
	runPlugin(t, f, Options{Annotate: a.Annotate})
	lse := f.mustCreate(lse4)
	want := fmt.Sprintf(`"cpuset":"%s","qos":"LSE"`, lse.Linux.Resources.Cpu.Cpus)
	deadline := time.After(testutil.Patience)
	for {
		select {
		case pt := <-patches:
			ann := pt.Metadata.Annotations
			if ann[nodestate.AnnotationTopology] == nil || ann[nodestate.AnnotationAssigned] == nil {
				t.Fatalf("patch without the topology and assignments: %v", ann)
			}
			if !strings.Contains(*ann[nodestate.AnnotationAssigned], want) {
				continue
			}
			// The entry names the container's pod, and the settings
			// say entries do: the extender tells admitted pods from
			// those on their way by it.
			var list []plan.Assigned
			if err := json.Unmarshal([]byte(*ann[nodestate.AnnotationAssigned]), &list); err != nil {
				t.Fatal(err)
			}
			for _, e := range list {
				if e.QoS == "LSE" && e.ID != plan.ReservedID && e.PodUID != "uid-"+lse4.name {
					t.Errorf("entry %+v names pod UID %q, want %q", e, e.PodUID, "uid-"+lse4.name)
				}
			}
			if set := ann[nodestate.AnnotationAllocator]; set == nil || !strings.Contains(*set, `"pod_uids":true`) {
				t.Errorf("%s = %v, want it to say entries name their pods", nodestate.AnnotationAllocator, set)
			}
			return
		case <-deadline:
			t.Fatalf("no annotation showing the LSE container (%s) within %v", want, testutil.Patience)
		}
	}
}

// runPlugin runs a plugin of o (state in a temporary file, the two-node
// machine) with its own Run loop against f until the test ends, and
// returns once f's runtime has synchronised it.
func runPlugin(t *testing.T, f *fakeRuntime, o Options) *Plugin {
	t.Helper()
	o.State, o.Topology = filepath.Join(t.TempDir(), "state.db"), topology.MustSynthetic(twoNodes)
	p, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx, stub.WithSocketPath(f.sock)) }()
	t.Cleanup(func() { cancel(); <-done })
	f.waitSync()
	f.r.BlockPluginSync().Unblock()
	return p
}

// TestSharedPoolsRegrowAfterExclusiveContainerEnds shows that the shared
// containers (LS and BE) get back the CPUs of an exclusive container when
// it ends: on StopContainer in the answer to the runtime's request, on a
// RemoveContainer without a stop before it (a container that never ran,
// or a runtime that skips the stop event) in an unsolicited update. The
// cpusets are the ones the fake runtime applied, compared as sets.
func TestSharedPoolsRegrowAfterExclusiveContainerEnds(t *testing.T) {
	for _, how := range []string{"stop", "remove"} {
		t.Run(how, func(t *testing.T) {
			f, p := connected(t, alloc.NodeSettings{Reserved: cpuset.New(0)})
			ls := f.mustCreate(ls1500)
			bec := f.mustCreate(be)
			sharedOf := func() map[string]cpuset.CPUSet {
				m := map[string]cpuset.CPUSet{}
				for id, s := range f.cpusets() {
					if id == ls.Id || id == bec.Id {
						m[id] = cpuset.MustParse(s)
					}
				}
				return m
			}
			before := sharedOf()
			lse := f.mustCreate(lse4)
			pinned := cpuset.MustParse(lse.Linux.Resources.Cpu.Cpus)
			for id, s := range sharedOf() {
				if s.Intersects(pinned) || !s.Union(pinned).Equals(before[id]) {
					t.Fatalf("shared container %s has %s beside LSE %s, want %s less the LSE CPUs", id, s, pinned, before[id])
				}
			}
			f.mu.Lock()
			pod := f.pods[lse.PodSandboxId]
			f.mu.Unlock()
			ctx := context.Background()
			switch how {
			case "stop":
				rsp, err := f.r.StopContainer(ctx, &api.StopContainerRequest{Pod: pod, Container: lse})
				if err != nil {
					t.Fatalf("StopContainer: %v", err)
				}
				f.mu.Lock()
				f.apply(rsp.GetUpdate())
				lse.State = api.ContainerState_CONTAINER_STOPPED
				f.mu.Unlock()
			case "remove":
				if err := f.r.RemoveContainer(ctx, &api.RemoveContainerRequest{Pod: pod, Container: lse}); err != nil {
					t.Fatalf("RemoveContainer: %v", err)
				}
				f.mu.Lock()
				delete(f.ctrs, lse.Id)
				f.mu.Unlock()
				// The plugin sends the regrown pools by itself, after
				// answering; wait for them.
				deadline := time.After(testutil.Patience)
			wait:
				for {
					for id, s := range sharedOf() {
						if !s.Equals(before[id]) {
							select {
							case <-f.pushed:
								continue wait
							case <-deadline:
								t.Fatalf("shared container %s still has %s %v after the LSE container was removed, want %s back", id, s, testutil.Patience, before[id])
							}
						}
					}
					break
				}
			}
			for id, s := range sharedOf() {
				if !s.Equals(before[id]) || !pinned.IsSubsetOf(s) {
					t.Errorf("after %s of the LSE container (%s) shared container %s has %s, want %s again", how, pinned, id, s, before[id])
				}
			}
			if got, err := p.Containers().List(); err != nil || len(got) != 2 {
				t.Errorf("assignments after %s = %v (%v), want the 2 shared containers", how, got, err)
			}
		})
	}
}

// A container created while no plugin ran (NRI fails open: every CPU)
// and started only after the plugin's Synchronize answered its update:
// containerd applies that update to the created container's spec, not to
// its cgroup, so the start leaves it on every CPU. The plugin sends the
// update again once the container runs (PostStartContainer).
func TestContainerStartedAfterSynchronizeGetsItsUpdate(t *testing.T) {
	f := newRuntime(t, socketDir(t))
	t.Cleanup(f.r.Stop)
	pod := &api.PodSandbox{Id: "pod-late", Name: "late", Namespace: "default", Uid: "uid-late", Labels: lse4.labels, Annotations: lse4.annotations}
	ctr := &api.Container{Id: "ctr-late", PodSandboxId: pod.Id, Name: "main", State: api.ContainerState_CONTAINER_CREATED,
		Linux: &api.LinuxContainer{Resources: &api.LinuxResources{Cpu: &api.LinuxCPU{Shares: api.UInt64(lse4.shares),
			Quota: api.Int64(lse4.quota), Period: api.UInt64(100000), Cpus: "0-15", Mems: "0-1"}}}}
	f.mu.Lock()
	f.pods[pod.Id], f.ctrs[ctr.Id] = pod, ctr
	f.mu.Unlock()
	p := newPlugin(t, filepath.Join(t.TempDir(), "state.db"), alloc.NodeSettings{Reserved: cpuset.New(0)})
	f.connect(p)
	ca, err := p.Containers().Get(ctr.Id)
	if err != nil {
		t.Fatalf("Synchronize did not admit the created container: %v", err)
	}
	want := ca.CPUs.String()
	if want == "0-15" {
		t.Fatalf("the container's assignment is every CPU (%s): the test needs one that differs", want)
	}
	// The runtime started it with the cgroup made at create.
	f.mu.Lock()
	ctr.Linux.Resources.Cpu.Cpus = "0-15"
	ctr.State = api.ContainerState_CONTAINER_RUNNING
	f.mu.Unlock()
	if err := f.r.PostStartContainer(context.Background(), &api.PostStartContainerRequest{Pod: pod, Container: ctr}); err != nil {
		t.Fatalf("PostStartContainer: %v", err)
	}
	select {
	case <-f.pushed:
	case <-time.After(testutil.Patience):
		t.Fatalf("no update sent after the start; the container runs on %s, its assignment is %s", f.cpusets()[ctr.Id], want)
	}
	if got := f.cpusets()[ctr.Id]; got != want {
		t.Errorf("after the start the container runs on %s, want its assignment %s", got, want)
	}
	// A container started normally (admitted at create) gets no second update.
	f.mustCreate(ls1500)
	f.mu.Lock()
	late := f.ctrs["ctr-ls"]
	f.mu.Unlock()
	if err := f.r.PostStartContainer(context.Background(), &api.PostStartContainerRequest{Pod: f.pods[late.PodSandboxId], Container: late}); err != nil {
		t.Fatalf("PostStartContainer: %v", err)
	}
	select {
	case ups := <-f.pushed:
		t.Errorf("an update was sent after a normal start: %v", ups)
	case <-time.After(200 * time.Millisecond):
	}
}
