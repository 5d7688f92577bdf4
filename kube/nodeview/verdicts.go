package nodeview

import (
	"maps"
	"sync"
	"sync/atomic"
)

// Key numbers a request's shape in a View (View.Key), so that the
// verdicts a node's entry keeps are found by a small integer rather than
// by hashing the request's strings at every node.
type Key int32

// verdicts are a node entry's kept verdicts by key: the first keys (a
// burst's few shapes) in slots read without a lock, by every Filter and
// Score of a scheduling cycle at once, each the number of its verdict in
// the process's table of verdicts (interned, 0 for none); the others in
// a map.
type verdicts struct {
	slots [verdictSlots]atomic.Uint32
	// spilled says a slot's key is in m (the table was full).
	spilled atomic.Bool
	mu      sync.Mutex
	m       map[Key]Verdict
}

const verdictSlots = 32

func newVerdicts() *verdicts { return &verdicts{} }

// copyFrom makes vs hold what o holds now (vs new, read by no one yet):
// a verdict o keeps later may be missing from vs, and is found again.
func (vs *verdicts) copyFrom(o *verdicts) {
	for i := range o.slots {
		vs.slots[i].Store(o.slots[i].Load())
	}
	o.mu.Lock()
	vs.m = maps.Clone(o.m)
	o.mu.Unlock()
	vs.spilled.Store(o.spilled.Load())
}

func (vs *verdicts) load(id Key) (Verdict, bool) {
	if id >= 0 && id < verdictSlots {
		if i := vs.slots[id].Load(); i != 0 {
			return interned.get(i), true
		}
		if !vs.spilled.Load() {
			return Verdict{}, false
		}
	}
	vs.mu.Lock()
	defer vs.mu.Unlock()
	v, ok := vs.m[id]
	return v, ok
}

func (vs *verdicts) store(id Key, v Verdict) {
	if id >= 0 && id < verdictSlots {
		if i, ok := interned.number(v); ok {
			vs.slots[id].Store(i)
			return
		}
		vs.spilled.Store(true)
	}
	vs.mu.Lock()
	if vs.m == nil {
		vs.m = map[Key]Verdict{}
	}
	vs.m[id] = v
	vs.mu.Unlock()
}

// verdictTable numbers the distinct verdicts found (a few per request
// shape: they differ by score and reason only), so that a node entry keeps
// a verdict in 4 bytes read with one atomic load, and storing one
// allocates nothing. Numbers start at 1 and are never reused; at most
// maxInterned verdicts are numbered, the others kept in the entries' maps.
type verdictTable struct {
	mu   sync.RWMutex
	ids  map[Verdict]uint32
	list atomic.Pointer[[]Verdict] // list[i-1] is verdict i, appended only
}

// maxInterned bounds the verdicts a process numbers: a cluster's pods
// come in a few shapes, each answered in a few ways.
const maxInterned = 1 << 16

// interned is the process's table: verdicts are values, the same for
// every view.
var interned = &verdictTable{ids: map[Verdict]uint32{}}

// get is verdict i (number returned it).
func (t *verdictTable) get(i uint32) Verdict { return (*t.list.Load())[i-1] }

// number is v's number, v numbered now if it was not; false when the
// table is full.
func (t *verdictTable) number(v Verdict) (uint32, bool) {
	// Found under the read lock, the common case: the parallel Filters
	// of a cycle never wait on each other for a verdict numbered before.
	t.mu.RLock()
	i, ok := t.ids[v]
	t.mu.RUnlock()
	if ok {
		return i, true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if i, ok := t.ids[v]; ok {
		return i, true
	}
	if len(t.ids) >= maxInterned {
		return 0, false
	}
	var list []Verdict
	if p := t.list.Load(); p != nil {
		list = *p
	}
	// Appended past what readers of the old list read: a reader that
	// holds a number this call returns loads the new list.
	list = append(list, v)
	t.list.Store(&list)
	i = uint32(len(list))
	t.ids[v] = i
	return i, true
}
