package nodecore

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/enforce"
	"github.com/corepin/corepin/qos"
	"github.com/corepin/corepin/store"
)

// DefaultCgroupRoot is the agent's root group name in each hierarchy.
const DefaultCgroupRoot = "corepin-agent"

// Held is one workload the node holds, as the agent's views show it.
type Held struct {
	// Assignment is its row in the state file; Record its request
	// document there.
	Assignment store.Assignment
	Record     Record
	// CPUs is its exclusive set (LSE, LSR), or the pool it shares now
	// (LS, BE).
	CPUs cpuset.CPUSet
	// Offline are its CPUs that CheckOnline last found offline.
	Offline cpuset.CPUSet
	// Group is its enforcement group, nil for what a run or a runtime
	// enforces.
	Group enforce.Group
}

// Observer is told what a Node does: the agent's metrics. Its methods
// are called with the Node's lock held and must not call back into it.
type Observer interface {
	// Admitted is an admission that took d and ended with err.
	Admitted(d time.Duration, err error)
	// Reconciled is one release or reconcile action (ActGone, ...).
	Reconciled(action string)
	// Pools are the pools as last written to the shared groups.
	Pools(p alloc.Pools)
	// Offline is every workload's count of offline CPUs, by name.
	Offline(counts map[string]OfflineCount)
	// QoSTick is a tick of the QoS controller (StartQoS).
	QoSTick(r qos.Report)
}

// PhaseObserver is an Observer that is also told where each admission's
// time went (Node.Create), found with a type assertion: the agent's
// benchmark reports each phase's percentiles from it.
type PhaseObserver interface {
	AdmissionPhases(p Phases)
}

// Phases is how long each step of one admission took: Commit the state
// file's transaction (load, place, insert), Pools the shared groups'
// resize, Group making the workload's group, Start starting or adopting
// what runs in it. A step not reached is 0.
type Phases struct {
	Commit, Pools, Group, Start time.Duration
}

// OfflineCount is one workload's number of offline CPUs and its QoS.
type OfflineCount struct {
	QoS  string
	CPUs int
}

type noObserver struct{}

func (noObserver) Admitted(time.Duration, error)   {}
func (noObserver) Reconciled(string)               {}
func (noObserver) Pools(alloc.Pools)               {}
func (noObserver) Offline(map[string]OfflineCount) {}
func (noObserver) QoSTick(qos.Report)              {}

// held is e as the views show it. Callers hold n.mu.
func (n *Node) held(e *entry) Held {
	h := Held{Assignment: e.a, Record: e.rec, CPUs: e.cpus, Offline: e.offline, Group: e.group}
	if e.a.Cpuset == "" && n.st != nil {
		p := n.st.Pools()
		if e.a.QoS == string(alloc.BE) {
			h.CPUs = p.BE
		} else {
			h.CPUs = p.LS
		}
	}
	return h
}

// Get returns workload name; ErrNotFound when the node holds none.
func (n *Node) Get(name string) (Held, error) {
	if err := ValidateName(name); err != nil {
		return Held{}, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	e, ok := n.wl[name]
	if !ok {
		return Held{}, fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	return n.held(e), nil
}

// List returns every workload, by name, after bringing in what other
// processes committed (Refresh).
func (n *Node) List() []Held {
	if err := n.Refresh(); err != nil {
		n.log.Warn("reading what others committed to the state", "err", err)
	}
	return n.Snapshot()
}

// Snapshot returns every workload the node holds now, by name, without
// reading the state file.
func (n *Node) Snapshot() []Held {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]Held, 0, len(n.wl))
	for _, name := range slices.Sorted(maps.Keys(n.wl)) {
		out = append(out, n.held(n.wl[name]))
	}
	return out
}

// Pools are the node's pools now, after bringing in what other processes
// committed (Refresh).
func (n *Node) Pools() alloc.Pools {
	if err := n.Refresh(); err != nil {
		n.log.Warn("reading what others committed to the state", "err", err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.st.Pools()
}

// StatePath is the state file's path.
func (n *Node) StatePath() string { return n.db.Path() }
