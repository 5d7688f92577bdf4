package alloc

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
)

// This file re-implements the choices of the kubelet static CPU manager
// policy (pkg/kubelet/cm/cpumanager, Kubernetes v1.36, with the whole-unit
// test of PR #140498, released in v1.38) so that `policy: kubelet` places
// exactly where kubelet would, tie-breaks included.
// The algorithm is kubelet's; the code is corepin's own, written against
// bitsets and per-unit free counters.
//
// kubelet identifies units by ids: a core by its lowest CPU, a socket by its
// package id, an uncore cache by its L3 id (the socket where there is none).
// corepin's machine-wide indexes are numbered in the same order, so they
// sort the same way.

// kubeTopo is kubelet's view of a machine: its CPUTopology.
type kubeTopo struct {
	numCPUs, numCores, numSockets, numNodes, numUncore int

	cpuUncore []int32 // uncore key per CPU id

	coreCPUs   [][]int
	socketCPUs [][]int
	// Where every unit of one kind lies inside one unit of another (a
	// core in one socket, a node in one socket...), the inner units of
	// each outer unit, so the sorts need not walk CPUs. nil where a unit
	// straddles two.
	socketCores, nodeCores, socketNodes, nodeSockets, nodeUncores [][]int
	nodeCPUs                                                      [][]int // by node index
	uncoreCPUs                                                    [][]int // by uncore key (may hold empty keys)
	// coreUnit is each core's socket, node index and uncore key where
	// every core's CPUs share all three (unitCores), so that a whole core
	// is taken in one step (takeCore).
	coreUnit  []kubeUnit
	unitCores bool
}

// kubeUnit is a core's socket, node index and uncore key.
type kubeUnit struct{ socket, node, uncore int32 }

func newKubeTopo(ix *topoIndex) kubeTopo {
	k := kubeTopo{
		numCPUs:    len(ix.cpus),
		numCores:   len(ix.coreCPUs),
		numSockets: ix.numSockets,
		numNodes:   len(ix.nodes),
		coreCPUs:   ix.coreCPUs,
		socketCPUs: make([][]int, ix.numSockets),
		nodeCPUs:   make([][]int, len(ix.nodes)),
		uncoreCPUs: make([][]int, ix.numL3+ix.numSockets),
		cpuUncore:  make([]int32, len(ix.cpuCore)),
	}
	for _, c := range ix.cpus {
		k.socketCPUs[ix.cpuSocket[c]] = append(k.socketCPUs[ix.cpuSocket[c]], c)
		k.nodeCPUs[ix.cpuNode[c]] = append(k.nodeCPUs[ix.cpuNode[c]], c)
		u := ix.cpuL3[c]
		if u < 0 {
			u = int32(ix.numL3) + ix.cpuSocket[c] // kubelet falls back to the socket id
		}
		k.cpuUncore[c] = u
		k.uncoreCPUs[u] = append(k.uncoreCPUs[u], c)
	}
	for _, u := range k.uncoreCPUs {
		if len(u) > 0 {
			k.numUncore++
		}
	}
	k.coreUnit, k.unitCores = make([]kubeUnit, len(ix.coreCPUs)), true
	for core, cpus := range ix.coreCPUs {
		c := cpus[0]
		k.coreUnit[core] = kubeUnit{socket: ix.cpuSocket[c], node: ix.cpuNode[c], uncore: k.cpuUncore[c]}
		for _, c := range cpus {
			if (kubeUnit{socket: ix.cpuSocket[c], node: ix.cpuNode[c], uncore: k.cpuUncore[c]}) != k.coreUnit[core] {
				k.unitCores = false
			}
		}
	}
	k.socketCores = nest(ix, ix.numSockets, ix.cpuSocket, len(ix.coreCPUs), ix.cpuCore)
	k.nodeCores = nest(ix, len(ix.nodes), ix.cpuNode, len(ix.coreCPUs), ix.cpuCore)
	k.socketNodes = nest(ix, ix.numSockets, ix.cpuSocket, len(ix.nodes), ix.cpuNode)
	k.nodeSockets = nest(ix, len(ix.nodes), ix.cpuNode, ix.numSockets, ix.cpuSocket)
	k.nodeUncores = nest(ix, len(ix.nodes), ix.cpuNode, len(k.uncoreCPUs), k.cpuUncore)
	return k
}

// nest lists, for each outer unit, the inner units whose CPUs lie in it,
// ascending; nil if some inner unit has CPUs in two outer units.
func nest(ix *topoIndex, nOuter int, outerOf []int32, nInner int, innerOf []int32) [][]int {
	parent := make([]int32, nInner)
	for i := range parent {
		parent[i] = -1
	}
	for _, c := range ix.cpus {
		in, out := innerOf[c], outerOf[c]
		if parent[in] >= 0 && parent[in] != out {
			return nil
		}
		parent[in] = out
	}
	lists := make([][]int, nOuter)
	for in, out := range parent {
		if out >= 0 {
			lists[out] = append(lists[out], in)
		}
	}
	return lists
}

func perUnit(total, units int) int {
	if units == 0 {
		return 0
	}
	return total / units
}

// cpusPerCore is kubelet's CPUsPerCore(), the machine-wide average, which
// kubelet still uses for the SMT alignment of full-pcpus-only, the group
// size of distribute-cpus-across-numa and the partial uncore cache; whether
// a core or socket is whole is judged by its own size (takeFullCores).
func (k *kubeTopo) cpusPerCore() int   { return perUnit(k.numCPUs, k.numCores) }
func (k *kubeTopo) cpusPerUncore() int { return perUnit(k.numCPUs, k.numUncore) }

// kubeAcc is kubelet's cpuAccumulator: the free CPUs it may still claim,
// the result so far and how many are still needed.
type kubeAcc struct {
	ix     *topoIndex
	k      *kubeTopo
	free   bitset
	result bitset
	needed int
	spread bool

	freeCore, freeSocket, freeNode, freeUncore []int
	mark                                       []int // scratch for distinct keys

	// Buffers the sort and take steps reuse, one per step, so that a
	// decision allocates next to nothing: each holds the result of its
	// step only until the same step runs again.
	bufNodes, bufSockets, bufCores, bufUncores, bufCPUs, bufFree, bufTmp, bufTmp2, bufOrder, bufSort []int
}

// newKubeAcc returns an accumulator for n of avail's CPUs, reusing one from
// ix's pool (release it with done); its result is a fresh bitset the caller
// keeps. With from (not nil), avail is from's free CPUs (freeBits), whose
// counts per core, node and L3 group from keeps: they are copied instead
// of counted CPU by CPU.
func newKubeAcc(ix *topoIndex, avail bitset, n int, spread bool, from *State) *kubeAcc {
	k := &ix.kube
	a, _ := ix.kubeAccs.Get().(*kubeAcc)
	if a == nil {
		a = &kubeAcc{
			ix: ix, k: k, free: newBitset(ix.words),
			freeCore: make([]int, k.numCores), freeSocket: make([]int, k.numSockets),
			freeNode: make([]int, k.numNodes), freeUncore: make([]int, len(k.uncoreCPUs)),
			mark: make([]int, max(k.numCores, k.numSockets, k.numNodes, len(k.uncoreCPUs))),
		}
	} else {
		a.free.reset()
		clear(a.freeCore)
		clear(a.freeSocket)
		clear(a.freeNode)
		clear(a.freeUncore)
	}
	a.result, a.needed, a.spread = newBitset(ix.words), n, spread
	if from != nil && a.countsFrom(from, avail) {
		return a
	}
	for i, w := range avail {
		w &= ix.online[i]
		a.free[i] = w
		for ; w != 0; w &= w - 1 {
			c := i<<6 | bits.TrailingZeros64(w)
			a.freeCore[ix.cpuCore[c]]++
			a.freeSocket[ix.cpuSocket[c]]++
			a.freeNode[ix.cpuNode[c]]++
			a.freeUncore[k.cpuUncore[c]]++
		}
	}
	return a
}

// countsFrom sets a's free CPUs to avail and its free counts from s's,
// and reports whether it could: every CPU has an L3 group (the uncore
// counts are s's L3 counts) and the nodes lie within sockets (the socket
// counts are sums of node counts). a's counts are zero on entry.
func (a *kubeAcc) countsFrom(s *State, avail bitset) bool {
	ix, k := a.ix, a.k
	if !ix.allL3 || k.socketNodes == nil {
		return false
	}
	copy(a.free, avail)
	widen(a.freeCore, s.freeCore)
	widen(a.freeNode, s.freeNode)
	widen(a.freeUncore, s.freeL3)
	for so, nodes := range k.socketNodes {
		for _, nd := range nodes {
			a.freeSocket[so] += int(s.freeNode[nd])
		}
	}
	return true
}

// widen copies the State's counts from into the accumulator's to, which
// is at least as long (the uncore counts have the sockets' after the L3
// groups').
func widen(to []int, from []int32) {
	for i, x := range from {
		to[i] = int(x)
	}
}

// done returns a to its index's pool; a must not be used afterwards.
func (a *kubeAcc) done() {
	a.result = nil
	a.ix.kubeAccs.Put(a)
}

func (a *kubeAcc) numaFirst() bool { return a.k.numSockets >= a.k.numNodes }

// take claims the free CPUs among cpus. kubelet claims every CPU of a unit
// it judged whole; since PR #140498 a unit is whole only when all of its own
// CPUs are free, so the two agree. (Before it, kubelet compared a socket's or
// core's free count with the machine-wide average size and could hand out a
// CPU another container or the system held, kubernetes issue #140495.)
func (a *kubeAcc) take(cpus []int) {
	for _, c := range cpus {
		a.takeOne(c)
	}
}

// takeCore claims every CPU of core, all of them free: in one step where
// the core's CPUs share their socket, node and uncore cache (unitCores),
// as take otherwise.
func (a *kubeAcc) takeCore(core int) {
	cpus := a.k.coreCPUs[core]
	if !a.k.unitCores {
		a.take(cpus)
		return
	}
	for _, c := range cpus {
		a.free.clear(c)
		a.result.set(c)
	}
	n, u := len(cpus), a.k.coreUnit[core]
	a.freeCore[core] -= n
	a.freeSocket[u.socket] -= n
	a.freeNode[u.node] -= n
	a.freeUncore[u.uncore] -= n
	a.needed -= n
}

// takeOne claims c if it is free.
func (a *kubeAcc) takeOne(c int) {
	if a.free.has(c) {
		a.free.clear(c)
		ci := a.ix.cpuAt[c]
		a.freeCore[ci.core]--
		a.freeSocket[ci.socket]--
		a.freeNode[ci.node]--
		a.freeUncore[a.k.cpuUncore[c]]--
		a.result.set(c)
		a.needed--
	}
}

func (a *kubeAcc) satisfied() bool { return a.needed < 1 }

// distinct appends to out the keys of the free CPUs among cpus, in order of
// first appearance, and returns the extended slice.
func (a *kubeAcc) distinct(out, cpus []int, key []int32) []int {
	start := len(out)
	for _, c := range cpus {
		if a.free.has(c) {
			if k := int(key[c]); a.mark[k] == 0 {
				a.mark[k] = 1
				out = append(out, k)
			}
		}
	}
	for _, k := range out[start:] {
		a.mark[k] = 0
	}
	return out
}

// byFree sorts unit ids by free CPUs ascending (the most allocated first),
// then by id: kubelet's best-fit order. Each id is packed with its free
// count into one integer key, so the sort compares plain integers.
// It may use buf, and returns it (grown) for the next call.
func byFree(ids []int, free []int, buf []int) []int {
	if buf, ok := byFreeCounting(ids, free, buf); ok {
		return buf
	}
	for i, x := range ids {
		ids[i] = free[x]<<32 | x
	}
	slices.Sort(ids)
	for i, k := range ids {
		ids[i] = k & (1<<32 - 1)
	}
	return buf
}

// byFreeCounting is byFree by a counting sort, for the usual case of ids
// in ascending order with few distinct free counts (cores, whose free
// counts are at most their threads): a stable sort by free count then
// keeps the ids of one count ascending, the order byFree's key gives. It
// reports false, sorting nothing, where that case does not hold. buf is
// where the ids are laid out; it returns it, grown to fit.
func byFreeCounting(ids []int, free []int, buf []int) ([]int, bool) {
	const maxFree = 16
	var count [maxFree + 1]int
	for i, x := range ids {
		f := free[x]
		if f < 0 || f > maxFree || (i > 0 && ids[i-1] >= x) {
			return buf, false
		}
		count[f]++
	}
	pos := 0
	for f, c := range count {
		count[f] = pos
		pos += c
	}
	buf = slices.Grow(buf[:0], len(ids))[:len(ids)]
	for _, x := range ids {
		f := free[x]
		buf[count[f]] = x
		count[f]++
	}
	copy(ids, buf)
	return buf, true
}

func (a *kubeAcc) allWithFree(out, free []int) []int {
	for i, f := range free {
		if f > 0 {
			out = append(out, i)
		}
	}
	a.bufSort = byFree(out, free, a.bufSort)
	return out
}

// sortedWithin appends, for each outer unit in order, the distinct inner
// units of its free CPUs sorted by byFree, to out. With inner, the inner
// units of each outer unit when they nest, it reads free counts instead of
// walking the CPUs.
func (a *kubeAcc) sortedWithin(out []int, outer []int, cpusOf [][]int, key []int32, free []int, inner [][]int) []int {
	if inner != nil {
		for _, u := range outer {
			start := len(out)
			for _, in := range inner[u] {
				if free[in] > 0 {
					out = append(out, in)
				}
			}
			a.bufSort = byFree(out[start:], free, a.bufSort)
		}
		return out
	}
	for _, u := range outer {
		start := len(out)
		out = a.distinct(out, cpusOf[u], key)
		a.bufSort = byFree(out[start:], free, a.bufSort)
	}
	return out
}

func (a *kubeAcc) sortNodes() []int {
	if a.numaFirst() {
		a.bufNodes = a.allWithFree(a.bufNodes[:0], a.freeNode)
	} else {
		a.bufNodes = a.sortedWithin(a.bufNodes[:0], a.sortSockets(), a.k.socketCPUs, a.ix.cpuNode, a.freeNode, a.k.socketNodes)
	}
	return a.bufNodes
}

func (a *kubeAcc) sortSockets() []int {
	if !a.numaFirst() {
		a.bufSockets = a.allWithFree(a.bufSockets[:0], a.freeSocket)
	} else {
		a.bufSockets = a.sortedWithin(a.bufSockets[:0], a.sortNodes(), a.k.nodeCPUs, a.ix.cpuSocket, a.freeSocket, a.k.nodeSockets)
	}
	return a.bufSockets
}

func (a *kubeAcc) sortCores() []int {
	if a.numaFirst() {
		a.bufCores = a.sortedWithin(a.bufCores[:0], a.sortSockets(), a.k.socketCPUs, a.ix.cpuCore, a.freeCore, a.k.socketCores)
	} else {
		a.bufCores = a.sortedWithin(a.bufCores[:0], a.sortNodes(), a.k.nodeCPUs, a.ix.cpuCore, a.freeCore, a.k.nodeCores)
	}
	return a.bufCores
}

func (a *kubeAcc) sortUncores() []int {
	a.bufUncores = a.sortedWithin(a.bufUncores[:0], a.sortNodes(), a.k.nodeCPUs, a.k.cpuUncore, a.freeUncore, a.k.nodeUncores)
	return a.bufUncores
}

// sortCPUs is the order single threads are taken in: packed walks cores
// (siblings together), spread walks sockets in CPU id order.
func (a *kubeAcc) sortCPUs() []int {
	out := a.bufCPUs[:0]
	defer func() { a.bufCPUs = out }()
	if a.spread {
		for _, s := range a.sortSockets() {
			for _, c := range a.k.socketCPUs[s] {
				if a.free.has(c) {
					out = append(out, c)
				}
			}
		}
		return out
	}
	for _, core := range a.sortCores() {
		for _, c := range a.k.coreCPUs[core] {
			if a.free.has(c) {
				out = append(out, c)
			}
		}
	}
	return out
}

// takeWhole claims, in order, every unit whose CPUs are all free
// (whole(u)) while the request still needs at least all of them.
func (a *kubeAcc) takeWhole(order []int, whole func(u int) bool, cpusOf [][]int) {
	free := a.bufFree[:0]
	defer func() { a.bufFree = free }()
	for _, u := range order {
		if whole(u) {
			free = append(free, u)
		}
	}
	for _, u := range free {
		if a.needed >= len(cpusOf[u]) {
			a.take(cpusOf[u])
		}
	}
}

func (a *kubeAcc) takeFullNodes() {
	a.takeWhole(a.sortNodes(), func(n int) bool { return a.freeNode[n] == len(a.k.nodeCPUs[n]) }, a.k.nodeCPUs)
}

func (a *kubeAcc) takeFullSockets() {
	a.takeWhole(a.sortSockets(), func(s int) bool { return a.freeSocket[s] == len(a.k.socketCPUs[s]) }, a.k.socketCPUs)
}

func (a *kubeAcc) takeFullUncores() {
	a.takeWhole(a.sortUncores(), func(u int) bool { return a.freeUncore[u] == len(a.k.uncoreCPUs[u]) }, a.k.uncoreCPUs)
}

// takePartialUncore claims the lowest-numbered cores of one uncore cache
// when they hold exactly the CPUs still needed.
func (a *kubeAcc) takePartialUncore(u int) {
	perCore := a.k.cpusPerCore()
	coresNeeded := (a.needed + perCore - 1) / max(perCore, 1)
	cores := a.distinct(a.bufTmp[:0], a.k.uncoreCPUs[u], a.ix.cpuCore)
	a.bufTmp = cores
	slices.Sort(cores)
	if len(cores) > coresNeeded {
		cores = cores[:coresNeeded]
	}
	cpus := a.bufTmp2[:0]
	defer func() { a.bufTmp2 = cpus }()
	for _, core := range cores {
		for _, c := range a.k.coreCPUs[core] {
			if a.free.has(c) {
				cpus = append(cpus, c)
			}
		}
	}
	slices.Sort(cpus)
	if a.needed%2 != 0 && perCore > 1 && len(cpus) > a.needed {
		cpus = cpus[:len(cpus)-1]
	}
	if a.needed == len(cpus) {
		a.take(cpus)
	}
}

func (a *kubeAcc) takeUncoreCache() {
	per := a.k.cpusPerUncore()
	// takeFullUncores sorts again into bufUncores: walk a copy.
	a.bufOrder = append(a.bufOrder[:0], a.sortUncores()...)
	for _, u := range a.bufOrder {
		if a.needed >= per {
			a.takeFullUncores()
		}
		if a.satisfied() {
			return
		}
		a.takePartialUncore(u)
		if a.satisfied() {
			return
		}
	}
}

// takeFullCores claims whole cores: those whose CPUs are all free, judged
// by each core's own size (kubelet's isCoreFree since PR #140498). On a
// hybrid machine the machine-wide average is 1 CPU per core, which made a
// P-core with one thread taken look whole and left the free P-cores out.
func (a *kubeAcc) takeFullCores() {
	if a.ix.uniformCores() {
		if outer, inner := a.nestedCores(); inner != nil {
			a.takeUniformCores(outer, inner)
			return
		}
	}
	a.takeWhole(a.sortCores(), func(c int) bool { return a.freeCore[c] == len(a.k.coreCPUs[c]) }, a.k.coreCPUs)
}

// takeUniformCores is takeFullCores where every core has the same size
// and the cores nest in the outer units sortCores walks (outer, in its
// order; inner, the cores of each, ascending): sortCores puts the whole
// cores of each unit last, in id order, so they are taken in that order
// without sorting the partly free ones, until fewer CPUs than a core are
// needed.
func (a *kubeAcc) takeUniformCores(outer []int, inner [][]int) {
	size := a.ix.tpc
	for _, u := range outer {
		for _, c := range inner[u] {
			if a.needed < size {
				return
			}
			if a.freeCore[c] == size {
				a.takeCore(c)
			}
		}
	}
}

// nestedCores returns the outer units sortCores walks, in its order, and
// the cores of each, ascending, where the cores nest in those units; nil
// and nil, sorting nothing, where they do not.
func (a *kubeAcc) nestedCores() (outer []int, inner [][]int) {
	sortOuter, inner := a.sortNodes, a.k.nodeCores
	if a.numaFirst() {
		sortOuter, inner = a.sortSockets, a.k.socketCores
	}
	if inner == nil {
		return nil, nil
	}
	return sortOuter(), inner
}

func (a *kubeAcc) takeRemaining() {
	if !a.spread {
		if outer, inner := a.nestedCores(); inner != nil {
			a.takeRemainingNested(outer, inner)
			return
		}
	}
	for _, c := range a.sortCPUs() {
		a.takeOne(c)
		if a.satisfied() {
			return
		}
	}
}

// takeRemainingNested is takeRemaining's packed walk (sortCPUs) where
// the cores nest in the outer units sortCores walks (outer, in its order;
// inner, the cores of each, ascending), without sorting or listing every
// core: within each unit, the cores with 1 free CPU, then 2, and so on,
// each in id order, is byFree's order (free count, then id), and the walk
// stops once the request is satisfied. Taking a core's CPUs lowers only
// its own count, which no later pass matches again.
func (a *kubeAcc) takeRemainingNested(outer []int, inner [][]int) {
	for _, u := range outer {
		most := 0
		for _, c := range inner[u] {
			most = max(most, a.freeCore[c])
		}
		for f := 1; f <= most; f++ {
			for _, c := range inner[u] {
				if a.freeCore[c] != f {
					continue
				}
				for _, cpu := range a.k.coreCPUs[c] {
					a.takeOne(cpu)
					if a.satisfied() {
						return
					}
				}
			}
		}
	}
}

func errNotEnough(n, avail int) error {
	return reject("capacity", "not enough cpus available to satisfy request: requested=%d, available=%d", n, avail)
}

// kubePacked is kubelet's takeByTopologyNUMAPacked.
//
// With from (not nil), avail is from's free CPUs (see newKubeAcc).
func (ix *topoIndex) kubePacked(avail bitset, n int, spread, uncore bool, from *State) (bitset, error) {
	a := newKubeAcc(ix, avail, n, spread, from)
	defer a.done()
	if a.satisfied() {
		return a.result, nil
	}
	if have := a.free.count(); n > have {
		return nil, errNotEnough(n, have)
	}
	if a.numaFirst() {
		a.takeFullNodes()
		if a.satisfied() {
			return a.result, nil
		}
		a.takeFullSockets()
	} else {
		a.takeFullSockets()
		if a.satisfied() {
			return a.result, nil
		}
		a.takeFullNodes()
	}
	if a.satisfied() {
		return a.result, nil
	}
	if uncore {
		a.takeUncoreCache()
		if a.satisfied() {
			return a.result, nil
		}
	}
	if !spread {
		a.takeFullCores()
		if a.satisfied() {
			return a.result, nil
		}
	}
	a.takeRemaining()
	if a.satisfied() {
		return a.result, nil
	}
	return nil, reject("capacity", "failed to allocate cpus")
}

// combinations calls f with every k-subset of n in lexicographic order,
// building the subsets the way kubelet does. kubelet keeps the slice it is
// handed as its best so far; because appends reuse spare capacity, a kept
// slice can change under later iterations. Building subsets the same way
// reproduces its choice exactly.
func combinations(n []int, k int, f func([]int) bool) {
	if k < 1 {
		return
	}
	var rec func(k, start int, acc []int) bool
	rec = func(k, start int, acc []int) bool {
		if k == 0 {
			return f(acc)
		}
		for i := start; i <= len(n)-k; i++ {
			if !rec(k-1, i+1, append(acc, n[i])) {
				return false
			}
		}
		return true
	}
	rec(k, 0, []int{})
}

// balance is kubelet's "balance score": the population standard deviation
// of free CPUs per node, both mean and result rounded to 3 decimals.
func balance(xs []int) float64 {
	var sum float64
	for _, x := range xs {
		sum += float64(x)
	}
	m := math.Round(sum/float64(len(xs))*1000) / 1000
	var sq float64
	for _, x := range xs {
		sq += (float64(x) - m) * (float64(x) - m)
	}
	return math.Round(math.Sqrt(sq/float64(len(xs)))*1000) / 1000
}

// kubeDistributed is kubelet's takeByTopologyNUMADistributed.
// With from (not nil), avail is from's free CPUs (see newKubeAcc).
func (ix *topoIndex) kubeDistributed(avail bitset, n, group int, spread bool, from *State) (bitset, error) {
	if n%group != 0 {
		return ix.kubePacked(avail, n, spread, false, from)
	}
	a := newKubeAcc(ix, avail, n, spread, from)
	defer a.done()
	if a.satisfied() {
		return a.result, nil
	}
	if have := a.free.count(); n > have {
		return nil, errNotEnough(n, have)
	}
	numas := a.sortNodes()
	k := a.k
	groupsTotal := (k.numCPUs-1)/group + 1
	groupsPerNode := (groupsTotal-1)/k.numNodes + 1
	groupsNeeded := (a.needed-1)/group + 1
	minNodes := (groupsNeeded-1)/groupsPerNode + 1
	maxNodes := min(groupsNeeded, len(numas))
	pos := make([]int, len(a.freeNode)) // node index -> position in numas
	for i, nd := range numas {
		pos[nd] = i
	}
	after := make([]int, len(numas))
	local := make([]int, len(numas))
	for size := minNodes; size <= maxNodes; size++ {
		bestBalance := math.MaxFloat64
		var bestRemainder, bestCombo []int
		combinations(numas, size, func(combo []int) bool {
			if bestBalance == 0 {
				return false
			}
			total, groups := 0, 0
			for _, nd := range combo {
				total += a.freeNode[nd]
				groups += a.freeNode[nd] / group
			}
			if total < n || groups*group < n {
				return true
			}
			dist := (n / len(combo) / group) * group
			for _, nd := range combo {
				if a.freeNode[nd] < dist {
					return true
				}
			}
			for i, nd := range numas {
				after[i] = a.freeNode[nd]
			}
			for _, nd := range combo {
				after[pos[nd]] -= dist
			}
			remainder := n - dist*len(combo)
			var remCombo []int
			for _, nd := range combo {
				if after[pos[nd]] >= group {
					remCombo = append(remCombo, nd)
				}
			}
			bestLocal := math.MaxFloat64
			var bestLocalRemainder []int
			if remainder == 0 {
				bestLocal = balance(after)
			}
			for kk := len(remCombo); remainder > 0 && kk >= 1; kk-- {
				combinations(remCombo, kk, func(subset []int) bool {
					copy(local, after)
					rem, sum := remainder, 0
					for _, nd := range subset {
						sum += local[pos[nd]]
					}
					if sum < rem {
						return true
					}
					for rem > 0 {
						progress := false
						for _, nd := range subset {
							if rem == 0 {
								break
							}
							if local[pos[nd]] < group {
								continue
							}
							local[pos[nd]] -= group
							rem -= group
							progress = true
						}
						if !progress {
							return true // kubelet would spin here; no balance to score
						}
					}
					if b := balance(local); b < bestLocal {
						bestLocal = b
						bestLocalRemainder = subset
					}
					return true
				})
			}
			if bestLocal < bestBalance {
				bestBalance, bestRemainder, bestCombo = bestLocal, bestLocalRemainder, combo
			}
			return true
		})
		if bestCombo == nil {
			continue
		}
		dist := (n / len(bestCombo) / group) * group
		for _, nd := range bestCombo {
			got, _ := ix.kubePacked(a.freeIn(nd), dist, spread, false, nil)
			a.takeSet(got)
		}
		remainder := n - dist*len(bestCombo)
		for remainder > 0 {
			progress := false
			for _, nd := range bestRemainder {
				if remainder == 0 {
					break
				}
				if a.freeNode[nd] < group {
					continue
				}
				got, _ := ix.kubePacked(a.freeIn(nd), group, spread, false, nil)
				a.takeSet(got)
				remainder -= group
				progress = true
			}
			if !progress {
				break
			}
		}
		if a.needed != 0 {
			return nil, reject("capacity", "accounting error, %d cpus still needed after distributing over numa nodes", a.needed)
		}
		return a.result, nil
	}
	return ix.kubePacked(avail, n, spread, false, from)
}

func (a *kubeAcc) freeIn(node int) bitset {
	b := newBitset(a.ix.words)
	for _, c := range a.k.nodeCPUs[node] {
		if a.free.has(c) {
			b.set(c)
		}
	}
	return b
}

func (a *kubeAcc) takeSet(b bitset) {
	if b == nil {
		return
	}
	var cpus []int
	b.each(func(c int) { cpus = append(cpus, c) })
	a.take(cpus)
}

// kubeTake is the static policy's takeByTopology. With from (not nil),
// avail is from's free CPUs (freeBits), whose counts it reads.
func (s *State) kubeTake(avail bitset, n int, from *State) (bitset, error) {
	o := s.opts
	if o.distributeNUMA {
		group := 1
		if o.fullPCPUs {
			group = s.ix.kube.cpusPerCore()
		}
		return s.ix.kubeDistributed(avail, n, group, o.distributeCores, from)
	}
	return s.ix.kubePacked(avail, n, o.distributeCores, o.uncore, from)
}

// kubeDefault is kubelet's default (shared) cpuset: every CPU not held
// exclusively, without the reserved ones under strict-cpu-reservation.
func (s *State) kubeDefault() bitset { return s.pool(false) }

// kubeAllocate places an exclusive request the way the static policy's
// Allocate does: SMT alignment check, topology hint, then takeByTopology
// from the hinted nodes first and from everything else for the rest.
func (s *State) kubeAllocate(r *Request) (bitset, error) {
	n := r.CPUs
	ix := s.ix
	if s.opts.fullPCPUs {
		group := ix.kube.cpusPerCore()
		if n%group != 0 {
			return nil, Rejection{Constraint: OptFullPCPUsOnly, CoreSize: group,
				Reason: fmt.Sprintf("SMT Alignment Error: requested %d cpus not multiple cpus per core = %d; request a multiple of %d", n, group, group)}
		}
		phys := 0
		def := s.kubeDefault()
		def.each(func(c int) {
			if !s.reservedPhys.has(c) {
				phys++
			}
		})
		if n > phys {
			return nil, reject(OptFullPCPUsOnly, "SMT Alignment Error: not enough free physical CPUs: available physical CPUs = %d, requested CPUs = %d, CPUs per core = %d", phys, n, group)
		}
	}
	// The call's scratch bitset: kubeTake copies what it reads of it.
	allocatable := s.sc.tmp
	s.freeInto(allocatable)
	hint, err := s.kubeHint(r, allocatable)
	if err != nil {
		return nil, err
	}
	if hint == nil {
		// Every free CPU, whose counts s keeps.
		return s.kubeTake(allocatable, n, s)
	}
	result := newBitset(ix.words)
	{
		aligned := newBitset(ix.words)
		inHint := make([]bool, len(ix.nodes))
		for _, nd := range hint {
			inHint[nd] = true
		}
		if s.opts.alignBySocket {
			inSock := make([]bool, ix.numSockets)
			for _, c := range ix.cpus {
				if inHint[ix.cpuNode[c]] {
					inSock[ix.cpuSocket[c]] = true
				}
			}
			allocatable.each(func(c int) {
				if inSock[ix.cpuSocket[c]] {
					aligned.set(c)
				}
			})
		} else {
			allocatable.each(func(c int) {
				if inHint[ix.cpuNode[c]] {
					aligned.set(c)
				}
			})
		}
		got, err := s.kubeTake(aligned, min(n, aligned.count()), nil)
		if err != nil {
			return nil, err
		}
		result.copyFrom(got)
	}
	rest := newBitset(ix.words)
	for i := range rest {
		rest[i] = allocatable[i] &^ result[i]
	}
	got, err := s.kubeTake(rest, n-result.count(), nil)
	if err != nil {
		return nil, err
	}
	got.each(result.set)
	return result, nil
}

// kubeReserve picks count reserved CPUs as kubelet does without
// --reserved-cpus: takeByTopology over every CPU.
func (s *State) kubeReserve(count int) (bitset, error) {
	all := newBitset(s.ix.words)
	for _, c := range s.ix.cpus {
		all.set(c)
	}
	got, err := s.kubeTake(all, count, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: reserving %d cpus: %v", ErrInvalid, count, err)
	}
	return got, nil
}
