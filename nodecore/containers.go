package nodecore

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/store"
	"github.com/corepin/corepin/topology"
)

// ContainerRef names a container that a runtime (containerd, CRI-O) runs
// and enforces: the NRI plugin's unit of admission.
type ContainerRef struct {
	// ID is the runtime's container id.
	ID string `json:"id"`
	// Pod is namespace/name of its pod, Name the container's name in it.
	Pod    string `json:"pod,omitempty"`
	PodUID string `json:"pod_uid,omitempty"`
	Name   string `json:"name,omitempty"`
}

// MaxContainerIDLen bounds a runtime's container id (containerd's are 64
// hex digits) and the pod and container names kept with it (Kubernetes
// allows 253 bytes).
const MaxContainerIDLen = 256

// ContainerAssignment is what a runtime must apply to one container.
type ContainerAssignment struct {
	Ref ContainerRef
	// Name is the workload name in the state file (/v1/workloads).
	Name string
	QoS  alloc.QoS
	// CPUs is the exclusive set of an LSE or LSR container, or the pool an
	// LS or BE container shares now; Mems the NUMA nodes of CPUs (memory
	// follows the CPUs).
	CPUs cpuset.CPUSet
	Mems cpuset.CPUSet
	// MilliCPUs is the quota of an LS container (0: none).
	MilliCPUs int
	// Threads is the thread count its CPUs are worth (Record.Threads):
	// its exclusive CPUs, its quota rounded up, or a BE container's pool
	// when it was admitted.
	Threads int
	// BERoute is Record.BERoute: how a BE container is protected, once
	// SetBERoute recorded it.
	BERoute string
	// NoCPUQuota is its spec's cpu_quota false (an LSE or LSR container
	// whose runtime should apply no CFS quota).
	NoCPUQuota bool
}

// Containers admits and releases runtime containers on the node's state
// file, with the node's allocator and pool guard (Admit): the NRI
// plugin's core.
// Like StatePlacer it needs no agent to run and no lock beyond the
// store's write transaction (BEGIN IMMEDIATE), so the agent, local runs
// and the plugin never hand out one CPU twice. It writes no cgroup: the
// runtime applies what it answers. The agent's Reconcile keeps container
// assignments (it has no group for them); Containers.Sync releases those
// the runtime no longer runs.
type Containers struct {
	mu   sync.Mutex
	db   *store.DB
	topo *topology.Topology
	cfg  alloc.NodeSettings
}

// OpenContainers opens (or creates) the state file at path for topology t
// and node settings cfg (cfg.TopologyPolicy is given to requests that name
// none). It records cfg in the file (SharedConfig), so local runs place
// with it.
func OpenContainers(path string, t *topology.Topology, cfg alloc.NodeSettings) (*Containers, error) {
	if t == nil || path == "" {
		return nil, fmt.Errorf("opening the container state: state path and topology are required")
	}
	if _, err := alloc.NewState(t, cfg); err != nil {
		return nil, fmt.Errorf("%w: allocator configuration (reserved cpus, policy, options): %v", ErrInvalid, err)
	}
	if _, err := alloc.ParseTopologyPolicy(string(cfg.TopologyPolicy)); err != nil {
		return nil, fmt.Errorf("%w: topology policy: %v", ErrInvalid, err)
	}
	db, err := OpenState(path)
	if err != nil {
		return nil, err
	}
	if err := RecordConfig(db, "nri", cfg); err != nil {
		db.Close()
		return nil, err
	}
	return &Containers{db: db, topo: t, cfg: cfg}, nil
}

// Close closes the state file; assignments stay held.
func (c *Containers) Close() error { return c.db.Close() }

// Topology returns the machine placed on.
func (c *Containers) Topology() *topology.Topology { return c.topo }

// ContainerName is the workload name of container id in the state file:
// "nri-" and the id when that is a valid name, else "nri-" and a hash.
func ContainerName(id string) string {
	n := "nri-" + id
	if ValidateName(n) == nil {
		return n
	}
	h := sha256.Sum256([]byte(id))
	return "nri-" + hex.EncodeToString(h[:])[:40]
}

// Admit admits container ref for s (its name is set here; what runs in it
// is the runtime's). A container admitted already gets its assignment
// back unchanged, so a runtime's retry or a resynchronisation never moves
// it. If prefer holds exactly the CPUs an exclusive request asks for and
// they are all free, the container keeps them (a live container found
// pinned after the state was lost). Errors wrap ErrInvalid or ErrRejected
// (with the allocator's Rejection).
func (c *Containers) Admit(ref ContainerRef, s Spec, prefer cpuset.CPUSet) (ContainerAssignment, error) {
	if ref.ID == "" || len(ref.ID) > MaxContainerIDLen || strings.ContainsRune(ref.ID, 0) {
		return ContainerAssignment{}, fmt.Errorf("%w: container id %.40q is empty, has a NUL or is longer than %d bytes", ErrInvalid, ref.ID, MaxContainerIDLen)
	}
	for _, f := range []string{ref.Pod, ref.PodUID, ref.Name} {
		if len(f) > MaxContainerIDLen {
			return ContainerAssignment{}, fmt.Errorf("%w: container %.40s: pod or container name %.40q... is longer than %d bytes", ErrInvalid, ref.ID, f, MaxContainerIDLen)
		}
	}
	s.Name = ContainerName(ref.ID)
	s.Command, s.Args, s.PID, s.Cgroup = "", nil, 0, ""
	req, err := Request(c.cfg, s)
	if err != nil {
		return ContainerAssignment{}, err
	}
	if req.CPUs > c.topo.Allowed().Size() {
		return ContainerAssignment{}, fmt.Errorf("%w: container %s asks for %d CPUs; this node has %d usable (%s)",
			ErrInvalid, ref.ID, req.CPUs, c.topo.Allowed().Size(), c.topo.Allowed())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	ad, err := Admit(c.db, c.topo, c.cfg, Record{Spec: s, Container: &ref}, prefer)
	if errors.Is(err, ErrExists) {
		got, gerr := c.lookup(ref.ID)
		if gerr == nil {
			return got, nil
		}
		return ContainerAssignment{}, errors.Join(err, gerr)
	}
	if err != nil {
		return ContainerAssignment{}, err
	}
	return c.resolve(ad.Assignment, ad.Record, ad.State.Pools()), nil
}

// Resize resizes container id's assignment to the size of s (an
// in-place pod resize) with AdmitResize: an exclusive container grows
// around the CPUs it has and never gives back those it was created on.
// s must ask for the class admitted (ErrInvalid otherwise: the kubelet
// never changes a pod's QoS class in place); a size equal to the one held
// changes nothing. Errors wrap ErrNotFound when it holds none, and
// AdmitResize's.
func (c *Containers) Resize(id string, s Spec) (ContainerAssignment, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	name := ContainerName(id)
	as, err := c.db.Assignments()
	if err != nil {
		return ContainerAssignment{}, err
	}
	i := slices.IndexFunc(as, func(a store.Assignment) bool { return a.Name == name })
	if i < 0 {
		return ContainerAssignment{}, fmt.Errorf("%w: container %.80q", ErrNotFound, id)
	}
	rec, _, err := DecodeAssignment(as[i])
	if err != nil {
		return ContainerAssignment{}, err
	}
	s.Name = name
	s.Command, s.Args, s.PID, s.Cgroup = "", nil, 0, ""
	req, err := Request(c.cfg, s)
	if err != nil {
		return ContainerAssignment{}, err
	}
	if q := alloc.QoS(as[i].QoS); req.QoS != q {
		return ContainerAssignment{}, fmt.Errorf("%w: container %s is %s and would be %s at its new size; a resize in place keeps the class: "+
			"keep its CPUs whole (limits = requests) or recreate the pod", ErrInvalid, id, q, req.QoS)
	}
	if rec.CPUs != nil && s.CPUs != nil && *rec.CPUs == *s.CPUs {
		return c.lookup(id)
	}
	ad, err := AdmitResize(c.db, c.topo, c.cfg, name, *s.CPUs)
	if err != nil {
		return ContainerAssignment{}, err
	}
	return c.resolve(ad.Assignment, ad.Record, ad.State.Pools()), nil
}

// keep places req on prefer when prefer is an exclusive request's size
// and free in st.
func keep(st *alloc.State, req alloc.Request, prefer cpuset.CPUSet) (alloc.Placement, bool) {
	q := req.QoS
	if q == "" {
		q = alloc.LSE
	}
	if (q != alloc.LSE && q != alloc.LSR) || prefer.Size() != req.CPUs || !prefer.IsSubsetOf(st.Topology().Allowed()) {
		return alloc.Placement{}, false
	}
	if err := st.Assign(alloc.Assignment{ID: req.ID, QoS: q, CPUs: prefer, Exclusive: req.Exclusive}); err != nil {
		return alloc.Placement{}, false
	}
	return alloc.Placement{ID: req.ID, QoS: q, CPUs: prefer, NUMANodes: nodesOf(st.Topology(), prefer)}, true
}

// nodesOf is the set of NUMA nodes holding a CPU of set.
func nodesOf(t *topology.Topology, set cpuset.CPUSet) cpuset.CPUSet {
	var ids []int
	for _, n := range t.NodesWithCPUs() {
		if !t.NodeCPUs(n).Intersection(set).IsEmpty() {
			ids = append(ids, int(n))
		}
	}
	return cpuset.New(ids...)
}

// SetBERoute records route as how container id is protected
// (Record.BERoute), changing nothing else of its assignment; ErrNotFound
// when it holds none.
func (c *Containers) SetBERoute(id, route string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, err := c.db.Replace(ContainerName(id), func(_ []store.Assignment, old store.Assignment) (store.Assignment, error) {
		rec, _, err := DecodeAssignment(old)
		if err != nil {
			return store.Assignment{}, err
		}
		rec.BERoute = route
		doc, err := json.Marshal(rec)
		if err != nil {
			return store.Assignment{}, err
		}
		old.Request = doc
		return old, nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%w: container %.80q", ErrNotFound, id)
	}
	return err
}

// Release gives container id's CPUs back. Releasing a container that
// holds none is not an error (the runtime reports stop and remove both).
func (c *Containers) Release(id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	err := c.db.DeleteAssignment(ContainerName(id))
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	return err
}

// Get returns container id's assignment, resolved against the current
// pools; ErrNotFound if it holds none.
func (c *Containers) Get(id string) (ContainerAssignment, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lookup(id)
}

func (c *Containers) lookup(id string) (ContainerAssignment, error) {
	all, err := c.list()
	if err != nil {
		return ContainerAssignment{}, err
	}
	for _, ca := range all {
		if ca.Ref.ID == id {
			return ca, nil
		}
	}
	return ContainerAssignment{}, fmt.Errorf("%w: container %.80q", ErrNotFound, id)
}

// StateAndPods is State with the pod UID of each container's assignment,
// by assignment id (alloc.Assignment.ID), read in one go: what the NRI
// plugin publishes for the scheduler extender (nodestate.NodeAnnotations).
// Assignments of other front doors, and containers whose runtime named no
// pod UID, are not in pods.
func (c *Containers) StateAndPods() (*alloc.State, map[string]string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	as, err := c.db.Assignments()
	if err != nil {
		return nil, nil, err
	}
	st, recs, err := LoadState(c.topo, c.cfg, as)
	if err != nil {
		return nil, nil, fmt.Errorf("loading the state (%s): %w", c.db.Path(), err)
	}
	pods := map[string]string{}
	for name, rec := range recs {
		if rec.Container != nil && rec.Container.PodUID != "" {
			pods[name] = rec.Container.PodUID
		}
	}
	return st, pods, nil
}

// List returns every container assignment, sorted by container id, each
// resolved against the current pools.
func (c *Containers) List() ([]ContainerAssignment, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.list()
}

func (c *Containers) list() ([]ContainerAssignment, error) {
	as, err := c.db.Assignments()
	if err != nil {
		return nil, err
	}
	st, recs, err := LoadState(c.topo, c.cfg, as)
	if err != nil {
		return nil, fmt.Errorf("loading the state (%s): %w", c.db.Path(), err)
	}
	pools := st.Pools()
	var out []ContainerAssignment
	for _, a := range as {
		if rec := recs[a.Name]; rec.Container != nil {
			out = append(out, c.resolve(a, rec, pools))
		}
	}
	slices.SortFunc(out, func(a, b ContainerAssignment) int { return strings.Compare(a.Ref.ID, b.Ref.ID) })
	return out, nil
}

// resolve is a's assignment as the runtime applies it under pools.
func (c *Containers) resolve(a store.Assignment, rec Record, pools alloc.Pools) ContainerAssignment {
	ca := ContainerAssignment{Name: a.Name, QoS: alloc.QoS(a.QoS), Threads: rec.Threads, BERoute: rec.BERoute, NoCPUQuota: rec.NoCPUQuota()}
	if rec.Container != nil {
		ca.Ref = *rec.Container
	}
	switch ca.QoS {
	case alloc.LS:
		ca.CPUs, ca.MilliCPUs = pools.LS, rec.MilliCPUs
	case alloc.BE:
		ca.CPUs = pools.BE
	default:
		ca.CPUs, _ = cpuset.Parse(a.Cpuset) // stateAndRecords parsed it
	}
	ca.Mems = nodesOf(c.topo, ca.CPUs)
	return ca
}

// Pools are the pools of the whole state (every front door's workloads).
func (c *Containers) Pools() (alloc.Pools, error) {
	st, err := c.State()
	if err != nil {
		return alloc.Pools{}, err
	}
	return st.Pools(), nil
}

// State is the allocator's state of the whole state file (every front
// door's workloads), a copy the caller owns: what a node publishes for
// the cluster's view of it.
func (c *Containers) State() (*alloc.State, error) {
	st, _, err := c.StateAndPods()
	return st, err
}
