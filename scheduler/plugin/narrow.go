package plugin

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/corepin/corepin/kube/nodestate"
	"github.com/corepin/corepin/kube/nodeview"
)

// narrowing is what PreFilter keeps from one cycle to the next to name
// the nodes a pod may go to (Plugin.narrow).
type narrowing struct {
	mu sync.Mutex
	// pct is the profile's percentageOfNodesToScore (nil: unset, the
	// scheduler's adaptive default assumed).
	pct *int32
	// nodes is the fleet size the bounds were found for: a list of m of
	// them is worth naming when m < lo or hi <= m < nodes (worthAt).
	nodes, lo, hi int
	// named are the indices of the nodes named in a cycle, reused.
	named []int
	// sampled is where the next sample starts (promising).
	sampled int
}

// minFeasibleNodes and minFeasiblePercentage are kube-scheduler's
// floors of the nodes it looks for (pkg/scheduler: minFeasibleNodesToFind,
// minFeasibleNodesPercentageToFind).
const (
	minFeasibleNodes      = 100
	minFeasiblePercentage = 5
)

// feasibleToFind is how many feasible nodes kube-scheduler looks for
// among n before it stops filtering (pkg/scheduler's
// numFeasibleNodesToFind): pct of them, by default (nil or 0) 50% less 1%
// per 125 nodes, at least 5% and 100 nodes.
func feasibleToFind(pct *int32, n int) int {
	if n < minFeasibleNodes {
		return n
	}
	p := 0
	if pct != nil {
		p = int(*pct)
	}
	if p == 0 {
		p = max(50-n/125, minFeasiblePercentage)
	}
	return max(n*p/100, minFeasibleNodes)
}

// bounds makes lo and hi those of a fleet of n nodes (worthAt).
func (nw *narrowing) bounds(n int) {
	if nw.nodes == n {
		return
	}
	nw.nodes, nw.lo, nw.hi = n, 1, n
	for nw.lo < n && nw.worthAt(nw.lo) {
		nw.lo++
	}
	for nw.hi > nw.lo && nw.worthAt(nw.hi-1) {
		nw.hi--
	}
}

// worthAt reports whether naming m of the fleet's nodes (each one corepin
// may take, most of them one it takes) spares the scheduler work: it
// then looks for feasibleToFind(m) nodes among them, each visited by
// every Filter and then scored; among all the nodes, it looks for
// feasibleToFind(nodes), visiting about nodes/m times as many (those
// corepin refuses too), each feasible one scored. A visit and a score
// are taken to cost the same (kube-scheduler's profile at 5000 nodes:
// its Filters take about what its Scores take per node); naming a node
// costs nameCost hundredths of that (the set, the framework's copy of it
// and its look-up of each name), asking the view about one scanCost.
// Under the adaptive default the count looked for first grows with the
// list, then shrinks (to 5% from 5625 nodes on): at 5000 nodes a list of
// more than about half of them is not worth naming.
func (nw *narrowing) worthAt(m int) bool {
	n, all := nw.nodes, feasibleToFind(nw.pct, nw.nodes)
	with := 200*feasibleToFind(nw.pct, m) + nameCost*m + scanCost*n
	return with*m < 100*all*(n+m)
}

// nameCost and scanCost are the costs of naming a node and of asking
// the view about one, in hundredths of a node's visit and score by the
// scheduler (worthAt).
const (
	nameCost = 5
	scanCost = 3
)

// worth reports whether a list of m of the nodes, not all of them, is
// worth naming (worthAt: m < lo, or hi <= m < nodes).
func (nw *narrowing) worth(m int) bool { return m < nw.lo || m >= nw.hi && m < nw.nodes }

// narrow is the PreFilterResult of cycle c over the snapshot's nodes: the
// nodes but those the view's counts (or a verdict kept) prove corepin
// refuses the pod (View.Candidates), when naming them spares the
// scheduler work (narrowing.worthAt, asked first of a sample of the
// nodes: promising); nil (every node) for a pod that needs nothing of
// corepin (nodestate.NeedsAlignment), whose metadata does not read, in a
// fleet of fewer than 100 nodes (kube-scheduler filters every one of
// them: naming them would spare only the visits of those left out, and
// their status would be kube-scheduler's, not corepin's reason), or when
// no node is left (each node's Filter then says why).
//
// A node left out gets kube-scheduler's own status, "node(s) didn't
// satisfy plugin(s) [Corepin]", UnschedulableAndUnresolvable: preemption
// skips it, as it would after Filter, which judges the pods the node
// publishes, not those preemption would remove (no PreFilterExtensions).
func (p *Plugin) narrow(c *cycle, nodes []fwk.NodeInfo) *fwk.PreFilterResult {
	if c.err != nil || !nodestate.NeedsAlignment(c.req) || len(nodes) < minFeasibleNodes {
		return nil
	}
	nw := &p.narrowing
	nw.mu.Lock()
	defer nw.mu.Unlock()
	nw.bounds(len(nodes))
	if !nw.promising(p.view, c, nodes) {
		return nil
	}
	nw.named = nw.named[:0]
	left := len(nodes)
	p.view.Candidates(c.req, c.err, c.key, len(nodes), func(i int) *corev1.Node { left--; return nodes[i].Node() },
		func(i int) bool {
			nw.named = append(nw.named, i)
			// Stop once no count the rest could bring is worth naming.
			m := len(nw.named)
			return m < nw.lo || m+left >= nw.hi
		})
	m := len(nw.named)
	if left > 0 || m == 0 || !nw.worth(m) {
		return nil
	}
	names := make(sets.Set[string], m)
	for j, i := range nw.named {
		names.Insert(nodes[i].Node().Name)
		if c.example == nil && i != j {
			c.example = nodes[j].Node() // the first node left out
		}
	}
	if c.example == nil {
		c.example = nodes[m].Node()
	}
	c.leftOut = len(nodes) - m
	return &fwk.PreFilterResult{NodeNames: names}
}

// PostFilter says, when the pod fits none of the nodes PreFilter named,
// what corepin found lacking on those it left out, whose status is
// kube-scheduler's own ("node(s) didn't satisfy plugin(s) [Corepin]"):
// how many, and the reason of one of them as Filter words it. It makes
// no pod schedulable (Unschedulable, after kube-scheduler's preemption).
func (p *Plugin) PostFilter(_ context.Context, state fwk.CycleState, _ *corev1.Pod, _ fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	c, err := p.cycleOf(state)
	if err != nil || c.leftOut == 0 {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	v := p.view.JudgeNode(c.example, c.req, c.err, c.key)
	if v.OK {
		return nil, fwk.NewStatus(fwk.Unschedulable) // its state changed since
	}
	return nil, fwk.NewStatus(fwk.Unschedulable,
		fmt.Sprintf("corepin: %d node(s) left out before Filter, each refusing the pod (node %s: %s)", c.leftOut, c.example.Name, v.Reason))
}

// sampleNodes is how many nodes promising asks about, from where the
// last sample ended: the share of them a pod may go to tells, within a
// few percent, the share of the fleet.
const sampleNodes = 256

// promising reports whether a sample of the nodes says naming them is
// worth it for cycle c (worth of the sample's share of the fleet), so
// that a pod most nodes may take (at 5000 nodes, any pod more than half
// of them may take) costs the plugin a sample, not a scan of every node.
// A fleet of fewer than twice the sample is scanned whole.
func (nw *narrowing) promising(vw *nodeview.View, c *cycle, nodes []fwk.NodeInfo) bool {
	n := len(nodes)
	if n < 2*sampleNodes {
		return true
	}
	from, kept := nw.sampled%n, 0
	nw.sampled = from + sampleNodes
	vw.Candidates(c.req, c.err, c.key, sampleNodes, func(i int) *corev1.Node { return nodes[(from+i)%n].Node() },
		func(int) bool { kept++; return true })
	return nw.worth(kept * n / sampleNodes)
}
