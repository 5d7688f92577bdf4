package nodeview

import (
	"crypto/sha256"
	"slices"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/kube/nodestate"
)

// View holds each corepin node's decoded state, decoded once per change
// of what the node publishes (SetNode, SetNRT), with the pods a scheduler
// reserved or bound there and the node has not yet admitted placed on it
// (Reserve, Hold): a burst of pods is judged on the CPUs the ones before
// it took, never on the same free CPUs twice. Its methods are safe for
// concurrent use; the states it hands out are never changed (a change
// replaces the node's entry), so judging runs outside its lock.
type View struct {
	mu    sync.RWMutex
	nodes map[string]*node
	// byObj are the entries of the nodes by the Node object a scheduler's
	// informer last handed over (SetNode), which its snapshot hands to
	// Filter and Score (JudgeNode, JudgeSeen): found by the object's
	// address, without reading its name. objOf is that object by node
	// name. An object is there only while it is the last one set and its
	// node has an entry, and then with that entry (indexObj, putLocked,
	// forgetNodeLocked).
	byObj map[*corev1.Node]*node
	objOf map[string]*corev1.Node
	// held are the pods reserved or bound on each node and not yet in
	// its published state, by node name, in the order they came; pods
	// names the node of each, by UID. They outlive the node's entry
	// (an entry the bound forgets, a node not known yet).
	held map[string][]reservation
	pods map[string]string
	// nrt are the NodeResourceTopology objects by node name (SetNRT);
	// plain are the Koordinator labels of the nodes publishing no corepin
	// annotations, judged by their object.
	nrt   map[string]*nrtObject
	plain map[string][3]string
	// decoded are the published states the entries hold, by
	// fingerprint: nodes publishing the same share one.
	decoded map[Fingerprint]*published
	// seq orders what the view learns: each published state, each
	// NodeResourceTopology version and each binding takes the next
	// number.
	seq uint64
	// keys number the request keys seen (Key), at most maxKeys.
	keys map[key]Key
	// empties are the empty states shared by nodes (adoptEmpty), by
	// emptyKey: at most MaxSharedEmpties, each dropped once no node's
	// published state holds it; emptyTick orders their use.
	empties   map[[sha256.Size]byte]*sharedEmpty
	emptyTick uint64
	// maxBytes bounds the estimated heap of the entries and the states
	// they hold (0: none); bytes is theirs now.
	maxBytes, bytes int64
	// byCalls: the view is fed the nodes of each call (WithMaxBytes).
	byCalls bool
}

// maxKeys bounds the request shapes a View numbers: a cluster's pods
// come in a few shapes, and a request of one more is judged without
// keeping its verdict.
const maxKeys = 1 << 16

// MaxSharedEmpties caps the empty states the view shares, as
// nodestate.MaxSharedMachines caps the machines the decoders share: a
// fleet has a few machine types. An empty state no node's published
// state holds any more is dropped at once (a node republishing its
// topology leaves one, not one per version); beyond the cap the least
// recently adopted is no longer shared (the nodes holding it keep it).
const MaxSharedEmpties = nodestate.MaxSharedMachines

// sharedEmpty is one shared empty state: the number of nodes whose
// published state holds it, and when a node last adopted it
// (View.emptyTick).
type sharedEmpty struct {
	e    *empty
	refs int
	used uint64
}

// Option configures a View.
type Option func(*View)

// WithMaxBytes bounds the heap the view's decoded node states hold, by
// their estimate (n <= 0: no bound): when one more would pass it, the
// view forgets every decoded state and decodes each node again when it is
// next set (one entry heavier than n alone is kept by itself). The pods
// held and the NodeResourceTopology objects stay. It is for a view fed
// the nodes of each call (the scheduler extender), not by an informer that
// sets a node only when it changes: such a view also remembers nothing of
// a node that publishes no corepin annotations and has no
// NodeResourceTopology object (SetPlain), as the next call names it again.
func WithMaxBytes(n int64) Option {
	return func(vw *View) { vw.maxBytes, vw.byCalls = max(n, 0), n > 0 }
}

// New returns an empty View.
func New(opts ...Option) *View {
	vw := &View{nodes: map[string]*node{}, byObj: map[*corev1.Node]*node{}, objOf: map[string]*corev1.Node{},
		decoded: map[Fingerprint]*published{}, held: map[string][]reservation{},
		pods: map[string]string{}, nrt: map[string]*nrtObject{}, plain: map[string][3]string{}, keys: map[key]Key{},
		empties: map[[sha256.Size]byte]*sharedEmpty{}}
	for _, o := range opts {
		o(vw)
	}
	return vw
}

// Key numbers req's shape (nodestate.Shape), once per pod (PreFilter, or
// an extender call): Judge keeps each node's verdict under it, for Score
// and the next pod of the same shape while the node's entry lasts.
func (vw *View) Key(req alloc.Request) Key {
	k := keyOf(req)
	vw.mu.RLock()
	id, ok := vw.keys[k]
	vw.mu.RUnlock()
	if ok {
		return id
	}
	vw.mu.Lock()
	defer vw.mu.Unlock()
	if id, ok := vw.keys[k]; ok {
		return id
	}
	if len(vw.keys) >= maxKeys {
		return -1 // not kept
	}
	id = Key(len(vw.keys))
	vw.keys[k] = id
	return id
}

// Judge answers req (reqErr: the pod's metadata did not read) on node
// name, whose request key is k (Key): a node the view does not judge (it
// publishes no corepin state, or the view has not seen it) passes with
// score 0, not corepin's to judge. The verdict is kept on the node's
// entry under k while the entry lasts.
func (vw *View) Judge(name string, req alloc.Request, reqErr error, k Key) Verdict {
	return judgeKept(vw.get(name), req, reqErr, k)
}

// JudgeNode is Judge for node n as a scheduler's snapshot hands it over:
// a node the view has not seen yet (the snapshot had it before the view's
// feed) that publishes corepin annotations is decoded first, once
// (SetNode). One look-up of the node's entry when the view has it, by
// the object's address when it is the one the view was last set with.
func (vw *View) JudgeNode(n *corev1.Node, req alloc.Request, reqErr error, k Key) Verdict {
	e := vw.entryOf(n)
	if e == nil && Publishes(n) {
		vw.SetNode(n)
		e = vw.get(n.Name)
	}
	return judgeKept(e, req, reqErr, k)
}

// JudgeSeen is Judge for node n as a scheduler's snapshot hands it over
// (Score, after Filter judged it: JudgeNode), decoding nothing.
func (vw *View) JudgeSeen(n *corev1.Node, req alloc.Request, reqErr error, k Key) Verdict {
	return judgeKept(vw.entryOf(n), req, reqErr, k)
}

// entryOf is the entry of node n, nil when the view does not judge it:
// by the object when the view was last set with it (byObj), else by its
// name.
func (vw *View) entryOf(n *corev1.Node) *node {
	vw.mu.RLock()
	defer vw.mu.RUnlock()
	if e, ok := vw.byObj[n]; ok {
		return e
	}
	return vw.nodes[n.Name]
}

// indexObj makes n the object by which its node's entry is found
// (byObj), when the view has an entry for it: the object a scheduler's
// informer hands over last is the one its snapshot holds next. A view
// fed the nodes of each call (WithMaxBytes) indexes none: each call
// hands over objects of its own.
func (vw *View) indexObj(n *corev1.Node) {
	if vw.byCalls {
		return
	}
	vw.mu.RLock()
	done := vw.objOf[n.Name] == n || vw.nodes[n.Name] == nil
	vw.mu.RUnlock()
	if done {
		return
	}
	vw.mu.Lock()
	defer vw.mu.Unlock()
	e := vw.nodes[n.Name]
	if e == nil {
		return
	}
	if old := vw.objOf[n.Name]; old != nil {
		delete(vw.byObj, old)
	}
	vw.objOf[n.Name], vw.byObj[n] = n, e
}

// Known reports whether the view judges node name (it has its published
// state, or its NodeResourceTopology object).
func (vw *View) Known(name string) bool { return vw.get(name) != nil }

// Current reports whether the view judges n by the corepin annotations n
// carries now (false for a node that publishes none).
func (vw *View) Current(n *corev1.Node) bool {
	e := vw.get(n.Name)
	return Publishes(n) && e != nil && e.pub.fp == FingerprintOf(n)
}

// States is the number of decoded states the view holds: nodes
// publishing the same share one.
func (vw *View) States() int {
	vw.mu.RLock()
	defer vw.mu.RUnlock()
	return len(vw.decoded)
}

// Nodes is the number of nodes the view judges.
func (vw *View) Nodes() int {
	vw.mu.RLock()
	defer vw.mu.RUnlock()
	return len(vw.nodes)
}

// node is one node's entry: its published state with the pods held there
// placed. Entries are never changed once stored.
type node struct {
	// kept are the verdicts found on this entry, by request (its Key):
	// the entry never changes, so a burst of pods of a few shapes runs
	// the allocator once per shape and node change, not once per pod.
	// First, and held in the entry rather than behind a pointer: a kept
	// verdict is read with the one memory access to the entry that every
	// Filter and Score of a cycle makes.
	kept verdicts
	// screened keeps, for the first keys, what rulesOut found on this
	// entry: bit 2k says it was asked of key k, bit 2k+1 that it rules the
	// request out (Candidates).
	screened atomic.Uint64
	pub      *published
	// since orders the state against the pods bound to the node
	// (View.seq): a pod bound after it is not in it. It is when the view
	// learnt the state, or, for a NodeResourceTopology object's, when the
	// view learnt that version of the object.
	since    uint64
	reserved []reservation
	st       *alloc.State // pub.j.State with reserved placed; nil when pub has none
	sum      summary
	free     int
	// bytes estimates the heap the entry holds (View.maxBytes).
	bytes int64
}

// reservation is a pod a scheduler reserved or bound on a node and the
// node has not yet admitted.
type reservation struct {
	uid string
	req alloc.Request // as the pod asks, before the node's settings
	// bound is when the pod was bound (View.seq), 0 until then; before
	// says it was bound before the view started, so in every state that
	// names no pods.
	bound  uint64
	before bool
}

// reservationID is the assignment id of a held pod in a node's state.
func reservationID(uid string) string { return "reserved/" + uid }

// SetNode records what n publishes: a change of its corepin annotations
// is decoded once and replaces the node's state, with the pods held there
// that it does not include placed again. A node that publishes none is
// judged by its NodeResourceTopology object (SetNRT) under its
// Koordinator labels, else forgotten (not corepin's to judge).
func (vw *View) SetNode(n *corev1.Node) {
	if !Publishes(n) {
		vw.SetPlain(n.Name, koordLabelsOf(n))
	} else {
		vw.SetPublished(n.Name, FingerprintOf(n), func() Annotations { return annotationsOf(n) })
	}
	vw.indexObj(n)
}

// SetPublished records that node name publishes the corepin annotations
// read returns (Annotations.Publishes true), named fp: read is called
// only when the view holds no state of that fingerprint, a published state
// nodes of the same fingerprint share; a node setting what it published
// before costs a comparison.
func (vw *View) SetPublished(name string, fp Fingerprint, read func() Annotations) {
	vw.mu.RLock()
	old := vw.nodes[name]
	_, plain := vw.plain[name]
	vw.mu.RUnlock()
	if old != nil && old.pub.fp == fp && !plain {
		return // unchanged: the common case, under the read lock alone
	}
	vw.mu.Lock()
	delete(vw.plain, name)
	old = vw.nodes[name]
	if old != nil && old.pub.fp == fp {
		vw.mu.Unlock()
		return
	}
	p := vw.decoded[fp]
	vw.mu.Unlock()
	if p == nil {
		p = decode(read(), fp) // outside the lock: the expensive part
	}
	vw.replace(name, old, p, 0)
}

// SetPlain records that node name publishes no corepin annotations: it is
// judged by its NodeResourceTopology object (SetNRT) under its
// Koordinator labels (bind policy, NUMA topology policy, NUMA allocate
// strategy: nodestate.LabelKoordCPUBindPolicy,
// nodestate.LabelKoordNUMATopologyPolicy,
// nodestate.LabelKoordNUMAAllocateStrategy; "" when absent), else not
// judged.
func (vw *View) SetPlain(name string, labels [3]string) {
	vw.mu.Lock()
	if vw.byCalls && vw.nrt[name] == nil {
		delete(vw.plain, name)
		vw.forgetNodeLocked(name)
		vw.mu.Unlock()
		return
	}
	vw.plain[name] = labels
	vw.mu.Unlock()
	vw.refreshNRT(name)
}

// replace makes p the published state of node name, whose entry was old
// when p was read, unless another update of the same state won the race;
// the held pods p does not include are placed on it again. since orders
// p against the node's pods' bindings (node.since), 0 for now.
func (vw *View) replace(name string, old *node, p *published, since uint64) {
	vw.mu.Lock()
	defer vw.mu.Unlock()
	cur := vw.nodes[name]
	if cur != old && cur != nil && cur.pub.fp == p.fp {
		return
	}
	vw.seq++
	if since == 0 {
		since = vw.seq
	}
	p = vw.acquireLocked(p) // before the release: a node republishing the same machine keeps it shared
	if cur != nil {
		vw.forgetNodeLocked(name)
	}
	var kept []reservation
	for _, r := range vw.held[name] {
		if included(p, since, r) {
			delete(vw.pods, r.uid)
			continue
		}
		kept = append(kept, r)
	}
	vw.setHeldLocked(name, kept)
	vw.putLocked(name, build(p, since, kept))
}

// included reports whether the state p, of a node since since, includes
// the held pod r: the node names r's UID among the pods it admitted or,
// when it names none (nodestate.Allocator.PodUIDs unset, a
// NodeResourceTopology object), r was bound before.
func included(p *published, since uint64, r reservation) bool {
	if p.admitted.names {
		return p.admitted.has(r.uid)
	}
	return r.before || r.bound != 0 && r.bound < since
}

// build is the entry of state p with the held pods placed on a copy, in
// order, each under the node's settings (nodestate.RequestOn) as the node
// will place it; one the node refuses, or that no longer fits, stays held
// but unplaced (the node will refuse the pod).
func build(p *published, since uint64, reserved []reservation) *node {
	n := &node{pub: p, since: since, reserved: reserved, st: p.j.State, free: p.j.Free}
	if p.err != nil || p.j.State == nil {
		n.bytes = n.weigh()
		return n
	}
	if len(reserved) > 0 {
		n.st = p.j.State.Clone()
		for _, r := range reserved {
			if req, ok := placeable(p, r); ok {
				n.st.Admit(req) // a refusal leaves the state as it was
			}
		}
		n.free = n.st.Pools().LS.Size()
		n.sum = summarize(n.st)
	} else {
		n.sum = p.sum
	}
	n.bytes = n.weigh()
	return n
}

// placeable is r's request as the node of state p places it, and whether
// it takes CPUs there: not when the node refuses its strategies, nor a
// shared pod's quota on a state that counts exclusive CPUs only.
func placeable(p *published, r reservation) (alloc.Request, bool) {
	req, _, err := nodestate.RequestOn(p.j.Settings, r.req)
	if err != nil || p.exclusiveOnly && req.QoS != alloc.LSE && req.QoS != alloc.LSR {
		return req, false
	}
	req.ID = reservationID(r.uid)
	return req, true
}

// DeleteNode forgets a node and the pods held there.
func (vw *View) DeleteNode(name string) {
	vw.mu.Lock()
	defer vw.mu.Unlock()
	vw.forgetNodeLocked(name)
	for _, r := range vw.held[name] {
		delete(vw.pods, r.uid)
	}
	delete(vw.held, name)
	delete(vw.plain, name)
}

// forgetNodeLocked forgets node name's entry and its hold on its
// published state; the pods held there stay. Called with vw.mu held.
func (vw *View) forgetNodeLocked(name string) {
	n := vw.nodes[name]
	if n == nil {
		return
	}
	vw.releaseLocked(n.pub)
	vw.bytes -= n.bytes
	delete(vw.nodes, name)
	if o := vw.objOf[name]; o != nil {
		delete(vw.byObj, o)
		delete(vw.objOf, name)
	}
}

// putLocked makes n node name's entry, in place of the one it had (which
// held the same published state, its hold passing to n) if any, within
// the view's bound: when n would pass it, every other entry is forgotten
// first (WithMaxBytes). Called with vw.mu held.
func (vw *View) putLocked(name string, n *node) {
	if old := vw.nodes[name]; old != nil {
		vw.bytes -= old.bytes
		delete(vw.nodes, name)
	}
	if vw.maxBytes > 0 && vw.bytes+n.bytes > vw.maxBytes {
		for other := range vw.nodes {
			vw.forgetNodeLocked(other)
		}
	}
	vw.nodes[name] = n
	vw.bytes += n.bytes
	if o := vw.objOf[name]; o != nil {
		vw.byObj[o] = n
	}
}

// setHeldLocked makes held node name's held pods. Called with vw.mu held.
func (vw *View) setHeldLocked(name string, held []reservation) {
	if len(held) == 0 {
		delete(vw.held, name)
		return
	}
	vw.held[name] = held
}

// get is the node's entry, nil when the view does not judge it.
func (vw *View) get(name string) *node {
	vw.mu.RLock()
	defer vw.mu.RUnlock()
	return vw.nodes[name]
}

// Reserve places the pod uid's request req on node name's state at once
// (under the node's settings: nodestate.RequestOn); the node keeps it
// there until its published state includes the pod (SetNode, SetNRT) or
// the pod is forgotten (Forget). A node the view does not judge takes it
// without a record; a refusal (the state changed since the pod was
// judged) is returned and nothing is recorded.
func (vw *View) Reserve(uid, name string, req alloc.Request) error {
	vw.mu.Lock()
	defer vw.mu.Unlock()
	n := vw.nodes[name]
	if n == nil || n.pub.err != nil || n.st == nil {
		return nil
	}
	if prev, ok := vw.pods[uid]; ok {
		vw.forgetLocked(uid, prev)
		n = vw.nodes[name]
	}
	if _, _, err := nodestate.RequestOn(n.pub.j.Settings, req); err != nil {
		return err
	}
	r := reservation{uid: uid, req: req}
	placed, ok := placeable(n.pub, r)
	if !ok {
		return nil // the state does not count shared pods' quotas
	}
	st := n.st.Clone()
	if _, err := st.Admit(placed); err != nil {
		return err
	}
	held := append(slices.Clone(vw.held[name]), r)
	vw.setHeldLocked(name, held)
	e := &node{pub: n.pub, since: n.since, reserved: held, st: st, sum: summarize(st), free: st.Pools().LS.Size()}
	e.bytes = e.weigh()
	vw.putLocked(name, e)
	vw.pods[uid] = name
	return nil
}

// Hold records that the pod uid, asking for req, is bound to node name
// and not yet admitted there: the node's state is judged with it placed
// (if it fits; else the node will refuse it) until the node's published
// state includes it or the pod is forgotten (Forget), whether or not the
// view judges the node yet. before says the pod was bound before the
// view started (a watch's first list): a state that names no pods is
// taken to include it. A pod held again on the same node with the same
// request changes nothing.
func (vw *View) Hold(uid, name string, req alloc.Request, before bool) {
	vw.mu.Lock()
	defer vw.mu.Unlock()
	if prev, ok := vw.pods[uid]; ok {
		if prev == name {
			for _, r := range vw.held[name] {
				if r.uid == uid && r.req.ID == req.ID && keyOf(r.req) == keyOf(req) {
					return
				}
			}
		}
		vw.forgetLocked(uid, prev)
	}
	vw.seq++
	r := reservation{uid: uid, req: req, bound: vw.seq, before: before}
	n := vw.nodes[name]
	if n != nil && included(n.pub, n.since, r) {
		return // the node names it already
	}
	held := append(slices.Clone(vw.held[name]), r)
	vw.setHeldLocked(name, held)
	vw.pods[uid] = name
	if n != nil {
		vw.putLocked(name, build(n.pub, n.since, held))
	}
}

// Bound records that the reserved pod uid was bound to its node.
func (vw *View) Bound(uid string) {
	vw.mu.Lock()
	defer vw.mu.Unlock()
	name, ok := vw.pods[uid]
	if !ok {
		return
	}
	held := slices.Clone(vw.held[name])
	vw.seq++
	for i := range held {
		if held[i].uid == uid {
			held[i].bound = vw.seq
		}
	}
	vw.setHeldLocked(name, held)
	if n := vw.nodes[name]; n != nil {
		// A binding changes no verdict: the entry's verdicts stay.
		e := &node{pub: n.pub, since: n.since, reserved: held, st: n.st, sum: n.sum, free: n.free, bytes: n.bytes}
		e.kept.copyFrom(&n.kept)
		e.screened.Store(n.screened.Load())
		vw.putLocked(name, e)
	}
}

// Forget releases the pod uid, if held: Unreserve, and a pod deleted or
// finished before its node published it.
func (vw *View) Forget(uid string) {
	vw.mu.Lock()
	defer vw.mu.Unlock()
	if name, ok := vw.pods[uid]; ok {
		vw.forgetLocked(uid, name)
	}
}

func (vw *View) forgetLocked(uid, name string) {
	delete(vw.pods, uid)
	held := slices.DeleteFunc(slices.Clone(vw.held[name]), func(r reservation) bool { return r.uid == uid })
	vw.setHeldLocked(name, held)
	if n := vw.nodes[name]; n != nil {
		vw.putLocked(name, build(n.pub, n.since, held))
	}
}

// Reserved is the number of pods held on nodes and not yet published
// there.
func (vw *View) Reserved() int {
	vw.mu.RLock()
	defer vw.mu.RUnlock()
	return len(vw.pods)
}

// Holding is the UIDs of the pods held on node name (Reserve, Hold) and
// not yet in its published state, in the order they came: those a
// refusal ending nodestate.ComingSuffix counts.
func (vw *View) Holding(name string) []string {
	vw.mu.RLock()
	defer vw.mu.RUnlock()
	var uids []string
	for _, r := range vw.held[name] {
		uids = append(uids, r.uid)
	}
	return uids
}

// weigh estimates the heap n holds besides its published state (counted
// once for the entries sharing it, published.weigh): the copy of the state
// its held pods are placed on, its summary and what it names.
func (n *node) weigh() int64 {
	w := int64(512)
	if n.st != nil && n.st != n.pub.j.State {
		w += stateBytesFixed + stateBytesPerCPU*int64(n.st.Topology().Present().Size())
	}
	if n.st != n.pub.j.State {
		w += 64 * int64(n.sum.assigned)
	}
	return w + 64*int64(len(n.reserved))
}
