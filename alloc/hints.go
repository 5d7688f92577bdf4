package alloc

import (
	"cmp"
	"slices"
	"strings"

	"github.com/corepin/corepin/topology"
)

// NUMA hints. kubelet enumerates every subset of NUMA nodes (2^n masks, the
// reason its Topology Manager stops at 8 nodes). The best hint it would pick
// from them can be found directly: the fewest nodes that hold the request,
// and among those the numerically lowest mask, found one node at a time
// from the highest down. That is O(n^2 log n) and exact.

// topSum returns the sum of the r largest values of xs (xs is not modified).
func topSum(xs []int, r int, buf []int) int {
	if r <= 0 {
		return 0
	}
	buf = append(buf[:0], xs...)
	slices.SortFunc(buf, func(a, b int) int { return cmp.Compare(b, a) })
	s := 0
	for _, x := range buf[:min(r, len(buf))] {
		s += x
	}
	return s
}

// count is a count of CPUs: the State keeps its free counts as int32.
type count interface{ ~int | ~int32 }

// fewestNodes returns the smallest k such that some k nodes hold n, or 0.
func fewestNodes[T count](caps []T, n int) int {
	if n > 0 && len(caps) > 0 && int(slices.Max(caps)) >= n {
		return 1 // the usual case, without counting or sorting
	}
	if k, ok := fewestSmall(caps, n); ok {
		return k
	}
	var buf [64]T // no allocation for the usual few units
	sorted := append(buf[:0], caps...)
	slices.Sort(sorted)
	sum := 0
	for i := range sorted {
		sum += int(sorted[len(sorted)-1-i])
		if sum >= n {
			return i + 1
		}
	}
	return 0
}

// fewestSmall is fewestNodes by counting, for caps of small values (the
// free CPUs of partly held cores): it reports false where a cap is
// negative or above 16.
func fewestSmall[T count](caps []T, n int) (int, bool) {
	const maxCap = 16
	var counts [maxCap + 1]int
	for _, c := range caps {
		if c < 0 || c > maxCap {
			return 0, false
		}
		counts[c]++
	}
	sum, k := 0, 0
	for c := maxCap; c > 0; c-- {
		for range counts[c] {
			sum += c
			k++
			if sum >= n {
				return k, true
			}
		}
	}
	if n <= 0 && len(caps) > 0 {
		return 1, true // the largest alone, as sorting finds
	}
	return 0, true
}

// lowestMask returns the k node indexes with the numerically lowest bitmask
// whose caps sum to at least n, ascending; nil if there is none.
func lowestMask(caps []int, k, n int) []int {
	out := make([]int, 0, k)
	sum, bound := 0, len(caps)
	var buf []int
	for j := range k {
		r := k - j - 1
		found := false
		for c := r; c < bound; c++ {
			if sum+caps[c]+topSum(caps[:c], r, buf) >= n {
				out = append(out, c)
				sum += caps[c]
				bound = c
				found = true
				break
			}
		}
		if !found {
			return nil
		}
	}
	slices.Sort(out)
	return out
}

// kubeHint reproduces the NUMA affinity kubelet's Topology Manager would
// hand the static policy when the CPU manager is the only hint provider:
// nil for no affinity, or node indexes.
func (s *State) kubeHint(r *Request, allocatable bitset) ([]int, error) {
	ix := s.ix
	if len(r.Hint) > 0 {
		return s.hintIndexes(r.Hint)
	}
	if r.TopologyPolicy == TopologyNone {
		return nil, nil
	}
	n := r.CPUs
	avail := make([]int, len(ix.nodes))
	allocatable.each(func(c int) { avail[ix.cpuNode[c]]++ })
	minAff := fewestNodes(ix.nodeTotal, n)
	if minAff == 0 {
		minAff = len(ix.nodes)
	}
	var best []int
	preferred := false
	if topSum(avail, minAff, nil) >= n {
		best, preferred = lowestMask(avail, minAff, n), true
	} else if k := fewestNodes(avail, n); k > 0 {
		// kubelet also prefers every socket-aligned mask, whatever its
		// width, and the merge takes the narrowest preferred one; only
		// without one does it fall back to the narrowest mask of all.
		best = lowestMask(avail, k, n)
		if s.opts.alignBySocket {
			if m := s.socketAlignedMask(avail, n, minAff); m != nil {
				best, preferred = m, true
			}
		}
	}
	switch r.TopologyPolicy {
	case TopologySingleNUMANode:
		if minAff == 1 {
			for i, a := range avail {
				if a >= n {
					if len(ix.nodes) == 1 {
						return nil, nil
					}
					return []int{i}, nil
				}
			}
		}
		return nil, s.numaRejection(r, avail)
	case TopologyRestricted:
		if !preferred {
			return nil, s.numaRejection(r, avail)
		}
	}
	if best == nil { // no hint can hold the request: all nodes, not preferred
		best = make([]int, len(ix.nodes))
		for i := range best {
			best[i] = i
		}
	}
	return best, nil
}

// minSockets is the socket count kubelet's isHintSocketAligned wants a
// hint to span, or 0 when no hint can be socket-aligned.
func (s *State) minSockets(minAff int) int {
	ix := s.ix
	perSocket := len(ix.nodes) / max(ix.numSockets, 1)
	if perSocket == 0 {
		return 0
	}
	return (minAff + perSocket - 1) / perSocket
}

// socketAlignedMask returns the hint kubelet's Topology Manager merges to
// when align-by-socket marks socket-aligned masks preferred and no mask of
// minAff nodes can hold n: the narrowest mask (fewest nodes, then the
// numerically lowest) whose avail sum to at least n and whose nodes span
// exactly minSockets sockets (isHintSocketAligned). nil if there is none.
//
// kubelet enumerates all 2^nodes masks. This walks the masks of each width
// in increasing numeric order, pruning a branch as soon as its nodes could
// not reach n or already span more sockets than allowed, so the first mask
// it completes is the answer.
func (s *State) socketAlignedMask(avail []int, n, minAff int) []int {
	ix := s.ix
	want := s.minSockets(minAff)
	k0 := fewestNodes(avail, n)
	if want == 0 || k0 == 0 {
		return nil
	}
	cnt := make([]int, ix.numSockets) // nodes of the partial mask per socket
	spanned := 0
	nodeSockets := s.nodeSockets()
	// below[c][so]: whether a node index below c has a CPU on socket so,
	// to prune branches that can no longer span enough sockets.
	below := make([][]bool, len(avail)+1)
	below[0] = make([]bool, ix.numSockets)
	for c := range avail {
		below[c+1] = slices.Clone(below[c])
		for _, so := range nodeSockets[c] {
			below[c+1][so] = true
		}
	}
	reachable := func(r, c int) bool { // can r more nodes below c span want?
		more := 0
		for so, ok := range below[c] {
			if ok && cnt[so] == 0 {
				more++
			}
		}
		return spanned+min(more, r*ix.numSockets) >= want
	}
	var buf []int
	out := make([]int, 0, len(avail))
	steps := 0
	var dfs func(r, bound, sum int) bool
	dfs = func(r, bound, sum int) bool {
		if r == 0 {
			return sum >= n && spanned == want
		}
		for c := r - 1; c < bound; c++ {
			if steps++; steps > maxMaskSteps {
				return false
			}
			if sum+avail[c]+topSum(avail[:c], r-1, buf) < n {
				continue
			}
			for _, so := range nodeSockets[c] {
				if cnt[so]++; cnt[so] == 1 {
					spanned++
				}
			}
			out = append(out, c)
			if spanned <= want && reachable(r-1, c) && dfs(r-1, c, sum+avail[c]) {
				return true
			}
			out = out[:len(out)-1]
			for _, so := range nodeSockets[c] {
				if cnt[so]--; cnt[so] == 0 {
					spanned--
				}
			}
		}
		return false
	}
	for k := k0; k <= len(avail) && steps <= maxMaskSteps; k++ {
		if dfs(k, len(avail), 0) {
			slices.Sort(out)
			return out
		}
	}
	return nil
}

// maxMaskSteps bounds the socket-aligned mask search. Machines kubelet's
// Topology Manager accepts (8 NUMA nodes unless max-allowable-numa-nodes
// says more) take a few hundred steps; past the bound, on machines of many
// nodes with adversarial free counts, no mask counts as socket-aligned.
const maxMaskSteps = 1 << 20

// nodeSockets lists the sockets of each node index's CPUs.
func (s *State) nodeSockets() [][]int32 {
	ix := s.ix
	out := make([][]int32, len(ix.nodes))
	for nd, cores := range ix.nodeCores {
		for _, core := range cores {
			if so := ix.coreSocket[core]; !slices.Contains(out[nd], so) {
				out[nd] = append(out[nd], so)
			}
		}
	}
	return out
}

func (s *State) hintIndexes(ids []topology.NodeID) ([]int, error) {
	var out []int
	for _, id := range ids {
		i, ok := slices.BinarySearch(s.ix.nodes, id)
		if !ok || id == topology.None {
			return nil, invalid("hint names numa node %d, which has no online cpu", id)
		}
		out = append(out, i)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// numaRejection explains a topology-policy refusal with the numbers a
// person needs: how many CPUs on how many nodes, and the most on offer.
func (s *State) numaRejection(r *Request, avail []int) error {
	ix := s.ix
	bestNode, bestFree := 0, -1
	for i, a := range avail {
		if a > bestFree {
			bestNode, bestFree = i, a
		}
	}
	minAff := fewestNodes(ix.nodeTotal, r.CPUs)
	what := "CPUs"
	if r.Bind == BindFullPCPUs || s.opts.fullPCPUs {
		what = "CPUs in whole cores"
	}
	if r.TopologyPolicy == TopologySingleNUMANode || minAff == 1 {
		if minAff != 1 {
			return reject(string(r.TopologyPolicy), "%d CPUs needed on one NUMA node, but the largest node has %d CPUs; use best-effort or a smaller request",
				r.CPUs, slices.Max(ix.nodeTotal))
		}
		return reject(string(r.TopologyPolicy), "%d %s needed on one NUMA node; the most free on any node is %d (node %d)",
			r.CPUs, what, bestFree, ix.nodes[bestNode])
	}
	var sb strings.Builder
	k := fewestNodes(avail, r.CPUs)
	if k == 0 {
		sb.WriteString("not enough free CPUs on the whole machine")
	} else {
		sb.WriteString("the fewest nodes that hold them now is ")
		sb.WriteString(itoa(k))
	}
	return reject(string(r.TopologyPolicy), "%d %s needed on %d NUMA node(s); %s; the most free on one node is %d (node %d)",
		r.CPUs, what, minAff, sb.String(), bestFree, ix.nodes[bestNode])
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b [20]byte
	p := len(b)
	neg := i < 0
	if neg {
		i = -i
	}
	for i > 0 {
		p--
		b[p] = byte('0' + i%10)
		i /= 10
	}
	if neg {
		p--
		b[p] = '-'
	}
	return string(b[p:])
}

// chooseNodes picks the NUMA nodes a multi-node corepin placement spans:
// the fewest that hold n (by caps), then the closest by distance, then the
// fewest sockets, then the fullest (MostAllocated) or emptiest
// (LeastAllocated). Seeds grow by distance, so it is O(nodes^2 log nodes)
// and never enumerates subsets. The nodes it returns lie in the call's
// scratch buffers, valid until it runs again.
func (s *State) chooseNodes(caps []int, n int, strategy NUMAStrategy) []int {
	ix, sc := s.ix, s.sc
	k := fewestNodes(caps, n)
	if k == 0 {
		return nil
	}
	type cand struct {
		nodes            []int
		dist, sockets, c int
	}
	score := func(nodes []int) cand {
		slices.Sort(nodes)
		c := cand{nodes: nodes}
		seen := uint64(0)
		var extra map[int32]bool
		for i, a := range nodes {
			c.c += caps[a]
			for _, b := range nodes[i+1:] {
				c.dist += ix.dist[a][b]
			}
			sock := ix.coreSocket[ix.nodeCores[a][0]]
			if sock < 64 {
				seen |= 1 << uint(sock)
			} else {
				if extra == nil {
					extra = map[int32]bool{}
				}
				extra[sock] = true
			}
		}
		c.sockets = popcount(seen) + len(extra)
		return c
	}
	better := func(a, b cand) bool {
		capOrder := cmp.Compare(a.c, b.c)
		if strategy == LeastAllocated {
			capOrder = -capOrder
		}
		return cmp.Or(cmp.Compare(len(a.nodes), len(b.nodes)), cmp.Compare(a.dist, b.dist), cmp.Compare(a.sockets, b.sockets),
			capOrder, slices.Compare(a.nodes, b.nodes)) < 0
	}
	// The k nodes with the most room always work.
	order := sc.chOrder[:0]
	defer func() { sc.chOrder = order }()
	for i, c := range caps {
		if c > 0 {
			order = append(order, i)
		}
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Or(cmp.Compare(caps[b], caps[a]), cmp.Compare(a, b)) })
	// The best set and the candidate in two buffers, swapped when the
	// candidate wins.
	bestBuf, candBuf := append(sc.chBest[:0], order[:k]...), sc.chCand[:0]
	defer func() { sc.chBest, sc.chCand = bestBuf, candBuf }()
	best := score(bestBuf)
	grow := sc.chGrow[:0]
	defer func() { sc.chGrow = grow }()
	for _, seed := range order {
		// The nodes with room by distance from seed, then the most room,
		// then index: the precomputed distance order, with each run of
		// equal distances put in order of room by insertion.
		d := ix.dist[seed]
		grow = grow[:0]
		for _, nd := range ix.distOrder[seed] {
			if caps[nd] <= 0 {
				continue
			}
			grow = append(grow, nd)
			for j := len(grow) - 1; j > 0; j-- {
				a, b := grow[j-1], grow[j]
				if d[a] != d[b] || caps[a] > caps[b] || (caps[a] == caps[b] && a < b) {
					break
				}
				grow[j-1], grow[j] = b, a
			}
		}
		sum := 0
		for i, nd := range grow {
			sum += caps[nd]
			if sum >= n {
				if i+1 == k {
					candBuf = append(candBuf[:0], grow[:i+1]...)
					if c := score(candBuf); better(c, best) {
						best = c
						bestBuf, candBuf = candBuf, bestBuf
					}
				}
				break
			}
		}
	}
	return best.nodes
}

func popcount(x uint64) int {
	n := 0
	for x != 0 {
		x &= x - 1
		n++
	}
	return n
}
