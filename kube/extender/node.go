package extender

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/kube/nodestate"
	"github.com/corepin/corepin/topology"
)

// Node annotations a corepin node (the NRI plugin with --annotate-node)
// publishes; kube/nodestate encodes and decodes them.
const (
	// AnnotationTopology holds the node's `corepin topo -o json` document,
	// compact.
	AnnotationTopology = nodestate.AnnotationTopology
	// AnnotationAssigned holds the CPUs already held on the node, as the
	// "assigned" list of `corepin plan`: [{"id":"ns/pod","cpuset":"2-5","qos":"LSE"}].
	// Absent means nothing is held.
	AnnotationAssigned = nodestate.AnnotationAssigned
	// AnnotationNUMAFree is the coarse fallback: free CPUs per NUMA node,
	// in node order, e.g. "[4,0]". It stands for a machine of that many
	// single-thread cores per node, one socket and one L3 per node.
	AnnotationNUMAFree = nodestate.AnnotationNUMAFree
	// AnnotationAllocator holds the node allocator's settings beside
	// either form: {"policy":"kubelet","options":["full-pcpus-only"],"topology_policy":"single-numa-node"}
	// (nodestate.Allocator). Absent means policy corepin, no options, topology
	// policy none (a node of an older corepin).
	AnnotationAllocator = nodestate.AnnotationAllocator
)

// ErrNode is wrapped by errors about a node's published state
// (nodestate.ErrNode).
var ErrNode = nodestate.ErrNode

// Limits on what a node may publish.
const (
	// MaxAnnotationBytes bounds each annotation decoded (Kubernetes caps
	// all of an object's annotations at 256 KiB together).
	MaxAnnotationBytes = nodestate.MaxAnnotationBytes
)

// nodeState is a node's decoded state before any placement: shared,
// read-only, copied (Clone) for each decision.
type nodeState struct {
	st *alloc.State
	// free is the number of CPUs an exclusive request could still take.
	free int
	// empty is the node with nothing held but its reserved CPUs
	// (plan.ReservedID): what a request refused on st would meet if
	// every pod there were preempted. Nil when the node publishes too
	// little to know (AnnotationNUMAFree).
	empty *alloc.State
	// settings are the node settings it is judged under (request puts
	// them on each request): its default topology policy, given to pods
	// that name none, and, from Koordinator's node labels
	// (nodestate.LabelKoordCPUBindPolicy, nodestate.LabelKoordNUMAAllocateStrategy),
	// the bind policy and NUMA strategy every exclusive (LSE, LSR)
	// request takes, whatever it asks; with bindLabel and policyLabel, the
	// values of the labels that decided Bind and TopologyPolicy, for the
	// reasons of the refusals they cause.
	settings judgedSettings
	// published is the set of pod UIDs the node's AnnotationAssigned
	// names, nil unless its AnnotationAllocator says the entries name
	// their pods (nodestate.Allocator.PodUIDs): the pods it has admitted.
	published map[string]struct{}
	// coming is how many pods bound to the node and not yet admitted
	// there st holds (withBound), before the state the node published
	// without them.
	coming int
	before *alloc.State
	// fromNRT: the state is a NodeResourceTopology object's (nrtStateOf).
	fromNRT bool
	err     error
}

// cache is a bounded map, safe for concurrent use: decoded node states by
// a hash of their annotations, verdicts by state and request. It holds at
// most max entries and, when weigh is set, entries weighing at most
// maxBytes together (an entry heavier than that alone is not kept). It is
// cleared whole when one more would pass either bound; a cluster has few
// distinct states per scheduling wave, so that is rare and cheap.
type cache[K comparable, V any] struct {
	mu       sync.Mutex
	m        map[K]V
	max      int
	weigh    func(V) int64
	maxBytes int64
	bytes    int64
}

func (c *cache[K, V]) get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[k]
	return v, ok
}

func (c *cache[K, V]) put(k K, v V) {
	var w int64
	if c.weigh != nil {
		if w = c.weigh(v); w > c.maxBytes {
			return
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= c.max || c.bytes+w > c.maxBytes && c.weigh != nil {
		c.m = make(map[K]V)
		c.bytes = 0
	}
	if old, ok := c.m[k]; ok && c.weigh != nil {
		c.bytes -= c.weigh(old)
	}
	c.m[k] = v
	c.bytes += w
}

func (c *cache[K, V]) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// machineBytesPerCPU and machineBytesFixed estimate the heap a node's
// machine holds (its decoded topology and alloc's index of it), which its
// states share (and nodes of the same machine share with each other:
// kube/nodestate); stateBytesPerCPU and stateBytesFixed that of each
// alloc.State besides, per CPU of its machine and besides.
// TestStateBytesEstimate checks them against the heap measured.
const (
	machineBytesPerCPU = 400
	machineBytesFixed  = 8 << 10
	stateBytesPerCPU   = 32
	stateBytesFixed    = 8 << 10
)

// bytes estimates the heap ns holds: its machine, counted for each entry
// although nodes of one machine share it, its states (the one it shares
// with another entry counted again) and its maps.
func (ns *nodeState) bytes() int64 {
	n := int64(512)
	var counted *topology.Topology
	for _, st := range []*alloc.State{ns.st, ns.empty, ns.before} {
		if st == nil {
			continue
		}
		cpus := int64(st.Topology().Present().Size())
		if st.Topology() != counted {
			n += machineBytesFixed + machineBytesPerCPU*cpus
			counted = st.Topology()
		}
		n += stateBytesFixed + stateBytesPerCPU*cpus
	}
	return n + 64*int64(len(ns.published))
}

// stateKey names a node's published state: a hash of its annotations (the
// typed path hashes their values, the fast path their JSON text; the two
// never share an entry).
type stateKey [32]byte

// stateOf returns the node's decoded state and its key: by its corepin
// annotations, else by its NodeResourceTopology (nrtStateOf), else nil;
// with the pods bound to it and not yet admitted there placed (withBound).
func (e *Extender) stateOf(node *corev1.Node) (*nodeState, stateKey) {
	ns, k := e.publishedStateOf(node)
	return e.withBound(node.Name, ns, k)
}

// rawStateOf is stateOf for a node item of the fast path.
func (e *Extender) rawStateOf(n *rawNode) (*nodeState, stateKey) {
	ns, k := e.rawPublishedStateOf(n)
	return e.withBound(n.name, ns, k)
}

// publishedStateOf is the state node publishes, by its corepin
// annotations, else by its NodeResourceTopology (nrtStateOf), else nil.
func (e *Extender) publishedStateOf(node *corev1.Node) (*nodeState, stateKey) {
	topo, hasTopo := node.Annotations[AnnotationTopology]
	free, hasFree := node.Annotations[AnnotationNUMAFree]
	if !hasTopo && !hasFree {
		return e.nrtStateOf(node.Name, koordLabelValues{node.Labels[nodestate.LabelKoordCPUBindPolicy], node.Labels[nodestate.LabelKoordNUMATopologyPolicy],
			node.Labels[nodestate.LabelKoordNUMAAllocateStrategy]})
	}
	settings, hasSettings := node.Annotations[AnnotationAllocator]
	h := sha256.New()
	if hasSettings {
		// Length first: the annotations after it are not delimited.
		h.Write([]byte("allocator " + strconv.Itoa(len(settings)) + "\x00" + settings))
	}
	if hasTopo {
		h.Write([]byte("topology\x00" + topo + "\x00" + node.Annotations[AnnotationAssigned]))
	} else {
		h.Write([]byte("numa-free\x00" + free))
	}
	var k stateKey
	h.Sum(k[:0])
	if ns, ok := e.cache.get(k); ok {
		return ns, k
	}
	var set *string
	if hasSettings {
		set = &settings
	}
	var ns *nodeState
	if hasTopo {
		ns = decodeTopology(topo, node.Annotations[AnnotationAssigned], set)
	} else {
		ns = decodeNUMAFree(free, set)
	}
	e.cache.put(k, ns)
	return ns, k
}

// rawPublishedStateOf is publishedStateOf for a node item of the fast
// path, whose annotations are still JSON strings: they are hashed as sent
// and unquoted only when the state is not cached.
func (e *Extender) rawPublishedStateOf(n *rawNode) (*nodeState, stateKey) {
	topo, assigned, free, settings := n.ann[0], n.ann[1], n.ann[2], n.ann[3]
	if topo == nil && free == nil {
		return e.nrtStateOf(n.name, koordLabelValues{rawLabel(n.label[0]), rawLabel(n.label[1]), rawLabel(n.label[2])})
	}
	h := sha256.New()
	if settings != nil {
		// A raw JSON string ends at its first unescaped quote: it
		// delimits itself from the annotations after it.
		h.Write([]byte("raw allocator\x00"))
		h.Write(settings)
	}
	if topo != nil {
		h.Write([]byte("raw topology\x00"))
		h.Write(topo)
		h.Write([]byte{0})
		h.Write(assigned)
	} else {
		h.Write([]byte("raw numa-free\x00"))
		h.Write(free)
	}
	var k stateKey
	h.Sum(k[:0])
	if ns, ok := e.cache.get(k); ok {
		return ns, k
	}
	unquote := func(raw []byte) string {
		var s string
		if raw != nil && json.Unmarshal(raw, &s) != nil {
			return "\x00" // not reached: the walker took it from a valid document
		}
		return s
	}
	var set *string
	if settings != nil {
		s := unquote(settings)
		set = &s
	}
	var ns *nodeState
	if topo != nil {
		ns = decodeTopology(unquote(topo), unquote(assigned), set)
	} else {
		ns = decodeNUMAFree(unquote(free), set)
	}
	e.cache.put(k, ns)
	return ns, k
}

// judged is the nodeState of a node's Judged state (nodestate.Judge*),
// or of the error building it.
func judged(j nodestate.Judged, err error) *nodeState {
	if err != nil {
		return &nodeState{err: err}
	}
	return &nodeState{st: j.State, free: j.Free, empty: j.Empty, published: j.Admitted,
		settings: judgedSettings{NodeSettings: j.Settings, bindLabel: j.BindLabel, policyLabel: j.PolicyLabel}}
}

// decodeTopology builds the state of a node publishing its topology and
// assignments under the allocator settings settings (AnnotationAllocator;
// nil when the node publishes none): nodestate.JudgeTopology.
func decodeTopology(topo, assigned string, settings *string) *nodeState {
	pub, err := nodestate.DecodeTopology(topo, assigned, settings)
	if err != nil {
		return &nodeState{err: err}
	}
	return judged(nodestate.JudgeTopology(pub))
}

// decodeNUMAFree builds the stand-in machine of AnnotationNUMAFree
// (nodestate.JudgeFree) under the allocator settings settings
// (AnnotationAllocator; nil when the node publishes none).
func decodeNUMAFree(raw string, settings *string) *nodeState {
	pub, err := nodestate.DecodeNUMAFree(raw, settings)
	if err != nil {
		return &nodeState{err: err}
	}
	return judged(nodestate.JudgeFree(pub.Free, AnnotationNUMAFree, pub.Settings))
}

// nrtStateOf is the state of a node without corepin annotations: the
// machine Koordinator's annotations describe on its NodeResourceTopology
// (nodestate.JudgeKoord) under the node's Koordinator labels bindLabel
// (nodestate.LabelKoordCPUBindPolicy) and policyLabel
// (nodestate.LabelKoordNUMATopologyPolicy), "" when absent; else the stand-in
// machine of its zones, whose labels are not read (no koordlet runs there,
// no koord-scheduler judges it by them). Nil when the extender watches none
// (WithNRT) or knows none for the node.
func (e *Extender) nrtStateOf(name string, lv koordLabelValues) (*nodeState, stateKey) {
	if e.nrt == nil {
		return nil, stateKey{}
	}
	ent, ok := e.nrt.get(name)
	if !ok {
		return nil, stateKey{}
	}
	key := ent.key
	var labels nodestate.KoordLabels
	if ent.koord != nil && lv != (koordLabelValues{}) {
		var err error
		if labels, err = nodestate.ParseKoordLabels(lv.bind, lv.policy, lv.strategy); err != nil {
			// Not cached: judge answers a failed state before it
			// looks at its key.
			return &nodeState{err: fmt.Errorf("%w: %w", ErrNode, err)}, stateKey{}
		}
		if labels != (nodestate.KoordLabels{}) {
			key = labeledKey(ent.key, labels)
		}
	}
	if ns, ok := e.cache.get(key); ok {
		return ns, key
	}
	var ns *nodeState
	switch {
	case ent.readErr != nil:
		ns = &nodeState{err: nodestate.NRTError(ent.readErr)}
	case ent.koord != nil:
		ns = judged(nodestate.JudgeKoord(ent.koord, ent.settings.TopologyPolicy, labels))
	default:
		ns = judged(nodestate.JudgeFree(ent.free, "NodeResourceTopology", ent.settings))
	}
	ns.fromNRT = true
	e.cache.put(key, ns)
	return ns, key
}

// koordLabelValues are the values of a Node's Koordinator labels
// (nodestate.LabelKoordCPUBindPolicy, nodestate.LabelKoordNUMATopologyPolicy,
// nodestate.LabelKoordNUMAAllocateStrategy), "" when absent.
type koordLabelValues struct{ bind, policy, strategy string }

// labeledKey is the key of the state of the NodeResourceTopology of key
// under Koordinator labels l (not both empty), computed without
// allocating.
func labeledKey(key stateKey, l nodestate.KoordLabels) stateKey {
	var b [len(key) + 64]byte
	n := copy(b[:], key[:])
	n += copy(b[n:], "labels\x00")
	n += copy(b[n:], l.Bind)
	b[n] = 0 // the names are known: none holds a NUL
	n++
	n += copy(b[n:], l.TopologyPolicy)
	b[n] = 0
	n++
	n += copy(b[n:], l.NUMA)
	return sha256.Sum256(b[:n])
}

// rawLabel is the value of a label of the fast path (a raw JSON string;
// nil when absent) as the typed path reads it: one of Koordinator's names,
// without allocating, else unquoted.
func rawLabel(raw []byte) string {
	if raw == nil {
		return ""
	}
	v := raw[1 : len(raw)-1]
	for _, names := range [][]string{nodestate.KoordCPUBindPolicies, nodestate.KoordNUMATopologyPolicies, nodestate.KoordNUMAAllocateStrategies} {
		for _, name := range names {
			if string(v) == name {
				return name
			}
		}
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "\x00" // not reached: the walker took it from a valid document
	}
	return s
}

// judgedSettings are the node settings a node is judged under, with the
// values of Koordinator's labels that decided Bind and TopologyPolicy
// (bindLabel, policyLabel), "" when none did.
type judgedSettings struct {
	alloc.NodeSettings
	bindLabel, policyLabel string
}

func short(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
