package nodeview

import (
	"sync/atomic"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/kube/nodestate"
)

// Verdict is one node's answer for a pod, the same from every scheduler
// door.
type Verdict struct {
	// OK says the node takes the pod.
	OK bool
	// Reason says why not, when !OK, worded as the scheduler shows it
	// (nodestate.Reason, nodestate.Refusal), the same text on every node
	// refused for the same cause.
	Reason string
	// Unresolvable: preempting the node's pods would not help (the pod's
	// metadata or the node's state is bad, or the node refuses the
	// request even with nothing held).
	Unresolvable bool
	// Score is nodestate.Score of the placement, 0 to nodestate.MaxScore.
	Score int64
	// byAllocator says the allocator ran (the summary could not decide).
	byAllocator bool
}

// key is what a node entry's verdict depends on besides the entry: the
// request's shape (nodestate.Shape, its use of isolated CPUs included).
type key = nodestate.Shape

// keyOf is req's key.
func keyOf(req alloc.Request) key { return nodestate.ShapeOf(req) }

// judgeKept is judge, kept on the entry n (node.kept) under id (the
// View.Key of req) for Score and the next pod of the same shape while n
// lasts.
func judgeKept(n *node, req alloc.Request, reqErr error, id Key) Verdict {
	if n == nil || reqErr != nil || id < 0 {
		return judgeAs(n, req, reqErr, -1)
	}
	if v, ok := n.kept.load(id); ok {
		return v
	}
	v := judgeAs(n, req, reqErr, id)
	n.kept.store(id, v)
	return v
}

// judgeRuns counts judge's calls, for the tests and benchmarks of what
// is kept; allocatorRuns those of them the summary left to the allocator.
var judgeRuns, allocatorRuns atomic.Int64

// Runs is how many times the views of this process judged a node, and
// how many of those the allocator ran (the summary could not decide):
// what benchmarks report per pod. A verdict kept on a node's entry is
// not judged again.
func Runs() (judged, byAllocator int64) { return judgeRuns.Load(), allocatorRuns.Load() }

// judge answers req (reqErr: the pod's metadata did not read) on node n
// (nil: the node publishes no corepin state, not ours to judge): by n's
// summary where it proves a refusal, else by placing req on a copy of n's
// state as the node's plugin admits it.
func judge(n *node, req alloc.Request, reqErr error) Verdict { return judgeAs(n, req, reqErr, -1) }

// judgeAs is judge of a request whose View.Key is id (-1: none), by which
// the answers found on the node's empty state are kept
// (published.refusesEmpty).
func judgeAs(n *node, req alloc.Request, reqErr error, id Key) Verdict {
	judgeRuns.Add(1)
	s := screen(n, req, reqErr)
	if s.decided {
		return s.v
	}
	p := n.pub
	req, err := s.req, s.err
	v := Verdict{}
	if err == nil && n.sum.placesWhole(req) {
		// nodestate.Score reads only the placement's size and quality.
		pl := alloc.Placement{QoS: req.QoS, CPUs: cpuset.Range(0, req.CPUs-1), Quality: n.sum.wholeQuality()}
		return Verdict{OK: true, Score: nodestate.Score(pl, n.free)}
	}
	if err == nil {
		v.byAllocator = true
		allocatorRuns.Add(1)
		pl, aerr := n.st.Try(req)
		if aerr == nil {
			return Verdict{OK: true, Score: nodestate.Score(pl, n.free), byAllocator: true}
		}
		err = aerr
	}
	v.Reason = nodestate.Refusal(req, err, s.nodeDefault, p.j.BindLabel, p.j.PolicyLabel)
	if len(n.reserved) > 0 {
		if _, err := p.j.State.Try(req); err == nil {
			// The CPUs are free on what the node published: say who
			// takes them.
			v.Reason += nodestate.ComingSuffix
		}
	}
	v.Unresolvable = p.refusesEmpty(req, id)
	return v
}

// screened is what judge finds of a request on a node before the
// summary's proof of a place (placesWhole) or the allocator (screen).
type screened struct {
	// v is the verdict when decided: the node is not corepin's to judge,
	// nodestate.Prejudge decides, the node's settings refuse the request,
	// or the summary places a shared request.
	v       Verdict
	decided bool
	// req is the request under the node's settings (nodestate.RequestOn,
	// nodeDefault as it reports); err the refusal the summary proves, nil
	// when it proves none.
	req         alloc.Request
	nodeDefault bool
	err         error
}

// screen is judge's first steps for req (reqErr: the pod's metadata did
// not read) on node n (nil: not corepin's to judge): what is decided
// without placing anything. Candidates asks it too, so that a node it
// leaves out is one judge refuses.
func screen(n *node, req alloc.Request, reqErr error) screened {
	var stateErr error
	var hasState bool
	if n != nil {
		stateErr, hasState = n.pub.err, n.st != nil
	}
	if pv, ok := nodestate.Prejudge(n != nil, req, reqErr, stateErr, hasState); ok {
		return screened{v: Verdict{OK: pv.OK, Reason: pv.Reason, Unresolvable: pv.Unresolvable}, decided: true}
	}
	req, nodeDefault, err := nodestate.RequestOn(n.pub.j.Settings, req)
	if err != nil {
		return screened{v: Verdict{Reason: nodestate.Reason(req, err), Unresolvable: true}, decided: true}
	}
	err, decided := n.sum.shared(req)
	if decided && err == nil {
		return screened{v: Verdict{OK: true, Score: nodestate.Score(alloc.Placement{QoS: req.QoS}, n.free)}, decided: true}
	}
	if !decided {
		err = n.sum.refuses(req, n.pub.opts)
	}
	return screened{req: req, nodeDefault: nodeDefault, err: err}
}

// refusesEmpty reports whether the node of state p refuses req (as
// nodestate.RequestOn made it under p's settings) even with nothing held
// but its reserved CPUs; false when p does not say what it holds. The
// answer is kept on p's empty state for as long as it lasts: by id, the
// View.Key of the request before p's settings (-1: none), which names
// the same request on every node sharing the empty state (they publish
// the same settings: emptyKey), else by the request's shape.
func (p *published) refusesEmpty(req alloc.Request, id Key) bool {
	if p.j.Empty == nil {
		return false
	}
	e := p.empty
	if id >= 0 && id < verdictSlots {
		if v := e.byKey[id].Load(); v != 0 {
			return v == emptyRefuses
		}
	}
	refuses := e.refusesShape(req, p.opts)
	if id >= 0 && id < verdictSlots {
		v := uint32(emptyTakes)
		if refuses {
			v = emptyRefuses
		}
		e.byKey[id].Store(v)
	}
	return refuses
}

// Answers kept in empty.byKey (0: not asked yet).
const (
	emptyTakes   = 1
	emptyRefuses = 2
)

// refusesShape is refusesEmpty by the shape of req.
func (e *empty) refusesShape(req alloc.Request, o nodeOpts) bool {
	if e.sum.refuses(req, o) != nil {
		return true
	}
	k := nodestate.ShapeOf(req)
	if v, ok := e.refuses.Load(k); ok {
		return v.(bool)
	}
	_, err := e.st.Try(req)
	e.refuses.Store(k, err != nil)
	return err != nil
}
