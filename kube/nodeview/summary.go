package nodeview

import (
	"slices"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/topology"
)

// summary is what a node's state leaves an exclusive request, counted once
// per change of the state: per NUMA node and per socket, the CPUs it could
// still take (allowed, not reserved, not held by LSE or LSR) and those of
// them in wholly free physical cores. Each count is an upper bound of what
// the allocator can give, so a request it refuses is refused by the
// allocator too; the allocator runs only where the summary cannot decide.
type summary struct {
	free, whole                []int
	total, wholeTotal          int
	maxFree, maxWhole, coreMax int
	// sockFree and sockWhole are the counts per socket.
	sockFree, sockWhole []int
	// online are the online CPUs per NUMA node, as the allocator sizes
	// the fewest nodes a request needs; noneCPUs says some CPUs are in no
	// NUMA node (the allocator's extra locality, not counted here).
	online   []int
	noneCPUs bool
	// ls and be are the shared pools' CPUs, lsMilli the LS quotas
	// committed, st the state counted (whose assignment ids are held):
	// what the allocator reads of a shared (LS, BE) request. assigned is
	// the number of its assignments.
	ls, be, lsMilli, assigned int
	st                        *alloc.State
	// exact says the node's engine and machine place an exclusive
	// request that fits one L3 group's whole free cores there
	// (placesWhole; exactUnits). unitWhole is the most CPUs in whole free
	// cores of one L3 group; tpc the threads of every core, 0 when cores
	// differ.
	exact     bool
	unitWhole int
	tpc       int
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
		s.online = append(s.online, cpus.Size())
	}
	for so := range t.NumSockets() {
		cpus := t.SocketCPUs(topology.SocketID(so))
		s.sockFree = append(s.sockFree, cpus.Intersection(avail).Size())
		s.sockWhole = append(s.sockWhole, cpus.Intersection(whole).Size())
	}
	s.noneCPUs = !t.NoNodeCPUs().IsEmpty()
	var units []cpuset.CPUSet
	units, s.exact = exactUnits(st)
	for _, u := range units {
		s.unitWhole = max(s.unitWhole, u.Intersection(whole).Size())
	}
	uniform := true
	for c := range t.NumCores() {
		switch n := t.CoreCPUs(topology.CoreID(c)).Size(); {
		case n == 0:
		case s.tpc == 0:
			s.tpc = n
		case s.tpc != n:
			uniform = false
		}
	}
	if !uniform {
		s.tpc = 0
	}
	s.ls, s.be = p.LS.Size(), p.BE.Size()
	s.st = st
	as := st.Assignments()
	s.assigned = len(as)
	for _, a := range as {
		if a.QoS == alloc.LS {
			s.lsMilli += a.MilliCPUs
		}
	}
	return s
}

// shared answers a shared (LS, BE) request of the usual form as the
// allocator does, without placing it: the shared pools only hold the
// quota (an LS quota within the LS pool's CPUs, a pool not empty), and
// such a placement always scores nodestate.Score's shared 5. decided is
// false for a request the allocator must read (another class, a bind,
// exclusive or NUMA strategy, isolated CPUs, an id already held, no LS
// quota).
func (s summary) shared(req alloc.Request) (err error, decided bool) {
	if req.QoS != alloc.LS && req.QoS != alloc.BE || req.ID == "" || req.Isolated != alloc.IsolatedAvoid ||
		req.Bind != "" && req.Bind != alloc.BindDefault || req.Exclusive != "" && req.Exclusive != alloc.ExclusiveNone ||
		req.NUMA != "" && req.NUMA != alloc.MostAllocated || req.CPUs < 0 || req.MilliCPUs < 0 {
		return nil, false
	}
	if _, err := alloc.ParseTopologyPolicy(string(req.TopologyPolicy)); err != nil {
		return nil, false
	}
	if s.st != nil && s.st.Holds(req.ID) {
		return nil, false
	}
	milli := req.MilliCPUs
	if milli == 0 {
		milli = req.CPUs * 1000
	}
	size := s.be
	if req.QoS == alloc.LS {
		if milli == 0 {
			return nil, false
		}
		size = s.ls
		if s.lsMilli+milli > size*1000 {
			return alloc.Rejection{Constraint: "LS pool", Reason: "the node's summary"}, true
		}
	}
	if size == 0 {
		return alloc.Rejection{Constraint: string(req.QoS) + " pool", Reason: "the node's summary"}, true
	}
	return nil, true
}

// topSum is the sum of the k largest of counts.
func topSum(counts []int, k int) int {
	sorted := slices.Sorted(slices.Values(counts))
	sum := 0
	for i := len(sorted) - 1; i >= 0 && i >= len(sorted)-k; i-- {
		sum += sorted[i]
	}
	return sum
}

// fewest is the fewest of counts whose sum reaches n, 0 when all of them
// do not (as the allocator counts the NUMA nodes a request needs).
func fewest(counts []int, n int) int {
	for k := 1; k <= len(counts); k++ {
		if topSum(counts, k) >= n {
			return k
		}
	}
	return 0
}

// refusesRestricted reports whether the summary proves that a request of
// n CPUs under the restricted topology policy is refused: kubelet's
// Topology Manager, as the allocator reproduces it, admits it only on the
// fewest NUMA nodes that could hold n on the empty machine, or (option
// align-by-socket) on nodes spanning the fewest sockets that could; the
// free CPUs there are at most the largest counts. The free CPUs are
// counted whatever the bind, an upper bound of every engine's capacity.
func (s summary) refusesRestricted(n int, alignBySocket bool) bool {
	if s.noneCPUs || len(s.free) < 2 {
		return false
	}
	minAff := fewest(s.online, n)
	if minAff == 0 {
		minAff = len(s.online)
	}
	if topSum(s.free, minAff) >= n {
		return false
	}
	if !alignBySocket {
		return true
	}
	perSocket := len(s.free) / max(len(s.sockFree), 1)
	if perSocket == 0 {
		return true // no mask can be socket-aligned
	}
	minSockets := (minAff + perSocket - 1) / perSocket
	return topSum(s.sockFree, minSockets) < n
}

// nodeOpts are what the summary reads of a node's options.
type nodeOpts struct {
	// fullPCPUs: the option full-pcpus-only (a request must be whole
	// cores); wholeCores: the node also places exclusive CPUs in whole
	// free cores only (the corepin engine under it).
	fullPCPUs, wholeCores bool
	// alignBySocket: the option align-by-socket (restricted also admits
	// socket-aligned masks).
	alignBySocket bool
	// kubelet: the kubelet engine, which checks a request's topology
	// policy before the node's free CPUs.
	kubelet bool
}

// refuses is the refusal of req (as alloc.NodeSettings.Apply made it)
// that the summary alone proves, in the form the allocator gives it
// (alloc.Rejection, worded by nodestate.Reason), or nil when the
// allocator must decide, under the node's options o. A request the
// allocator refuses by another rule first (an exclusive level, isolated
// CPUs; under the kubelet engine, its topology policy or options) is
// left to it, so that the reason is the allocator's, the node's own
// (issue 29: one answer per rule).
func (s summary) refuses(req alloc.Request, o nodeOpts) error {
	if req.QoS != alloc.LSE && req.QoS != alloc.LSR || req.CPUs <= 0 ||
		req.Exclusive != "" && req.Exclusive != alloc.ExclusiveNone || req.Isolated != alloc.IsolatedAvoid {
		return nil
	}
	whole := o.wholeCores || req.Bind == alloc.BindFullPCPUs
	if (whole || o.fullPCPUs) && s.coreMax > 0 && req.CPUs%s.coreMax != 0 {
		return nil // the allocator words a request of the wrong shape
	}
	have, haveOne := s.total, s.maxFree
	constraint := "capacity"
	if whole {
		have, haveOne = s.wholeTotal, s.maxWhole
		constraint = string(alloc.BindFullPCPUs)
	}
	switch {
	case have < req.CPUs && o.kubelet:
		return nil // the kubelet engine words it by its topology policy or its options first
	case have < req.CPUs:
		return alloc.Rejection{Constraint: constraint, Reason: "the node's summary"}
	case req.TopologyPolicy == alloc.TopologySingleNUMANode && haveOne < req.CPUs:
		return alloc.Rejection{Constraint: string(alloc.TopologySingleNUMANode), Reason: "the node's summary"}
	case req.TopologyPolicy == alloc.TopologyRestricted && s.refusesRestricted(req.CPUs, o.alignBySocket):
		return alloc.Rejection{Constraint: string(alloc.TopologyRestricted), Reason: "the node's summary"}
	}
	return nil
}

// exactUnits are the units in which st's engine places an exclusive
// request that one unit's whole free cores hold: the L3 groups. exact is
// false where the summary does not predict the placement: the kubelet
// engine, any option, isolated CPUs, allowed CPUs offline, in no NUMA node
// or in no L3 group, or an L3 group spanning NUMA nodes or sockets.
func exactUnits(st *alloc.State) (units []cpuset.CPUSet, exact bool) {
	t := st.Topology()
	if st.Policy() != alloc.PolicyCorepin || len(st.Options()) > 0 || !alloc.IsolatedCPUs(t).IsEmpty() ||
		!t.Allowed().IsSubsetOf(t.Online()) || !t.NoNodeCPUs().IsEmpty() {
		return nil, false
	}
	var all cpuset.Builder
	for c := range t.NumL3() {
		u := t.L3CPUs(topology.CacheID(c))
		all.AddSet(u)
		units = append(units, u)
	}
	if !t.Allowed().IsSubsetOf(all.Result()) {
		return nil, false // no L3 groups, or CPUs in none
	}
	nodes := t.NodesWithCPUs()
	for _, u := range units {
		if !within(u, t.NumSockets(), func(i int) cpuset.CPUSet { return t.SocketCPUs(topology.SocketID(i)) }) {
			return nil, false
		}
		if !within(u, len(nodes), func(i int) cpuset.CPUSet { return t.NodeCPUs(nodes[i]) }) {
			return nil, false
		}
	}
	return units, true
}

// within reports whether u's CPUs are those of at most one of the n sets
// part(0..n-1).
func within(u cpuset.CPUSet, n int, part func(int) cpuset.CPUSet) bool {
	seen := 0
	for i := range n {
		if part(i).Intersects(u) {
			seen++
		}
	}
	return seen <= 1
}

// placesWhole reports whether the summary proves that the allocator
// takes req (as alloc.NodeSettings.Apply made it) in whole free cores of
// one L3 group (exactUnits), and so places it on one NUMA node, one socket
// and one L3 group sharing no core, past GuardPools (the LS pool keeps a
// CPU and its quotas): an exclusive request of the usual form (LSE, bind
// Default or FullPCPUs in whole cores, no exclusive level, most-allocated,
// no isolated CPUs, an id not held) that some unit's whole free cores hold,
// under any topology policy (one NUMA node satisfies each).
func (s summary) placesWhole(req alloc.Request) bool {
	if !s.exact || req.QoS != alloc.LSE || req.CPUs <= 0 || req.MilliCPUs != 0 && req.MilliCPUs != req.CPUs*1000 || req.ID == "" ||
		req.Exclusive != "" && req.Exclusive != alloc.ExclusiveNone || req.NUMA != "" && req.NUMA != alloc.MostAllocated ||
		req.Isolated != alloc.IsolatedAvoid || len(req.Hint) > 0 {
		return false
	}
	switch req.Bind {
	case "", alloc.BindDefault:
	case alloc.BindFullPCPUs:
		if s.tpc == 0 || req.CPUs%s.tpc != 0 {
			return false
		}
	default:
		return false
	}
	if _, err := alloc.ParseTopologyPolicy(string(req.TopologyPolicy)); err != nil {
		return false
	}
	if s.st != nil && s.st.Holds(req.ID) {
		return false
	}
	left := s.ls - req.CPUs
	return req.CPUs <= s.unitWhole && left > 0 && s.lsMilli <= left*1000
}

// wholeQuality is the quality of a placement placesWhole proves.
func (s summary) wholeQuality() alloc.Quality {
	return alloc.Quality{NUMANodes: 1, Sockets: 1, L3Groups: 1}
}
