package nodeview

import (
	"sync"
	"sync/atomic"
)

// Key numbers a request's shape in a View (View.Key), so that the
// verdicts a node's entry keeps are found by a small integer rather than
// by hashing the request's strings at every node.
type Key int32

// verdicts are a node entry's kept verdicts by key: the first keys (a
// burst's few shapes) in slots read without a lock, by every Filter and
// Score of a scheduling cycle at once; the others in a map.
type verdicts struct {
	slots [verdictSlots]atomic.Pointer[Verdict]
	mu    sync.Mutex
	m     map[Key]Verdict
}

const verdictSlots = 32

func newVerdicts() *verdicts { return &verdicts{} }

func (vs *verdicts) load(id Key) (Verdict, bool) {
	if id >= 0 && id < verdictSlots {
		if v := vs.slots[id].Load(); v != nil {
			return *v, true
		}
		return Verdict{}, false
	}
	vs.mu.Lock()
	defer vs.mu.Unlock()
	v, ok := vs.m[id]
	return v, ok
}

func (vs *verdicts) store(id Key, v Verdict) {
	if id >= 0 && id < verdictSlots {
		vs.slots[id].Store(&v)
		return
	}
	vs.mu.Lock()
	if vs.m == nil {
		vs.m = map[Key]Verdict{}
	}
	vs.m[id] = v
	vs.mu.Unlock()
}
