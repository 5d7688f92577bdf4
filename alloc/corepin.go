package alloc

import (
	"cmp"
	"fmt"
	"slices"
)

// The corepin engine. It places an exclusive request in the smallest unit
// that can hold it, looking at L3 groups first, then NUMA nodes (and
// sockets), then sets of nodes chosen by count and distance. Inside a unit it
// fills children largest first until the rest fits one child, and gives
// the rest to the child that fits it most tightly (best fit), so whole free
// units stay whole. Whole free cores are preferred over cores another
// workload already uses, so an exclusive set shares no core where it can
// avoid it. Every decision is a few passes over the cores and the tree
// (O(cores + nodes^2 log nodes)), with buffers reused across decisions.

type corepinCall struct {
	s        *State
	r        *Request
	bind     Bind
	strategy NUMAStrategy
	allowN   []bool // node indexes the request may use; nil for all
	// cleanOnly counts only whole free cores, so nothing is shared.
	cleanOnly bool
	// light: the counts are lightCaps', not computeCaps' (see there).
	light bool
}

func (s *State) corepinAllocate(r *Request) (bitset, error) {
	ix := s.ix
	sc := s.sc
	cc := corepinCall{s: s, r: r, bind: r.Bind, strategy: r.NUMA}
	if s.opts.fullPCPUs && cc.bind == BindDefault {
		cc.bind = BindFullPCPUs
	}
	if s.opts.distributeCores && cc.bind == BindDefault {
		cc.bind = BindSpreadByPCPUs
	}
	if s.opts.distributeNUMA && cc.strategy == MostAllocated {
		cc.strategy = DistributeEvenly
	}
	n := r.CPUs
	if cc.bind == BindFullPCPUs && ix.uniformCores() && n%ix.tpc != 0 {
		c := string(BindFullPCPUs)
		if r.Bind != BindFullPCPUs {
			c = OptFullPCPUsOnly
		}
		return nil, Rejection{Constraint: c, CoreSize: ix.tpc,
			Reason: fmt.Sprintf("%d CPUs is not a whole number of cores (%d threads per core); request a multiple of %d", n, ix.tpc, ix.tpc)}
	}
	if len(r.Hint) > 0 {
		idx, err := s.hintIndexes(r.Hint)
		if err != nil {
			return nil, err
		}
		cc.allowN = make([]bool, len(ix.nodes))
		for _, i := range idx {
			cc.allowN[i] = true
		}
	}
	hintAllow := cc.allowN
	sc.taken.reset()
	clear(sc.takenCore)
	cc.firstCaps()
	total := sc.cap[0]
	if total < n {
		return nil, cc.capacityRejection(n, total)
	}
	k := fewestNodes(sc.nodeCap, n)
	minAff := fewestNodes(ix.nodeTotal, n)
	if minAff == 0 {
		minAff = len(ix.nodes)
	}
	maxNodes := len(ix.nodes)
	switch r.TopologyPolicy {
	case TopologySingleNUMANode:
		if k != 1 {
			return nil, s.numaRejection(r, sc.nodeCap)
		}
		maxNodes = 1
	case TopologyRestricted:
		maxNodes = minAff
		if k > minAff {
			// With align-by-socket, kubelet's Topology Manager also admits
			// the narrowest mask that stays within the fewest sockets:
			// admit it too, and place inside it.
			var aligned []int
			if s.opts.alignBySocket {
				aligned = s.socketAlignedMask(sc.nodeCap, n, minAff)
			}
			if aligned == nil {
				return nil, s.numaRejection(r, sc.nodeCap)
			}
			cc.restrict(aligned)
			hintAllow = cc.allowN
			k, maxNodes = fewestNodes(sc.nodeCap, n), len(aligned)
		}
	}
	// First pass: every free CPU counts, whole cores preferred. Second pass
	// (Default bind): only whole free cores count, so no core is shared. The
	// better of the two by NUMA nodes, sockets, L3 groups, shared cores wins;
	// on a tie the first, which leaves more whole cores free.
	// What the whole free cores of each node hold, before place restricts.
	sc.wholeNode = append(sc.wholeNode[:0], sc.nodeClean...)
	pick := cc.kubeletFirst(n, k)
	if pick.wins {
		if testHooks.won != nil {
			testHooks.won()
		}
		return pick.set, nil
	}
	cc.place(n, k)
	got := sc.taken.count()
	score := cc.score(sc.taken)
	if first := score; got == n && cc.bind == BindDefault && first.shared > 0 {
		// A whole-cores-only placement spans at least k2 nodes; where that
		// is more than the first pass spanned it cannot win, so skip it.
		whole := 0
		for _, w := range sc.wholeNode {
			whole += w
		}
		if k2 := fewestNodes(sc.wholeNode, n); whole >= n && k2 <= first.nodes && k2 <= maxNodes {
			sc.best.copyFrom(sc.taken)
			cc.cleanOnly, cc.allowN = true, hintAllow
			sc.taken.reset()
			clear(sc.takenCore)
			cc.computeCaps()
			cc.place(n, k2)
			second := cc.score(sc.taken)
			if sc.taken.count() != n || second.nodes > maxNodes || !second.less(first) {
				sc.taken.copyFrom(sc.best)
			} else {
				score = second
			}
		}
	}
	if got != n {
		return nil, reject(string(cc.bind), "%d CPUs requested, but only %d could be taken as whole cores; request a different size", n, got)
	}
	return s.kubeletGuard(r, sc.taken, score, pick), nil
}

// kubeletPick is kubelet's placement of a request as kubeletGuard weighs
// it, when made before the corepin engine's (kubeletFirst).
type kubeletPick struct {
	made bool      // set and score hold kubelet's placement (set nil: it failed)
	wins bool      // it wins the guard whatever the corepin engine places
	set  bitset    // kubeAllocate's answer
	q    spanScore // its span
}

// kubeletFirst makes kubelet's placement before the corepin engine's where
// the guard will weigh it and the corepin engine's placement will share
// cores (at least atLeast, bounded from the counts): when kubelet's shares
// fewer, the guard keeps kubelet's whatever the corepin engine would
// place, so that placement is never made. On a busy node this is the usual
// case for requests larger than one L3 group's free whole cores: the
// corepin engine keeps to the fewest NUMA nodes, and kubelet takes whole
// cores first.
//
// The bound: the corepin engine's first pass places inside k nodes (one,
// for placeFinest, which on a machine whose nodes lie in sockets finds a
// node or a unit inside one; the k nodes chooseNodes returns otherwise);
// at most the k largest counts of CPUs in whole free cores come from whole
// cores, and every other CPU comes from a core with a CPU that is not free,
// so reserved or held (every CPU is allowed), which makes that core shared;
// each such core gives at most tpc-1 CPUs. Its second pass (whole cores
// only) needs more than k nodes then, so it is not tried. The guard's
// unbeatable test fails, as kubelet's placement shares at least the cores
// it counts. So kubelet's placement sharing fewer cores is not matched on
// that metric, and the guard takes it.
func (cc *corepinCall) kubeletFirst(n, k int) kubeletPick {
	s, ix, sc := cc.s, cc.s.ix, cc.s.sc
	if testHooks.slow || !ix.plainShares || ix.tpc < 2 || !guarded(cc.r) || cc.bind != BindDefault || cc.allowN != nil ||
		(k > 1 && cc.strategy != MostAllocated) {
		return kubeletPick{}
	}
	var buf [64]int                   // topSum's: no allocation for the usual few nodes
	clean := slices.Max(sc.nodeClean) // the cheap test first: it settles small requests
	if clean >= n {
		return kubeletPick{}
	}
	if k > 1 {
		if clean = topSum(sc.nodeClean, k, buf[:0]); clean >= n {
			return kubeletPick{}
		}
	}
	atLeast := (n - clean + ix.tpc - 2) / (ix.tpc - 1)
	theirs, err := s.kubeAllocate(cc.r)
	if err != nil || theirs.count() != n {
		return kubeletPick{made: true}
	}
	// Spanned with its node ids: where it wins, the placement's quality
	// reads them (State.quality) instead of spanning it again.
	sc.nodeIDs.reset()
	q := s.span(theirs, sc.nodeIDs)
	wins := q.shared < atLeast
	sc.spanKnown, sc.knownSpan = wins, q
	return kubeletPick{made: true, wins: wins, set: theirs, q: q}
}

// guarded reports whether kubeletGuard weighs r: a request kubelet can
// express.
func guarded(r *Request) bool {
	return r.Bind == BindDefault && r.Exclusive == ExclusiveNone && r.NUMA == MostAllocated && len(r.Hint) == 0
}

// unbeatable reports whether a placement of n CPUs scoring q is as good as
// any placement could be on every metric: no more NUMA nodes, L3 groups,
// sockets and shared cores than the fewest whose free CPUs could hold n.
func (s *State) unbeatable(q spanScore, n int) bool {
	// Cheapest bounds first: each one that fails settles it.
	if q.nodes > fewestNodes(s.freeNode, n) {
		return false
	}
	if q.l3 > 0 && q.l3 > fewestNodes(s.freeL3, n) {
		return false
	}
	ix := s.ix
	if q.sockets > 1 {
		perSocket := s.sc.socketFree[:0]
		for range ix.numSockets {
			perSocket = append(perSocket, 0)
		}
		for core, free := range s.freeCore {
			perSocket[ix.coreSocket[core]] += int(free)
		}
		s.sc.socketFree = perSocket
		if q.sockets > fewestNodes(perSocket, n) {
			return false
		}
	}
	if q.shared > 0 {
		// Whole free cores share nothing; past them, every partly held
		// core used shares one.
		whole := 0
		partial := s.sc.partialFree[:0]
		for core, free := range s.freeCore {
			switch {
			case free == ix.cores[core].size:
				whole += int(free)
			case free > 0:
				partial = append(partial, int(free))
			}
		}
		s.sc.partialFree = partial
		if n <= whole || q.shared > fewestNodes(partial, n-whole) {
			return false
		}
	}
	return true
}

// kubeletGuard keeps corepin's promise to be at least as well aligned as
// kubelet's static policy on every metric, not only in corepin's ranking:
// where corepin's placement is not already the best possible, the one
// kubelet would make on the same state with the same options is computed,
// and kept instead when corepin's does not match or beat it on each of
// NUMA nodes, sockets, L3 groups and shared cores. (corepin sometimes buys a
// NUMA node or an L3 group with a shared core; kubelet never gets there,
// and a user comparing the two must never see corepin lose a metric.) Only
// requests kubelet can express are guarded.
// pick is kubelet's placement where kubeletFirst made it already.
func (s *State) kubeletGuard(r *Request, ours bitset, q spanScore, pick kubeletPick) bitset {
	if !guarded(r) {
		return ours
	}
	if s.unbeatable(q, ours.count()) {
		return ours
	}
	if !pick.made {
		set, err := s.kubeAllocate(r)
		if err != nil {
			return ours
		}
		pick.set, pick.q = set, s.span(set, nil)
	}
	theirs, k := pick.set, pick.q
	if theirs == nil || theirs.count() != ours.count() {
		return ours
	}
	if q == k {
		// Aligned alike: keep the one that leaves more whole NUMA nodes,
		// L3 groups and cores free for the next request.
		if s.leftWhole(theirs).more(s.leftWhole(ours)) {
			return theirs
		}
		return ours
	}
	if q.nodes <= k.nodes && q.sockets <= k.sockets && q.l3 <= k.l3 && q.shared <= k.shared {
		return ours
	}
	return theirs
}

// wholeLeft counts the NUMA nodes, L3 groups and cores a placement would
// leave entirely free.
type wholeLeft struct{ nodes, l3, cores int }

func (a wholeLeft) more(b wholeLeft) bool {
	return cmp.Or(cmp.Compare(a.nodes, b.nodes), cmp.Compare(a.l3, b.l3), cmp.Compare(a.cores, b.cores)) > 0
}

// wholeFree counts the NUMA nodes, L3 groups and cores entirely free now.
func (s *State) wholeFree() wholeLeft {
	ix := s.ix
	var w wholeLeft
	s.work += int64(len(s.freeNode) + len(s.freeL3) + len(s.freeCore))
	for n, f := range s.freeNode {
		if int(f) == ix.nodeTotal[n] {
			w.nodes++
		}
	}
	for l, f := range s.freeL3 {
		if int(f) == ix.l3Total[l] {
			w.l3++
		}
	}
	for c, f := range s.freeCore {
		if f == ix.cores[c].size {
			w.cores++
		}
	}
	return w
}

// leftWhole returns what taking b would leave entirely free: the units
// entirely free now that b does not touch.
func (s *State) leftWhole(b bitset) wholeLeft {
	ix, sc := s.ix, s.sc
	w := s.wholeFree()
	b.each(func(c int) {
		if n := ix.cpuNode[c]; sc.markNode[n] == 0 {
			sc.markNode[n] = 1
			if int(s.freeNode[n]) == ix.nodeTotal[n] {
				w.nodes--
			}
		}
		if l := ix.cpuL3[c]; l >= 0 && sc.markL3[l] == 0 {
			sc.markL3[l] = 1
			if int(s.freeL3[l]) == ix.l3Total[l] {
				w.l3--
			}
		}
		if core := ix.cpuCore[c]; sc.markCore[core] == 0 {
			sc.markCore[core] = 1
			if s.freeCore[core] == ix.cores[core].size {
				w.cores--
			}
		}
	})
	clear(sc.markNode)
	clear(sc.markL3)
	clear(sc.markCore)
	return w
}

// place runs one placement of n CPUs needing k nodes into sc.taken.
func (cc *corepinCall) place(n, k int) {
	sc := cc.s.sc
	switch {
	case k > 1 && cc.strategy == DistributeEvenly:
		if !cc.distribute(n) {
			cc.restrict(cc.s.chooseNodes(sc.nodeCap, n, MostAllocated))
			cc.fill(0, n)
		}
	case k == 1 && cc.strategy == LeastAllocated:
		// The emptiest node; on a tie, the one in the emptier socket.
		ix := cc.s.ix
		best := -1
		for i, c := range sc.nodeCap {
			if c < n {
				continue
			}
			if best < 0 || cmp.Or(cmp.Compare(c, sc.nodeCap[best]),
				cmp.Compare(sc.socketCap[ix.coreSocket[ix.nodeCores[i][0]]], sc.socketCap[ix.coreSocket[ix.nodeCores[best][0]]])) > 0 {
				best = i
			}
		}
		cc.restrict([]int{best})
		cc.placeFinest(n)
	case k == 1:
		cc.placeFinest(n)
	default:
		cc.restrict(cc.s.chooseNodes(sc.nodeCap, n, cc.strategy))
		cc.fill(0, n)
	}
}

// spanScore is what two candidate placements are ranked by.
type spanScore struct{ nodes, sockets, l3, shared int }

func (a spanScore) less(b spanScore) bool {
	return cmp.Or(cmp.Compare(a.nodes, b.nodes), cmp.Compare(a.sockets, b.sockets), cmp.Compare(a.l3, b.l3), cmp.Compare(a.shared, b.shared)) < 0
}

func (cc *corepinCall) score(b bitset) spanScore {
	return cc.s.span(b, nil)
}

// span counts the NUMA nodes, sockets, L3 groups and shared cores (cores
// whose other CPUs another workload or the reserved set holds) of the CPUs
// of b, adding the node ids spanned to nodes when it is not nil.
func (s *State) span(b bitset, nodes bitset) spanScore {
	ix, sc := s.ix, s.sc
	var q spanScore
	b.each(func(c int) {
		if c >= len(ix.cpuAt) || ix.cpuAt[c].core < 0 {
			return
		}
		ci := ix.cpuAt[c]
		if n := ci.node; sc.markNode[n] == 0 {
			sc.markNode[n] = 1
			q.nodes++
			if nodes != nil && ix.nodes[n] >= 0 { // not the no-node group
				nodes.set(int(ix.nodes[n]))
			}
		}
		if so := ci.socket; sc.markSocket[so] == 0 {
			sc.markSocket[so] = 1
			q.sockets++
		}
		if l := ci.l3; l >= 0 && sc.markL3[l] == 0 {
			sc.markL3[l] = 1
			q.l3++
		}
		if core := ci.core; sc.markCore[core] == 0 {
			sc.markCore[core] = 1
			for _, sib := range ix.coreCPUs[core] {
				if !b.has(sib) && (s.used.has(sib) || s.reserved.has(sib)) {
					q.shared++
					break
				}
			}
		}
	})
	clear(sc.markNode)
	clear(sc.markSocket)
	clear(sc.markL3)
	clear(sc.markCore)
	return q
}

// uniformCores reports whether every core has the same number of CPUs.
func (ix *topoIndex) uniformCores() bool { return ix.uniform }

// firstCaps counts what the first pass can take: lightCaps where they
// suffice for now, computeCaps otherwise.
func (cc *corepinCall) firstCaps() {
	r := cc.r
	if !testHooks.slow && cc.bind == BindDefault && r.Exclusive == ExclusiveNone && cc.allowN == nil {
		cc.lightCaps()
		return
	}
	cc.computeCaps()
}

// lightCaps is computeCaps for the first pass of a plain request (Default
// bind, no exclusive level, every node allowed) counted only as far as a
// decision usually reads them: per NUMA node and socket, per L3 group of
// the tree (its level lvL3, the leaves' parents) and at the root. The
// leaves and the levels between are left as they were; cc.light says so.
// Most decisions then read no more (one node holds the request and one of
// its L3 groups does too: placeFinest fills the group's leaves itself,
// lightFill), or count again anyway (restrict, the second pass); where
// they need more, placeFinest calls computeCaps. It sums each L3 group's
// cores in registers (a group's cores share its node and socket), storing
// nothing per core and clearing none of the tree's counts.
func (cc *corepinCall) lightCaps() {
	s, ix, sc := cc.s, cc.s.ix, cc.s.sc
	capT, cleanT, freeCore, cores := sc.cap, sc.cleanT, s.freeCore, ix.cores
	nodeCap, nodeClean, socketCap := sc.nodeCap, sc.nodeClean, sc.socketCap
	clear(nodeCap)
	clear(nodeClean)
	clear(socketCap)
	total := 0
	for _, t := range ix.byLevel[lvL3] {
		free, clean := 0, 0
		list := ix.tree[t].cores
		for _, core := range list {
			f := freeCore[core]
			free += int(f)
			clean += int(f) * b2i(f == cores[core].size)
		}
		capT[t], cleanT[t] = free, clean
		ci := cores[list[0]]
		nodeCap[ci.node] += free
		nodeClean[ci.node] += clean
		socketCap[ci.socket] += free
		total += free
	}
	capT[0] = total
	cc.light = true
}

// lightFill fills m below L3 group t after lightCaps: the leaves of t's
// cores counted as capPlain counts them, then fill.
func (cc *corepinCall) lightFill(t int32, m int) {
	s, ix, sc := cc.s, cc.s.ix, cc.s.sc
	for _, core := range ix.tree[t].cores {
		ci := ix.cores[core]
		free := int(s.freeCore[core]) - sc.takenCore[core]
		cl := free * b2i(s.freeCore[core] == ci.size) * b2i(sc.takenCore[core] == 0)
		sc.ec[core], sc.clean[core] = free, cl
		sc.cap[ci.leaf], sc.cleanT[ci.leaf], sc.coresT[ci.leaf] = free, cl, b2i(free != 0)
	}
	cc.fill(t, m)
}

// computeCaps fills per-core eligible counts and the tree aggregates: one
// pass over the cores sets the leaves, one pass over the tree from the
// last node up adds each node into its parent (a child always comes after
// its parent).
func (cc *corepinCall) computeCaps() {
	ix, sc := cc.s.ix, cc.s.sc
	cc.light = false
	wholeOnly := cc.bind == BindFullPCPUs || cc.cleanOnly
	spread := cc.bind == BindSpreadByPCPUs
	pcpu := cc.r.Exclusive == ExclusivePCPULevel
	numaEx := cc.r.Exclusive == ExclusiveNUMANodeLevel
	clear(sc.cap)
	clear(sc.cleanT)
	clear(sc.coresT)
	clear(sc.nodeCap)
	clear(sc.nodeClean)
	clear(sc.socketCap)
	plain := !wholeOnly && !spread && !pcpu && !numaEx
	if allow := cc.allowN; allow != nil {
		// Only the allowed nodes' cores can hold anything.
		clear(sc.ec)
		clear(sc.clean)
		for node, ok := range allow {
			switch {
			case !ok:
			case plain:
				cc.capPlain(ix.nodeCores[node])
			default:
				for _, core := range ix.nodeCores[node] {
					cc.capCore(int(core), wholeOnly, spread, pcpu, numaEx)
				}
			}
		}
	} else if plain {
		cc.capPlain(ix.coreIDs)
	} else {
		for core := range ix.coreCPUs {
			cc.capCore(core, wholeOnly, spread, pcpu, numaEx)
		}
	}
	capT, cleanT, coresT := sc.cap, sc.cleanT, sc.coresT
	for t := len(ix.parent) - 1; t > 0; t-- {
		p := ix.parent[t]
		capT[p] += capT[t]
		cleanT[p] += cleanT[t]
		coresT[p] += coresT[t]
	}
}

// capCore sets one core's eligible and whole-free counts, on its leaf of
// the tree among others (see computeCaps).
func (cc *corepinCall) capCore(core int, wholeOnly, spread, pcpu, numaEx bool) {
	s, ix, sc := cc.s, cc.s.ix, cc.s.sc
	fc, tk := int(s.freeCore[core]), sc.takenCore[core]
	free, whole := fc-tk, fc == len(ix.coreCPUs[core]) && tk == 0
	node := ix.coreNode[core]
	if (cc.allowN != nil && !cc.allowN[node]) || (pcpu && s.pcpuHeld(core) > 0) || (numaEx && s.numaHeld(node) > 0) {
		free, whole = 0, false
	}
	if wholeOnly && !whole {
		free = 0
	}
	clean := 0
	if whole {
		clean = free
		if spread {
			clean = 1
		}
	}
	sc.ec[core], sc.clean[core] = free, clean
	if free == 0 {
		return
	}
	leaf := ix.coreLeaf[core]
	sc.cap[leaf], sc.cleanT[leaf], sc.coresT[leaf] = free, clean, 1
	sc.nodeCap[node] += free
	sc.socketCap[ix.coreSocket[core]] += free
	if whole {
		sc.nodeClean[node] += free
	}
}

// capPlain is capCore for the cores listed, where no exclusive level
// applies and any free CPU counts (Default bind): the first pass of most
// decisions and its restriction to the nodes chosen, written out as one
// loop for speed, without branches on a core's state (whether a core is
// whole is as good as random on a busy node, and a mispredicted branch
// per core cost more than the loop's work): a core with nothing free
// writes zeros where capCore writes nothing, onto counters that start at
// zero.
func (cc *corepinCall) capPlain(list []int32) {
	s, sc := cc.s, cc.s.sc
	ec, clean, taken, freeCore := sc.ec, sc.clean, sc.takenCore, s.freeCore
	capT, cleanT, coresT := sc.cap, sc.cleanT, sc.coresT
	nodeCap, nodeClean, socketCap := sc.nodeCap, sc.nodeClean, sc.socketCap
	cores := s.ix.cores
	for _, core := range list {
		ci := cores[core]
		fc, tk := freeCore[core], taken[core]
		free := int(fc) - tk
		cl := free * (b2i(fc == ci.size) & b2i(tk == 0))
		ec[core], clean[core] = free, cl
		capT[ci.leaf], cleanT[ci.leaf], coresT[ci.leaf] = free, cl, b2i(free != 0)
		nodeCap[ci.node] += free
		socketCap[ci.socket] += free
		nodeClean[ci.node] += cl
	}
}

func (cc *corepinCall) restrict(nodes []int) {
	allow := cc.s.sc.allow
	if len(allow) > 0 && len(cc.allowN) > 0 && &allow[0] == &cc.allowN[0] {
		allow = cc.s.sc.allow2 // restricting a restriction: keep the old one readable
	}
	clear(allow)
	for _, n := range nodes {
		if n >= 0 && (cc.allowN == nil || cc.allowN[n]) {
			allow[n] = true
		}
	}
	cc.allowN = allow
	cc.computeCaps()
}

// childrenNeeded is how many children of t, largest first, hold m.
func (cc *corepinCall) childrenNeeded(t int32, m int) int {
	sc := cc.s.sc
	tn := &cc.s.ix.tree[t]
	if tn.level >= lvL3 {
		return 0 // cores: counted by the clean test instead
	}
	sc.ints = sc.ints[:0]
	for _, ch := range tn.children {
		if c := sc.cap[ch]; c > 0 {
			sc.ints = append(sc.ints, c)
		}
	}
	slices.SortFunc(sc.ints, func(a, b int) int { return cmp.Compare(b, a) })
	sum := 0
	for i, c := range sc.ints {
		sum += c
		if sum >= m {
			return i + 1
		}
	}
	return len(sc.ints) + 1
}

// fit is the key fitKey orders units that can hold m by: those that need
// no shared core, then those spanning the fewest children, then the
// tightest fit, then the fullest NUMA node, then the fullest socket (so
// that packing leaves the emptier socket whole), then the lowest tree
// index.
type fit struct {
	t                               int32
	unclean                         bool
	needed, cap, nodeCap, socketCap int
}

func (cc *corepinCall) fitOf(t int32, m int) fit {
	sc := cc.s.sc
	ix := cc.s.ix
	return fit{t: t, unclean: sc.cleanT[t] < m, needed: cc.childrenNeeded(t, m), cap: sc.cap[t], nodeCap: cc.nodeCapOf(t),
		socketCap: sc.socketCap[ix.treeSocket[t]]}
}

// compare orders fits as fit says. (Written out rather than with cmp.Or,
// which evaluates every comparison: placeFinest weighs every L3 group of
// the machine with it.)
func (a fit) compare(b fit) int {
	if a.unclean != b.unclean {
		return cmpBool(a.unclean, b.unclean)
	}
	if a.needed != b.needed {
		return cmp.Compare(a.needed, b.needed)
	}
	if a.cap != b.cap {
		return cmp.Compare(a.cap, b.cap)
	}
	if a.nodeCap != b.nodeCap {
		return cmp.Compare(a.nodeCap, b.nodeCap)
	}
	if a.socketCap != b.socketCap {
		return cmp.Compare(a.socketCap, b.socketCap)
	}
	return cmp.Compare(a.t, b.t)
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}

// nodeCapOf is the eligible capacity of the NUMA node holding tree node t,
// so that among equal fits the one in the fuller node wins.
func (cc *corepinCall) nodeCapOf(t int32) int {
	return cc.s.sc.nodeCap[cc.s.ix.treeNode[t]]
}

// placeFinest takes m from the single tightest unit that holds it, trying
// L3 groups before NUMA nodes and sockets.
func (cc *corepinCall) placeFinest(m int) {
	ix, sc := cc.s.ix, cc.s.sc
	for _, level := range []int{lvL3, lvInner, lvOuter} {
		var best fit
		found := false
		for _, t := range ix.byLevel[level] {
			if sc.cap[t] < m {
				continue
			}
			if f := cc.fitOf(t, m); !found || f.compare(best) < 0 {
				best, found = f, true
			}
		}
		switch {
		case found && cc.light:
			cc.lightFill(best.t, m)
			return
		case found:
			cc.fill(best.t, m)
			return
		case cc.light:
			cc.computeCaps() // the levels above L3 groups: counted now
		}
	}
	cc.fill(0, m)
}

// fill takes m eligible CPUs below tree node t.
func (cc *corepinCall) fill(t int32, m int) {
	ix, sc := cc.s.ix, cc.s.sc
	tn := &ix.tree[t]
	if tn.level == lvCore {
		cc.takeCore(tn.key, m, false)
		return
	}
	if tn.level == lvL3 && cc.bind == BindSpreadByPCPUs {
		cc.spread(tn, m)
		return
	}
	start := len(sc.kids)
	for _, ch := range tn.children {
		if sc.cap[ch] > 0 {
			sc.kids = append(sc.kids, ch)
		}
	}
	kids := sc.kids[start:]
	defer func() { sc.kids = sc.kids[:start] }()
	// Choose the children: the one that fits the rest most tightly, else
	// the largest whole, until the rest fits one.
	chosen, rem := 0, m
	for rem > 0 && chosen < len(kids) {
		rest := kids[chosen:]
		best := -1
		var bestFit fit
		for i, ch := range rest {
			if sc.cap[ch] < rem {
				continue
			}
			if f := cc.fitOf(ch, rem); best < 0 || f.compare(bestFit) < 0 {
				best, bestFit = i, f
			}
		}
		if best < 0 {
			best = 0
			for i, ch := range rest {
				if b := rest[best]; larger(sc, ch, b) {
					best = i
				}
			}
		}
		rest[0], rest[best] = rest[best], rest[0]
		rem -= min(rem, sc.cap[rest[0]])
		chosen++
	}
	// Share m among them in tiers, each child topped up to a tier's limit
	// before the next tier: CPUs of whole free cores first, so that
	// spanning the same children shares as few cores as possible; under
	// SpreadByPCPUs one thread of each whole free core, then one thread of
	// every other core, then second threads, so that the set spans as many
	// cores as the chosen children hold before it doubles up on any.
	as := len(sc.amt)
	defer func() { sc.amt = sc.amt[:as] }()
	for range kids[:chosen] {
		sc.amt = append(sc.amt, 0)
	}
	amt := sc.amt[as:]
	tiers := [...][]int{sc.cleanT, sc.coresT, sc.cap}
	if cc.bind != BindSpreadByPCPUs {
		tiers[1] = sc.cleanT // no middle tier
	}
	left := m
	for _, limit := range tiers {
		for i, ch := range kids[:chosen] {
			a := min(max(limit[ch]-amt[i], 0), left)
			amt[i] += a
			left -= a
		}
	}
	for i, ch := range kids[:chosen] {
		if amt[i] > 0 {
			cc.fill(ch, amt[i])
		}
	}
}

// larger orders the children fill takes whole: the most eligible CPUs,
// then the most in whole free cores, then the lowest tree index. (Written
// out rather than with cmp.Or, which evaluates every comparison: this runs
// for every pair of children a fill weighs.)
func larger(sc *scratch, a, b int32) bool {
	if sc.cap[a] != sc.cap[b] {
		return sc.cap[a] > sc.cap[b]
	}
	if sc.cleanT[a] != sc.cleanT[b] {
		return sc.cleanT[a] > sc.cleanT[b]
	}
	return a < b
}

// takeCore takes up to m eligible CPUs of a core, lowest ids first.
func (cc *corepinCall) takeCore(core, m int, _ bool) int {
	s, ix, sc := cc.s, cc.s.ix, cc.s.sc
	got := 0
	for _, c := range ix.coreCPUs[core] {
		if got == m {
			break
		}
		if s.isFree(c) && !sc.taken.has(c) {
			sc.taken.set(c)
			sc.takenCore[core]++
			got++
		}
	}
	return got
}

// spread takes one CPU per core first (whole free cores before others),
// then second threads, for SpreadByPCPUs.
func (cc *corepinCall) spread(tn *tnode, m int) {
	sc := cc.s.sc
	start := len(sc.kids)
	for _, core := range tn.cores {
		if sc.ec[core] > 0 {
			sc.kids = append(sc.kids, core)
		}
	}
	cores := sc.kids[start:]
	defer func() { sc.kids = sc.kids[:start] }()
	slices.SortFunc(cores, func(a, b int32) int {
		return cmp.Or(cmp.Compare(sc.clean[b], sc.clean[a]), cmp.Compare(a, b))
	})
	for round := 0; m > 0 && round < cc.s.ix.tpc; round++ {
		for _, core := range cores {
			if m == 0 {
				return
			}
			if sc.takenCore[core] == round && sc.ec[core] > round {
				m -= cc.takeCore(int(core), 1, false)
			}
		}
	}
}

// distribute splits n evenly over the fewest nodes that can each take an
// equal share (whole cores under FullPCPUs). It reports false when no such
// split exists.
func (cc *corepinCall) distribute(n int) bool {
	ix, sc := cc.s.ix, cc.s.sc
	unit := 1
	if cc.bind == BindFullPCPUs {
		unit = ix.tpc
	}
	units := n / unit
	caps := slices.Clone(sc.nodeCap)
	order := make([]int, 0, len(caps))
	for i, c := range caps {
		if c > 0 {
			order = append(order, i)
		}
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Or(cmp.Compare(caps[b], caps[a]), cmp.Compare(a, b)) })
	for k := 2; k <= len(order); k++ {
		ok := true
		for i := range k {
			share := (units/k + b2i(i < units%k)) * unit
			if caps[order[i]] < share {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		set := slices.Clone(order[:k])
		allow := cc.allowN
		for i, nd := range set {
			share := (units/k + b2i(i < units%k)) * unit
			cc.allowN = allow
			cc.restrict([]int{nd})
			cc.placeFinest(share)
		}
		return true
	}
	return false
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (cc *corepinCall) capacityRejection(n, total int) error {
	r := cc.r
	switch {
	case r.Exclusive == ExclusivePCPULevel:
		return reject(string(ExclusivePCPULevel), "%d CPUs requested, %d free on cores without another PCPULevel workload; release one or use exclusive None", n, total)
	case r.Exclusive == ExclusiveNUMANodeLevel:
		return reject(string(ExclusiveNUMANodeLevel), "%d CPUs requested, %d free on NUMA nodes without another NUMANodeLevel workload; release one or use exclusive None", n, total)
	case cc.bind == BindFullPCPUs:
		c := string(BindFullPCPUs)
		if r.Bind != BindFullPCPUs {
			c = OptFullPCPUsOnly
		}
		return reject(c, "%d CPUs requested, %d free in whole cores; release cores or request at most %d", n, total, total)
	case len(r.Hint) > 0:
		return reject("hint", "%d CPUs requested, %d free on the hinted nodes", n, total)
	}
	return reject("capacity", "%d CPUs requested, %d free; release workloads or request at most %d", n, total, total)
}
