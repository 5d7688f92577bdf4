package alloc

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/corepin/corepin/cpuset"
)

// Promised returns the CPUs a was first placed on: its CPUs less those a
// Resize added. A resize never takes them away.
func (a Assignment) Promised() cpuset.CPUSet {
	if len(a.Added) == 0 {
		return a.CPUs
	}
	return a.CPUs.Difference(cpuset.New(a.Added...))
}

// Resize changes the size of the assignment r.ID in place and returns its
// placement; on any error s is unchanged. r.CPUs is the new size of an LSE
// or LSR assignment, r.MilliCPUs (or r.CPUs) the new quota of an LS or BE
// one; r.Bind, r.TopologyPolicy and r.Isolated say how an exclusive one
// grows, as they do for Allocate; r.QoS and r.Exclusive, when given, must
// be the assignment's.
//
// An exclusive assignment grows by extending its cpuset, never moving a
// CPU it holds: first the free sibling threads of its own cores, then
// whole free cores of its own L3 groups, then of its own NUMA nodes, then
// the free threads of partly held cores there; other NUMA nodes only under
// the topology policies none and best-effort (restricted and
// single-numa-node keep it on the nodes it has), the node with the most
// free CPUs first. Whole-core placement (bind FullPCPUs, option
// full-pcpus-only) takes whole cores only. Isolated CPUs are taken as
// r.Isolated says (a workload on isolated CPUs grows on isolated CPUs).
// It shrinks by giving back the CPUs added last first, and never below
// its promised CPUs (Assignment.Promised): asking for fewer is ErrInvalid.
// Both engines grow the same way: the kubelet refuses to resize a
// static-policy pod (Infeasible), so there is no kubelet choice to
// reproduce; its engine honours full-pcpus-only as above.
//
// A growth that starves the shared pools is refused as GuardPools refuses
// it, and an LS quota must fit the LS pool as in Allocate. A request wrong
// as written fails with ErrInvalid, one the current state cannot take
// with a Rejection, an unknown id with ErrUnknownID.
func (s *State) Resize(r Request) (Placement, error) {
	defer s.giveBack(s.borrow())
	i, ok := s.ids.lookup(s.recs, r.ID)
	if !ok {
		return Placement{}, fmt.Errorf("%w: %q", ErrUnknownID, r.ID)
	}
	a := s.assignment(i)
	if r.QoS != "" && r.QoS != a.QoS {
		return Placement{}, invalid("request %q: a resize keeps the qos class %s (asked %s); delete and create again to change it", r.ID, a.QoS, r.QoS)
	}
	if r.Exclusive != "" && r.Exclusive != a.Exclusive {
		return Placement{}, invalid("request %q: a resize keeps the exclusive policy %s (asked %s)", r.ID, a.Exclusive, r.Exclusive)
	}
	r.QoS, r.Exclusive = a.QoS, a.Exclusive
	if err := r.normalize(); err != nil {
		return Placement{}, err
	}
	if s.policy == PolicyKubelet && (r.Bind != BindDefault || r.NUMA != MostAllocated) {
		return Placement{}, invalid("request %q: the kubelet policy has no bind or numa strategy (got %s, %s); use policy corepin, or kubelet's options", r.ID, r.Bind, r.NUMA)
	}
	switch a.QoS {
	case LS, BE:
		return s.resizeQuota(i, r)
	case LSE, LSR:
		return s.resizeExclusive(i, r)
	}
	return Placement{}, invalid("request %q: %s holds the reserved CPUs and is not resized", r.ID, a.QoS)
}

// resizeQuota sets the quota of the LS or BE assignment recs[i].
func (s *State) resizeQuota(i int32, r Request) (Placement, error) {
	a := &s.recs[i]
	q, milli := a.QoS(), s.milliOf(a)
	pool := s.pool(q == BE)
	if q == LS {
		if left := pool.count()*1000 - (s.lsMilli - milli); r.MilliCPUs > left {
			return Placement{}, reject("LS pool", "%d millicpus asked for %q, but the shared pool has %d CPUs with %d millicpus committed to other LS work; at most %d fit",
				r.MilliCPUs, r.ID, pool.count(), s.lsMilli-milli, max(0, left))
		}
		s.lsMilli += r.MilliCPUs - milli
	}
	s.setMilli(a, r.MilliCPUs)
	p := Placement{ID: r.ID, QoS: q, CPUs: pool.toSet(), MilliCPUs: r.MilliCPUs}
	p.Quality, p.NUMANodes = s.quality(p.CPUs)
	return p, nil
}

// resizeExclusive grows or shrinks the LSE or LSR assignment recs[i].
func (s *State) resizeExclusive(i int32, r Request) (Placement, error) {
	ix := s.ix
	a := s.assignment(i)
	n, m := a.CPUs.Size(), r.CPUs
	whole := r.Bind == BindFullPCPUs || s.opts.fullPCPUs
	if whole && m != n && ix.uniformCores() && (m-n)%ix.tpc != 0 {
		c := string(BindFullPCPUs)
		if r.Bind != BindFullPCPUs {
			c = OptFullPCPUsOnly
		}
		return Placement{}, Rejection{Constraint: c, CoreSize: ix.tpc,
			Reason: fmt.Sprintf("resizing %q from %d to %d CPUs is not a whole number of cores (%d threads per core); ask for %d plus a multiple of %d", r.ID, n, m, ix.tpc, n, ix.tpc)}
	}
	switch {
	case m < n:
		promised := a.Promised()
		if m < promised.Size() {
			return Placement{}, invalid("request %q: %d CPUs is fewer than the %d it was placed with (%s), which a resize never takes away; ask for %d or more",
				r.ID, m, promised.Size(), promised, promised.Size())
		}
		keep := len(a.Added) - (n - m)
		for _, c := range a.Added[keep:] {
			s.holdCPU(c, a.QoS, a.Exclusive, -1)
		}
		a.CPUs = a.CPUs.Difference(cpuset.New(a.Added[keep:]...))
		a.Added = a.Added[:keep] // setAdded below copies it
	case m > n:
		got, err := s.growth(a, r, m-n, whole)
		if err != nil {
			return Placement{}, err
		}
		for _, c := range got {
			s.holdCPU(c, a.QoS, a.Exclusive, 1)
		}
		if err := s.GuardPools(a.QoS); err != nil {
			for _, c := range got {
				s.holdCPU(c, a.QoS, a.Exclusive, -1)
			}
			return Placement{}, err
		}
		a.CPUs = a.CPUs.Union(cpuset.New(got...))
		// This may append into the spare capacity of the slice a Clone
		// shares; setAdded below stores a copy, and neither state ever
		// reads past its own length, so neither sees the other's CPUs.
		a.Added = append(a.Added, got...)
	}
	s.recs[i].cpus = a.CPUs
	s.setAdded(a.ID, a.Added)
	p := Placement{ID: a.ID, QoS: a.QoS, CPUs: a.CPUs}
	p.Quality, p.NUMANodes = s.quality(p.CPUs)
	return p, nil
}

// growCand is a free CPU a growth may take, with what ranks it.
type growCand struct {
	cpu, core int
	// beyond is 0 on the assignment's own NUMA nodes; otherwise 1 plus
	// the rank of the node.
	beyond int
	iso    int // 0 for the CPUs r.Isolated prefers, 1 for the others
	tier   int // own core's sibling, whole core in own L3, whole core, partial core
}

// growth chooses k free CPUs for a to grow by, in the order they are
// added (best first), or says why it cannot.
func (s *State) growth(a Assignment, r Request, k int, whole bool) ([]int, error) {
	ix := s.ix
	ownCore := map[int]int{}
	ownNode := map[int32]int{}
	ownL3 := map[int32]bool{}
	onIsolated := true
	for c := range a.CPUs.All() {
		ownCore[int(ix.cpuCore[c])]++
		ownNode[ix.cpuNode[c]]++
		if l := ix.cpuL3[c]; l >= 0 {
			ownL3[l] = true
		}
		onIsolated = onIsolated && ix.isolated.has(c)
	}
	iso := r.Isolated
	if onIsolated && iso == IsolatedAvoid {
		iso = IsolatedRequire // a workload on isolated CPUs stays on them
	}
	beyondOK := r.TopologyPolicy == TopologyNone || r.TopologyPolicy == TopologyBestEffort
	// Other nodes rank by their free CPUs, most first, so that a growth
	// spans as few as it can.
	var others []int32
	for nd := range ix.nodes {
		if _, own := ownNode[int32(nd)]; !own {
			others = append(others, int32(nd))
		}
	}
	slices.SortStableFunc(others, func(x, y int32) int { return cmp.Compare(s.freeNode[y], s.freeNode[x]) })
	nodeRank := map[int32]int{}
	for j, nd := range others {
		nodeRank[nd] = j + 1
	}
	free := s.freeBits()
	var cands []growCand
	skipped := 0
	free.each(func(c int) {
		core, node := int(ix.cpuCore[c]), ix.cpuNode[c]
		isIso := ix.isolated.has(c)
		switch {
		case iso == IsolatedRequire && !isIso,
			!beyondOK && nodeRank[node] > 0,
			a.Exclusive == ExclusivePCPULevel && s.pcpuHeld(core) > ownCore[core],
			a.Exclusive == ExclusiveNUMANodeLevel && s.numaHeld(node) > ownNode[node]:
			skipped++
			return
		}
		g := growCand{cpu: c, core: core, beyond: nodeRank[node], iso: 1}
		if (iso == IsolatedAvoid) != isIso {
			g.iso = 0
		}
		wholeFree := int(s.freeCore[core]) == len(ix.coreCPUs[core])
		switch {
		case ownCore[core] > 0:
			g.tier = 0
		case wholeFree && ownL3[ix.cpuL3[c]]:
			g.tier = 1
		case wholeFree:
			g.tier = 2
		default:
			g.tier = 3
		}
		if whole && !wholeFree && (ownCore[core] == 0 || ownCore[core]+int(s.freeCore[core]) != len(ix.coreCPUs[core])) {
			skipped++ // takes whole cores only: no thread of a core another holds
			return
		}
		cands = append(cands, g)
	})
	slices.SortFunc(cands, func(x, y growCand) int {
		return cmp.Or(cmp.Compare(x.beyond, y.beyond), cmp.Compare(x.iso, y.iso), cmp.Compare(x.tier, y.tier),
			cmp.Compare(x.core, y.core), cmp.Compare(x.cpu, y.cpu))
	})
	var got []int
	if !whole {
		for _, g := range cands[:min(k, len(cands))] {
			got = append(got, g.cpu)
		}
	} else {
		// Units of a core (its free CPUs), in the order their best CPU
		// ranks, taken whole where they fit what is left to take.
		var order []int
		unit := map[int][]int{}
		for _, g := range cands {
			if _, seen := unit[g.core]; !seen {
				order = append(order, g.core)
			}
			unit[g.core] = append(unit[g.core], g.cpu)
		}
		for _, core := range order {
			if u := unit[core]; len(got)+len(u) <= k {
				got = append(got, u...)
			}
		}
	}
	if len(got) < k {
		where := "on this machine"
		if !beyondOK {
			where = fmt.Sprintf("on its NUMA nodes (topology policy %s keeps it there)", r.TopologyPolicy)
		}
		what := "free CPUs"
		if whole {
			what = "CPUs in free whole cores"
		}
		return nil, reject("capacity", "growing %q from %d to %d CPUs needs %d more without moving the ones it has; %d %s qualify %s (%d other free CPUs are ruled out by its bind, exclusive, isolated or topology policy)",
			r.ID, a.CPUs.Size(), a.CPUs.Size()+k, k, len(got), what, where, skipped)
	}
	return got, nil
}

// checkAdded reports whether a's Added CPUs are its own, each once, and
// leave it a promised CPU.
func checkAdded(a Assignment) error {
	if len(a.Added) == 0 {
		return nil // the usual case, without the map
	}
	seen := map[int]bool{}
	for _, c := range a.Added {
		if !a.CPUs.Contains(c) || seen[c] {
			return invalid("assignment %q: added cpu %d is not one of its cpus %s, or is added twice", a.ID, c, a.CPUs)
		}
		seen[c] = true
	}
	if len(a.Added) > 0 && len(a.Added) >= a.CPUs.Size() {
		return invalid("assignment %q: every cpu of %s is marked added; it keeps at least the one it was placed on", a.ID, a.CPUs)
	}
	return nil
}
