package nodecore

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/enforce"
	"github.com/corepin/corepin/qos"
)

// QoSStatus is the controller's latest tick, as the agent serves it in
// GET /v1/usage and `corepin ctl top` shows it.
type QoSStatus struct {
	Mechanism   string  `json:"mechanism"`
	Lever       string  `json:"lever"`
	Slice       string  `json:"slice,omitempty"`
	BEPool      string  `json:"be_pool"`
	BECpuset    string  `json:"be_cpuset"`
	BEQuotaMS   float64 `json:"be_quota_ms"`
	Level       float64 `json:"level_cpus"`
	Suppression float64 `json:"suppression"`
	LSUsage     float64 `json:"ls_usage_cpus"`
	PSI         float64 `json:"psi_some"`
	RunqWaitMS  float64 `json:"runq_wait_ms_per_s"`
	Throttled   float64 `json:"throttled_ratio"`
	// Actions counts the ticks' action kinds since the agent started.
	Actions map[string]uint64 `json:"actions"`
	Error   string            `json:"error,omitempty"`
}

// qosHost is the node's side of the controller: the loop and the latest
// plan, under a mutex of its own (the loop calls back into the Node, so
// the Node never waits on the loop's lock).
type qosHost struct {
	loop  *qos.Loop
	lever string
	mu    sync.Mutex
	plan  qos.Plan
	st    QoSStatus
}

// StartQoS runs the QoS controller l (its Config, Tick, Slice, BESlice,
// Burst and SystemPSI as the caller set them) over n's workloads until
// ctx ends: n gives it the pools, the BE groups, the LS members and takes
// its reports. It returns at once; the loop runs in a goroutine.
func (n *Node) StartQoS(ctx context.Context, l *qos.Loop) {
	h := &qosHost{st: QoSStatus{Mechanism: string(l.Config.WithDefaults().Mechanism), Actions: map[string]uint64{}}}
	l.Pools = func() alloc.Pools {
		n.mu.Lock()
		defer n.mu.Unlock()
		return n.st.Pools()
	}
	l.BE, l.LS, l.Report = n.qosBE, n.qosLS, func(r qos.Report) { h.record(r, n.obs) }
	h.loop = l
	n.mu.Lock()
	n.qos = h
	be, _ := n.qosBELocked()
	n.mu.Unlock()
	h.lever = "cpu.idle"
	if len(be) > 0 {
		lv, _ := qos.BestLever(qos.ProbeGroup(be[0]))
		h.lever = string(lv)
	}
	go func() { _ = h.loop.Run(ctx) }()
}

func (h *qosHost) record(r qos.Report, m Observer) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := &h.st
	s.Lever, s.Slice, s.Error = h.lever, r.Slice, ""
	if r.Err != nil {
		s.Error = r.Err.Error()
	}
	if !r.Plan.CPUs.IsEmpty() {
		h.plan = r.Plan
		s.BEPool, s.BECpuset = r.Plan.Pool.String(), r.Plan.CPUs.String()
		s.BEQuotaMS = float64(r.Plan.Quota) / float64(time.Millisecond)
		s.Level, s.Suppression = r.State.Level, r.Plan.Suppression
	}
	s.LSUsage, s.PSI, s.Throttled = r.Signals.LSUsage, r.Signals.PSI, r.Signals.Throttled
	s.RunqWaitMS = float64(r.Signals.RunqWait) / float64(time.Millisecond)
	for _, a := range r.Plan.Actions {
		s.Actions[a]++
	}
	if r.Bursts > 0 {
		s.Actions["burst"] += uint64(r.Bursts)
	}
	m.QoSTick(r)
}

// QoSStatus returns the controller's latest tick, or nil when it does not run.
func (n *Node) QoSStatus() *QoSStatus {
	n.mu.Lock()
	h := n.qos
	n.mu.Unlock()
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.st
	s.Actions = maps.Clone(h.st.Actions)
	return &s
}

// bePlanned returns BE's cpuset and quota under the controller's latest
// plan, kept inside the current BE pool: a plan made before an LSE
// admission never hands BE the CPUs that admission took. Without a plan,
// or when nothing of it is left in the pool, r is returned unchanged.
// n.mu is held.
func (n *Node) bePlanned(r enforce.Resources) enforce.Resources {
	if n.qos == nil {
		return r
	}
	n.qos.mu.Lock()
	p := n.qos.plan
	n.qos.mu.Unlock()
	p.CPUs = p.CPUs.Intersection(r.CPUs)
	if p.CPUs.IsEmpty() {
		return r
	}
	return p.Resources(r)
}

func (n *Node) qosBE() ([]enforce.Group, enforce.Resources) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.qosBELocked()
}

func (n *Node) qosBELocked() ([]enforce.Group, enforce.Resources) {
	var gs []enforce.Group
	for _, name := range slices.Sorted(maps.Keys(n.wl)) {
		if e := n.wl[name]; e.group != nil && alloc.QoS(e.a.QoS) == alloc.BE {
			gs = append(gs, e.group)
		}
	}
	return gs, qos.ClassResources(alloc.BE, 0, cpuset.CPUSet{}, cpuset.CPUSet{})
}

func (n *Node) qosLS() []qos.Member {
	n.mu.Lock()
	defer n.mu.Unlock()
	var ms []qos.Member
	for _, name := range slices.Sorted(maps.Keys(n.wl)) {
		e := n.wl[name]
		if e.group == nil || alloc.QoS(e.a.QoS) == alloc.BE {
			continue
		}
		m := qos.Member{Group: e.group, LSR: alloc.QoS(e.a.QoS) == alloc.LSR, Resources: n.resources(e)}
		if m.LSR {
			m.CPUs = m.Resources.CPUs
		}
		ms = append(ms, m)
	}
	return ms
}
