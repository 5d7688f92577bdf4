package topology

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/corepin/corepin/cpuset"
)

// Machine-wide indexes of the units a CPU belongs to. They are distinct types
// so that a core index can't be passed where a NUMA node id belongs.
type (
	// SocketID indexes a physical package, machine-wide, from 0 in order of
	// each package's lowest CPU.
	SocketID int
	// DieID indexes a die, machine-wide.
	DieID int
	// ClusterID indexes a cluster (CPUs sharing an L2 or a module), machine-wide.
	ClusterID int
	// CoreID indexes a physical core, machine-wide.
	CoreID int
	// CacheID indexes a last-level (L3) cache group, machine-wide; -1 where
	// the CPU has no L3.
	CacheID int
	// NodeID is the kernel's NUMA node number (may be sparse).
	NodeID int
)

// None marks an index that is not known, such as the core of an offline CPU
// or the L3 of a machine without one.
const None = -1

// Hybrid CPU kinds, from /sys/devices/cpu_core/cpus and cpu_atom/cpus.
const (
	KindCore = "core" // Intel hybrid performance core
	KindAtom = "atom" // Intel hybrid efficiency core
)

// CPU is one logical CPU with the units it belongs to. The JSON form is the
// `corepin topo -o json` contract.
type CPU struct {
	ID      int       `json:"cpu"`
	Online  bool      `json:"online"`
	Allowed bool      `json:"allowed"`
	Socket  SocketID  `json:"socket"`
	Die     DieID     `json:"die"`
	Cluster ClusterID `json:"cluster"`
	NUMA    NodeID    `json:"numa"`
	L3      CacheID   `json:"l3"`
	Core    CoreID    `json:"core"`
	Kind    string    `json:"kind"`
}

// ErrInvalid is wrapped by errors about an inconsistent topology description.
var ErrInvalid = errors.New("invalid topology")

// Caps on what a Topology carries, checked by New for every CPU (online or
// not) and every distance, so that no id reaching alloc, sim or a cpuset can
// be one they cannot hold. CPU ids are capped by cpuset.MaxCPU; the
// machine-wide indexes (socket, die, cluster, core, l3) by the CPU count,
// since each names a non-empty group of CPUs.
const (
	// MaxNodeID is the largest NUMA node id. Linux numbers nodes below
	// MAX_NUMNODES = 1 << CONFIG_NODES_SHIFT, and NODES_SHIFT is at most 10
	// (mm/Kconfig, https://github.com/torvalds/linux/blob/master/mm/Kconfig).
	MaxNodeID = 1<<10 - 1
	// MaxDistance is the largest NUMA distance: ACPI SLIT and the kernel's
	// node_distance hold one byte per entry.
	MaxDistance = 255
	// MaxKindLen caps the length of a CPU kind ("core", "atom", "big"...).
	MaxKindLen = 32
)

// Topology is a machine's CPU topology. Build it with Discover or New; it is
// read-only afterwards and safe for concurrent use.
type Topology struct {
	cpus      []CPU // sorted by ID
	byID      map[int]int
	distances map[NodeID][]int
	nodes     []NodeID // sorted, including nodes without CPUs

	present, online, allowed cpuset.CPUSet

	socketCPUs  []cpuset.CPUSet // by SocketID, online CPUs
	dieCPUs     []cpuset.CPUSet
	clusterCPUs []cpuset.CPUSet
	coreCPUs    []cpuset.CPUSet
	l3CPUs      []cpuset.CPUSet
	nodeCPUs    map[NodeID]cpuset.CPUSet
	noNode      cpuset.CPUSet // online CPUs in no NUMA node

	isolation Isolation

	// Warnings holds what discovery noticed and worked around (a stale
	// *_list file, a missing sibling file); the model is still usable.
	Warnings []string
}

// New builds a Topology from CPUs in the JSON contract form and the NUMA
// distance table (may be nil). Indexes of online CPUs must be dense
// machine-wide indexes (0..n-1); offline CPUs may carry None, and so may an
// online CPU's NUMA node (a CPU in no node, see NoNodeCPUs) and L3. Online
// CPUs of one core must share socket, die, cluster, node and L3.
func New(cpus []CPU, distances map[NodeID][]int) (*Topology, error) {
	if len(cpus) == 0 {
		return nil, fmt.Errorf("%w: no cpus", ErrInvalid)
	}
	t := &Topology{
		cpus:      slices.Clone(cpus),
		byID:      make(map[int]int, len(cpus)),
		distances: map[NodeID][]int{},
		nodeCPUs:  map[NodeID]cpuset.CPUSet{},
	}
	slices.SortFunc(t.cpus, func(a, b CPU) int { return cmp.Compare(a.ID, b.ID) })
	var present, online, allowed, noNode cpuset.Builder
	nodes := map[NodeID]*cpuset.Builder{}
	var sockets, dies, clusters, cores, l3s []*cpuset.Builder
	grow := func(bs *[]*cpuset.Builder, i int, what string, cpu int) (*cpuset.Builder, error) {
		if i < 0 {
			return nil, fmt.Errorf("%w: online cpu %d has %s %d", ErrInvalid, cpu, what, i)
		}
		if i > len(t.cpus) {
			return nil, fmt.Errorf("%w: cpu %d has %s index %d, above the cpu count %d", ErrInvalid, cpu, what, i, len(t.cpus))
		}
		for len(*bs) <= i {
			*bs = append(*bs, &cpuset.Builder{})
		}
		return (*bs)[i], nil
	}
	for i, c := range t.cpus {
		if c.ID < 0 || c.ID > cpuset.MaxCPU {
			return nil, fmt.Errorf("%w: cpu id %d outside [0, %d]", ErrInvalid, c.ID, cpuset.MaxCPU)
		}
		if _, dup := t.byID[c.ID]; dup {
			return nil, fmt.Errorf("%w: cpu %d listed twice", ErrInvalid, c.ID)
		}
		if err := c.checkCaps(len(t.cpus)); err != nil {
			return nil, err
		}
		t.byID[c.ID] = i
		present.Add(c.ID)
		if !c.Online {
			continue
		}
		online.Add(c.ID)
		if c.Allowed {
			allowed.Add(c.ID)
		}
		if c.NUMA == None {
			// In no NUMA node: its node has no directory (issue 17).
			noNode.Add(c.ID)
		} else if nodes[c.NUMA] == nil {
			nodes[c.NUMA] = &cpuset.Builder{}
		}
		if c.NUMA != None {
			nodes[c.NUMA].Add(c.ID)
		}
		for _, u := range []struct {
			bs   *[]*cpuset.Builder
			idx  int
			what string
		}{
			{&sockets, int(c.Socket), "socket"},
			{&dies, int(c.Die), "die"},
			{&clusters, int(c.Cluster), "cluster"},
			{&cores, int(c.Core), "core"},
		} {
			b, err := grow(u.bs, u.idx, u.what, c.ID)
			if err != nil {
				return nil, err
			}
			b.Add(c.ID)
		}
		if c.L3 != None {
			b, err := grow(&l3s, int(c.L3), "l3", c.ID)
			if err != nil {
				return nil, err
			}
			b.Add(c.ID)
		}
	}
	t.present, t.online, t.allowed, t.noNode = present.Result(), online.Result(), allowed.Result(), noNode.Result()
	if t.online.IsEmpty() {
		return nil, fmt.Errorf("%w: no online cpu", ErrInvalid)
	}
	var err error
	if t.socketCPUs, err = dense(sockets, "socket"); err != nil {
		return nil, err
	}
	if t.dieCPUs, err = dense(dies, "die"); err != nil {
		return nil, err
	}
	if t.clusterCPUs, err = dense(clusters, "cluster"); err != nil {
		return nil, err
	}
	if t.coreCPUs, err = dense(cores, "core"); err != nil {
		return nil, err
	}
	if t.l3CPUs, err = dense(l3s, "l3"); err != nil {
		return nil, err
	}
	for n, b := range nodes {
		t.nodeCPUs[n] = b.Result()
	}
	for n, d := range distances {
		if n < 0 || n > MaxNodeID {
			return nil, fmt.Errorf("%w: numa_distances has node %d outside [0, %d]", ErrInvalid, n, MaxNodeID)
		}
		for _, v := range d {
			if v < 0 || v > MaxDistance {
				return nil, fmt.Errorf("%w: node %d has distance %d outside [0, %d]", ErrInvalid, n, v, MaxDistance)
			}
		}
		t.distances[n] = slices.Clone(d)
	}
	nodeSet := map[NodeID]bool{}
	for n := range t.nodeCPUs {
		nodeSet[n] = true
	}
	for n := range t.distances {
		nodeSet[n] = true
	}
	t.nodes = slices.Sorted(maps.Keys(nodeSet))
	for n, d := range t.distances {
		if len(d) != len(t.nodes) {
			return nil, fmt.Errorf("%w: node %d has %d distances for %d nodes", ErrInvalid, n, len(d), len(t.nodes))
		}
	}
	// Every core must sit inside one socket, die, cluster, node and L3.
	for core, set := range t.coreCPUs {
		first := t.cpus[t.byID[set.Min()]]
		for id := range set.All() {
			c := t.cpus[t.byID[id]]
			if c.Socket != first.Socket || c.Die != first.Die || c.Cluster != first.Cluster || c.NUMA != first.NUMA || c.L3 != first.L3 {
				return nil, fmt.Errorf("%w: core %d spans cpus %d and %d in different sockets, dies, clusters, nodes or L3 groups", ErrInvalid, core, first.ID, c.ID)
			}
		}
	}
	return t, nil
}

// checkCaps checks c's ids against the documented caps: the NUMA node
// within [0, MaxNodeID] and each machine-wide index below the CPU count n,
// None (-1) allowed for all but the CPU id. Online CPUs are further checked
// by New (no None, dense indexes).
func (c CPU) checkCaps(n int) error {
	if c.NUMA != None && (c.NUMA < 0 || c.NUMA > MaxNodeID) {
		return fmt.Errorf("%w: cpu %d has numa node %d outside [0, %d]", ErrInvalid, c.ID, c.NUMA, MaxNodeID)
	}
	for _, f := range []struct {
		what string
		v    int
	}{{"socket", int(c.Socket)}, {"die", int(c.Die)}, {"cluster", int(c.Cluster)}, {"core", int(c.Core)}, {"l3", int(c.L3)}} {
		if f.v != None && (f.v < 0 || f.v >= n) {
			return fmt.Errorf("%w: cpu %d has %s %d outside [0, %d) (indexes count groups of the %d cpus)", ErrInvalid, c.ID, f.what, f.v, n, n)
		}
	}
	if len(c.Kind) > MaxKindLen {
		return fmt.Errorf("%w: cpu %d has a kind of %d bytes, above %d", ErrInvalid, c.ID, len(c.Kind), MaxKindLen)
	}
	return nil
}

func dense(bs []*cpuset.Builder, what string) ([]cpuset.CPUSet, error) {
	out := make([]cpuset.CPUSet, len(bs))
	for i, b := range bs {
		out[i] = b.Result()
		if out[i].IsEmpty() {
			return nil, fmt.Errorf("%w: %s index %d has no online cpu (indexes must be dense)", ErrInvalid, what, i)
		}
	}
	return out, nil
}

// CPUs returns every present CPU, sorted by id. The slice is a copy.
func (t *Topology) CPUs() []CPU { return slices.Clone(t.cpus) }

// CPU returns the CPU with the given id.
func (t *Topology) CPU(id int) (CPU, bool) {
	i, ok := t.byID[id]
	if !ok {
		return CPU{}, false
	}
	return t.cpus[i], true
}

// Present returns the present CPUs (online or not).
func (t *Topology) Present() cpuset.CPUSet { return t.present }

// Online returns the online CPUs.
func (t *Topology) Online() cpuset.CPUSet { return t.online }

// Allowed returns the online CPUs corepin's own cpuset cgroup allows.
func (t *Topology) Allowed() cpuset.CPUSet { return t.allowed }

// NumSockets, NumCores and the like count units with at least one online CPU.
func (t *Topology) NumSockets() int  { return len(t.socketCPUs) }
func (t *Topology) NumDies() int     { return len(t.dieCPUs) }
func (t *Topology) NumClusters() int { return len(t.clusterCPUs) }
func (t *Topology) NumCores() int    { return len(t.coreCPUs) }
func (t *Topology) NumL3() int       { return len(t.l3CPUs) }

// Nodes returns the NUMA node ids, sorted, including nodes without CPUs.
func (t *Topology) Nodes() []NodeID { return slices.Clone(t.nodes) }

// NodesWithCPUs returns the NUMA nodes that hold online CPUs, sorted.
func (t *Topology) NodesWithCPUs() []NodeID {
	return slices.Sorted(maps.Keys(t.nodeCPUs))
}

// SocketCPUs returns the online CPUs of a socket (empty if out of range).
func (t *Topology) SocketCPUs(s SocketID) cpuset.CPUSet { return at(t.socketCPUs, int(s)) }

// DieCPUs returns the online CPUs of a die.
func (t *Topology) DieCPUs(d DieID) cpuset.CPUSet { return at(t.dieCPUs, int(d)) }

// ClusterCPUs returns the online CPUs of a cluster.
func (t *Topology) ClusterCPUs(c ClusterID) cpuset.CPUSet { return at(t.clusterCPUs, int(c)) }

// CoreCPUs returns the online CPUs of a physical core (its SMT siblings).
func (t *Topology) CoreCPUs(c CoreID) cpuset.CPUSet { return at(t.coreCPUs, int(c)) }

// L3CPUs returns the online CPUs sharing an L3 cache.
func (t *Topology) L3CPUs(c CacheID) cpuset.CPUSet { return at(t.l3CPUs, int(c)) }

// NodeCPUs returns the online CPUs of a NUMA node.
func (t *Topology) NodeCPUs(n NodeID) cpuset.CPUSet { return t.nodeCPUs[n] }

// NoNodeCPUs returns the online CPUs that are in no NUMA node (NUMA None):
// on machines whose CPUs link to a node that has no directory, as hwloc
// reads them. They are in none of NodesWithCPUs; callers that group CPUs by
// node treat them as one more group (alloc does) or leave them out of
// per-node views (NodeResourceTopology zones).
func (t *Topology) NoNodeCPUs() cpuset.CPUSet { return t.noNode }

func at(sets []cpuset.CPUSet, i int) cpuset.CPUSet {
	if i < 0 || i >= len(sets) {
		return cpuset.CPUSet{}
	}
	return sets[i]
}

// Distance returns the kernel's NUMA distance from node a to node b: 10 for a
// node to itself, and, where the machine publishes no table, 10 on the
// diagonal and 20 elsewhere.
func (t *Topology) Distance(a, b NodeID) int {
	if d, ok := t.distances[a]; ok {
		if j, found := slices.BinarySearch(t.nodes, b); found && j < len(d) {
			return d[j]
		}
	}
	if a == b {
		return 10
	}
	return 20
}

// Distances returns a copy of the NUMA distance table, each row in the order
// of Nodes.
func (t *Topology) Distances() map[NodeID][]int {
	out := make(map[NodeID][]int, len(t.distances))
	for n, d := range t.distances {
		out[n] = slices.Clone(d)
	}
	return out
}

// Isolation is what the kernel keeps apart from general scheduling: CPUs
// isolated at boot (isolcpus=), in isolated cgroup v2 cpuset partitions,
// and CPUs without the periodic tick (nohz_full=). The sets are CPU ids of
// the machine; each may be empty.
type Isolation struct {
	Isolcpus   cpuset.CPUSet // cpu/isolated
	Partitions cpuset.CPUSet // cpuset.cpus.isolated of the cgroup v2 root, beyond Isolcpus
	NohzFull   cpuset.CPUSet // cpu/nohz_full
}

// Isolation returns the machine's isolated CPUs by source.
func (t *Topology) Isolation() Isolation { return t.isolation }

// Isolated returns the CPUs isolated from general scheduling: isolcpus and
// isolated cpuset partitions (not nohz_full alone; see NohzFull).
func (t *Topology) Isolated() cpuset.CPUSet {
	return t.isolation.Isolcpus.Union(t.isolation.Partitions)
}

// NohzFull returns the CPUs the kernel runs without a periodic tick while
// they run one task (nohz_full=).
func (t *Topology) NohzFull() cpuset.CPUSet { return t.isolation.NohzFull }

// WithIsolation returns a copy of t whose isolated CPUs are iso, checked
// to be present CPUs (a saved document, a test).
func (t *Topology) WithIsolation(iso Isolation) (*Topology, error) {
	for what, set := range map[string]cpuset.CPUSet{"isolated": iso.Isolcpus.Union(iso.Partitions), "nohz_full": iso.NohzFull} {
		if !set.IsSubsetOf(t.present) {
			return nil, fmt.Errorf("%w: %s cpus %s are not all present cpus (%s)", ErrInvalid, what, set, t.present)
		}
	}
	c := *t
	c.isolation = iso
	return &c, nil
}

// ThreadsPerCore returns the largest number of online CPUs in one core.
func (t *Topology) ThreadsPerCore() int {
	n := 0
	for _, c := range t.coreCPUs {
		n = max(n, c.Size())
	}
	return n
}

// UnmarshalJSON reads a CPU of the topo JSON contract, strictly: a key
// outside the contract is an error (a misspelt "numa" must not silently
// become node 0). A CPU written by hand (a plan input, a test topology)
// may leave out "online" and "allowed": both then default to true, as on a
// machine whose every CPU is up and ours. Every other field keeps Go's zero
// default.
func (c *CPU) UnmarshalJSON(b []byte) error {
	type plain CPU // no methods: no recursion
	v := struct {
		plain
		Online  *bool `json:"online"`
		Allowed *bool `json:"allowed"`
	}{}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return err
	}
	*c = CPU(v.plain)
	c.Online = v.Online == nil || *v.Online
	c.Allowed = v.Allowed == nil || *v.Allowed
	return nil
}
