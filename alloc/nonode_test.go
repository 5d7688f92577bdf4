package alloc

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/topology"
)

// noNodeTopologies are machines some or all of whose online CPUs are in no
// NUMA node (topology.NoNodeCPUs), as corepin and hwloc read a machine
// whose CPUs link to a node without a directory (issue 17 §1).
func noNodeTopologies(t *testing.T) map[string]*topology.Topology {
	t.Helper()
	out := map[string]*topology.Topology{}
	edit := func(name string, shape topology.Shape, none func(c topology.CPU) bool, keepNodes bool) {
		base := topology.MustSynthetic(shape)
		cpus := base.CPUs()
		for i := range cpus {
			if none(cpus[i]) {
				cpus[i].NUMA = topology.None
			}
		}
		var dist map[topology.NodeID][]int
		if keepNodes {
			// The remaining nodes' table, rows in the order of their ids.
			var nodes []topology.NodeID
			for _, c := range cpus {
				if c.NUMA != topology.None && !slices.Contains(nodes, c.NUMA) {
					nodes = append(nodes, c.NUMA)
				}
			}
			slices.Sort(nodes)
			dist = map[topology.NodeID][]int{}
			for _, a := range nodes {
				for _, b := range nodes {
					dist[a] = append(dist[a], base.Distance(a, b))
				}
			}
		}
		topo, err := topology.New(cpus, dist)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out[name] = topo
	}
	// The machine: two packages, package 0 in no node.
	edit("2s-pkg0-in-no-node", topology.Shape{Sockets: 2, NodesPerSocket: 1, L3PerNode: 1, CoresPerL3: 6, ThreadsPerCore: 2},
		func(c topology.CPU) bool { return c.Socket == 0 }, true)
	// Every CPU in no node (only a CPU-less node has a directory).
	edit("1s-all-in-no-node", topology.Shape{Sockets: 1, NodesPerSocket: 1, L3PerNode: 2, CoresPerL3: 4, ThreadsPerCore: 2},
		func(topology.CPU) bool { return true }, false)
	// Two of four nodes absent, one per socket.
	edit("2s4n-two-absent", topology.Shape{Sockets: 2, NodesPerSocket: 2, L3PerNode: 1, CoresPerL3: 3, ThreadsPerCore: 2},
		func(c topology.CPU) bool { return c.NUMA == 0 || c.NUMA == 2 }, true)
	return out
}

// TestNoNodeCPUsAllocate checks that both engines place work on machines
// with CPUs in no NUMA node: the group of such CPUs counts as one locality
// (a request fits in it as in a node), it is reported as no node id, and
// the churn invariants hold.
func TestNoNodeCPUsAllocate(t *testing.T) {
	topos := noNodeTopologies(t)
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range topos {
			if !yield(n) {
				return
			}
		}
	})
	for ti, name := range names {
		topo := topos[name]
		t.Run(name, func(t *testing.T) {
			none := topo.NoNodeCPUs()
			for _, policy := range []Policy{PolicyCorepin, PolicyKubelet} {
				s, err := NewState(topo, NodeSettings{Policy: policy})
				if err != nil {
					t.Fatalf("NewState(%s): %v", policy, err)
				}
				// A request the no-node group can hold alone stays in it
				// when that is where the free CPUs are.
				for _, n := range topo.NodesWithCPUs() {
					if _, err := s.Allocate(Request{ID: fmt.Sprintf("fill-%d", n), QoS: LSE, CPUs: topo.NodeCPUs(n).Size(), Hint: []topology.NodeID{n}}); err != nil {
						t.Fatalf("%s: filling node %d: %v", policy, n, err)
					}
				}
				p, err := s.Allocate(Request{ID: "in-none", QoS: LSE, CPUs: 2, TopologyPolicy: TopologySingleNUMANode})
				if err != nil {
					t.Fatalf("%s: 2 cpus beside full nodes: %v", policy, err)
				}
				if !p.CPUs.IsSubsetOf(none) {
					t.Errorf("%s: placed %s, want inside the no-node cpus %s", policy, p.CPUs, none)
				}
				if !p.NUMANodes.IsEmpty() {
					t.Errorf("%s: numa nodes of a placement in no node = %s, want none", policy, p.NUMANodes)
				}
				if q := p.Quality; q.NUMANodes != 1 {
					t.Errorf("%s: quality counts %d numa groups, want 1", policy, q.NUMANodes)
				}
				if _, err := s.Allocate(Request{ID: "hint-none", QoS: LSE, CPUs: 1, Hint: []topology.NodeID{topology.None}}); err == nil {
					t.Errorf("%s: a hint naming node %d was accepted", policy, topology.None)
				}
				pools := s.Pools()
				if pools.LS.Intersects(p.CPUs) || !pools.LS.Union(pools.LSE).Equals(topo.Allowed()) {
					t.Errorf("%s: pools %+v do not split the machine", policy, pools)
				}
			}
			// Random churn, as TestPropertyChurn, on both engines.
			for trial := range 4 {
				rng := rand.New(rand.NewPCG(uint64(ti), uint64(trial)))
				cfg := randomConfig(rng, topo)
				s, err := NewState(topo, cfg)
				if errors.Is(err, ErrInvalid) {
					continue // a reserved count full-pcpus-only refuses
				}
				if err != nil {
					t.Fatalf("NewState(%+v): %v", cfg, err)
				}
				var used cpuset.CPUSet
				for i := range 60 {
					r := randomRequest(rng, cfg, i, topo.Online().Size())
					p, err := s.Allocate(r)
					if err != nil {
						continue
					}
					if (r.QoS == LSE || r.QoS == LSR) && (p.CPUs.Size() != r.CPUs || p.CPUs.Intersects(used)) {
						t.Fatalf("Allocate(%+v) = %s over %s", r, p.CPUs, used)
					}
					if r.QoS == LSE || r.QoS == LSR {
						used = used.Union(p.CPUs)
					}
					checkInvariants(t, s)
				}
			}
		})
	}
}
