package plugin

import (
	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/topology"
)

// summary is what a node's state leaves an exclusive request, counted once
// per change of the state: per NUMA node, the CPUs it could still take
// (allowed, not reserved, not held by LSE or LSR) and those of them in
// wholly free physical cores. Each count is an upper bound of what the
// allocator can give, so a request it refuses is refused by the allocator
// too; the allocator runs only where the summary cannot decide.
type summary struct {
	free, whole                []int
	total, wholeTotal          int
	maxFree, maxWhole, coreMax int
}

// summarize counts st's summary.
func summarize(st *alloc.State) summary {
	t := st.Topology()
	p := st.Pools()
	avail := t.Allowed().Difference(p.Reserved).Difference(p.LSE).Difference(p.LSR)
	var wholeCPUs cpuset.Builder
	var s summary
	for c := range t.NumCores() {
		cpus := t.CoreCPUs(topology.CoreID(c))
		s.coreMax = max(s.coreMax, cpus.Size())
		if !cpus.IsEmpty() && cpus.IsSubsetOf(avail) {
			wholeCPUs.AddSet(cpus)
		}
	}
	whole := wholeCPUs.Result()
	for _, n := range t.NodesWithCPUs() {
		cpus := t.NodeCPUs(n)
		f, w := cpus.Intersection(avail).Size(), cpus.Intersection(whole).Size()
		s.free, s.whole = append(s.free, f), append(s.whole, w)
		s.total, s.wholeTotal = s.total+f, s.wholeTotal+w
		s.maxFree, s.maxWhole = max(s.maxFree, f), max(s.maxWhole, w)
	}
	return s
}

// refuses is the refusal of req (as alloc.NodeSettings.Apply made it)
// that the summary alone proves, in the form the allocator gives it
// (alloc.Rejection, worded by nodestate.Reason), or nil when the
// allocator must decide. wholeCores says the node places exclusive CPUs
// in whole cores whatever the request asks (the option full-pcpus-only).
func (s summary) refuses(req alloc.Request, wholeCores bool) error {
	if req.QoS != alloc.LSE && req.QoS != alloc.LSR || req.CPUs <= 0 {
		return nil
	}
	whole := wholeCores || req.Bind == alloc.BindFullPCPUs
	if whole && s.coreMax > 0 && req.CPUs%s.coreMax != 0 {
		return nil // the allocator words a request of the wrong shape
	}
	have, haveOne := s.total, s.maxFree
	constraint := "capacity"
	if whole {
		have, haveOne = s.wholeTotal, s.maxWhole
		constraint = string(alloc.BindFullPCPUs)
	}
	switch {
	case have < req.CPUs:
		return alloc.Rejection{Constraint: constraint, Reason: "the node's summary"}
	case req.TopologyPolicy == alloc.TopologySingleNUMANode && haveOne < req.CPUs:
		return alloc.Rejection{Constraint: string(alloc.TopologySingleNUMANode), Reason: "the node's summary"}
	}
	return nil
}
