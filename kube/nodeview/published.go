package nodeview

import (
	"crypto/sha256"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/kube/nodestate"
	"github.com/corepin/corepin/topology"
)

// Fingerprint names what a node publishes: nodes publishing the same
// share one decoded state, and a node setting what it published before
// decodes nothing (FingerprintOf; a caller reading nodes in another wire
// form names them its own way, with a prefix of its own).
type Fingerprint [sha256.Size]byte

// published is one state nodes published, decoded, with what is counted
// of it once: shared by the entries of every node publishing it (by
// Fingerprint, View.decoded) until none does.
type published struct {
	// fp is what the nodes published: an update of a Node that leaves
	// it alone (a heartbeat, a label) decodes nothing.
	fp  Fingerprint
	j   nodestate.Judged
	err error
	// opts are the node's options the summary reads.
	opts nodeOpts
	// exclusiveOnly: the state counts exclusive CPUs only (a
	// NodeResourceTopology object's), so a shared pod's quota is not
	// placed on it.
	exclusiveOnly bool
	empty         *empty // nil when the node does not say what it holds
	// admitted are the pods j.Admitted names (then nil): the node
	// admitted them.
	admitted uidSet
	// sum is j.State's summary, the entries' without held pods.
	sum summary
	// shares says that empty may be shared with other nodes publishing
	// the same machine, settings and reserved CPUs: emptyKey is theirs.
	shares   bool
	emptyKey [sha256.Size]byte
	// refs are the entries holding it; bytes estimates its heap
	// (View.maxBytes).
	refs  int
	bytes int64
}

// empty is a node's state with nothing held but its reserved CPUs
// (nodestate.Judged.Empty), what is counted of it once, and by request
// shape whether it refuses the request (published.refusesEmpty). It is
// shared by every node publishing the same machine, settings and reserved
// CPUs (View.adoptEmpty): a burst asks each of a fleet's few machine
// types once per shape, not each node.
type empty struct {
	st  *alloc.State
	sum summary
	// refuses memoizes, by request shape (nodestate.Shape), whether st
	// refuses it; byKey the same by the View.Key of the request before
	// the node's settings, for the first keys (emptyTakes,
	// emptyRefuses; 0 when not asked yet): one load, not a hash of the
	// shape's strings, for every node refusing a pod.
	refuses sync.Map
	byKey   [verdictSlots]atomic.Uint32
}

// Annotations are the corepin annotations a node carries, nil when
// absent (nodestate.AnnotationTopology, nodestate.AnnotationAssigned,
// nodestate.AnnotationNUMAFree, nodestate.AnnotationAllocator).
type Annotations struct {
	Topology, Assigned, NUMAFree, Allocator *string
}

// Publishes reports whether a carries a corepin state: a topology or the
// coarse free CPUs per NUMA node.
func (a Annotations) Publishes() bool { return a.Topology != nil || a.NUMAFree != nil }

// annotationsOf are n's corepin annotations.
func annotationsOf(n *corev1.Node) Annotations {
	get := func(k string) *string {
		if v, ok := n.Annotations[k]; ok {
			return &v
		}
		return nil
	}
	return Annotations{Topology: get(nodestate.AnnotationTopology), Assigned: get(nodestate.AnnotationAssigned),
		NUMAFree: get(nodestate.AnnotationNUMAFree), Allocator: get(nodestate.AnnotationAllocator)}
}

// FingerprintOf names what n publishes in its corepin annotations
// (View.SetPublished).
func FingerprintOf(n *corev1.Node) Fingerprint {
	h := sha256.New()
	h.Write([]byte("node annotations\x00"))
	for _, k := range []string{nodestate.AnnotationTopology, nodestate.AnnotationAssigned, nodestate.AnnotationNUMAFree, nodestate.AnnotationAllocator} {
		v, ok := n.Annotations[k]
		if !ok {
			h.Write([]byte("-\x00"))
			continue
		}
		// Length first: the values are not delimited.
		h.Write([]byte("+" + strconv.Itoa(len(v)) + "\x00"))
		h.Write([]byte(v))
	}
	return Fingerprint(h.Sum(nil))
}

// Publishes reports whether n publishes a corepin state in its
// annotations, without reading it.
func Publishes(n *corev1.Node) bool {
	_, topo := n.Annotations[nodestate.AnnotationTopology]
	_, free := n.Annotations[nodestate.AnnotationNUMAFree]
	return topo || free
}

// Changed reports whether what a node publishes for corepin differs
// between old and cur: its corepin annotations, or its Koordinator labels
// (read when it is judged by its NodeResourceTopology object). A
// heartbeat, another label or annotation, a condition changes nothing.
func Changed(old, cur *corev1.Node) bool {
	for _, k := range []string{nodestate.AnnotationTopology, nodestate.AnnotationAssigned, nodestate.AnnotationNUMAFree, nodestate.AnnotationAllocator} {
		a, okA := old.Annotations[k]
		b, okB := cur.Annotations[k]
		if okA != okB || a != b {
			return true
		}
	}
	return koordLabelsOf(old) != koordLabelsOf(cur)
}

// decode decodes the annotations a (fingerprint fp) through
// kube/nodestate.
func decode(a Annotations, fp Fingerprint) *published {
	p := &published{fp: fp}
	var pub nodestate.Published
	if a.Topology != nil {
		if pub, p.err = nodestate.DecodeTopology(*a.Topology, deref(a.Assigned), a.Allocator); p.err == nil {
			p.j, p.err = nodestate.JudgeTopology(pub)
		}
	} else if pub, p.err = nodestate.DecodeNUMAFree(deref(a.NUMAFree), a.Allocator); p.err == nil {
		p.j, p.err = nodestate.JudgeFree(pub.Free, nodestate.AnnotationNUMAFree, pub.Settings)
	}
	p.finish()
	if a.Topology != nil && p.err == nil && p.empty != nil { // a NUMA-free node's empty state names no machine to share by
		p.shares, p.emptyKey = true, emptyKey(*a.Topology, a.Allocator, p.empty.st)
	}
	return p
}

// finish counts what p's decoded state gives once: whether it places
// exclusive CPUs in whole cores, and the summary of its empty state.
func (p *published) finish() {
	if p.err != nil {
		return
	}
	p.admitted, p.j.Admitted = newUIDSet(p.j.Admitted), nil
	p.opts = nodeOpts{
		fullPCPUs:     slices.Contains(p.j.Settings.Options, alloc.OptFullPCPUsOnly),
		alignBySocket: slices.Contains(p.j.Settings.Options, alloc.OptAlignBySocket),
	}
	// The kubelet engine under full-pcpus-only still takes the free
	// threads of a core partly held (by reserved CPUs, or a workload
	// placed before the option): only the corepin engine's placements are
	// whole cores alone.
	p.opts.kubelet = p.j.Settings.Policy == alloc.PolicyKubelet
	p.opts.wholeCores = p.opts.fullPCPUs && !p.opts.kubelet
	// Kept to be judged on and cloned, never placed on: the room for
	// more assignments goes.
	if p.j.State != nil {
		p.j.State.Trim()
		p.sum = summarize(p.j.State)
	}
	if p.j.Empty != nil {
		p.j.Empty.Trim()
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
// go; the first such p shares its own. Called with vw.mu held, as p
// becomes a published state the view holds (acquireLocked).
func (vw *View) adoptEmpty(p *published) {
	if !p.shares {
		return
	}
	vw.emptyTick++
	if s, ok := vw.empties[p.emptyKey]; ok {
		s.refs++
		s.used = vw.emptyTick
		p.empty, p.j.Empty = s.e, s.e.st
		return
	}
	vw.empties[p.emptyKey] = &sharedEmpty{e: p.empty, refs: 1, used: vw.emptyTick}
	if len(vw.empties) <= MaxSharedEmpties {
		return
	}
	var oldest [sha256.Size]byte
	var oldestUse uint64
	for k, s := range vw.empties {
		if k != p.emptyKey && (oldestUse == 0 || s.used < oldestUse) {
			oldest, oldestUse = k, s.used
		}
	}
	delete(vw.empties, oldest)
}

// releaseEmpty says that the view no longer holds p: the empty state it
// shares is dropped once no published state holds it. Called with vw.mu
// held.
func (vw *View) releaseEmpty(p *published) {
	if p == nil || !p.shares {
		return
	}
	if s, ok := vw.empties[p.emptyKey]; ok && s.e == p.empty {
		if s.refs--; s.refs == 0 {
			delete(vw.empties, p.emptyKey)
		}
	}
}

// sharedEmpties is how many empty states vw shares.
func (vw *View) sharedEmpties() int {
	vw.mu.RLock()
	defer vw.mu.RUnlock()
	return len(vw.empties)
}

// acquireLocked is the published state the view holds for p's
// fingerprint, p itself unless a node published the same before (and
// still does): one more entry holds it. Called with vw.mu held.
func (vw *View) acquireLocked(p *published) *published {
	if d := vw.decoded[p.fp]; d != nil {
		d.refs++
		return d
	}
	if p.bytes != 0 {
		// Dropped since it was read (its last entry went): a copy, so
		// that adopting an empty state never changes what a judgement
		// in flight reads.
		c := *p
		p = &c
	}
	vw.adoptEmpty(p)
	p.refs, p.bytes = 1, p.weigh()
	vw.decoded[p.fp] = p
	vw.bytes += p.bytes
	return p
}

// releaseLocked says that one entry less holds p: it is dropped when none
// does. Called with vw.mu held.
func (vw *View) releaseLocked(p *published) {
	if p.refs--; p.refs > 0 {
		return
	}
	if vw.decoded[p.fp] == p {
		delete(vw.decoded, p.fp)
	}
	vw.releaseEmpty(p)
	vw.bytes -= p.bytes
}

// machineBytesPerCPU and machineBytesFixed estimate the heap a node's
// machine holds (its decoded topology and alloc's index of it), which its
// states share (and nodes of the same machine share with each other:
// kube/nodestate); stateBytesPerCPU and stateBytesFixed that of each
// alloc.State besides, per CPU of its machine and besides.
// TestBytesEstimate checks them against the heap measured.
const (
	machineBytesPerCPU = 400
	machineBytesFixed  = 8 << 10
	stateBytesPerCPU   = 32
	stateBytesFixed    = 8 << 10
)

// weigh estimates the heap p holds: its machine, counted although nodes
// of one machine share it, its states (an empty state shared with other
// machines counted again), its summaries and the pods it names.
func (p *published) weigh() int64 {
	w := int64(1024)
	var counted *topology.Topology
	for _, st := range []*alloc.State{p.j.State, p.j.Empty} {
		if st == nil {
			continue
		}
		cpus := int64(st.Topology().Present().Size())
		if st.Topology() != counted {
			w += machineBytesFixed + machineBytesPerCPU*cpus
			counted = st.Topology()
		}
		w += stateBytesFixed + stateBytesPerCPU*cpus
	}
	return w + 64*int64(p.admitted.len()+p.sum.assigned)
}
