package sim

import (
	"cmp"
	"slices"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/topology"
)

// shape is the per-CPU index of the node topology that the scheduler's view
// needs: every node of a cluster has the same one.
type shape struct {
	core     []int32 // by CPU id: dense core index, -1 for an offline CPU
	unit     []int32 // by CPU id: L3 unit (an L3 group, or the NUMA node of a CPU without L3)
	numa     []int32 // by CPU id: dense NUMA node index
	coreSize []int   // online CPUs of each core
	numUnits int
	numNUMA  int
	// fresh is the view of an empty node.
	fresh view
}

func newShape(t *topology.Topology, reserved cpuset.CPUSet) *shape {
	sh := &shape{}
	cpus := t.CPUs()
	maxID := 0
	for _, c := range cpus {
		maxID = max(maxID, c.ID)
	}
	sh.core = make([]int32, maxID+1)
	sh.unit = make([]int32, maxID+1)
	sh.numa = make([]int32, maxID+1)
	for i := range sh.core {
		sh.core[i], sh.unit[i], sh.numa[i] = -1, -1, -1
	}
	nodes := t.NodesWithCPUs()
	if !t.NoNodeCPUs().IsEmpty() {
		// CPUs in no NUMA node count as one more node, as in alloc.
		nodes = append([]topology.NodeID{topology.None}, nodes...)
	}
	sh.numNUMA = len(nodes)
	sh.coreSize = make([]int, t.NumCores())
	for _, c := range cpus {
		if !c.Online || c.Core < 0 {
			continue
		}
		sh.core[c.ID] = int32(c.Core)
		sh.numa[c.ID] = int32(slices.Index(nodes, c.NUMA))
		if c.L3 >= 0 {
			sh.unit[c.ID] = int32(c.L3)
		}
		sh.coreSize[c.Core]++
	}
	sh.numUnits = t.NumL3()
	for id := range sh.unit {
		if sh.core[id] >= 0 && sh.unit[id] < 0 {
			sh.unit[id] = int32(t.NumL3()) + sh.numa[id]
			sh.numUnits = max(sh.numUnits, int(sh.unit[id])+1)
		}
	}
	v := view{
		freeCore:  make([]int, len(sh.coreSize)),
		freeUnit:  make([]int, sh.numUnits),
		wholeUnit: make([]int, sh.numUnits),
		freeNUMA:  make([]int, sh.numNUMA),
		wholeNUMA: make([]int, sh.numNUMA),
	}
	for _, c := range cpus {
		if c.Online && c.Allowed && c.Core >= 0 && !reserved.Contains(c.ID) {
			v.freeCore[c.Core]++
			v.freeUnit[sh.unit[c.ID]]++
			v.freeNUMA[sh.numa[c.ID]]++
			v.free++
		}
	}
	for _, c := range cpus {
		if c.Online && c.Core >= 0 && v.freeCore[c.Core] == sh.coreSize[c.Core] {
			v.wholeUnit[sh.unit[c.ID]]++
			v.wholeNUMA[sh.numa[c.ID]]++
			v.whole++
		}
	}
	sh.fresh = v
	return sh
}

// view is the scheduler's picture of one node: free CPUs (not reserved, not
// held by an exclusive workload) per core, L3 unit and NUMA node, the CPUs of
// whole free cores per unit and node, and the LS quota committed. It is kept
// in step with the node's alloc.State from the placements alone.
type view struct {
	freeCore             []int
	freeUnit, wholeUnit  []int
	freeNUMA, wholeNUMA  []int
	free, whole, lsMilli int
}

func (v *view) clone() view {
	c := *v
	c.freeCore, c.freeUnit, c.wholeUnit = slices.Clone(v.freeCore), slices.Clone(v.freeUnit), slices.Clone(v.wholeUnit)
	c.freeNUMA, c.wholeNUMA = slices.Clone(v.freeNUMA), slices.Clone(v.wholeNUMA)
	return c
}

// change marks cpus taken (d = -1) or freed (d = +1).
func (v *view) change(sh *shape, cpus cpuset.CPUSet, d int) {
	for c := range cpus.All() {
		k := sh.core[c]
		size := sh.coreSize[k]
		wasWhole := v.freeCore[k] == size
		v.freeCore[k] += d
		u, n := sh.unit[c], sh.numa[c]
		v.freeUnit[u] += d
		v.freeNUMA[n] += d
		v.free += d
		if isWhole := v.freeCore[k] == size; isWhole != wasWhole {
			w := size
			if !isWhole {
				w = -size
			}
			// A core's CPUs share one unit and one node (topology.New checks it).
			v.wholeUnit[u] += w
			v.wholeNUMA[n] += w
			v.whole += w
		}
	}
}

// uncommitted is the node's CPU capacity, in millicpus, not yet promised to
// an exclusive set or an LS quota: what a scheduler's resource fit counts.
func (v *view) uncommitted() int { return v.free*1000 - v.lsMilli }

// fits is the scheduler's resource fit: the node has the CPUs, wherever they
// are. BE work reserves nothing; it needs a node with a CPU not held
// exclusively.
func (v *view) fits(r *alloc.Request) bool {
	switch r.QoS {
	case alloc.BE:
		return v.free > 0
	case alloc.LS:
		return v.uncommitted() >= r.MilliCPUs
	}
	return v.uncommitted() >= r.CPUs*1000
}

// score ranks a node for best fit; lower is better.
type score struct {
	level, block, free, node int
}

func (a score) compare(b score) int {
	return cmp.Or(cmp.Compare(a.level, b.level), cmp.Compare(a.block, b.block), cmp.Compare(a.free, b.free), cmp.Compare(a.node, b.node))
}

// score ranks the node for r: level 0 if one L3 unit holds r, 1 if one NUMA
// node does, 2 if the node does, 3 if only the resource fit says so; block
// is the free capacity of the tightest unit at that level. whole counts only
// CPUs of whole free cores (bind FullPCPUs, full-pcpus-only).
func (v *view) score(r *alloc.Request, whole bool, node int) score {
	switch r.QoS {
	case alloc.BE:
		return score{block: -v.free, node: node} // BE fills the emptiest node
	case alloc.LS:
		return score{block: v.uncommitted(), node: node}
	}
	n := r.CPUs
	units, nodes, total := v.freeUnit, v.freeNUMA, v.free
	if whole {
		units, nodes, total = v.wholeUnit, v.wholeNUMA, v.whole
	}
	if b, ok := tightest(units, n); ok {
		return score{level: 0, block: b, free: v.free, node: node}
	}
	if b, ok := tightest(nodes, n); ok {
		return score{level: 1, block: b, free: v.free, node: node}
	}
	if total >= n {
		return score{level: 2, block: total, free: v.free, node: node}
	}
	return score{level: 3, block: v.free, free: v.free, node: node}
}

// perfect reports whether no node can rank better than sc for r: the
// request fills one L3 unit exactly on a node with nothing else free (or an
// LS quota fills a node's uncommitted capacity exactly). Best fit stops
// scanning there.
func (sc score) perfect(r *alloc.Request) bool {
	switch r.QoS {
	case alloc.BE:
		return false
	case alloc.LS:
		return sc.block == r.MilliCPUs
	}
	return sc.level == 0 && sc.block == r.CPUs && sc.free == r.CPUs
}

// tightest returns the smallest capacity in caps that is at least n.
func tightest(caps []int, n int) (int, bool) {
	best, ok := 0, false
	for _, c := range caps {
		if c >= n && (!ok || c < best) {
			best, ok = c, true
		}
	}
	return best, ok
}
