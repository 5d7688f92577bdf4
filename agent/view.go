package agent

import (
	"strconv"
	"time"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/enforce"
	"github.com/corepin/corepin/nodecore"
	"github.com/corepin/corepin/schedext"
	"github.com/corepin/corepin/topology"
)

// Workload is an admitted workload as the API shows it.
type Workload struct {
	Name string `json:"name"`
	QoS  string `json:"qos"`
	// Cpuset is the exclusive set of an LSE or LSR workload, or the pool
	// an LS or BE workload shares now (Linux list format).
	Cpuset string `json:"cpuset"`
	// CPUs is what was asked: whole CPUs, or the quota of LS and BE.
	CPUs      float64 `json:"cpus"`
	Exclusive string  `json:"exclusive,omitempty"`
	NUMANodes string  `json:"numa_nodes,omitempty"`
	// Threads is the thread-pool size given to a started command.
	Threads int `json:"threads"`
	// Source is command, pid, cgroup, adopted (found running at start
	// without an assignment), run (a job of a local corepin run, PID
	// being the run's) or container (a container of the NRI plugin).
	Source     string    `json:"source"`
	Command    []string  `json:"command,omitempty"`
	PID        int       `json:"pid,omitempty"`
	Cgroup     string    `json:"cgroup,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
	Generation int64     `json:"generation"`
	// Deleting is true once a delete is committed and until it finishes
	// (a full disk can hold the last step back; the agent retries).
	Deleting bool `json:"deleting,omitempty"`
	// PromisedCpuset, on an LSE or LSR workload a resize grew, is the set
	// it was placed on, which it keeps whatever its size.
	PromisedCpuset string `json:"promised_cpuset,omitempty"`
	// OfflineCPUs are the workload's CPUs the kernel has taken offline
	// (CheckOnline): they stay the workload's, but it does not run on
	// them until they are back.
	OfflineCPUs string `json:"offline_cpus,omitempty"`
	// Pod (namespace/name) and Container name the pod and container of a
	// container workload (source container), which Name names only by a
	// hash of the runtime's container id.
	Pod       string `json:"pod,omitempty"`
	Container string `json:"container,omitempty"`
	// IRQIsolate says the workload's CPUs are kept clear of movable
	// device interrupts (its spec's irq_isolate).
	IRQIsolate bool `json:"irq_isolate,omitempty"`
	// LoadBalance and CPUQuota are false where its spec asked for no load
	// balancing (its CPUs an isolated partition, or sched_load_balance 0)
	// or no CFS quota; absent otherwise.
	LoadBalance *bool `json:"load_balance,omitempty"`
	CPUQuota    *bool `json:"cpu_quota,omitempty"`
}

// Node is the agent's node: nodecore's Node (the state file, the
// allocator, the agent's groups and their reconcile) with the API's views
// of what it holds. Every front door of the agent (the HTTP API, the QoS
// controller) calls it.
type Node struct {
	*nodecore.Node
	// changed, when not nil, is called after a workload is created,
	// resized or deleted (the agent's wake_scan follows its BE workloads,
	// its interrupt steering the CPUs of irq_isolate workloads).
	changed func()
}

// Options configure Open (nodecore.Options; Observer takes the agent's
// Metrics).
type Options = nodecore.Options

// ErrLocked means another process holds the state file's lock.
var ErrLocked = nodecore.ErrLocked

// Open opens (or creates) the state file, takes its lock, reconciles the
// state with the live groups and records the node's settings in the file
// for local runs (nodecore.Open).
func Open(o Options) (*Node, error) {
	n, err := nodecore.Open(o)
	if err != nil {
		return nil, err
	}
	return &Node{Node: n}, nil
}

// view returns h as the API shows it.
func view(h nodecore.Held) Workload {
	a, rec := h.Assignment, h.Record
	w := Workload{Name: a.Name, QoS: a.QoS, Cpuset: h.CPUs.String(), Exclusive: rec.Excl, NUMANodes: rec.NUMANodes,
		Threads: rec.Threads, PID: rec.PID, Cgroup: rec.Cgroup, CreatedAt: a.CreatedAt, Generation: a.Generation,
		Deleting: rec.Deleting, IRQIsolate: rec.IRQIsolate}
	if rec.NoLoadBalance() {
		w.LoadBalance = new(false)
	}
	if rec.NoCPUQuota() {
		w.CPUQuota = new(false)
	}
	if !h.Offline.IsEmpty() {
		w.OfflineCPUs = h.Offline.String()
	}
	if len(rec.Added) > 0 {
		w.PromisedCpuset = h.CPUs.Difference(cpuset.New(rec.Added...)).String()
	}
	if rec.CPUs != nil {
		w.CPUs = *rec.CPUs
	}
	switch {
	case rec.Container != nil:
		w.Source = "container"
		w.Pod, w.Container = rec.Container.Pod, rec.Container.Name
	case rec.Owner != nil:
		w.Source = "run"
		w.PID = rec.Owner.PID
	case rec.Adopted:
		w.Source = "adopted"
	case rec.Command != "":
		w.Source = "command"
		w.Command = append([]string{rec.Command}, rec.Args...)
	case rec.PID != 0:
		w.Source = "pid"
	default:
		w.Source = "cgroup"
	}
	return w
}

// Create admits s (nodecore.Node.Create) and returns it as the API shows it.
func (n *Node) Create(s Spec) (Workload, error) {
	h, err := n.Node.Create(s)
	if err != nil {
		return Workload{}, err
	}
	n.notify()
	return view(h), nil
}

// Delete stops and releases workload name (nodecore.Node.Delete).
func (n *Node) Delete(name string) error {
	err := n.Node.Delete(name)
	n.notify()
	return err
}

func (n *Node) notify() {
	if n.changed != nil {
		n.changed()
	}
}

// Resize changes workload name's size to cpus (nodecore.Node.Resize) and
// returns it as the API shows it.
func (n *Node) Resize(name string, cpus float64) (Workload, error) {
	h, err := n.Node.Resize(name, cpus)
	if err != nil {
		return Workload{}, err
	}
	n.notify() // an LSE or LSR workload's CPUs changed
	return view(h), nil
}

// Get returns workload name.
func (n *Node) Get(name string) (Workload, error) {
	h, err := n.Node.Get(name)
	if err != nil {
		return Workload{}, err
	}
	return view(h), nil
}

// List returns every workload, by name.
func (n *Node) List() []Workload {
	hs := n.Node.List()
	out := make([]Workload, 0, len(hs))
	for _, h := range hs {
		out = append(out, view(h))
	}
	return out
}

// Usage is one workload's CPU accounting, read from its group.
type Usage struct {
	Name          string  `json:"name"`
	QoS           string  `json:"qos"`
	Cpuset        string  `json:"cpuset"`
	UsageS        float64 `json:"usage_s"`
	ThrottledS    float64 `json:"throttled_s"`
	NrThrottled   uint64  `json:"nr_throttled"`
	NrPeriods     uint64  `json:"nr_periods"`
	Pids          int     `json:"pids"`
	StatsReadable bool    `json:"stats_readable"`
	// BERoute is how a BE container of the NRI plugin is kept out of the
	// other workloads' way (nodecore.Record.BERoute: idle-parent, runtime-sched-idle,
	// plugin-sched-idle, min-weight); empty for every other workload and
	// for a BE container the plugin did not see start.
	BERoute string `json:"be_route,omitempty"`
}

// Usages reads every workload's group accounting (what `corepin ctl top`
// and /metrics show).
func (n *Node) Usages() []Usage {
	hs := n.Node.Snapshot()
	out := make([]Usage, 0, len(hs))
	for _, h := range hs {
		u := Usage{Name: h.Assignment.Name, QoS: h.Assignment.QoS, Cpuset: h.CPUs.String(), BERoute: h.Record.BERoute}
		if h.Group != nil {
			if st, err := h.Group.Stats(); err == nil {
				u.StatsReadable = true
				u.UsageS, u.ThrottledS = st.Usage.Seconds(), st.ThrottledTime.Seconds()
				u.NrThrottled, u.NrPeriods = st.NrThrottled, st.NrPeriods
			}
			if pids, err := enforce.Pids(h.Group); err == nil {
				u.Pids = len(pids)
			}
		}
		out = append(out, u)
	}
	return out
}

// TopologyView is GET /v1/topology: the machine (the `corepin topo -o
// json` document), the pools, the free CPUs of each NUMA node (neither
// reserved nor held by an exclusive workload), and the workloads.
type TopologyView struct {
	Summary    string            `json:"summary"`
	Machine    topology.Doc      `json:"machine"`
	Pools      PoolsView         `json:"pools"`
	FreeByNUMA map[string]string `json:"free_by_numa"`
	Workloads  []Workload        `json:"workloads"`
	// Scheduler is what decides wake placement on the machine (`corepin
	// topo`'s scheduler section), when the server reads it.
	Scheduler *topology.Scheduler `json:"scheduler,omitempty"`
	// SchedExt is what the supervisor of the layered route does (node
	// setting sched_ext), absent while the setting is off.
	SchedExt *schedext.Status `json:"sched_ext_route,omitempty"`
}

// PoolsView are the CPU sets of each QoS class.
type PoolsView struct {
	Reserved string `json:"reserved"`
	LSE      string `json:"lse"`
	LSR      string `json:"lsr"`
	LS       string `json:"ls"`
	BE       string `json:"be"`
}

// View returns the topology with the current assignments.
func (n *Node) View() TopologyView {
	p := n.Pools()
	t := n.Topology()
	v := TopologyView{Summary: t.Summary(), Machine: t.Doc(), FreeByNUMA: map[string]string{},
		Pools:     PoolsView{Reserved: p.Reserved.String(), LSE: p.LSE.String(), LSR: p.LSR.String(), LS: p.LS.String(), BE: p.BE.String()},
		Workloads: n.List()}
	free := t.Allowed().Difference(p.Reserved).Difference(p.LSE).Difference(p.LSR)
	for _, id := range t.Nodes() {
		v.FreeByNUMA[strconv.Itoa(int(id))] = free.Intersection(t.NodeCPUs(id)).String()
	}
	return v
}

// Holders maps each CPU of an exclusive workload to the workload's name,
// for drawing on the topology.
func Holders(ws []Workload) map[int]string {
	m := map[int]string{}
	for _, w := range ws {
		if w.QoS != string(alloc.LSE) && w.QoS != string(alloc.LSR) {
			continue
		}
		set, err := cpuset.Parse(w.Cpuset)
		if err != nil {
			continue
		}
		for c := range set.All() {
			m[c] = w.Name
		}
	}
	return m
}

// ReadState returns the workloads the state file at path holds, as the
// API shows them, read-only and without an agent (nodecore.Read): the NRI
// plugin's containers on a Kubernetes node, or a run's jobs.
func ReadState(path string, t *topology.Topology) ([]Workload, error) {
	hs, err := nodecore.Read(path, t)
	if err != nil {
		return nil, err
	}
	out := make([]Workload, 0, len(hs))
	for _, h := range hs {
		out = append(out, view(h))
	}
	return out, nil
}
