package plugin

import (
	"crypto/sha256"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/kube/nodestate"
)

// Cache holds each corepin node's decoded state, decoded once per change
// of what the node publishes (SetNode, from the Node informer), with the
// pods this scheduler reserved there and the node has not yet admitted
// placed on it (Reserve): a burst of pods is judged on the CPUs the ones
// before it took, never on the same free CPUs twice. Its methods are safe
// for concurrent use; the states it hands out are never changed (a change
// replaces the node's entry), so judging runs outside its lock.
type Cache struct {
	mu    sync.RWMutex
	nodes map[string]*node
	// pods names the node of each reserved pod, by UID.
	pods map[string]string
	// nrt are the NodeResourceTopology objects by node name (SetNRT);
	// plain are the Koordinator labels of the nodes publishing no corepin
	// annotations, judged by their object.
	nrt   map[string]*nrtObject
	plain map[string][3]string
	// seq orders what the cache learns: each published state and each
	// binding takes the next number.
	seq uint64
	// keys number the request keys seen (keyID).
	keys map[key]int32
	// empties are the empty states shared by nodes (adoptEmpty), by
	// emptyKey: at most MaxSharedEmpties, each dropped once no node's
	// published state holds it; emptyTick orders their use.
	empties   map[[sha256.Size]byte]*sharedEmpty
	emptyTick uint64
}

// MaxSharedEmpties caps the empty states the cache shares, as
// nodestate.MaxSharedMachines caps the machines the decoders share: a
// fleet has a few machine types. An empty state no node's published
// state holds any more is dropped at once (a node republishing its
// topology leaves one, not one per version); beyond the cap the least
// recently adopted is no longer shared (the nodes holding it keep it).
const MaxSharedEmpties = nodestate.MaxSharedMachines

// sharedEmpty is one shared empty state: the number of nodes whose
// published state holds it, and when a node last adopted it
// (Cache.emptyTick).
type sharedEmpty struct {
	e    *empty
	refs int
	used uint64
}

// keyID numbers k, once per pod (PreFilter), so that a node entry's kept
// verdicts are found by a small integer rather than by hashing the
// request's strings at every node.
func (c *Cache) keyID(k key) int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	id, ok := c.keys[k]
	if !ok {
		id = int32(len(c.keys))
		c.keys[k] = id
	}
	return id
}

// verdicts are a node entry's kept verdicts by key number: the first
// keys (a burst's few shapes) in slots read without a lock, by every
// Filter and Score of the cycle at once; the others in a map.
type verdicts struct {
	slots [verdictSlots]atomic.Pointer[verdict]
	mu    sync.Mutex
	m     map[int32]verdict
}

const verdictSlots = 32

func newVerdicts() *verdicts { return &verdicts{} }

func (vs *verdicts) load(id int32) (verdict, bool) {
	if id < verdictSlots {
		if v := vs.slots[id].Load(); v != nil {
			return *v, true
		}
		return verdict{}, false
	}
	vs.mu.Lock()
	defer vs.mu.Unlock()
	v, ok := vs.m[id]
	return v, ok
}

func (vs *verdicts) store(id int32, v verdict) {
	if id < verdictSlots {
		vs.slots[id].Store(&v)
		return
	}
	vs.mu.Lock()
	if vs.m == nil {
		vs.m = map[int32]verdict{}
	}
	vs.m[id] = v
	vs.mu.Unlock()
}

// NewCache returns an empty Cache.
func NewCache() *Cache {
	return &Cache{nodes: map[string]*node{}, pods: map[string]string{}, nrt: map[string]*nrtObject{}, plain: map[string][3]string{},
		keys: map[key]int32{}, empties: map[[sha256.Size]byte]*sharedEmpty{}}
}

// published is one state a node published, decoded, with what is counted
// of it once: shared by the node's entries until the node publishes
// another.
type published struct {
	// fp is what the node published, as sent: an update of the Node that
	// leaves it alone (a heartbeat, a label) decodes nothing.
	fp  string
	j   nodestate.Judged
	err error
	// seq is when the cache learnt it (Cache.seq).
	seq uint64
	// opts are the node's options the summary reads.
	opts nodeOpts
	// exclusiveOnly: the state counts exclusive CPUs only (a
	// NodeResourceTopology object's), so a shared pod's quota is not
	// placed on it, as the extender does not.
	exclusiveOnly bool
	empty         *empty // nil when the node does not say what it holds
	// shares says that empty may be shared with other nodes publishing
	// the same machine, settings and reserved CPUs: emptyKey is theirs.
	shares   bool
	emptyKey [sha256.Size]byte
}

// empty is a node's state with nothing held but its reserved CPUs
// (nodestate.Judged.Empty), what is counted of it once, and by request
// shape whether it refuses the request (published.refusesEmpty). It is
// shared by every node publishing the same machine, settings and reserved
// CPUs (Cache.shareEmpty): a burst asks each of a fleet's few machine
// types once per shape, not each node.
type empty struct {
	st  *alloc.State
	sum summary
	// refuses memoizes, by request shape (nodestate.Shape), whether st
	// refuses it.
	refuses sync.Map
}

// node is one node's entry: its published state with the pods reserved
// there placed. Entries are never changed once stored.
type node struct {
	pub      *published
	reserved []reservation
	st       *alloc.State // pub.j.State with reserved placed; nil when pub has none
	sum      summary
	free     int
	// kept are the verdicts found on this entry, by request (its
	// Cache.keyID): the entry never changes, so a burst of pods of a few
	// shapes runs the allocator once per shape and node change, not once
	// per pod.
	kept *verdicts
}

// reservation is a pod this scheduler reserved on a node and the node has
// not yet admitted.
type reservation struct {
	uid string
	req alloc.Request
	// bound is when the pod was bound (Cache.seq), 0 until then.
	bound uint64
}

// reservationID is the assignment id of a reserved pod in a node's cached
// state.
func reservationID(uid string) string { return "reserved/" + uid }

// fingerprint is what n publishes for corepin, and whether it publishes
// anything.
func fingerprint(n *corev1.Node) (string, bool) {
	topo, hasTopo := n.Annotations[nodestate.AnnotationTopology]
	free, hasFree := n.Annotations[nodestate.AnnotationNUMAFree]
	if !hasTopo && !hasFree {
		return "", false
	}
	set, hasSet := n.Annotations[nodestate.AnnotationAllocator]
	var b strings.Builder
	for _, part := range []struct {
		has bool
		v   string
	}{{hasTopo, topo}, {true, n.Annotations[nodestate.AnnotationAssigned]}, {hasFree, free}, {hasSet, set}} {
		if part.has {
			b.WriteString("+")
			b.WriteString(part.v)
		}
		b.WriteByte(0) // a NUL never appears in JSON text unescaped
	}
	return b.String(), true
}

// publishes reports whether n publishes a corepin state, without reading
// it.
func publishes(n *corev1.Node) bool {
	_, topo := n.Annotations[nodestate.AnnotationTopology]
	_, free := n.Annotations[nodestate.AnnotationNUMAFree]
	return topo || free
}

// decode decodes what n publishes (fp: fingerprint) through kube/nodestate,
// as the scheduler extender does.
func (c *Cache) decode(n *corev1.Node, fp string) *published {
	p := &published{fp: fp}
	var set *string
	if s, ok := n.Annotations[nodestate.AnnotationAllocator]; ok {
		set = &s
	}
	topo, hasTopo := n.Annotations[nodestate.AnnotationTopology]
	var pub nodestate.Published
	if hasTopo {
		if pub, p.err = nodestate.DecodeTopology(topo, n.Annotations[nodestate.AnnotationAssigned], set); p.err == nil {
			p.j, p.err = nodestate.JudgeTopology(pub)
		}
	} else if pub, p.err = nodestate.DecodeNUMAFree(n.Annotations[nodestate.AnnotationNUMAFree], set); p.err == nil {
		p.j, p.err = nodestate.JudgeFree(pub.Free, nodestate.AnnotationNUMAFree, pub.Settings)
	}
	p.finish()
	if hasTopo && p.err == nil && p.empty != nil { // a NUMA-free node's empty state names no machine to share by
		p.shares, p.emptyKey = true, emptyKey(topo, set, p.empty.st)
	}
	return p
}

// finish counts what p's decoded state gives once: whether it places
// exclusive CPUs in whole cores, and the summary of its empty state.
func (p *published) finish() {
	if p.err != nil {
		return
	}
	p.opts = nodeOpts{
		fullPCPUs:     slices.Contains(p.j.Settings.Options, alloc.OptFullPCPUsOnly),
		alignBySocket: slices.Contains(p.j.Settings.Options, alloc.OptAlignBySocket),
	}
	// The kubelet engine under full-pcpus-only still takes the free
	// threads of a core partly held (by reserved CPUs, or a workload
	// placed before the option): only the corepin engine's placements are
	// whole cores alone.
	p.opts.wholeCores = p.opts.fullPCPUs && p.j.Settings.Policy != alloc.PolicyKubelet
	if p.j.Empty != nil {
		p.empty = &empty{st: p.j.Empty, sum: summarize(p.j.Empty)}
	}
}

// emptyKey names what a node's empty state is made of: the topology and
// settings it publishes (topo, set; set nil when it publishes none) and
// the assignments left on it (its reserved CPUs).
func emptyKey(topo string, set *string, st *alloc.State) [sha256.Size]byte {
	h := sha256.New()
	for _, part := range []string{topo, fmt.Sprint(set != nil), deref(set), st.Reserved().String(), fmt.Sprint(st.Assignments())} {
		h.Write([]byte(part))
		h.Write([]byte{0}) // a NUL never appears in JSON text unescaped
	}
	return [sha256.Size]byte(h.Sum(nil))
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// adoptEmpty makes p's empty state the one shared by the nodes that
// publish the same machine, settings and reserved CPUs (p.emptyKey), so
// that what is found on it is found once for all of them and the copies
// go; the first such p shares its own. Called with c.mu held, as p
// becomes a node's published state.
func (c *Cache) adoptEmpty(p *published) {
	if !p.shares {
		return
	}
	c.emptyTick++
	if s, ok := c.empties[p.emptyKey]; ok {
		s.refs++
		s.used = c.emptyTick
		p.empty, p.j.Empty = s.e, s.e.st
		return
	}
	c.empties[p.emptyKey] = &sharedEmpty{e: p.empty, refs: 1, used: c.emptyTick}
	if len(c.empties) <= MaxSharedEmpties {
		return
	}
	var oldest [sha256.Size]byte
	var oldestUse uint64
	for k, s := range c.empties {
		if k != p.emptyKey && (oldestUse == 0 || s.used < oldestUse) {
			oldest, oldestUse = k, s.used
		}
	}
	delete(c.empties, oldest)
}

// releaseEmpty says that p is no longer a node's published state: the
// empty state it shares is dropped once no node's holds it. Called with
// c.mu held.
func (c *Cache) releaseEmpty(p *published) {
	if p == nil || !p.shares {
		return
	}
	if s, ok := c.empties[p.emptyKey]; ok && s.e == p.empty {
		if s.refs--; s.refs == 0 {
			delete(c.empties, p.emptyKey)
		}
	}
}

// sharedEmpties is how many empty states c shares.
func (c *Cache) sharedEmpties() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.empties)
}

// SetNode records what n publishes: a change of its corepin annotations
// is decoded once and replaces the node's state, with the pods reserved
// there that it does not include placed again. A node that publishes none
// is judged by its NodeResourceTopology object (SetNRT) under its
// Koordinator labels, else forgotten (not corepin's to judge).
func (c *Cache) SetNode(n *corev1.Node) {
	fp, ok := fingerprint(n)
	if !ok {
		l := koordLabelsOf(n)
		c.mu.Lock()
		c.plain[n.Name] = l
		c.mu.Unlock()
		c.refreshNRT(n.Name)
		return
	}
	c.mu.Lock()
	delete(c.plain, n.Name)
	old := c.nodes[n.Name]
	c.mu.Unlock()
	if old != nil && old.pub.fp == fp {
		return
	}
	c.replace(n.Name, old, c.decode(n, fp)) // decoded outside the lock: the expensive part
}

// replace makes p the published state of node name, whose entry was old
// when p was decoded, unless another update of the same state won the
// race; the reservations p does not include are placed on it again.
func (c *Cache) replace(name string, old *node, p *published) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cur := c.nodes[name]
	if cur != old && cur != nil && cur.pub.fp == p.fp {
		return
	}
	c.seq++
	p.seq = c.seq
	c.adoptEmpty(p) // before the release: a node republishing the same machine keeps it shared
	var kept []reservation
	if cur != nil {
		c.releaseEmpty(cur.pub)
		for _, r := range cur.reserved {
			if c.included(p, r) {
				delete(c.pods, r.uid)
				continue
			}
			kept = append(kept, r)
		}
	}
	c.nodes[name] = build(p, kept)
}

// included reports whether the state p includes the reserved pod r: the
// node names r's UID among the pods it admitted or, when it names none
// (nodestate.Allocator.PodUIDs unset), r was bound before p was published, as
// the extender takes the pods bound before a NodeResourceTopology change
// to be in it.
func (c *Cache) included(p *published, r reservation) bool {
	if p.j.Admitted != nil {
		_, ok := p.j.Admitted[r.uid]
		return ok
	}
	return r.bound != 0 && r.bound < p.seq
}

// build is the entry of state p with the reservations placed on a copy,
// in order; one that no longer fits stays reserved but unplaced (the node
// will refuse the pod).
func build(p *published, reserved []reservation) *node {
	n := &node{pub: p, reserved: reserved, st: p.j.State, free: p.j.Free, kept: newVerdicts()}
	if p.err != nil || p.j.State == nil {
		return n
	}
	if len(reserved) > 0 {
		n.st = p.j.State.Clone()
		for _, r := range reserved {
			if p.exclusiveOnly && r.req.QoS != alloc.LSE && r.req.QoS != alloc.LSR {
				continue
			}
			n.st.Admit(r.req) // a refusal leaves the state as it was
		}
		n.free = n.st.Pools().LS.Size()
	}
	n.sum = summarize(n.st)
	return n
}

// DeleteNode forgets a node and the pods reserved there.
func (c *Cache) DeleteNode(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forgetNodeLocked(name)
	delete(c.plain, name)
}

// forgetNodeLocked forgets node name's entry, the pods reserved there and
// its hold on a shared empty state. Called with c.mu held.
func (c *Cache) forgetNodeLocked(name string) {
	n := c.nodes[name]
	if n == nil {
		return
	}
	for _, r := range n.reserved {
		delete(c.pods, r.uid)
	}
	c.releaseEmpty(n.pub)
	delete(c.nodes, name)
}

// get is the node's entry, nil when it publishes no corepin state.
func (c *Cache) get(name string) *node {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.nodes[name]
}

// Reserve places the pod uid's request req (as the node judges it:
// nodestate.RequestOn) on the node's cached state at once; the node keeps
// it there until its published state includes the pod (SetNode) or the
// pod is forgotten (Forget). A node the cache does not judge takes it
// without a record; a refusal (the state changed since Filter) is
// returned and nothing is recorded.
func (c *Cache) Reserve(uid, name string, req alloc.Request) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.nodes[name]
	if n == nil || n.pub.err != nil || n.st == nil {
		return nil
	}
	if prev, ok := c.pods[uid]; ok {
		c.forgetLocked(uid, prev)
		n = c.nodes[name]
	}
	req, _, err := nodestate.RequestOn(n.pub.j.Settings, req)
	if err != nil {
		return err
	}
	if n.pub.exclusiveOnly && req.QoS != alloc.LSE && req.QoS != alloc.LSR {
		return nil // the state does not count shared pods' quotas
	}
	req.ID = reservationID(uid)
	st := n.st.Clone()
	if _, err := st.Admit(req); err != nil {
		return err
	}
	reserved := append(append([]reservation(nil), n.reserved...), reservation{uid: uid, req: req})
	c.nodes[name] = &node{pub: n.pub, reserved: reserved, st: st, sum: summarize(st), free: st.Pools().LS.Size(), kept: newVerdicts()}
	c.pods[uid] = name
	return nil
}

// Bound records that the reserved pod uid was bound to its node.
func (c *Cache) Bound(uid string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	name, ok := c.pods[uid]
	if !ok {
		return
	}
	n := c.nodes[name]
	reserved := append([]reservation(nil), n.reserved...)
	c.seq++
	for i := range reserved {
		if reserved[i].uid == uid {
			reserved[i].bound = c.seq
		}
	}
	// A binding changes no verdict: the entry's verdicts stay.
	c.nodes[name] = &node{pub: n.pub, reserved: reserved, st: n.st, sum: n.sum, free: n.free, kept: n.kept}
}

// Forget releases the pod uid's reservation, if any: Unreserve, and a pod
// deleted or finished before its node published it.
func (c *Cache) Forget(uid string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if name, ok := c.pods[uid]; ok {
		c.forgetLocked(uid, name)
	}
}

func (c *Cache) forgetLocked(uid, name string) {
	delete(c.pods, uid)
	n := c.nodes[name]
	if n == nil {
		return
	}
	kept := make([]reservation, 0, len(n.reserved))
	for _, r := range n.reserved {
		if r.uid != uid {
			kept = append(kept, r)
		}
	}
	c.nodes[name] = build(n.pub, kept)
}

// Reserved is the number of pods reserved on nodes and not yet published
// there.
func (c *Cache) Reserved() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.pods)
}
