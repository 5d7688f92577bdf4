package nodeview

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/corepin/corepin/alloc"
)

// Candidates calls keep(i) for each node(i), i below n (a scheduler's
// snapshot of its nodes), that JudgeNode may keep for a pod asking req
// (reqErr: its metadata did not read; k its Key): every node but those
// the view refuses the pod already, by the verdict kept on the node's
// entry or by what screen decides from the node's summary (free CPUs per
// NUMA node and socket, in whole cores), the first steps of the very
// judgement JudgeNode makes. A node the view has not decoded yet is
// kept. It stops when keep returns false.
//
// The nodes it leaves out are a subset of those JudgeNode refuses on the
// entries of now: a node whose state changes after the call may take the
// pod and is left out of this call's answer all the same. The view's
// lock is held for reading throughout: a node's entry cannot change
// during the scan.
func (vw *View) Candidates(req alloc.Request, reqErr error, k Key, n int, node func(int) *corev1.Node, keep func(int) bool) {
	vw.mu.RLock()
	defer vw.mu.RUnlock()
	for i := range n {
		obj := node(i)
		e, ok := vw.byObj[obj]
		if !ok {
			e = vw.nodes[obj.Name]
		}
		if !rulesOut(e, req, reqErr, k) && !keep(i) {
			return
		}
	}
}

// rulesOut reports whether judge refuses req on entry n without placing
// it: by n's verdict kept under k (k < 0: none), else by screen, whose
// answer n keeps for the first keys (node.screened).
func rulesOut(n *node, req alloc.Request, reqErr error, k Key) bool {
	if n == nil {
		return false
	}
	if k >= 0 {
		if v, ok := n.kept.load(k); ok {
			return !v.OK
		}
	}
	slot := k >= 0 && k < verdictSlots
	if slot {
		if bits := n.screened.Load() >> (2 * k); bits&1 != 0 {
			return bits&2 != 0
		}
	}
	s := screen(n, req, reqErr)
	out := !s.v.OK
	if !s.decided {
		out = s.err != nil
	}
	if slot {
		mask := uint64(1) << (2 * k)
		if out {
			mask |= 2 << (2 * k)
		}
		n.screened.Or(mask)
	}
	return out
}
