package alloc

// Try answers r as Admit would on a Clone of s (the placement, or the
// refusal), without changing s and without copying its assignments: only
// the bitsets and counters a placement changes are copied, into buffers
// reused across calls. A scheduler judging a node's state for each pod
// of a burst asks this, and places the pod (Clone, Admit) only on the
// node it chose. Unlike Admit, Try may run concurrently with other calls
// that only read s (Try, Clone, Pools, Assignments). Work does not count
// its scans.
func (s *State) Try(r Request) (Placement, error) {
	t := s.ix.trials.Get().(*trial)
	defer s.ix.trials.Put(t)
	t.st = *s
	c := &t.st
	w := s.ix.words
	copy(t.bits, s.reserved)
	copy(t.bits[w:], s.reservedPhys)
	copy(t.bits[2*w:], s.used)
	copy(t.bits[3*w:], s.lsr)
	counters := t.counters[:0]
	for _, xs := range [][]int32{s.freeCore, s.freeL3, s.freeNode} {
		counters = append(counters, xs...)
	}
	c.carve(t.bits, counters)
	if s.pcpuCore != nil {
		copy(t.excl, s.pcpuCore)
		copy(t.excl[len(s.pcpuCore):], s.numaExcl)
		c.carveExcl(t.excl)
	}
	// The copy reads s's assignments and never records one (trying):
	// GuardPools, the only reader of them after the placement, counts
	// the LS and BE workloads, and the placement it guards is exclusive.
	c.sc, c.trying = nil, true
	defer func() { t.st = State{} }() // hold no assignments of s in the pool
	p, err := c.Allocate(r)
	if err != nil {
		return p, err
	}
	if err := c.GuardPools(p.QoS); err != nil {
		return Placement{}, err
	}
	return p, nil
}

// trial is the buffers of one Try: a State's value, bitsets and counters
// (excl: the exclusive-level ones, used when the State has them).
type trial struct {
	st       State
	bits     bitset
	counters []int32
	excl     []int
}

func (ix *topoIndex) newTrial() *trial {
	return &trial{bits: make(bitset, 4*ix.words), counters: make([]int32, 0, ix.counters), excl: make([]int, len(ix.coreCPUs)+len(ix.nodes))}
}
