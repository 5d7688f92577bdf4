package nodestate

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/topology"
)

func TestFreeCPUsReadsBuild(t *testing.T) {
	topo, st := heldFourOnNodeZero(t)
	o := BuildNRT("n1", topo, st.Pools(), "single-numa-node")
	got, err := FreeCPUs(o.Zones)
	if err != nil {
		t.Fatalf("FreeCPUs(Build(...)) error %v", err)
	}
	var want []int
	for _, z := range o.Zones {
		want = append(want, map[string]int{"2": 2, "4": 4, "6": 6, "8": 8}[z.Resources[0].Available])
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("FreeCPUs (-want +got):\n%s", diff)
	}
}

func TestFreeCPUs(t *testing.T) {
	cpu := func(avail string) []Resource {
		return []Resource{{Name: "memory", Available: "1Gi"}, {Name: "cpu", Capacity: "8", Allocatable: "8", Available: avail}}
	}
	cases := []struct {
		name  string
		zones []Zone
		want  []int
		err   string
	}{
		{name: "ordered by number, not by position", want: []int{3, 0, 7},
			zones: []Zone{{Name: "node-2", Type: "Node", Resources: cpu("7")}, {Name: "socket-0", Type: "Socket"}, {Name: "node-0", Type: "Node", Resources: cpu("3")}}},
		{name: "whole quantity in another form", want: []int{2}, zones: []Zone{{Name: "node-0", Type: "Node", Resources: cpu("2000m")}}},
		{name: "fraction", zones: []Zone{{Name: "node-0", Type: "Node", Resources: cpu("2500m")}}, err: "want whole CPUs"},
		{name: "just under a whole", zones: []Zone{{Name: "node-0", Type: "Node", Resources: cpu("999999999n")}}, err: "want whole CPUs"},
		{name: "negative", zones: []Zone{{Name: "node-0", Type: "Node", Resources: cpu("-1")}}, err: "want 0 to"},
		{name: "huge", zones: []Zone{{Name: "node-0", Type: "Node", Resources: cpu("1e30")}}, err: "want 0 to"},
		{name: "long", zones: []Zone{{Name: "node-0", Type: "Node", Resources: cpu("00000000000000000000000000000000001")}}, err: "longer than"},
		{name: "no cpu", zones: []Zone{{Name: "node-0", Type: "Node"}}, err: "no cpu resource"},
		{name: "leading zero", zones: []Zone{{Name: "node-01", Type: "Node", Resources: cpu("1")}}, err: "want a name node-N"},
		{name: "sign", zones: []Zone{{Name: "node-+1", Type: "Node", Resources: cpu("1")}}, err: "want a name node-N"},
		{name: "too many NUMA nodes", zones: []Zone{{Name: "node-64", Type: "Node", Resources: cpu("1")}}, err: "must be below 64"},
		{name: "twice", zones: []Zone{{Name: "node-0", Type: "Node", Resources: cpu("1")}, {Name: "node-0", Type: "Node", Resources: cpu("1")}}, err: "node-0 given twice"},
		{name: "none", zones: []Zone{{Name: "core-0", Type: "Core"}}, err: "no zone of type Node"},
		{name: "too many zones", zones: make([]Zone, MaxZones+1), err: "more than 1024"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := FreeCPUs(tc.zones)
			if tc.err != "" {
				if err == nil || !errors.Is(err, ErrZones) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("FreeCPUs error = %v, want ErrZones saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("FreeCPUs (-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzFreeCPUs feeds arbitrary zone lists (JSON) to FreeCPUs: it never
// panics, and what it accepts is a bounded list of non-negative counts.
func FuzzFreeCPUs(f *testing.F) {
	o := BuildNRT("n", topology.MustSynthetic(twoNodes), alloc.Pools{LSE: cpuset.New(1, 2)}, "")
	seed, err := json.Marshal(o.Zones)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte(`[{"name":"node-1","type":"Node","resources":[{"name":"cpu","available":"1500m"}]}]`))
	f.Add([]byte(`[{"name":"node-0","type":"Node","resources":[{"name":"cpu","available":"-3"}]},{"name":"node-0","type":"Node"}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var zones []Zone
		if json.Unmarshal(data, &zones) != nil {
			return
		}
		free, err := FreeCPUs(zones)
		if err != nil {
			if !errors.Is(err, ErrZones) {
				t.Errorf("error %v does not wrap ErrZones", err)
			}
			return
		}
		if len(free) == 0 || len(free) > MaxNUMAFreeNodes {
			t.Errorf("FreeCPUs = %d NUMA nodes, want 1 to %d", len(free), MaxNUMAFreeNodes)
		}
		for _, n := range free {
			if n < 0 || n > maxCPUsPerZone {
				t.Errorf("FreeCPUs = %v: count out of range", free)
			}
		}
	})
}
