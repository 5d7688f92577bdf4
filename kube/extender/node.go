package extender

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/plan"
	"github.com/corepin/corepin/topology"
)

// Node annotations a corepin node (the agent, the NRI plugin) publishes.
const (
	// AnnotationTopology holds the node's `corepin topo -o json` document,
	// compact.
	AnnotationTopology = "corepin.io/topology"
	// AnnotationAssigned holds the CPUs already held on the node, as the
	// "assigned" list of `corepin plan`: [{"id":"ns/pod","cpuset":"2-5","qos":"LSE"}].
	// Absent means nothing is held.
	AnnotationAssigned = "corepin.io/assigned"
	// AnnotationNUMAFree is the coarse fallback: free CPUs per NUMA node,
	// in node order, e.g. "[4,0]". It stands for a machine of that many
	// single-thread cores per node, one socket and one L3 per node.
	AnnotationNUMAFree = "corepin.io/numa-free"
)

// ErrNode is wrapped by errors about a node's published state.
var ErrNode = errors.New("invalid node annotation")

// Limits on what a node may publish.
const (
	// MaxAnnotationBytes bounds each annotation decoded (Kubernetes caps
	// all of an object's annotations at 256 KiB together).
	MaxAnnotationBytes = 256 << 10
	// maxNUMAFreeNodes bounds the entries of AnnotationNUMAFree.
	maxNUMAFreeNodes = 64
)

// nodeState is a node's decoded state before any placement: shared,
// read-only, copied (Clone) for each decision.
type nodeState struct {
	st *alloc.State
	// free is the number of CPUs an exclusive request could still take.
	free int
	err  error
}

// cache maps an annotation hash to the decoded nodeState. It is cleared
// whole when it reaches its bound; a cluster has few distinct states per
// scheduling wave, so that is rare and cheap.
type cache struct {
	mu  sync.Mutex
	m   map[[32]byte]*nodeState
	max int
}

func (c *cache) get(k [32]byte) (*nodeState, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ns, ok := c.m[k]
	return ns, ok
}

func (c *cache) put(k [32]byte, ns *nodeState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= c.max {
		c.m = make(map[[32]byte]*nodeState)
	}
	c.m[k] = ns
}

func (c *cache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// stateOf returns the node's decoded state, nil when the node publishes no
// corepin state.
func (e *Extender) stateOf(node *corev1.Node) *nodeState {
	topo, hasTopo := node.Annotations[AnnotationTopology]
	free, hasFree := node.Annotations[AnnotationNUMAFree]
	if !hasTopo && !hasFree {
		return nil
	}
	h := sha256.New()
	if hasTopo {
		h.Write([]byte("topology\x00" + topo + "\x00" + node.Annotations[AnnotationAssigned]))
	} else {
		h.Write([]byte("numa-free\x00" + free))
	}
	var k [32]byte
	h.Sum(k[:0])
	if ns, ok := e.cache.get(k); ok {
		return ns
	}
	var ns *nodeState
	if hasTopo {
		ns = decodeTopology(topo, node.Annotations[AnnotationAssigned])
	} else {
		ns = decodeNUMAFree(free)
	}
	e.cache.put(k, ns)
	return ns
}

func failed(format string, args ...any) *nodeState {
	return &nodeState{err: fmt.Errorf("%w: %s", ErrNode, fmt.Sprintf(format, args...))}
}

// NodeTopology decodes the corepin state a node publishes: its machine
// (AnnotationTopology, the compact `corepin topo -o json` document) and
// the workloads already holding CPUs on it (AnnotationAssigned, the
// "assigned" list of `corepin plan`). ok is false, with nothing decoded,
// for a node without AnnotationTopology. A malformed or oversized
// annotation is an error wrapping ErrNode. The assignments are not checked
// against the machine here: alloc.State.Assign does that.
func NodeTopology(node *corev1.Node) (t *topology.Topology, held []alloc.Assignment, ok bool, err error) {
	topo, ok := node.Annotations[AnnotationTopology]
	if !ok {
		return nil, nil, false, nil
	}
	t, assigned, err := parseTopology(topo, node.Annotations[AnnotationAssigned])
	if err != nil {
		return nil, nil, true, err
	}
	for _, a := range assigned {
		as, err := a.Assignment()
		if err != nil {
			return nil, nil, true, fmt.Errorf("%w: %s: %w", ErrNode, AnnotationAssigned, err)
		}
		held = append(held, as)
	}
	return t, held, true, nil
}

// parseTopology decodes the two annotations of a node publishing its
// topology and assignments.
func parseTopology(topo, assigned string) (*topology.Topology, []plan.Assigned, error) {
	if len(topo) > MaxAnnotationBytes || len(assigned) > MaxAnnotationBytes {
		return nil, nil, fmt.Errorf("%w: annotation longer than %d bytes", ErrNode, MaxAnnotationBytes)
	}
	t, err := topology.ReadDoc(bytes.NewReader([]byte(topo)))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s: %w", ErrNode, AnnotationTopology, err)
	}
	var list []plan.Assigned
	if assigned != "" {
		dec := json.NewDecoder(bytes.NewReader([]byte(assigned)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&list); err != nil {
			return nil, nil, fmt.Errorf("%w: %s: parsing: %w", ErrNode, AnnotationAssigned, err)
		}
		if dec.More() {
			return nil, nil, fmt.Errorf("%w: %s: trailing data after the JSON list", ErrNode, AnnotationAssigned)
		}
	}
	return t, list, nil
}

// decodeTopology builds the state of a node publishing its topology and
// assignments, through the same plan document `corepin plan` places on.
func decodeTopology(topo, assigned string) *nodeState {
	t, list, err := parseTopology(topo, assigned)
	if err != nil {
		return &nodeState{err: err}
	}
	doc := plan.Document{Topology: plan.TopologyOf(t), Assigned: list}
	p, err := doc.Place(func(string) (*topology.Topology, error) {
		return nil, errors.New("a node's state never names a sysfs root")
	})
	if err != nil {
		return failed("%s: %v", AnnotationAssigned, err)
	}
	return &nodeState{st: p.State, free: p.State.Pools().LS.Size()}
}

// decodeNUMAFree builds the stand-in machine of AnnotationNUMAFree: node i
// has free[i] single-thread cores, its own L3 and its own socket.
func decodeNUMAFree(raw string) *nodeState {
	if len(raw) > MaxAnnotationBytes {
		return failed("%s longer than %d bytes", AnnotationNUMAFree, MaxAnnotationBytes)
	}
	var free []int
	dec := json.NewDecoder(bytes.NewReader([]byte(raw)))
	if err := dec.Decode(&free); err != nil {
		return failed("%s %q: want a JSON list of free CPUs per NUMA node, like [4,0]: %v", AnnotationNUMAFree, short(raw), err)
	}
	if dec.More() {
		return failed("%s %q: trailing data after the JSON list", AnnotationNUMAFree, short(raw))
	}
	if len(free) == 0 || len(free) > maxNUMAFreeNodes {
		return failed("%s %q: want 1 to %d NUMA nodes", AnnotationNUMAFree, short(raw), maxNUMAFreeNodes)
	}
	var cpus []topology.CPU
	dense := 0 // socket and L3 indexes are dense over the nodes with CPUs
	for n, f := range free {
		if f < 0 || len(cpus)+f > cpuset.MaxCPU+1 {
			return failed("%s %q: free CPUs must be 0 to %d in all", AnnotationNUMAFree, short(raw), cpuset.MaxCPU+1)
		}
		for range f {
			id := len(cpus)
			cpus = append(cpus, topology.CPU{ID: id, Online: true, Allowed: true, Socket: topology.SocketID(dense),
				NUMA: topology.NodeID(n), L3: topology.CacheID(dense), Core: topology.CoreID(id)})
		}
		if f > 0 {
			dense++
		}
	}
	if len(cpus) == 0 {
		// No CPU at all: an empty state every exclusive request fails on.
		return &nodeState{}
	}
	t, err := topology.New(cpus, nil)
	if err != nil {
		return failed("%s: %v", AnnotationNUMAFree, err)
	}
	st, err := alloc.NewState(t, alloc.Config{})
	if err != nil {
		return failed("%s: %v", AnnotationNUMAFree, err)
	}
	return &nodeState{st: st, free: len(cpus)}
}

func short(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
