package alloc

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/topology"
)

// TestMilliBeyondInt32: a record keeps its MilliCPUs in an int32 and a
// count that does not fit (or is the int32 that marks one) in
// State.bigMilli; every count reads back as assigned, through Clone,
// Resize and Release, and a clone's counts are its own.
func TestMilliBeyondInt32(t *testing.T) {
	s, err := NewState(topology.MustSynthetic(topology.Shape{Sockets: 1, NodesPerSocket: 1, L3PerNode: 1, CoresPerL3: 4, ThreadsPerCore: 2}), NodeSettings{})
	if err != nil {
		t.Fatal(err)
	}
	given := []Assignment{
		{ID: "be-big", QoS: BE, MilliCPUs: 1 << 40, Exclusive: ExclusiveNone},
		{ID: "be-max", QoS: BE, MilliCPUs: math.MaxInt32, Exclusive: ExclusiveNone},
		{ID: "be-over", QoS: BE, MilliCPUs: math.MaxInt32 + 1, Exclusive: ExclusiveNone},
		{ID: "lse-marker", QoS: LSE, CPUs: cpuset.New(0), MilliCPUs: math.MinInt32, Exclusive: ExclusiveNone},
		{ID: "lse-low", QoS: LSE, CPUs: cpuset.New(1), MilliCPUs: -1 << 40, Exclusive: ExclusiveNone},
		{ID: "ls", QoS: LS, MilliCPUs: 1500, Exclusive: ExclusiveNone},
	}
	for _, a := range given {
		if err := s.Assign(a); err != nil {
			t.Fatal(err)
		}
	}
	byID := func(as []Assignment) map[string]int {
		out := map[string]int{}
		for _, a := range as {
			out[a.ID] = a.MilliCPUs
		}
		return out
	}
	want := byID(given)
	if diff := cmp.Diff(want, byID(s.Assignments())); diff != "" {
		t.Fatalf("MilliCPUs read back (-assigned +held):\n%s", diff)
	}
	c := s.Clone()
	for id, m := range map[string]int{"be-big": 3 << 40, "be-over": 7, "be-max": math.MaxInt32 + 5} {
		if _, err := c.Resize(Request{ID: id, MilliCPUs: m}); err != nil {
			t.Fatalf("Resize(%s, %d): %v", id, m, err)
		}
	}
	if err := c.Release("lse-low"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, byID(s.Assignments())); diff != "" {
		t.Errorf("the original after its clone's resizes (-assigned +held):\n%s", diff)
	}
	wantClone := map[string]int{"be-big": 3 << 40, "be-over": 7, "be-max": math.MaxInt32 + 5, "lse-marker": math.MinInt32, "ls": 1500}
	if diff := cmp.Diff(wantClone, byID(c.Assignments())); diff != "" {
		t.Errorf("the clone after its resizes and a release (-want +held):\n%s", diff)
	}
	if len(c.bigMilli) != 3 {
		t.Errorf("the clone keeps %d counts beside its records (%v), want 3 (be-big, be-max, lse-marker)", len(c.bigMilli), c.bigMilli)
	}
}
