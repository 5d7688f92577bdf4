package topology

import (
	"errors"
	"strings"
	"testing"
)

// New refuses ids above the documented caps, online or offline, so that
// nothing downstream can be handed one (issue 8 §3: "numa": 70000 panicked
// plan and simulate).
func TestNewRejectsIDsAboveCaps(t *testing.T) {
	ok := func() []CPU {
		return []CPU{
			{ID: 0, Online: true, Allowed: true, L3: 0},
			{ID: 1, Online: true, Allowed: true, Core: 1, L3: 0},
			{ID: 2, Socket: None, Die: None, Cluster: None, Core: None, L3: None, NUMA: None},
		}
	}
	tests := []struct {
		name      string
		edit      func(cpus []CPU)
		distances map[NodeID][]int
		want      string
	}{
		{name: "online numa above the cap", edit: func(c []CPU) { c[0].NUMA = 70000; c[1].NUMA = 70000 }, want: "numa node 70000 outside [0, 1023]"},
		{name: "offline numa above the cap", edit: func(c []CPU) { c[2].NUMA = 70000 }, want: "cpu 2 has numa node 70000"},
		{name: "offline numa below None", edit: func(c []CPU) { c[2].NUMA = -2 }, want: "numa node -2"},
		{name: "offline socket beyond the cpus", edit: func(c []CPU) { c[2].Socket = 1 << 40 }, want: "cpu 2 has socket 1099511627776"},
		{name: "offline core negative", edit: func(c []CPU) { c[2].Core = -7 }, want: "core -7"},
		{name: "online l3 beyond the cpus", edit: func(c []CPU) { c[0].L3 = 3; c[1].L3 = 3 }, want: "l3 3 outside [0, 3)"},
		{name: "long kind", edit: func(c []CPU) { c[0].Kind = strings.Repeat("k", 33) }, want: "kind of 33 bytes"},
		{name: "distance node above the cap", distances: map[NodeID][]int{0: {10}, 70000: {10}}, want: "node 70000 outside"},
		{name: "negative distance node", distances: map[NodeID][]int{-1: {10}}, want: "node -1 outside"},
		{name: "distance above a byte", distances: map[NodeID][]int{0: {256}}, want: "distance 256 outside [0, 255]"},
		{name: "negative distance", distances: map[NodeID][]int{0: {-10}}, want: "distance -10"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cpus := ok()
			if tc.edit != nil {
				tc.edit(cpus)
			}
			_, err := New(cpus, tc.distances)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New error = %v, want ErrInvalid containing %q", err, tc.want)
			}
		})
	}
	if _, err := New(ok(), map[NodeID][]int{0: {10}}); err != nil {
		t.Errorf("New(valid) = %v", err)
	}
}

// A node70000 directory in a dump is an error, not a panic.
func TestDiscoverNodeIDAboveCap(t *testing.T) {
	files := merge(twoCPUs(), map[string]string{"sys/devices/system/node/node70000/cpulist": "0-1\n"})
	_, err := Discover(machine(files))
	if !errors.Is(err, ErrBadSysfs) || !strings.Contains(err.Error(), "node70000") {
		t.Errorf("Discover error = %v, want ErrBadSysfs naming node70000", err)
	}
}
