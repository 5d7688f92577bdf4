package alloc

import (
	"errors"
	"maps"
	"math"
	"math/bits"
	"slices"
	"strings"

	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/topology"
)

// State is a machine's topology, its configuration and the assignments
// placed on it so far. Allocate and Release change it; everything else only
// reads. A State is not safe for concurrent use: Clone it for another
// goroutine. Decisions depend only on the State and the Request, so the same
// sequence of calls gives the same placements on any machine.
type State struct {
	ix       index // a value: a fresh State is one allocation fewer
	policy   Policy
	opts     options
	optNames []string // NodeSettings.Options as given

	reserved, reservedPhys bitset
	used                   bitset // CPUs held by LSE and LSR assignments
	lsr                    bitset // CPUs held by LSR assignments (BE may borrow them)

	// CPUs of each core, L3 group and node free for an exclusive
	// placement: int32, half the bytes of a fresh State's counters (a
	// decision's garbage), and more cores to a cache line.
	freeCore []int32
	freeL3   []int32
	freeNode []int32
	// CPUs per core held by PCPULevel-exclusive assignments, and per node
	// index by NUMANodeLevel-exclusive ones: both nil until the first
	// such assignment (holdExcl), which most nodes never hold.
	pcpuCore []int
	numaExcl []int

	// The assignments held: recs, in no order, and ids, each id's index
	// in recs. Values, not pointers, so that Assign allocates nothing per
	// assignment and Clone copies two blocks. added holds the Added CPUs
	// of the assignments that have any (resized ones), by id; nil when
	// none has.
	ids   idIndex
	recs  []record
	added map[string][]int
	// bigMilli holds the MilliCPUs of the records whose count does not
	// fit their int32 (record.milli is milliElsewhere), by id; nil when
	// none has.
	bigMilli map[string]int
	lsMilli  int

	// work counts the units (CPUs, bitset words, counters) the pool and
	// quality scans of every call so far visited; see Work.
	work int64

	// sc holds the buffers of the call under way, borrowed from the
	// topology's pool (borrow) and nil between calls, so that a State
	// allocates none for its own.
	sc *scratch
	// trying: a copy Try places on, sharing its original's assignments,
	// which it must never change (record does nothing).
	trying bool
}

// testHooks are for tests only, set while no decision runs: slow turns
// the corepin engine's shortcuts off (kubeletFirst, lightCaps), and won,
// when set, is called for each decision kubeletFirst settles, so that
// tests can show they decide as the full path does. They are not State
// fields, which every State would carry.
var testHooks struct {
	slow bool
	won  func()
}

// NewState returns an empty State for t. It fails with ErrInvalid on an
// unknown policy or option, a pair of options kubelet refuses together,
// reserved CPUs that are not online, or a NUMA node id above cpuset.MaxCPU.
func NewState(t *topology.Topology, cfg NodeSettings) (*State, error) {
	if t == nil {
		return nil, invalid("no topology")
	}
	policy, err := ParsePolicy(string(cfg.Policy))
	if err != nil {
		return nil, err
	}
	// recs and their index by id are made on the first record.
	s := &State{policy: policy, optNames: slices.Clone(cfg.Options)}
	if s.opts, err = parseOptions(cfg.Options); err != nil {
		return nil, err
	}
	s.ix = indexOf(t)
	ix := s.ix
	// A Placement reports its NUMA nodes as a cpuset, which holds ids up
	// to cpuset.MaxCPU; a hand-written topology can name more. None is
	// the CPUs in no NUMA node, which a placement reports as no node.
	for _, nd := range ix.nodes {
		if (nd < 0 && nd != topology.None) || int(nd) > cpuset.MaxCPU {
			return nil, invalid("numa node id %d is outside [0, %d], the node ids a placement can report", nd, cpuset.MaxCPU)
		}
	}
	if s.policy == PolicyKubelet && s.opts.alignBySocket && ix.numSockets > len(ix.nodes) {
		return nil, invalid("option %s needs at least as many NUMA nodes as sockets; this machine has %d sockets and %d nodes", OptAlignBySocket, ix.numSockets, len(ix.nodes))
	}
	s.carve(make(bitset, 4*ix.words), make([]int32, ix.counters))
	if !cfg.Reserved.IsEmpty() {
		if !cfg.Reserved.IsSubsetOf(t.Online()) {
			return nil, invalid("reserved cpus %s are not all online (online: %s)", cfg.Reserved, t.Online())
		}
		s.reserved.fromSet(cfg.Reserved)
	}
	s.recount()
	if cfg.Reserved.IsEmpty() && cfg.ReservedCount > 0 {
		defer s.giveBack(s.borrow())
		var got bitset
		if s.policy == PolicyKubelet {
			got, err = s.kubeReserve(cfg.ReservedCount)
		} else {
			got, err = s.corepinAllocate(&Request{ID: "reserved", CPUs: cfg.ReservedCount, QoS: SYSTEM, Bind: BindDefault, NUMA: MostAllocated, TopologyPolicy: TopologyNone})
			if err != nil {
				err = invalid("reserving %d cpus: %v", cfg.ReservedCount, err)
			}
		}
		if err != nil {
			return nil, err
		}
		s.reserved.copyFrom(got)
		s.recount()
	}
	s.reserved.each(func(c int) {
		for _, sib := range ix.coreCPUs[ix.cpuCore[c]] {
			s.reservedPhys.set(sib)
		}
	})
	return s, nil
}

// carve lays the State's bitsets (reserved, reservedPhys, used, lsr) over
// bits and its free counters (freeCore, freeL3, freeNode) over counters,
// one allocation each instead of one per slice.
func (s *State) carve(bits bitset, counters []int32) {
	ix := s.ix
	w := ix.words
	s.reserved, s.reservedPhys, s.used, s.lsr = bits[:w:w], bits[w:2*w:2*w], bits[2*w:3*w:3*w], bits[3*w:4*w:4*w]
	c, l := len(ix.coreCPUs), ix.numL3
	s.freeCore, s.freeL3, s.freeNode = counters[:c:c], counters[c:c+l:c+l], counters[c+l:ix.counters:ix.counters]
}

// carveExcl lays pcpuCore and numaExcl over excl, which holds a counter
// per core and then one per node index.
func (s *State) carveExcl(excl []int) {
	c := len(s.ix.coreCPUs)
	s.pcpuCore, s.numaExcl = excl[:c:c], excl[c:]
}

// exclCounters returns the exclusive-level counters (pcpuCore, then
// numaExcl) in one new slice: zeros, or a copy of s's.
func (s *State) exclCounters() []int {
	out := make([]int, len(s.ix.coreCPUs)+len(s.ix.nodes))
	if s.pcpuCore != nil {
		copy(out, s.pcpuCore)
		copy(out[len(s.pcpuCore):], s.numaExcl)
	}
	return out
}

// pcpuHeld is pcpuCore[core], 0 before any PCPULevel assignment.
func (s *State) pcpuHeld(core int) int {
	if s.pcpuCore == nil {
		return 0
	}
	return s.pcpuCore[core]
}

// numaHeld is numaExcl[node], 0 before any NUMANodeLevel assignment.
func (s *State) numaHeld(node int32) int {
	if s.numaExcl == nil {
		return 0
	}
	return s.numaExcl[node]
}

// holdExcl counts d CPUs of CPU c held (d > 0) or freed by an assignment
// exclusive at level ex, making the counters on first use.
func (s *State) holdExcl(c int, ex Exclusive, d int) {
	if ex != ExclusivePCPULevel && ex != ExclusiveNUMANodeLevel {
		return
	}
	if s.pcpuCore == nil {
		s.carveExcl(s.exclCounters())
	}
	if ex == ExclusivePCPULevel {
		s.pcpuCore[s.ix.cpuCore[c]] += d
	} else {
		s.numaExcl[s.ix.cpuNode[c]] += d
	}
}

// recount rebuilds the free counters from reserved and used: the
// topology's allowed CPUs per unit, less those reserved or used.
func (s *State) recount() {
	ix := s.ix
	copy(s.freeCore, ix.allowedCore)
	copy(s.freeL3, ix.allowedL3)
	copy(s.freeNode, ix.allowedNode)
	for i := range ix.words {
		w := ix.online[i] & ix.allowed[i] & (s.reserved[i] | s.used[i])
		for ; w != 0; w &= w - 1 {
			s.adjust(i<<6|bits.TrailingZeros64(w), -1)
		}
	}
}

func (s *State) isFree(c int) bool {
	return s.ix.allowed.has(c) && !s.reserved.has(c) && !s.used.has(c)
}

func (s *State) adjust(c int, d int32) {
	ci := s.ix.cpuAt[c]
	s.freeCore[ci.core] += d
	s.freeNode[ci.node] += d
	if ci.l3 >= 0 {
		s.freeL3[ci.l3] += d
	}
}

// freeBits returns the CPUs free for an exclusive placement.
func (s *State) freeBits() bitset {
	b := newBitset(s.ix.words)
	s.freeInto(b)
	return b
}

// freeInto sets b to the CPUs free for an exclusive placement.
func (s *State) freeInto(b bitset) {
	for i := range b {
		b[i] = s.ix.online[i] & s.ix.allowed[i] &^ s.reserved[i] &^ s.used[i]
	}
}

// Topology returns the topology the State was built on.
func (s *State) Topology() *topology.Topology { return s.ix.topo }

// Policy returns the engine in use.
func (s *State) Policy() Policy { return s.policy }

// Options returns the option names of the State's Config, as given (a
// copy).
func (s *State) Options() []string { return slices.Clone(s.optNames) }

// Reserved returns the reserved CPUs.
func (s *State) Reserved() cpuset.CPUSet { return s.reserved.toSet() }

// Clone returns an independent copy; the topology index is shared.
func (s *State) Clone() *State {
	c := *s
	w := s.ix.words
	bits := make(bitset, 4*w)
	copy(bits, s.reserved)
	copy(bits[w:], s.reservedPhys)
	copy(bits[2*w:], s.used)
	copy(bits[3*w:], s.lsr)
	counters := make([]int32, 0, s.ix.counters)
	for _, xs := range [][]int32{s.freeCore, s.freeL3, s.freeNode} {
		counters = append(counters, xs...)
	}
	c.carve(bits, counters)
	if s.pcpuCore != nil {
		c.carveExcl(s.exclCounters())
	}
	// The records keep their room: a clone is made to place on (the
	// extender's Clone().Admit), and a clone cut to its length would copy
	// them all again at its first record.
	c.ids, c.recs, c.added, c.bigMilli = s.ids.clone(), nil, maps.Clone(s.added), maps.Clone(s.bigMilli)
	if s.recs != nil {
		c.recs = append(make([]record, 0, max(cap(s.recs), len(s.recs)+1)), s.recs...)
	}
	c.sc = nil
	return &c
}

// Holds reports whether an assignment of id is held.
func (s *State) Holds(id string) bool {
	_, ok := s.ids.lookup(s.recs, id)
	return ok
}

// Trim gives back the room s keeps for the assignments it may record
// next: its records and their index at their length. It is for a State
// kept to be read and cloned, never placed on itself (a scheduler's
// decoded node states, thousands of them), whose first record made room
// for recordsHint; a Clone makes room again.
func (s *State) Trim() {
	if s.trying || s.recs == nil {
		return
	}
	s.recs = slices.Clip(slices.Clone(s.recs))
	s.ids.grow(s.recs, s.ids.n) // remade at the size of the ids held
}

// Assignments returns the assignments held, sorted by id.
func (s *State) Assignments() []Assignment {
	out := make([]Assignment, 0, len(s.recs))
	for _, i := range s.byID() {
		out = append(out, s.assignment(i))
	}
	return out
}

// byID returns the indexes of recs in order of their ids.
func (s *State) byID() []int32 {
	order := make([]int32, len(s.recs))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int { return strings.Compare(s.recs[a].id, s.recs[b].id) })
	return order
}

// Assign records an existing assignment, as when a plan names workloads
// already placed or an agent restarts. Exclusive sets (LSE, LSR) must be
// online, allowed, outside the reserved CPUs and disjoint from every other
// exclusive set.
func (s *State) Assign(a Assignment) error {
	if a.ID == "" {
		return invalid("assignment without an id")
	}
	hash := idHash(a.ID)
	if _, dup := s.ids.lookupHash(s.recs, a.ID, hash); dup {
		return invalid("assignment id %q used twice", a.ID)
	}
	if a.QoS == "" {
		a.QoS = LSE
	}
	if a.Exclusive == "" {
		a.Exclusive = ExclusiveNone
	}
	// An exclusive set with a known exclusive policy is what a node's
	// state is rebuilt from, per decision: the request normalize would
	// check is valid, so it is not built.
	qc, ec := qosCode(a.QoS), exclCode(a.Exclusive)
	var r Request
	if !exclusiveSet(a, qc, ec) {
		r = Request{ID: a.ID, QoS: a.QoS, Exclusive: a.Exclusive, CPUs: a.CPUs.Size(), MilliCPUs: a.MilliCPUs}
		switch a.QoS {
		case LSE, LSR:
			r.MilliCPUs = 0
		case SYSTEM:
			r.CPUs, r.MilliCPUs = max(1, s.reserved.count()), 0
		default:
			r.CPUs = 0
			if r.MilliCPUs == 0 {
				r.MilliCPUs = 1 // an LS or BE assignment with no quota stated still counts as present
			}
		}
		if err := r.normalize(); err != nil {
			return err
		}
	}
	switch qc {
	case qosLSE, qosLSR:
		if a.CPUs.IsEmpty() {
			return invalid("assignment %q: %s needs a cpuset", a.ID, a.QoS)
		}
		if a.CPUs.Max() >= len(s.ix.cpuCore) || !a.CPUs.IsSubsetOf(s.ix.topo.Online()) {
			return invalid("assignment %q: cpus %s are not all online", a.ID, a.CPUs)
		}
		// A word at a time: a node's state is rebuilt from every
		// assignment it holds, per decision, in the extender and the
		// scheduler plugin.
		for i := range s.ix.words {
			w := a.CPUs.Word(i)
			if bad := w & (s.reserved[i] | s.used[i]); bad != 0 {
				c := i<<6 | bits.TrailingZeros64(bad)
				if s.reserved.has(c) {
					return invalid("assignment %q: cpu %d is reserved", a.ID, c)
				}
				return invalid("assignment %q: cpu %d is already assigned to %s", a.ID, c, s.holder(c))
			}
		}
		if err := checkAdded(a); err != nil {
			return err
		}
		s.holdFresh(a.CPUs, a.QoS, a.Exclusive)
	default:
		if len(a.Added) > 0 {
			return invalid("assignment %q: %s holds no cpuset, so no cpus were added to it", a.ID, a.QoS)
		}
		a.CPUs = cpuset.CPUSet{}
		a.MilliCPUs = r.MilliCPUs
		if a.QoS == LS {
			s.lsMilli += a.MilliCPUs
		}
	}
	// normalize has accepted a.QoS and a.Exclusive where exclusiveSet
	// did not: both codes are known.
	s.recordCoded(&a, hash, uint8(qc), uint8(ec))
	return nil
}

// exclusiveSet reports whether a (QoS and Exclusive defaulted, of codes
// qc and ec) is an LSE or LSR assignment with cpus and a known exclusive
// policy, which Request.normalize accepts as it is.
func exclusiveSet(a Assignment, qc, ec int) bool {
	return (qc == qosLSE || qc == qosLSR) && ec >= 0 && !a.CPUs.IsEmpty()
}

// recordsHint is the room a State's first record makes for assignments:
// 47 records of 48 bytes, with the 8-byte header the Go allocator puts on
// a block of more than 512 bytes that holds pointers, fill its 2304-byte
// size class; 48 would take the next, of 2688.
const recordsHint = 47

// record is an Assignment as a State holds it: its QoS and Exclusive as
// indexes into qosCodes and exclCodes, its MilliCPUs as an int32 (a count
// that does not fit is in State.bigMilli), and its Added CPUs in
// State.added, so that a fresh State's records for a node of some 30 pods
// take 2.3 KB, not 5 (an Assignment is 104 bytes, a record 48).
type record struct {
	id    string
	cpus  cpuset.CPUSet
	milli int32
	qos   uint8
	excl  uint8
}

// milliElsewhere is a record's milli when its MilliCPUs is in
// State.bigMilli.
const milliElsewhere = math.MinInt32

// milliOf returns the MilliCPUs of r, one of s's records.
func (s *State) milliOf(r *record) int {
	if r.milli == milliElsewhere {
		return s.bigMilli[r.id]
	}
	return int(r.milli)
}

// setMilli sets the MilliCPUs of r, one of s's records, to m.
func (s *State) setMilli(r *record, m int) {
	if m > math.MinInt32 && m <= math.MaxInt32 {
		r.milli = int32(m)
		if s.bigMilli != nil { // the usual case: no call
			delete(s.bigMilli, r.id)
		}
		return
	}
	if s.bigMilli == nil {
		s.bigMilli = map[string]int{}
	}
	r.milli, s.bigMilli[r.id] = milliElsewhere, m
}

// The classes a record can name: normalize accepts no others.
var (
	qosCodes  = [...]QoS{SYSTEM, LSE, LSR, LS, BE}
	exclCodes = [...]Exclusive{ExclusiveNone, ExclusivePCPULevel, ExclusiveNUMANodeLevel}
)

// The codes of LSE and LSR in qosCodes.
const qosLSE, qosLSR = 1, 2

// qosCode is q's index in qosCodes, -1 for a class it does not hold: one
// switch per Assign, instead of a search per use.
func qosCode(q QoS) int {
	switch q {
	case SYSTEM:
		return 0
	case LSE:
		return qosLSE
	case LSR:
		return qosLSR
	case LS:
		return 3
	case BE:
		return 4
	}
	return -1
}

// exclCode is e's index in exclCodes, -1 for a policy it does not hold.
func exclCode(e Exclusive) int {
	switch e {
	case ExclusiveNone:
		return 0
	case ExclusivePCPULevel:
		return 1
	case ExclusiveNUMANodeLevel:
		return 2
	}
	return -1
}

// QoS returns the record's class.
func (r record) QoS() QoS { return qosCodes[r.qos] }

// Exclusive returns the record's exclusive policy.
func (r record) Exclusive() Exclusive { return exclCodes[r.excl] }

// assignment returns recs[i] as an Assignment.
func (s *State) assignment(i int32) Assignment {
	r := &s.recs[i]
	return Assignment{ID: r.id, QoS: r.QoS(), CPUs: r.cpus, MilliCPUs: s.milliOf(r), Exclusive: r.Exclusive(), Added: s.added[r.id]}
}

// setAdded records the Added CPUs of id (none: nil), as a copy.
func (s *State) setAdded(id string, added []int) {
	if len(added) == 0 {
		if s.added != nil { // the usual case: no call
			delete(s.added, id)
		}
		return
	}
	if s.added == nil {
		s.added = map[string][]int{}
	}
	s.added[id] = slices.Clone(added)
}

// record adds a (with a.QoS and a.Exclusive normalized) to the assignments
// held; hash is idHash(a.ID).
func (s *State) record(a Assignment, hash uint64) {
	s.recordCoded(&a, hash, uint8(qosCode(a.QoS)), uint8(exclCode(a.Exclusive)))
}

// recordCoded is record with a.QoS and a.Exclusive as their codes (qosCode,
// exclCode); a by reference, not copied again (104 bytes).
func (s *State) recordCoded(a *Assignment, hash uint64, qc, ec uint8) {
	if s.trying {
		return
	}
	if s.recs == nil {
		// Skip the first doublings of both: a node holds a few at least,
		// and a fresh state rebuilt per decision (the extender, the
		// scheduler plugin) would otherwise grow and rehash its map twice
		// for a node of some 30 pods. Both hold recordsHint before they
		// grow: a node of 32 judged for one more (its 33rd record) made
		// its records twice, 3.4 KB and then 6.8 KB.
		s.recs = make([]record, 0, recordsHint)
	}
	i := int32(len(s.recs))
	s.recs = append(s.recs, record{id: a.ID, cpus: a.CPUs, qos: qc, excl: ec})
	s.setMilli(&s.recs[i], a.MilliCPUs)
	s.ids.insert(s.recs, hash, i, recordsHint)
	s.setAdded(a.ID, a.Added)
}

// holder names the assignment holding cpu (for error messages only).
func (s *State) holder(cpu int) string {
	for _, i := range s.byID() {
		if s.recs[i].cpus.Contains(cpu) {
			return s.recs[i].id
		}
	}
	return "?"
}

// holdFresh marks cpus, which are online and neither reserved nor used
// (Assign has checked; a placement takes only such), as used by a
// workload of class q, a word at a time: a fresh State per decision (the
// extender, the scheduler plugin) holds every assignment of its node
// through it, and every placement through Allocate.
func (s *State) holdFresh(cpus cpuset.CPUSet, q QoS, ex Exclusive) {
	ix := s.ix
	for i := range ix.words {
		w := cpus.Word(i)
		if w == 0 {
			continue
		}
		s.used[i] |= w
		if q == LSR {
			s.lsr[i] |= w
		}
		for f := w & ix.allowed[i]; f != 0; f &= f - 1 {
			s.adjust(i<<6|bits.TrailingZeros64(f), -1)
		}
		if ex == ExclusiveNone {
			continue
		}
		for ; w != 0; w &= w - 1 {
			s.holdExcl(i<<6|bits.TrailingZeros64(w), ex, 1)
		}
	}
}

// holdCPU marks CPU c as used by a workload of class q (d=1) or frees it
// (d=-1).
func (s *State) holdCPU(c int, q QoS, ex Exclusive, d int) {
	if d > 0 {
		if s.isFree(c) {
			s.adjust(c, -1)
		}
		s.used.set(c)
		if q == LSR {
			s.lsr.set(c)
		}
	} else {
		s.used.clear(c)
		s.lsr.clear(c)
		if s.isFree(c) {
			s.adjust(c, 1)
		}
	}
	s.holdExcl(c, ex, d)
}

// Release frees what id holds. The State afterwards is the one before the
// Allocate or Assign that created id.
func (s *State) Release(id string) error {
	i, ok := s.ids.lookup(s.recs, id)
	if !ok {
		return ErrUnknownID
	}
	a := s.assignment(i)
	s.ids.remove(s.recs, id, i)
	delete(s.added, id)
	delete(s.bigMilli, id)
	// The last record takes the freed place.
	if last := int32(len(s.recs) - 1); i != last {
		s.ids.renumber(s.recs[last].id, last, i)
		s.recs[i] = s.recs[last]
	}
	s.recs[len(s.recs)-1] = record{}
	s.recs = s.recs[:len(s.recs)-1]
	switch a.QoS {
	case LSE, LSR:
		for c := range a.CPUs.All() {
			s.holdCPU(c, a.QoS, a.Exclusive, -1)
		}
	case LS:
		s.lsMilli -= a.MilliCPUs
	}
	return nil
}

// Allocate places r and records it. A request the State can never satisfy
// as written fails with ErrInvalid; one the current state cannot satisfy
// fails with a Rejection.
func (s *State) Allocate(r Request) (Placement, error) {
	defer s.giveBack(s.borrow())
	if err := r.normalize(); err != nil {
		return Placement{}, err
	}
	if r.ID == "" {
		return Placement{}, invalid("request without an id")
	}
	hash := idHash(r.ID)
	if _, dup := s.ids.lookupHash(s.recs, r.ID, hash); dup {
		return Placement{}, invalid("request id %q is already assigned; release it first", r.ID)
	}
	if s.policy == PolicyKubelet {
		if err := noStrategy(r); err != nil {
			return Placement{}, err
		}
		if r.TopologyPolicy == TopologySingleNUMANode && s.opts.alignBySocket {
			return Placement{}, invalid("topology policy %s is incompatible with option %s", TopologySingleNUMANode, OptAlignBySocket)
		}
	}
	p := Placement{ID: r.ID, QoS: r.QoS}
	a := Assignment{ID: r.ID, QoS: r.QoS, Exclusive: r.Exclusive}
	switch r.QoS {
	case SYSTEM:
		if s.reserved.count() == 0 {
			return Placement{}, reject("SYSTEM", "no reserved CPUs to run system work on; configure reserved cpus")
		}
		if r.CPUs > s.reserved.count() {
			return Placement{}, reject("SYSTEM", "%d CPUs requested, but only %d are reserved (%s); reserve more", r.CPUs, s.reserved.count(), s.reserved.toSet())
		}
		p.CPUs = s.reserved.toSet()
	case LS, BE:
		pool := s.pool(r.QoS == BE)
		size := pool.count()
		if r.QoS == LS && s.lsMilli+r.MilliCPUs > size*1000 {
			return Placement{}, reject("LS pool", "%d millicpus requested, but the shared pool has %d CPUs with %d millicpus already committed to LS work; %d remain",
				r.MilliCPUs, size, s.lsMilli, max(0, size*1000-s.lsMilli))
		}
		if size == 0 {
			return Placement{}, reject(string(r.QoS)+" pool", "the shared pool is empty: every CPU is reserved or exclusive")
		}
		p.CPUs, p.MilliCPUs = pool.toSet(), r.MilliCPUs
		a.MilliCPUs = r.MilliCPUs
		if r.QoS == LS {
			s.lsMilli += r.MilliCPUs
		}
	default:
		// The engines take the request by reference and keep it beyond
		// escape analysis' sight: handed &r, Allocate's r moved to the
		// heap (one allocation per decision). The call's scratch holds it
		// instead, cleared after.
		req := &s.sc.req
		*req = r
		got, err := s.allocateIsolated(req)
		*req = Request{}
		if err != nil {
			return Placement{}, err
		}
		// got is free (online, allowed, neither reserved nor used), as
		// holdFresh wants.
		p.CPUs = got.toSet()
		s.holdFresh(p.CPUs, r.QoS, r.Exclusive)
		a.CPUs = p.CPUs
	}
	s.record(a, hash)
	p.Quality, p.NUMANodes = s.quality(p.CPUs)
	return p, nil
}

// pool returns the LS pool (every allowed CPU not held by LSE or LSR, and
// not reserved under strict-cpu-reservation); with lsr, the BE pool (the
// LS pool plus the LSR CPUs).
func (s *State) pool(withLSR bool) bitset {
	b := newBitset(s.ix.words)
	s.work += int64(len(b))
	for i := range b {
		b[i] = s.ix.online[i] & s.ix.allowed[i] &^ s.used[i]
		if s.opts.strict {
			b[i] &^= s.reserved[i]
		}
	}
	if withLSR {
		// Kept as a bitset, not found by walking the assignments: a plan of
		// many BE requests would otherwise be quadratic.
		s.work += int64(len(s.lsr))
		for i, w := range s.lsr {
			b[i] |= w
		}
	}
	for i := range b {
		b[i] &^= s.ix.poolSkip[i] // isolated CPUs are never shared
	}
	return b
}

// Work returns how many units (CPUs, bitset words, per-unit counters) the
// shared-pool and quality scans of the State's calls have visited so far.
// It does not depend on the clock, so tests use it to show that a
// decision's cost does not grow with the number of assignments held.
func (s *State) Work() int64 { return s.work }

// Pools are the CPU sets of each QoS class.
type Pools struct {
	Reserved cpuset.CPUSet `json:"reserved"`
	LSE      cpuset.CPUSet `json:"lse"`
	LSR      cpuset.CPUSet `json:"lsr"`
	LS       cpuset.CPUSet `json:"ls"`
	BE       cpuset.CPUSet `json:"be"`
}

// Admit places r as a node admits work: Allocate, then GuardPools on the
// placement made; a placement the guard refuses is released again, so a
// refusal leaves s as it was.
func (s *State) Admit(r Request) (Placement, error) {
	p, err := s.Allocate(r)
	if err != nil {
		return p, err
	}
	if err := s.GuardPools(p.QoS); err != nil {
		if rerr := s.Release(r.ID); rerr != nil {
			return Placement{}, errors.Join(err, rerr)
		}
		return Placement{}, err
	}
	return p, nil
}

// GuardPools refuses an exclusive placement (q LSE or LSR) already made on
// s that starves the shared pools: the LS pool must still hold the LS
// quotas committed, and a class with live workloads must keep at least one
// CPU (an empty cpuset under live tasks is what cgroups refuse). Every
// place that admits work (the agent, the NRI plugin, the scheduler
// extender judging a node) checks it after Allocate (Admit does both), so
// that they agree.
// The Rejection's Constraint is "LS pool" or "BE pool".
func (s *State) GuardPools(q QoS) error {
	if q != LSE && q != LSR {
		return nil
	}
	// The usual case without walking the assignments (a decision's cost
	// does not grow with them): the LS pool holds the quotas committed and
	// is not empty, so the BE pool, which holds it, is not either.
	if ls := s.pool(false).count(); ls > 0 && s.lsMilli <= ls*1000 {
		return nil
	}
	var lsMilli, nLS, nBE int
	for _, a := range s.recs {
		switch a.QoS() {
		case LS:
			lsMilli += s.milliOf(&a)
			nLS++
		case BE:
			nBE++
		}
	}
	p := s.Pools()
	if lsMilli > p.LS.Size()*1000 || (nLS > 0 && p.LS.IsEmpty()) {
		return reject("LS pool", "this would leave %d shared CPUs for %d LS workloads holding %d millicpus; delete LS work or ask for fewer CPUs",
			p.LS.Size(), nLS, lsMilli)
	}
	if nBE > 0 && p.BE.IsEmpty() {
		return reject("BE pool", "this would leave no CPU for %d BE workloads; delete BE work or ask for fewer CPUs", nBE)
	}
	return nil
}

// Pools returns the current pools.
func (s *State) Pools() Pools {
	var lse, lsr cpuset.Builder
	for _, a := range s.recs {
		switch a.QoS() {
		case LSE:
			lse.AddSet(a.cpus)
		case LSR:
			lsr.AddSet(a.cpus)
		}
	}
	return Pools{Reserved: s.reserved.toSet(), LSE: lse.Result(), LSR: lsr.Result(), LS: s.pool(false).toSet(), BE: s.pool(true).toSet()}
}

// Quality measures cpus against the current state: its spans, the cores it
// shares with other workloads, and the free whole units left.
func (s *State) Quality(cpus cpuset.CPUSet) Quality {
	defer s.giveBack(s.borrow())
	q, _ := s.quality(cpus)
	return q
}

func (s *State) quality(cpus cpuset.CPUSet) (Quality, cpuset.CPUSet) {
	b, nodes := s.sc.tmp, s.sc.nodeIDs
	sp := s.sc.knownSpan
	if !s.sc.spanKnown {
		b.reset()
		b.fromSet(cpus)
		nodes.reset()
		sp = s.span(b, nodes)
	}
	s.sc.spanKnown = false
	w := s.wholeFree()
	q := Quality{NUMANodes: sp.nodes, Sockets: sp.sockets, L3Groups: sp.l3, SharedCores: sp.shared,
		FreeCores: w.cores, FreeL3Groups: w.l3, FreeNUMANodes: w.nodes}
	return q, nodes.toSet()
}

// Fragmentation reports the free whole units of the current state.
func (s *State) Fragmentation() Quality {
	defer s.giveBack(s.borrow())
	q, _ := s.quality(cpuset.CPUSet{})
	return q
}

// scratch holds buffers reused by every decision so that a decision's
// allocations do not grow with the machine or the number of assignments.
type scratch struct {
	tmp, taken, best                       bitset
	markNode, markSocket, markL3, markCore []int8
	ec, clean                              []int // per core
	takenCore                              []int
	cap, cleanT, coresT                    []int // per tree node: eligible CPUs, in whole free cores, cores with any
	nodeCap, nodeClean, wholeNode          []int // per node: eligible, in whole free cores, saved
	socketFree, partialFree                []int // for unbeatable
	socketCap                              []int // per socket: eligible
	allow, allow2                          []bool
	kids                                   []int32
	amt                                    []int
	ints                                   []int
	chOrder, chGrow, chBest, chCand        []int   // chooseNodes
	nodeIDs                                bitset  // node ids a span covers
	req                                    Request // the exclusive request Allocate places (see there)
	// spanKnown: the engine's answer was spanned on the State it is
	// placed on, to knownSpan and nodeIDs, which quality then reads.
	// (The shared cores of a set count the same before and after it is
	// held: its own CPUs never count.)
	spanKnown bool
	knownSpan spanScore
}

// borrow gives s the scratch buffers of one call, taken from its
// topology's pool, and reports whether it took them: a call made inside
// another (Allocate inside Admit) uses its caller's. Marks are cleared, so
// that a call that panicked half way leaves none behind.
func (s *State) borrow() bool {
	if s.sc != nil {
		return false
	}
	s.sc = s.ix.scratches.Get().(*scratch)
	s.sc.spanKnown = false
	clear(s.sc.markNode)
	clear(s.sc.markSocket)
	clear(s.sc.markL3)
	clear(s.sc.markCore)
	return true
}

// giveBack returns the buffers borrow took (took) to the pool.
func (s *State) giveBack(took bool) {
	if took {
		s.ix.scratches.Put(s.sc)
		s.sc = nil
	}
}

func (sc *scratch) init(ix *topoIndex) {
	sc.tmp, sc.taken, sc.best = newBitset(ix.words), newBitset(ix.words), newBitset(ix.words)
	sc.markNode, sc.markSocket = make([]int8, len(ix.nodes)), make([]int8, ix.numSockets)
	sc.markL3, sc.markCore = make([]int8, ix.numL3), make([]int8, len(ix.coreCPUs))
	sc.ec, sc.clean, sc.takenCore = make([]int, len(ix.coreCPUs)), make([]int, len(ix.coreCPUs)), make([]int, len(ix.coreCPUs))
	sc.cap, sc.cleanT, sc.coresT = make([]int, len(ix.tree)), make([]int, len(ix.tree)), make([]int, len(ix.tree))
	sc.nodeCap, sc.nodeClean = make([]int, len(ix.nodes)), make([]int, len(ix.nodes))
	sc.allow, sc.allow2 = make([]bool, len(ix.nodes)), make([]bool, len(ix.nodes))
	sc.socketCap = make([]int, ix.numSockets)
	maxNode := 0
	for _, nd := range ix.nodes {
		maxNode = max(maxNode, int(nd))
	}
	sc.nodeIDs = newBitset(min(maxNode, cpuset.MaxCPU)/64 + 1)
}
