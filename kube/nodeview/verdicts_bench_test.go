package nodeview

import "testing"

// BenchmarkVerdictStoreParallel stores verdicts already numbered on fresh
// entries from parallel goroutines, as the parallel Filters of a cycle
// keep what they found on nodes whose entries changed. One op is one
// store.
func BenchmarkVerdictStoreParallel(b *testing.B) {
	vs := []Verdict{{OK: true, Score: 7}, {Reason: "no NUMA node with 9 free CPUs"}, {OK: true, Score: 5}}
	for _, v := range vs {
		newVerdicts().store(0, v)
	}
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			newVerdicts().store(Key(i%verdictSlots), vs[i%len(vs)])
			i++
		}
	})
}
