package agent

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/enforce"
	"github.com/corepin/corepin/nodecore"
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
	// OfflineCPUs are the workload's CPUs the kernel has taken offline
	// (CheckOnline): they stay the workload's, but it does not run on
	// them until they are back.
	OfflineCPUs string `json:"offline_cpus,omitempty"`
}

// view returns e as the API shows it. Callers hold n.mu.
func (n *Node) view(e *entry) Workload {
	w := Workload{Name: e.a.Name, QoS: e.a.QoS, Cpuset: e.a.Cpuset, Exclusive: e.rec.Excl, NUMANodes: e.rec.NUMANodes,
		Threads: e.rec.Threads, PID: e.rec.PID, Cgroup: e.rec.Cgroup, CreatedAt: e.a.CreatedAt, Generation: e.a.Generation,
		Deleting: e.rec.Deleting}
	if !e.offline.IsEmpty() {
		w.OfflineCPUs = e.offline.String()
	}
	if e.rec.CPUs != nil {
		w.CPUs = *e.rec.CPUs
	}
	switch {
	case e.rec.Container != nil:
		w.Source = "container"
	case e.rec.Owner != nil:
		w.Source = "run"
		w.PID = e.rec.Owner.PID
	case e.rec.Adopted:
		w.Source = "adopted"
	case e.rec.Command != "":
		w.Source = "command"
		w.Command = append([]string{e.rec.Command}, e.rec.Args...)
	case e.rec.PID != 0:
		w.Source = "pid"
	default:
		w.Source = "cgroup"
	}
	if w.Cpuset == "" && n.st != nil {
		p := n.st.Pools()
		if e.a.QoS == string(alloc.BE) {
			w.Cpuset = p.BE.String()
		} else {
			w.Cpuset = p.LS.String()
		}
	}
	return w
}

// Get returns workload name.
func (n *Node) Get(name string) (Workload, error) {
	if err := nodecore.ValidateName(name); err != nil {
		return Workload{}, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	e, ok := n.wl[name]
	if !ok {
		return Workload{}, fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	return n.view(e), nil
}

// List returns every workload, by name.
func (n *Node) List() []Workload {
	if err := n.Refresh(); err != nil {
		n.log.Warn("reading what others committed to the state", "err", err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]Workload, 0, len(n.wl))
	for _, name := range slices.Sorted(maps.Keys(n.wl)) {
		out = append(out, n.view(n.wl[name]))
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
}

// Usages reads every workload's group accounting (what `corepin ctl top`
// and /metrics show).
func (n *Node) Usages() []Usage {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]Usage, 0, len(n.wl))
	for _, name := range slices.Sorted(maps.Keys(n.wl)) {
		e := n.wl[name]
		v := n.view(e)
		u := Usage{Name: name, QoS: e.a.QoS, Cpuset: v.Cpuset}
		if e.group != nil {
			if st, err := e.group.Stats(); err == nil {
				u.StatsReadable = true
				u.UsageS, u.ThrottledS = st.Usage.Seconds(), st.ThrottledTime.Seconds()
				u.NrThrottled, u.NrPeriods = st.NrThrottled, st.NrPeriods
			}
			if pids, err := enforce.Pids(e.group); err == nil {
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
	if err := n.Refresh(); err != nil {
		n.log.Warn("reading what others committed to the state", "err", err)
	}
	n.mu.Lock()
	p := n.st.Pools()
	n.mu.Unlock()
	v := TopologyView{Summary: n.topo.Summary(), Machine: n.topo.Doc(), FreeByNUMA: map[string]string{},
		Pools:     PoolsView{Reserved: p.Reserved.String(), LSE: p.LSE.String(), LSR: p.LSR.String(), LS: p.LS.String(), BE: p.BE.String()},
		Workloads: n.List()}
	free := n.topo.Allowed().Difference(p.Reserved).Difference(p.LSE).Difference(p.LSR)
	for _, id := range n.topo.Nodes() {
		v.FreeByNUMA[strconv.Itoa(int(id))] = free.Intersection(n.topo.NodeCPUs(id)).String()
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
