package alloc

import (
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/topology"
)

// IsolatedCPUs returns the CPUs of t that corepin may hand out but the
// kernel keeps apart from general scheduling: isolated at boot (isolcpus),
// in isolated cgroup partitions, or run without the periodic tick
// (nohz_full), which pays off only while one task runs there. Exclusive
// requests take them as their Isolated policy says; the shared pools leave
// them out (SharedCPUs).
func IsolatedCPUs(t *topology.Topology) cpuset.CPUSet {
	return t.Isolated().Union(t.NohzFull()).Intersection(t.Allowed())
}

// SharedCPUs returns the CPUs of t the shared pools (LS, BE) and corepin
// run's unpinned jobs may use: the allowed CPUs outside IsolatedCPUs. Where
// every allowed CPU is isolated it returns them all, since shared work
// would otherwise have nowhere to run.
func SharedCPUs(t *topology.Topology) cpuset.CPUSet {
	if s := t.Allowed().Difference(IsolatedCPUs(t)); !s.IsEmpty() {
		return s
	}
	return t.Allowed()
}

// allocateIsolated runs place (the State's engine's exclusive placement
// of r) with the CPUs r's Isolated policy keeps out hidden as if held, and
// puts them back after: by default it hides the isolated CPUs and, where the rest
// cannot hold r, tries again with them; prefer hides the others first and
// falls back to every CPU; require hides the others only.
func (s *State) allocateIsolated(r *Request) (bitset, error) {
	ix := s.ix
	if ix.isolated.count() == 0 {
		if r.Isolated == IsolatedRequire {
			return nil, reject("isolated CPUs", "request %q requires isolated CPUs, and this machine has none (isolcpus=, nohz_full= or an isolated cpuset partition make some)", r.ID)
		}
		return s.place(r)
	}
	hide := newBitset(ix.words)
	for i := range hide {
		if r.Isolated == IsolatedAvoid {
			hide[i] = ix.isolated[i]
		} else {
			hide[i] = ix.allowed[i] &^ ix.isolated[i]
		}
	}
	got, err := s.withHidden(hide, r)
	if err == nil || r.Isolated != IsolatedRequire {
		if err != nil {
			return s.place(r) // avoid or prefer: every CPU, as without isolation
		}
		return got, nil
	}
	free := 0
	ix.isolated.each(func(c int) {
		if s.isFree(c) {
			free++
		}
	})
	return nil, reject("isolated CPUs", "request %q requires %d isolated CPUs; %d of the isolated CPUs %s are free (%v)", r.ID, r.CPUs, free, ix.isolated.toSet(), err)
}

// place is the State's engine's exclusive placement of r.
func (s *State) place(r *Request) (bitset, error) {
	if s.policy == PolicyKubelet {
		return s.kubeAllocate(r)
	}
	return s.corepinAllocate(r)
}

// withHidden runs place with the free CPUs of hide counted as held.
func (s *State) withHidden(hide bitset, r *Request) (bitset, error) {
	var hidden []int
	hide.each(func(c int) {
		if s.isFree(c) {
			s.used.set(c)
			s.adjust(c, -1)
			hidden = append(hidden, c)
		}
	})
	got, err := s.place(r)
	for _, c := range hidden {
		s.used.clear(c)
		s.adjust(c, 1)
	}
	// Spanned with the hidden CPUs held: not the state it is placed on.
	s.sc.spanKnown = false
	return got, err
}
