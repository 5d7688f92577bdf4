package e2ekubelet

import (
	"testing"
	"time"

	"github.com/corepin/corepin/cpuset"
)

// TestSharedPoolCountsContainerLifetimes: a pinned container holds its
// CPU from its creation to its exit (and releaseSlack after), so a shared
// pod that started in that time may lack the CPU even where the two
// workloads' own runs never overlapped; outside it, the pool is whole.
func TestSharedPoolCountsContainerLifetimes(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 8, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	pod := func(name, mode, cpus string, from, to float64) podResult {
		var r podResult
		r.pod, r.point.Mode, r.run.CPUSet = name, mode, cpus
		r.run.StartedAt, r.run.FinishedAt = at(from), at(to)
		return r
	}
	all := cpuset.MustParse("0-1")
	pinned := pod("pinned", "pinned", "1", 10, 20)
	for _, c := range []struct {
		name   string
		shared podResult
		spans  map[string]span
		want   string
	}{
		{"runs overlap", pod("shared", "shared", "0", 15, 25), nil, "0"},
		{"runs apart, no lifetimes", pod("shared", "shared", "0", 2, 8), nil, "0-1"},
		{"runs apart, pinned container created first", pod("shared", "shared", "0", 2, 8),
			map[string]span{"pinned": {at(1), at(21)}}, "0"},
		{"after the exit, within the slack", pod("shared", "shared", "0", 23, 30),
			map[string]span{"pinned": {at(9), at(21)}}, "0"},
		{"after the exit and the slack", pod("shared", "shared", "0", 21+releaseSlack.Seconds()+1, 40),
			map[string]span{"pinned": {at(9), at(21)}}, "0-1"},
		{"shared container created before the pinned exit", pod("shared", "shared", "0", 30, 40),
			map[string]span{"pinned": {at(9), at(21)}, "shared": {at(20), at(41)}}, "0"},
	} {
		got := sharedPool(all, c.shared, []podResult{pinned, c.shared}, c.spans)
		if got.String() != c.want {
			t.Errorf("%s: pool at least %s, want %s", c.name, got, c.want)
		}
	}
}

// The kernel's view of a running container: a pinned pod's must be what
// it reported; a shared-pool pod's must be a pool of its time, which may
// differ from what the pod reported when a pinned pod came or went in
// between (e2e-deploy saw 0-1 by the watcher, 0 by the workload).
func TestViewMismatch(t *testing.T) {
	all := cpuset.MustParse("0-1")
	pod := func(mode, cpus string) podResult {
		var r podResult
		r.pod, r.point.Mode, r.run.CPUSet = "p", mode, cpus
		return r
	}
	for _, c := range []struct {
		name     string
		r        podResult
		v        live
		pool     string
		mismatch bool
	}{
		{"pinned, as reported", pod("pinned", "1"), live{"1", "1"}, "", false},
		{"pinned, elsewhere", pod("pinned", "1"), live{"0-1", "0-1"}, "", true},
		{"pinned, cgroup elsewhere", pod("pinned", "1"), live{"1", "0"}, "", true},
		{"shared, the pool grew before the look", pod("unbounded", "0"), live{"0-1", "0-1"}, "0", false},
		{"shared, the pool shrank by a live pinned pod", pod("unbounded", "0-1"), live{"0", "0"}, "0", false},
		{"shared, short of the pool", pod("unbounded", "0-1"), live{"0", "0"}, "0-1", true},
		{"shared, outside the machine", pod("unbounded", "0-1"), live{"0-2", "0-1"}, "0", true},
		{"unreadable", pod("unbounded", "0-1"), live{"x", "0-1"}, "0", true},
	} {
		why := viewMismatch(c.r, c.v, all, cpuset.MustParse(c.pool))
		if (why != "") != c.mismatch {
			t.Errorf("%s: viewMismatch = %q, want a mismatch %v", c.name, why, c.mismatch)
		}
	}
}
