package alloc

import (
	"cmp"
	"math/bits"
	"runtime"
	"slices"
	"sync"
	"weak"

	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/topology"
)

// bitset is a mutable set of CPU ids used inside one decision; the public
// API speaks cpuset.CPUSet.
type bitset []uint64

func newBitset(words int) bitset { return make(bitset, words) }

func (b bitset) has(i int) bool { return i>>6 < len(b) && b[i>>6]&(1<<(uint(i)&63)) != 0 }
func (b bitset) set(i int)      { b[i>>6] |= 1 << (uint(i) & 63) }
func (b bitset) clear(i int)    { b[i>>6] &^= 1 << (uint(i) & 63) }

func (b bitset) count() int {
	n := 0
	for _, w := range b {
		n += bits.OnesCount64(w)
	}
	return n
}

func (b bitset) copyFrom(o bitset) { copy(b, o) }

func (b bitset) reset() {
	for i := range b {
		b[i] = 0
	}
}

// each calls f for every member in ascending order.
func (b bitset) each(f func(int)) {
	for i, w := range b {
		for w != 0 {
			t := bits.TrailingZeros64(w)
			f(i<<6 | t)
			w &= w - 1
		}
	}
}

func (b bitset) toSet() cpuset.CPUSet { return cpuset.FromWords(b) }

// fromSet adds the members of s that fit in b.
func (b bitset) fromSet(s cpuset.CPUSet) {
	for i := range b {
		b[i] |= s.Word(i)
	}
}

// Tree levels of the corepin engine.
const (
	lvRoot = iota
	lvOuter
	lvInner
	lvL3
	lvCore
)

// tnode is a node of the placement tree: the machine, then sockets and NUMA
// nodes (whichever is larger first), then L3 groups, then physical cores.
// Each child is the intersection of its parent with one unit, so the tree
// nests even on machines whose units do not (a NUMA node holding two
// sockets, an L3 spanning two sub-NUMA nodes).
type tnode struct {
	level    int
	key      int     // socket, node index, L3 index or core of this level
	children []int32 // tree indexes
	cores    []int32 // every core below, ascending
}

// index is a State's view of its topology: the topology itself and the
// immutable data derived from it, which every State built on the same
// topology shares (topoIndex).
type index struct {
	topo *topology.Topology
	*topoIndex
}

// topoIndex is the immutable, precomputed view of a topology, computed once
// per topology (indexOf) and shared by every State built on it. It holds no
// pointer to the topology, so that the cache keyed by the topology lets it
// go (see topoIndexes).
type topoIndex struct {
	words int

	online   bitset
	allowed  bitset
	isolated bitset // allowed CPUs the kernel keeps apart (IsolatedCPUs)
	poolSkip bitset // CPUs the shared pools leave out (allowed but not SharedCPUs)
	cpus     []int  // online CPUs, ascending

	// per CPU id (len maxID+1); -1 for CPUs that are not online
	cpuCore, cpuSocket, cpuNode, cpuL3 []int32
	// cpuAt packs the four per CPU id, one load for the hot loops
	// (adjust, span, the kubelet engine's takeOne); core -1 for CPUs
	// that are not online.
	cpuAt []cpuInfo

	nodes      []topology.NodeID // nodes with online CPUs, ascending; cpuNode indexes this
	coreCPUs   [][]int           // online CPUs per core, ascending
	coreNode   []int32
	coreSocket []int32
	coreL3     []int32 // -1 without L3
	nodeTotal  []int   // online CPUs per node index
	nodeCores  [][]int32
	numL3      int
	allL3      bool // every online CPU has an L3 group
	// plainShares: every online CPU is allowed, each core lies in one
	// NUMA node and each node in one socket, so that a core with a free
	// CPU and a CPU not free is shared by whoever takes the free one, and
	// a placement the corepin engine makes inside one node (placeFinest)
	// stays there (see kubeletWins).
	plainShares bool
	uniform     bool // every core has tpc CPUs (see uniformCores)
	l3Total     []int
	numSockets  int
	tpc         int // most threads in one core

	dist      [][]int // NUMA distance between node indexes
	distOrder [][]int // node indexes by distance from each node, then index

	tree     []tnode
	coreLeaf []int32 // tree index of each core's leaf
	// cores packs what computeCaps reads of each core, one load per core.
	cores   []coreInfo
	coreIDs []int32 // every core, ascending
	// byLevel lists the tree nodes of each level, ascending.
	byLevel [lvCore + 1][]int32
	parent  []int32 // tree index of each tree node's parent (-1 for the root), always lower
	// treeNode and treeSocket are the node index and socket of each tree
	// node's first core (fitOf's).
	treeNode, treeSocket []int32

	// Free CPUs per unit with nothing reserved or held: the allowed ones
	// (see State.recount); counters is the length of a State's counters.
	allowedCore, allowedL3, allowedNode []int32
	counters                            int

	kube kubeTopo
	// kubeAccs pools the kubelet engine's accumulators (see newKubeAcc).
	kubeAccs sync.Pool
	// scratches pools the buffers of a State's calls (see State.borrow).
	scratches sync.Pool
	// trials pools the copies State.Try places on.
	trials sync.Pool
}

// topoIndexes caches the topoIndex of every topology a State was built on,
// keyed weakly by the topology: an entry goes when its topology does. A
// Topology cannot change once built, so its topoIndex stays right; the
// extender and a scheduler build a State per node and decision, and would
// otherwise derive it (tree, kubelet view, distance orders) every time.
var topoIndexes sync.Map // weak.Pointer[topology.Topology] -> *topoIndex

// indexOf returns the index of t, deriving its topoIndex on first use only.
func indexOf(t *topology.Topology) index {
	key := weak.Make(t)
	if v, ok := topoIndexes.Load(key); ok {
		return index{topo: t, topoIndex: v.(*topoIndex)}
	}
	ti := newTopoIndex(t)
	if v, loaded := topoIndexes.LoadOrStore(key, ti); loaded {
		ti = v.(*topoIndex)
	} else {
		runtime.AddCleanup(t, func(k weak.Pointer[topology.Topology]) { topoIndexes.Delete(k) }, key)
	}
	return index{topo: t, topoIndex: ti}
}

func newTopoIndex(t *topology.Topology) *topoIndex {
	online := t.Online()
	maxID := online.Max()
	ix := &topoIndex{words: maxID/64 + 1}
	ix.online = newBitset(ix.words)
	ix.online.fromSet(online)
	ix.allowed = newBitset(ix.words)
	ix.allowed.fromSet(t.Allowed())
	ix.isolated = newBitset(ix.words)
	ix.isolated.fromSet(IsolatedCPUs(t))
	ix.poolSkip = newBitset(ix.words)
	ix.poolSkip.fromSet(t.Allowed().Difference(SharedCPUs(t)))
	ix.cpus = online.List()
	n := maxID + 1
	ix.cpuCore, ix.cpuSocket, ix.cpuNode, ix.cpuL3 = make([]int32, n), make([]int32, n), make([]int32, n), make([]int32, n)
	for i := range n {
		ix.cpuCore[i], ix.cpuSocket[i], ix.cpuNode[i], ix.cpuL3[i] = -1, -1, -1, -1
	}
	ix.nodes = t.NodesWithCPUs()
	if !t.NoNodeCPUs().IsEmpty() {
		// CPUs in no NUMA node (their node has no directory, issue 17)
		// form one more locality, first (None sorts below every id). It
		// reports no node id (span) and no hint names it (hintIndexes).
		ix.nodes = append([]topology.NodeID{topology.None}, ix.nodes...)
	}
	nodePos := map[topology.NodeID]int32{}
	for i, nd := range ix.nodes {
		nodePos[nd] = int32(i)
	}
	ix.coreCPUs = make([][]int, t.NumCores())
	ix.coreNode = make([]int32, t.NumCores())
	ix.coreSocket = make([]int32, t.NumCores())
	ix.coreL3 = make([]int32, t.NumCores())
	ix.nodeTotal = make([]int, len(ix.nodes))
	ix.nodeCores = make([][]int32, len(ix.nodes))
	ix.numL3 = t.NumL3()
	ix.l3Total = make([]int, ix.numL3)
	ix.numSockets = t.NumSockets()
	for _, id := range ix.cpus {
		c, _ := t.CPU(id)
		core := int(c.Core)
		ix.cpuCore[id], ix.cpuSocket[id], ix.cpuNode[id], ix.cpuL3[id] = int32(core), int32(c.Socket), nodePos[c.NUMA], int32(c.L3)
		if len(ix.coreCPUs[core]) == 0 {
			// A core belongs where its lowest CPU is, in nodeCores and
			// coreNode alike (they differ only on a core split across
			// nodes, which no real machine has).
			ix.nodeCores[nodePos[c.NUMA]] = append(ix.nodeCores[nodePos[c.NUMA]], int32(core))
			ix.coreNode[core], ix.coreSocket[core], ix.coreL3[core] = nodePos[c.NUMA], int32(c.Socket), int32(c.L3)
		}
		ix.coreCPUs[core] = append(ix.coreCPUs[core], id)
		ix.nodeTotal[nodePos[c.NUMA]]++
		if c.L3 >= 0 {
			ix.l3Total[c.L3]++
		}
	}
	for _, cs := range ix.coreCPUs {
		ix.tpc = max(ix.tpc, len(cs))
	}
	ix.uniform = true
	for _, cs := range ix.coreCPUs {
		if len(cs) != ix.tpc {
			ix.uniform = false
		}
	}
	ix.cpuAt = make([]cpuInfo, n)
	for i := range n {
		ix.cpuAt[i] = cpuInfo{core: ix.cpuCore[i], node: ix.cpuNode[i], socket: ix.cpuSocket[i], l3: ix.cpuL3[i]}
	}
	ix.allL3 = true
	for _, id := range ix.cpus {
		if ix.cpuL3[id] < 0 {
			ix.allL3 = false
		}
	}
	ix.plainShares = t.Allowed().Equals(online)
	for _, id := range ix.cpus {
		if ix.cpuNode[id] != ix.coreNode[ix.cpuCore[id]] {
			ix.plainShares = false
		}
	}
	ix.dist = make([][]int, len(ix.nodes))
	for a := range ix.nodes {
		ix.dist[a] = make([]int, len(ix.nodes))
		for b := range ix.nodes {
			ix.dist[a][b] = t.Distance(ix.nodes[a], ix.nodes[b])
		}
	}
	ix.distOrder = make([][]int, len(ix.nodes))
	for a := range ix.nodes {
		ix.distOrder[a] = make([]int, len(ix.nodes))
		for b := range ix.nodes {
			ix.distOrder[a][b] = b
		}
		slices.SortStableFunc(ix.distOrder[a], func(x, y int) int { return cmp.Compare(ix.dist[a][x], ix.dist[a][y]) })
	}
	ix.allowedCore, ix.allowedL3, ix.allowedNode = make([]int32, len(ix.coreCPUs)), make([]int32, ix.numL3), make([]int32, len(ix.nodes))
	for _, c := range ix.cpus {
		if ix.allowed.has(c) {
			ix.allowedCore[ix.cpuCore[c]]++
			ix.allowedNode[ix.cpuNode[c]]++
			if l := ix.cpuL3[c]; l >= 0 {
				ix.allowedL3[l]++
			}
		}
	}
	ix.counters = len(ix.coreCPUs) + ix.numL3 + len(ix.nodes)
	ix.buildTree()
	ix.kube = newKubeTopo(ix)
	ix.plainShares = ix.plainShares && ix.kube.socketNodes != nil
	ix.scratches.New = func() any {
		sc := &scratch{}
		sc.init(ix)
		return sc
	}
	ix.trials.New = func() any { return ix.newTrial() }
	return ix
}

// buildTree lays out the placement tree. Sockets come above NUMA nodes when
// a socket holds several nodes, below them when a node holds several sockets.
func (ix *topoIndex) buildTree() {
	socketsOuter := ix.numSockets < len(ix.nodes)
	outer := func(core int) int { return int(ix.coreSocket[core]) }
	inner := func(core int) int { return int(ix.coreNode[core]) }
	if !socketsOuter {
		outer, inner = inner, outer
	}
	l3 := func(core int) int {
		if ix.coreL3[core] < 0 {
			return -1 - core // a core without L3 is its own group
		}
		return int(ix.coreL3[core])
	}
	ix.coreLeaf = make([]int32, len(ix.coreCPUs))
	ix.tree = []tnode{{level: lvRoot}}
	type path struct{ o, i, l int }
	pos := map[path]int32{}
	posO := map[int]int32{}
	posI := map[[2]int]int32{}
	cores := make([]int, len(ix.coreCPUs))
	for i := range cores {
		cores[i] = i
	}
	// Children in order of their lowest core keep the tree deterministic.
	for _, core := range cores {
		o, in, l := outer(core), inner(core), l3(core)
		oi, ok := posO[o]
		if !ok {
			oi = int32(len(ix.tree))
			ix.tree = append(ix.tree, tnode{level: lvOuter, key: o})
			ix.tree[0].children = append(ix.tree[0].children, oi)
			posO[o] = oi
		}
		ii, ok := posI[[2]int{o, in}]
		if !ok {
			ii = int32(len(ix.tree))
			ix.tree = append(ix.tree, tnode{level: lvInner, key: in})
			ix.tree[oi].children = append(ix.tree[oi].children, ii)
			posI[[2]int{o, in}] = ii
		}
		li, ok := pos[path{o, in, l}]
		if !ok {
			li = int32(len(ix.tree))
			ix.tree = append(ix.tree, tnode{level: lvL3, key: l})
			ix.tree[ii].children = append(ix.tree[ii].children, li)
			pos[path{o, in, l}] = li
		}
		ci := int32(len(ix.tree))
		ix.tree = append(ix.tree, tnode{level: lvCore, key: core, cores: []int32{int32(core)}})
		ix.tree[li].children = append(ix.tree[li].children, ci)
		ix.coreLeaf[core] = ci
		for _, t := range []int32{0, oi, ii, li} {
			ix.tree[t].cores = append(ix.tree[t].cores, int32(core))
		}
	}
	// A child is appended after its parent, so its index is higher
	// (computeCaps sums the tree from the last node up on it).
	ix.cores = make([]coreInfo, len(ix.coreCPUs))
	ix.coreIDs = make([]int32, len(ix.coreCPUs))
	for core, cs := range ix.coreCPUs {
		ix.coreIDs[core] = int32(core)
		ix.cores[core] = coreInfo{size: int32(len(cs)), node: ix.coreNode[core], socket: ix.coreSocket[core], leaf: ix.coreLeaf[core]}
	}
	for t, tn := range ix.tree {
		ix.byLevel[tn.level] = append(ix.byLevel[tn.level], int32(t))
	}
	ix.parent = make([]int32, len(ix.tree))
	ix.parent[0] = -1
	ix.treeNode, ix.treeSocket = make([]int32, len(ix.tree)), make([]int32, len(ix.tree))
	for t, tn := range ix.tree {
		for _, ch := range tn.children {
			ix.parent[ch] = int32(t)
		}
		ix.treeNode[t], ix.treeSocket[t] = ix.coreNode[tn.cores[0]], ix.coreSocket[tn.cores[0]]
	}
}

// cpuInfo is a CPU's core, node index, socket and L3 group (-1: none).
type cpuInfo struct{ core, node, socket, l3 int32 }

// coreInfo is a core's CPU count, node index, socket and tree leaf.
type coreInfo struct{ size, node, socket, leaf int32 }

// nodeLevel is the tree level whose nodes are NUMA nodes (or parts of them).
func (ix *topoIndex) nodeLevel() int {
	if ix.numSockets < len(ix.nodes) {
		return lvInner
	}
	return lvOuter
}
