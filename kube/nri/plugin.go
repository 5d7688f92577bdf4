package nri

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/enforce"
	"github.com/corepin/corepin/nodecore"
	"github.com/corepin/corepin/qos"
	"github.com/corepin/corepin/topology"
	"github.com/corepin/corepin/wakescan"
)

// Registration of the plugin with the runtime.
const (
	// PluginName is the name the plugin registers under (and the one
	// AnnotationRequiredPlugins lists).
	PluginName = "corepin"
	// PluginIdx orders corepin among the runtime's plugins.
	PluginIdx = "10"
	// BEShares is the cpu.shares of a BE container: the kernel's lowest
	// cgroup v1 weight (cgroup v2 weight 1). Its tasks are SCHED_IDLE
	// besides, where a route allows (BERoute); the weight is what is left
	// where none does.
	BEShares = 2
)

// Environment of a container the plugin admits (CreateContainer): what it
// was given, so that it sizes its thread pools without parsing /proc, as
// a command `corepin run` or the agent starts does. They are set once, at
// creation: a later resize or a shared pool's change does not reach them.
const (
	// EnvCPUSet is its cpuset (Linux list format): its exclusive CPUs, or
	// the shared pool when it was created.
	EnvCPUSet = "COREPIN_CPUSET"
	// EnvThreads is the thread count its CPUs are worth
	// (nodecore.ContainerAssignment.Threads).
	EnvThreads = "COREPIN_THREADS"
)

// Options configure New.
type Options struct {
	// State is the agent's state file, shared with `corepin agent` and
	// local runs.
	State string
	// Topology is the machine (topology.Open of a sysfs root).
	Topology *topology.Topology
	// Alloc is the node's settings: policy, options, reserved CPUs, and
	// the topology policy given to requests that name none.
	Alloc alloc.NodeSettings
	// Logger gets structured logs; nil discards them.
	Logger *slog.Logger
	// Publish, when not nil, is called by Run with the node's pools after
	// each change of the state (a NodeResourceTopology publisher), one
	// call at a time, the latest pools only; a failure is logged and
	// retried after the next change or 30 seconds.
	Publish func(context.Context, alloc.Pools) error
	// Annotate, when not nil, is called like Publish (the same moments,
	// one call at a time, the latest state only, retried after the next
	// change or 30 seconds) with the node's whole allocator state and
	// the pod UID of each container's assignment, by assignment id: the
	// node annotations the scheduler extender reads (publish.Annotator).
	Annotate func(ctx context.Context, st *alloc.State, pods map[string]string) error
	// InfoDir, when not empty, is a directory of the host (the runtime's
	// view; the plugin must see it at the same path) where the plugin
	// keeps, for each container it creates, the files InfoCPUSet and
	// InfoThreads, rewritten at every resize and pool change, and mounts
	// them read-only into the container at InfoMount.
	InfoDir string
	// Tasks reads and sets the policy of a BE container's process
	// (ProtectBE); nil is KernelTasks.
	Tasks Tasks
	// MetricsAddr, when not empty, is the TCP address Run serves
	// Prometheus metrics on (GET /metrics): corepin_nri_be_protection.
	MetricsAddr string
	// IdleParentMount, when not empty, is the host's cgroup mount (its
	// /sys/fs/cgroup, as the plugin sees it) where the plugin keeps the
	// idle parent (RouteIdleParent): BE containers are created under it,
	// and the plugin removes their pod groups there. A mount it can not
	// use is logged and the plugin goes on without the route. Empty
	// leaves the cgroups to the runtime and the kubelet.
	IdleParentMount string
	// WakeScan is the node setting wake_scan (package wakescan): with
	// full, SIS_UTIL is off in the scheduler's features while a BE
	// container is admitted, the value found restored when the last ends
	// and when the plugin stops. Either way the plugin undoes what a
	// crashed holder left.
	WakeScan wakescan.Mode
	// SchedRoot is the directory holding the host's
	// sys/kernel/debug/sched/features ("" is "/"): the chart's /host.
	SchedRoot string
	// IRQIsolate is the node setting irq_isolate ("" is off): which
	// exclusive containers are admitted with their CPUs to be kept clear
	// of device interrupts, recorded in their assignments for RunIRQSync.
	IRQIsolate IRQMode
}

// Plugin is corepin's NRI plugin: the runtime asks it about each container
// and applies what it answers (cpuset cpus and mems, CPU shares and
// quota). It admits through nodecore.Containers, the node's state and
// allocator it shares with the agent, and writes no cgroup itself: the
// idle parent (Options.IdleParentMount) is written by enforce.IdleParents.
type Plugin struct {
	c   *nodecore.Containers
	log *slog.Logger

	mu sync.Mutex
	// applied is what the runtime last applied per container id, as far
	// as the plugin knows (from Synchronize and its own answers).
	applied map[string]cpuset.CPUSet
	// unstarted are the containers whose Synchronize update the runtime
	// took before it started them: containerd applies an update of a
	// created container to its spec only (the cgroup was made at create,
	// fail-open while no plugin ran), so PostStartContainer sends it again.
	unstarted map[string]bool
	// rtStarts counts the real-time route's container starts by route
	// (ensureRealTime).
	rtStarts map[RTRoute]int
	stub     stub.Stub

	publish  func(context.Context, alloc.Pools) error
	annotate func(context.Context, *alloc.State, map[string]string) error
	changed  chan struct{} // capacity 1: a change not yet published
	info     string        // Options.InfoDir
	tasks    Tasks
	metrics  string // Options.MetricsAddr
	idle     *enforce.IdleParents
	wake     *wakescan.Follower
	wakeSig  chan struct{} // capacity 1: a change wake_scan has not seen
	// placed is the cgroups path, under an idle parent, of each BE
	// container created there.
	placed map[string]string
	// irqMode is Options.IRQIsolate.
	irqMode IRQMode
}

// New opens the state file and returns a plugin over it.
func New(o Options) (*Plugin, error) {
	if o.InfoDir != "" && (!filepath.IsAbs(o.InfoDir) || filepath.Clean(o.InfoDir) == "/") {
		return nil, fmt.Errorf("%w: info dir %q: want an absolute directory of the host other than /, seen by the plugin at the same path", nodecore.ErrInvalid, o.InfoDir)
	}
	irqMode, err := ParseIRQMode(string(o.IRQIsolate))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", nodecore.ErrInvalid, err)
	}
	c, err := nodecore.OpenContainers(o.State, o.Topology, o.Alloc)
	if err != nil {
		return nil, err
	}
	p := &Plugin{irqMode: irqMode, c: c, log: o.Logger, applied: map[string]cpuset.CPUSet{}, unstarted: map[string]bool{}, publish: o.Publish, annotate: o.Annotate, changed: make(chan struct{}, 1), info: o.InfoDir, tasks: o.Tasks, metrics: o.MetricsAddr,
		placed: map[string]string{}, wakeSig: make(chan struct{}, 1)}
	if p.tasks == nil {
		p.tasks = KernelTasks{}
	}
	p.changed <- struct{}{} // publish once at start
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	if o.IdleParentMount != "" {
		if p.idle, err = enforce.OpenIdleParents(o.IdleParentMount, IdleGroup); err != nil {
			p.log.Warn("BE containers get no idle parent: SCHED_IDLE routes only", "err", err)
		}
	}
	if p.wake, err = nodecore.OpenWakeFollower(o.State, o.WakeScan, o.SchedRoot, "nri", p.log); err != nil {
		p.Close()
		return nil, err
	}
	p.wakeSig <- struct{}{} // follow the state once at start
	return p, nil
}

// wakeLoop tells the wake_scan follower whether a BE container is
// admitted, after each change of the state and every wakeEvery (a run
// that died holding the switch, a change another process made), until
// ctx ends.
func (p *Plugin) wakeLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.wakeSig:
		case <-time.After(wakeEvery):
		}
		cas, err := p.c.List()
		if err != nil {
			p.log.Warn("wake_scan: reading the state", "err", err)
			continue
		}
		p.wake.Sync(slices.ContainsFunc(cas, func(ca nodecore.ContainerAssignment) bool { return ca.QoS == alloc.BE }))
	}
}

// wakeEvery is how often wakeLoop looks without a change.
const wakeEvery = 10 * time.Second

// Close closes the state file (and the cgroup mount). Assignments stay
// held.
func (p *Plugin) Close() error {
	if p.idle != nil {
		p.idle.Close()
	}
	var werr error
	if p.wake != nil {
		werr = p.wake.Close() // restores the value found unless another holder runs
	}
	return errors.Join(werr, p.c.Close())
}

// Containers is the admission core the plugin runs on.
func (p *Plugin) Containers() *nodecore.Containers { return p.c }

// Backoff bounds between reconnect attempts.
const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 5 * time.Second
)

// Run connects to the runtime and serves it until ctx ends. When the
// connection drops (a containerd restart: stub.Run returns "ttrpc: server
// closed", then "connection refused" until the socket is back), it waits
// with a doubling back-off and connects again; every connect begins with
// Synchronize. opts add to the plugin's name and index (a socket path).
// With Options.MetricsAddr it serves the metrics there too (an address
// that can not be listened on fails Run).
func (p *Plugin) Run(ctx context.Context, opts ...stub.Option) error {
	if p.metrics != "" {
		stop, err := p.serveMetrics(ctx, p.metrics)
		if err != nil {
			return err
		}
		defer stop()
	}
	if p.publish != nil || p.annotate != nil {
		done := make(chan struct{})
		defer func() { <-done }()
		go func() { defer close(done); p.publishLoop(ctx) }()
	}
	wakeDone := make(chan struct{})
	defer func() { <-wakeDone }()
	go func() { defer close(wakeDone); p.wakeLoop(ctx) }()
	wait := minBackoff
	for ctx.Err() == nil {
		t0 := time.Now()
		err := p.runOnce(ctx, opts)
		if ctx.Err() != nil {
			return nil
		}
		if time.Since(t0) > 10*maxBackoff {
			wait = minBackoff
		}
		p.log.Warn("runtime connection lost; reconnecting", "err", err, "in", wait)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		wait = min(2*wait, maxBackoff)
	}
	return nil
}

// publishLoop calls p.publish and p.annotate (those set) after each
// change until ctx ends.
func (p *Plugin) publishLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.changed:
		case <-time.After(30 * time.Second):
		}
		st, pods, err := p.c.StateAndPods()
		if err != nil {
			p.log.Warn("reading the state to publish", "err", err)
			continue
		}
		if p.publish != nil {
			pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := p.publish(pctx, st.Pools())
			cancel()
			if err != nil && ctx.Err() == nil {
				p.log.Warn("publishing the node's topology", "err", err)
			}
		}
		if p.annotate != nil {
			pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := p.annotate(pctx, st, pods)
			cancel()
			if err != nil && ctx.Err() == nil {
				p.log.Warn("annotating the node", "err", err)
			}
		}
	}
}

// touched notes a change of the state for publishLoop.
func (p *Plugin) touched() {
	for _, c := range []chan struct{}{p.changed, p.wakeSig} {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

func (p *Plugin) runOnce(ctx context.Context, opts []stub.Option) error {
	s, err := p.NewStub(opts...)
	if err != nil {
		return err
	}
	return s.Run(ctx)
}

// NewStub is a stub serving p, registered as PluginName at PluginIdx.
func (p *Plugin) NewStub(opts ...stub.Option) (stub.Stub, error) {
	s, err := stub.New(p, append([]stub.Option{stub.WithPluginName(PluginName), stub.WithPluginIdx(PluginIdx)}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("creating the NRI stub: %w", err)
	}
	p.mu.Lock()
	p.stub = s
	p.mu.Unlock()
	return s, nil
}

// Interfaces of pkg/stub the plugin implements.
var (
	_ stub.SynchronizeInterface        = (*Plugin)(nil)
	_ stub.CreateContainerInterface    = (*Plugin)(nil)
	_ stub.UpdateContainerInterface    = (*Plugin)(nil)
	_ stub.StopContainerInterface      = (*Plugin)(nil)
	_ stub.RemoveContainerInterface    = (*Plugin)(nil)
	_ stub.PostStartContainerInterface = (*Plugin)(nil)
	_ stub.StartContainerInterface     = (*Plugin)(nil)
	_ stub.StopPodInterface            = (*Plugin)(nil)
	_ stub.RemovePodInterface          = (*Plugin)(nil)
)

// refOf names ctr of pod for the state file.
func refOf(pod *api.PodSandbox, ctr *api.Container) nodecore.ContainerRef {
	return nodecore.ContainerRef{ID: ctr.GetId(), Pod: pod.GetNamespace() + "/" + pod.GetName(), PodUID: pod.GetUid(), Name: ctr.GetName()}
}

// live reports whether the runtime still runs (or will run) ctr.
func live(ctr *api.Container) bool { return ctr.GetState() != api.ContainerState_CONTAINER_STOPPED }

// Synchronize runs on every connect with all of the runtime's pods and
// containers. It releases the assignments of containers that are gone,
// admits live containers it does not know (keeping an exclusive cpuset
// they hold already when it is free and the right size), and answers
// updates only for containers whose cpuset differs from their assignment:
// correct containers are not moved.
func (p *Plugin) Synchronize(ctx context.Context, pods []*api.PodSandbox, ctrs []*api.Container) ([]*api.ContainerUpdate, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	podOf := make(map[string]*api.PodSandbox, len(pods))
	for _, pod := range pods {
		podOf[pod.GetId()] = pod
	}
	running := map[string]*api.Container{}
	p.applied = map[string]cpuset.CPUSet{}
	for _, ctr := range ctrs {
		if !live(ctr) {
			continue
		}
		running[ctr.GetId()] = ctr
		if cur, err := cpuset.Parse(ctr.GetLinux().GetResources().GetCpu().GetCpus()); err == nil {
			p.applied[ctr.GetId()] = cur
		}
	}
	known, err := p.c.List()
	if err != nil {
		return nil, fmt.Errorf("reading the state: %w", err)
	}
	have := map[string]bool{}
	for _, ca := range known {
		if running[ca.Ref.ID] == nil {
			if err := p.c.Release(ca.Ref.ID); err != nil {
				return nil, fmt.Errorf("releasing gone container %s: %w", ca.Ref.ID, err)
			}
			p.removeInfo(ca.Ref.ID)
			p.log.Info("released a container that is gone", "id", ca.Ref.ID, "pod", ca.Ref.Pod)
			continue
		}
		have[ca.Ref.ID] = true
		if ca.QoS == alloc.LSE || ca.QoS == alloc.LSR {
			p.followSize(podOf[running[ca.Ref.ID].GetPodSandboxId()], running[ca.Ref.ID], ca)
		}
	}
	// Exclusive containers first, so that a pinned container keeps its
	// CPUs before a shared one's admission shrinks the pools.
	for _, pass := range []bool{true, false} {
		for _, ctr := range ctrs {
			if running[ctr.GetId()] == nil || have[ctr.GetId()] {
				continue
			}
			pod := podOf[ctr.GetPodSandboxId()]
			s, why, err := SpecOf(pod, ctr)
			if err != nil {
				if !pass {
					p.log.Warn("leaving a container unmanaged", "id", ctr.GetId(), "err", err)
				}
				continue
			}
			if (s.QoS == "LSE" || s.QoS == "LSR") != pass {
				continue
			}
			p.irqIsolate(pod, &s)
			ca, err := p.c.Admit(refOf(pod, ctr), s, p.applied[ctr.GetId()])
			if err != nil {
				p.log.Warn("leaving a container unmanaged", "id", ctr.GetId(), "err", err)
				continue
			}
			have[ctr.GetId()] = true
			p.log.Info("admitted a running container", "id", ctr.GetId(), "qos", ca.QoS, "cpuset", ca.CPUs, "why", why)
		}
	}
	p.syncIdleParents(pods, running)
	ups, err := p.repair(func(string) bool { return true })
	p.refreshInfo(running)
	p.unstarted = map[string]bool{}
	for _, u := range ups {
		if running[u.GetContainerId()].GetState() == api.ContainerState_CONTAINER_CREATED {
			p.unstarted[u.GetContainerId()] = true
		}
	}
	p.log.Info("synchronized", "containers", len(running), "managed", len(have), "updates", len(ups))
	p.touched()
	return ups, err
}

// followSize brings a known exclusive container's assignment back to the
// size the runtime now gives it. An in-place resize recorded here can
// still miss the container: the runtime gives up on a plugin that answers
// after its timeout and applies the kubelet's resources alone, and a
// resize made while the plugin was away never reaches it. The container's
// resources (its shares, as the kubelet wrote them) are then the truth;
// a grow that no longer fits keeps the recorded size and says so. Only
// exclusive containers: the plugin rewrites a shared container's quota,
// so its resources no longer say what the pod asked.
func (p *Plugin) followSize(pod *api.PodSandbox, ctr *api.Container, ca nodecore.ContainerAssignment) {
	s, _, err := SpecOf(pod, ctr)
	if err != nil || s.CPUs == nil || int(*s.CPUs) == ca.CPUs.Size() {
		return
	}
	got, err := p.c.Resize(ctr.GetId(), s)
	if err != nil {
		p.log.Warn("keeping a container's recorded size, which its resources no longer say", "id", ctr.GetId(),
			"recorded", ca.CPUs.Size(), "resources", *s.CPUs, "err", err)
		return
	}
	p.log.Info("followed a resize the plugin missed", "id", ctr.GetId(), "cpuset", got.CPUs, "was", ca.CPUs)
}

// refreshInfo rewrites the files of every live container the plugin
// manages: one written before a crash, or for a resize the runtime then
// dropped, may say what the container does not have.
func (p *Plugin) refreshInfo(running map[string]*api.Container) {
	all, err := p.c.List()
	if err != nil {
		return
	}
	for _, ca := range all {
		if running[ca.Ref.ID] != nil {
			p.noteInfo(ca)
		}
	}
}

// repair answers an update for each container (chosen by want) whose
// applied cpuset differs from its assignment now. Callers hold p.mu.
func (p *Plugin) repair(want func(id string) bool) ([]*api.ContainerUpdate, error) {
	all, err := p.c.List()
	if err != nil {
		return nil, fmt.Errorf("reading the state: %w", err)
	}
	var ups []*api.ContainerUpdate
	for _, ca := range all {
		cur, ok := p.applied[ca.Ref.ID]
		if !ok || !want(ca.Ref.ID) || cur.Equals(ca.CPUs) {
			continue
		}
		ups = append(ups, updateOf(ca))
		p.applied[ca.Ref.ID] = ca.CPUs
		p.noteInfo(ca)
	}
	return ups, nil
}

// Resources are the CPU settings corepin gives a container.
type Resources struct {
	Cpus, Mems string
	Shares     uint64
	// Quota and Period are the CFS bandwidth (microseconds); Quota 0
	// leaves the runtime's value, -1 is no quota (cpu_quota false).
	Quota  int64
	Period uint64
}

// ResourcesOf is what the runtime applies for ca: the settings of its
// class (qos.ClassResources, the rule `corepin run` and the agent use) in
// the runtime's fields. Its CPUs and the NUMA nodes they span; shares of
// its size (kubelet's mapping) for LSE, LSR and LS, the class's quota for
// LS, and BEShares for BE (the class is idle: its tasks are SCHED_IDLE
// where a BERoute allows, and the weight is the lowest either way).
func ResourcesOf(ca nodecore.ContainerAssignment) Resources {
	milli := int64(ca.MilliCPUs)
	if ca.QoS != alloc.LS && ca.QoS != alloc.BE {
		milli = int64(ca.CPUs.Size()) * 1000
	}
	cr := qos.ClassResources(ca.QoS, float64(milli)/1000, ca.CPUs, ca.Mems)
	r := Resources{Cpus: cr.CPUs.String(), Mems: ca.Mems.String(), Shares: sharesOf(milli)}
	if cr.Idle {
		r.Shares = BEShares
	}
	if cr.Quota > 0 {
		r.Quota, r.Period = cr.Quota.Microseconds(), uint64(cr.Period.Microseconds())
	}
	if ca.NoCPUQuota {
		r.Quota = noQuota
	}
	return r
}

// cpuSetter is what api.ContainerAdjustment and api.ContainerUpdate share.
type cpuSetter interface {
	SetLinuxCPUSetCPUs(string)
	SetLinuxCPUSetMems(string)
	SetLinuxCPUShares(uint64)
	SetLinuxCPUQuota(int64)
	SetLinuxCPUPeriod(int64)
}

// set writes ResourcesOf(ca) into s.
func set(s cpuSetter, ca nodecore.ContainerAssignment) {
	r := ResourcesOf(ca)
	if r.Cpus != "" {
		s.SetLinuxCPUSetCPUs(r.Cpus)
		s.SetLinuxCPUSetMems(r.Mems)
	}
	s.SetLinuxCPUShares(r.Shares)
	switch {
	case r.Quota > 0:
		s.SetLinuxCPUQuota(r.Quota)
		s.SetLinuxCPUPeriod(int64(r.Period))
	case r.Quota == noQuota:
		s.SetLinuxCPUQuota(noQuota)
	}
}

func adjustmentOf(ca nodecore.ContainerAssignment) *api.ContainerAdjustment {
	adj := &api.ContainerAdjustment{}
	set(adj, ca)
	return adj
}

func updateOf(ca nodecore.ContainerAssignment) *api.ContainerUpdate {
	u := &api.ContainerUpdate{ContainerId: ca.Ref.ID}
	set(u, ca)
	return u
}

// CreateContainer admits ctr and answers its adjustment, plus updates for
// the shared containers whose pool the admission shrank. A container whose
// metadata can not be read, or that the node can not admit, is refused
// with the reason.
func (p *Plugin) CreateContainer(ctx context.Context, pod *api.PodSandbox, ctr *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	s, why, err := SpecOf(pod, ctr)
	if err != nil {
		return nil, nil, fmt.Errorf("corepin: container %s of pod %s/%s: %w", ctr.GetName(), pod.GetNamespace(), pod.GetName(), err)
	}
	p.irqIsolate(pod, &s)
	p.mu.Lock()
	defer p.mu.Unlock()
	ca, err := p.c.Admit(refOf(pod, ctr), s, cpuset.CPUSet{})
	if err != nil {
		return nil, nil, fmt.Errorf("corepin: container %s of pod %s/%s: %w", ctr.GetName(), pod.GetNamespace(), pod.GetName(), err)
	}
	p.applied[ctr.GetId()] = ca.CPUs
	p.touched()
	p.log.Info("admitted", "id", ctr.GetId(), "pod", pod.GetNamespace()+"/"+pod.GetName(), "qos", ca.QoS, "cpuset", ca.CPUs, "why", why, "irq_isolate", s.IRQIsolate)
	ups, err := p.repair(func(id string) bool { return id != ctr.GetId() })
	if err != nil {
		return nil, nil, err
	}
	adj := adjustmentOf(ca)
	if ca.QoS == alloc.BE {
		adj.SetLinuxScheduler(idleScheduler())
		p.placeIdle(adj, pod, ctr)
	}
	if err := p.realTime(adj, ctr, s, ca); err != nil {
		p.release(ctr.GetId())
		return nil, nil, fmt.Errorf("corepin: container %s of pod %s/%s: %w", ctr.GetName(), pod.GetNamespace(), pod.GetName(), err)
	}
	adj.AddEnv(EnvCPUSet, ca.CPUs.String())
	adj.AddEnv(EnvThreads, strconv.Itoa(max(1, ca.Threads)))
	if m := p.infoMount(ca); m != nil {
		adj.AddMount(m)
	}
	return adj, ups, nil
}

// UpdateContainer answers kubelet's UpdateContainerResources, which would
// overwrite the cpuset. New CPU resources of another size (an in-place
// pod resize: the kubelet sends them with cpuManagerPolicy none) resize
// the container's assignment (nodecore.Containers.Resize, the agent's
// resize): an exclusive container grows around its CPUs, keeping its NUMA
// node and whole cores where it can, and never gives back the CPUs it was
// created on. The answer is the container's pin at its new size, plus
// updates for the shared containers whose pool changed. A resize that can
// not be placed is refused with the reason (the runtime fails the update;
// the kubelet shows it on the pod's resize status) and changes nothing.
// Resources of the same size are answered with the pin unchanged, and so
// are resources of no CPU size (noCPUSize). CPU values the kernel would
// not take (cpuOf: shares below 2, a quota below -1) are refused.
func (p *Plugin) UpdateContainer(ctx context.Context, pod *api.PodSandbox, ctr *api.Container, res *api.LinuxResources) ([]*api.ContainerUpdate, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ca, err := p.c.Get(ctr.GetId())
	if errors.Is(err, nodecore.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if cpu := res.GetCpu(); !noCPUSize(cpu) {
		if _, _, _, err := cpuOf(cpu); err != nil {
			return nil, fmt.Errorf("corepin: resizing container %s of pod %s/%s: %w", ctr.GetName(), pod.GetNamespace(), pod.GetName(), err)
		}
	}
	if res.GetCpu().GetShares().GetValue() > 0 {
		// The container as it will be: its new resources.
		s, _, err := SpecOf(pod, &api.Container{Id: ctr.GetId(), Linux: &api.LinuxContainer{Resources: res}})
		if err == nil {
			ca, err = p.c.Resize(ctr.GetId(), s)
		}
		if err != nil {
			return nil, fmt.Errorf("corepin: resizing container %s of pod %s/%s: %w", ctr.GetName(), pod.GetNamespace(), pod.GetName(), err)
		}
	}
	if !ca.CPUs.Equals(p.applied[ctr.GetId()]) {
		p.log.Info("updated", "id", ctr.GetId(), "pod", pod.GetNamespace()+"/"+pod.GetName(), "qos", ca.QoS, "cpuset", ca.CPUs)
		p.touched()
	}
	p.applied[ctr.GetId()] = ca.CPUs
	p.noteInfo(ca)
	ups, err := p.repair(func(id string) bool { return id != ctr.GetId() })
	if err != nil {
		return nil, err
	}
	return append([]*api.ContainerUpdate{updateOf(ca)}, ups...), nil
}

// StartContainer checks that a BE container created under the idle parent
// runs there (RouteIdleParent), or else protects it (ProtectBE), now that
// its process exists and before it runs the container's command, and records
// the route in the state file (`corepin ctl top` shows it); and that an LS
// container of the real-time route runs in its class, setting it where
// the runtime ignored it (EnsureRealTime). It never
// fails the start: a container no route reaches keeps the minimal weight,
// and the reason is logged.
func (p *Plugin) StartContainer(ctx context.Context, pod *api.PodSandbox, ctr *api.Container) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	ca, err := p.c.Get(ctr.GetId())
	if err != nil {
		return nil
	}
	switch ca.QoS {
	case alloc.LS:
		p.ensureRealTime(pod, ctr)
		return nil
	case alloc.BE:
	default:
		return nil
	}
	route, why := RouteIdleParent, p.idleHolds(ctr.GetId())
	if why != nil {
		route, why = ProtectBE(p.tasks, int(ctr.GetPid()), ctr.GetId())
	}
	if why != nil {
		p.log.Warn("BE container left at the minimal weight", "id", ctr.GetId(), "pod", pod.GetNamespace()+"/"+pod.GetName(), "route", route, "why", why)
	} else {
		p.log.Info("BE container protected", "id", ctr.GetId(), "pod", pod.GetNamespace()+"/"+pod.GetName(), "route", route)
	}
	if err := p.c.SetBERoute(ctr.GetId(), string(route)); err != nil {
		p.log.Warn("recording a BE container's route", "id", ctr.GetId(), "err", err)
	}
	return nil
}

// PostStartContainer sends a container that Synchronize updated before
// the runtime started it its assignment again, now that it runs: the
// first update reached its spec, not its cgroup (a container created
// while no plugin ran, during a rolling upgrade of the plugin, would
// otherwise keep every CPU, an exclusive container's included).
func (p *Plugin) PostStartContainer(ctx context.Context, pod *api.PodSandbox, ctr *api.Container) error {
	p.mu.Lock()
	if !p.unstarted[ctr.GetId()] {
		p.mu.Unlock()
		return nil
	}
	delete(p.unstarted, ctr.GetId())
	ca, err := p.c.Get(ctr.GetId())
	s := p.stub
	p.mu.Unlock()
	if errors.Is(err, nodecore.ErrNotFound) || s == nil {
		return nil
	}
	if err != nil {
		return err
	}
	up := updateOf(ca)
	// Not from inside the runtime's request: it holds its lock.
	go func() {
		if failed, err := s.UpdateContainers([]*api.ContainerUpdate{up}); err != nil || len(failed) > 0 {
			p.log.Warn("updating a container started after Synchronize", "id", ctr.GetId(), "err", err, "failed", len(failed))
		}
	}()
	return nil
}

// StopContainer releases ctr's CPUs and answers updates for the shared
// containers whose pool grew.
func (p *Plugin) StopContainer(ctx context.Context, pod *api.PodSandbox, ctr *api.Container) ([]*api.ContainerUpdate, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.release(ctr.GetId())
}

// RemoveContainer releases ctr's CPUs (if StopContainer did not) and
// sends the shared containers whose pool grew their update.
func (p *Plugin) RemoveContainer(ctx context.Context, pod *api.PodSandbox, ctr *api.Container) error {
	p.mu.Lock()
	ups, err := p.release(ctr.GetId())
	s := p.stub
	p.mu.Unlock()
	if err != nil {
		return err
	}
	if len(ups) > 0 && s != nil {
		// Not from inside the runtime's request: it holds its lock.
		go func() {
			if failed, err := s.UpdateContainers(ups); err != nil || len(failed) > 0 {
				p.log.Warn("updating the shared pools", "err", err, "failed", len(failed))
			}
		}()
	}
	return nil
}

func (p *Plugin) release(id string) ([]*api.ContainerUpdate, error) {
	if err := p.c.Release(id); err != nil {
		return nil, fmt.Errorf("releasing container %s: %w", id, err)
	}
	if _, ok := p.applied[id]; ok {
		p.log.Info("released", "id", id)
		p.touched()
	}
	delete(p.applied, id)
	delete(p.placed, id)
	p.removeInfo(id)
	delete(p.unstarted, id)
	return p.repair(func(string) bool { return true })
}
