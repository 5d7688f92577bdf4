package nodestate

import (
	"encoding/json"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/internal/testutil"
	"github.com/corepin/corepin/topology"
)

// publishedNode is the annotations (topology, assigned, settings) of a
// node of machine topo holding an exclusive workload of cpus CPUs.
func publishedNode(tb testing.TB, topo *topology.Topology, cpus int) (string, string, *string) {
	tb.Helper()
	st, err := alloc.NewState(topo, alloc.NodeSettings{Reserved: cpuset.New(0)})
	if err != nil {
		tb.Fatal(err)
	}
	if cpus > 0 {
		if _, err := st.Allocate(alloc.Request{ID: "ns/held", CPUs: cpus, QoS: alloc.LSE}); err != nil {
			tb.Fatal(err)
		}
	}
	ann, _, err := NodeAnnotations(st, alloc.TopologyNone, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return *ann[AnnotationTopology], *ann[AnnotationAssigned], ann[AnnotationAllocator]
}

// judge decodes and judges a node's annotations.
func judge(tb testing.TB, topo, assigned string, set *string) (Published, Judged) {
	tb.Helper()
	pub, err := DecodeTopology(topo, assigned, set)
	if err != nil {
		tb.Fatal(err)
	}
	j, err := JudgeTopology(pub)
	if err != nil {
		tb.Fatal(err)
	}
	return pub, j
}

// TestNodesOfOneMachineShareItsTopology: two nodes publishing the same
// machine get one decoded topology, which their states place on; placing
// and releasing on one node's states (while the other node is decoded
// and judged again, for -race) changes neither the other node's states
// nor the machine.
func TestNodesOfOneMachineShareItsTopology(t *testing.T) {
	machine := topology.MustSynthetic(twoNodes)
	topo1, assigned1, set1 := publishedNode(t, machine, 2)
	topo2, assigned2, set2 := publishedNode(t, machine, 6)
	if topo1 != topo2 {
		t.Fatalf("the two nodes publish different machines:\n%s\n%s", topo1, topo2)
	}
	pub1, j1 := judge(t, topo1, assigned1, set1)
	pub2, j2 := judge(t, topo2, assigned2, set2)
	if pub1.Topology != pub2.Topology {
		t.Errorf("nodes of one machine decoded two topologies (%p, %p), want one shared", pub1.Topology, pub2.Topology)
	}
	for _, st := range []*alloc.State{j1.State, j1.Empty, j2.State, j2.Empty} {
		if st.Topology() != pub1.Topology {
			t.Errorf("a judged state places on topology %p, want the shared %p", st.Topology(), pub1.Topology)
		}
	}
	machineDoc := pub1.Topology.Doc()
	free2, held2, emptyFree2 := j2.State.Pools().LS, j2.State.Assignments(), j2.Empty.Pools().LS

	var wg sync.WaitGroup
	for _, st := range []*alloc.State{j1.State, j1.Empty} {
		wg.Go(func() {
			for k := range 20 {
				id := fmt.Sprintf("ns/p%d", k)
				if _, err := st.Allocate(alloc.Request{ID: id, CPUs: 2, QoS: alloc.LSE}); err != nil {
					continue // full
				}
				if k%3 == 0 {
					if err := st.Release(id); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	wg.Go(func() {
		for range 20 {
			_, j := judge(t, topo2, assigned2, set2)
			if got := j.State.Pools().LS; !got.Equals(free2) {
				t.Errorf("node 2 judged again has free CPUs %s, want %s", got, free2)
			}
		}
	})
	wg.Wait()

	if free1 := j1.State.Pools().LS; free1.Size() >= free2.Size() {
		t.Fatalf("node 1 has %d free CPUs after placing, want fewer than node 2's %d", free1.Size(), free2.Size())
	}
	if got := j2.State.Pools().LS; !got.Equals(free2) {
		t.Errorf("node 2's free CPUs %s after node 1 placed, want %s", got, free2)
	}
	if got := j2.Empty.Pools().LS; !got.Equals(emptyFree2) {
		t.Errorf("node 2's empty state has free CPUs %s after node 1 placed, want %s", got, emptyFree2)
	}
	if diff := cmp.Diff(held2, j2.State.Assignments(), cmp.Comparer(cpuset.CPUSet.Equals)); diff != "" {
		t.Errorf("node 2's assignments changed after node 1 placed (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(machineDoc, pub1.Topology.Doc()); diff != "" {
		t.Errorf("the shared machine changed (-before +after):\n%s", diff)
	}
}

// TestSharedMachinesAreBounded: reading more different machines than
// MaxSharedMachines keeps at most that many; a malformed document is
// never kept; a machine dropped is read again.
func TestSharedMachinesAreBounded(t *testing.T) {
	var first string
	var held []*topology.Topology // kept alive: the cache holds machines weakly
	for cores := 1; cores <= MaxSharedMachines+10; cores++ {
		doc, err := json.Marshal(topology.MustSynthetic(topology.Shape{Sockets: 1, NodesPerSocket: 1, L3PerNode: 1, CoresPerL3: cores, ThreadsPerCore: 1}).Doc())
		if err != nil {
			t.Fatal(err)
		}
		if cores == 1 {
			first = string(doc)
		}
		got, err := DecodeTopology(string(doc), "", nil)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, got.Topology)
		if got.Topology.Online().Size() != cores {
			t.Fatalf("machine of %d cores decoded with CPUs %s", cores, got.Topology.Online())
		}
		if n := machines.len(); n > MaxSharedMachines {
			t.Fatalf("after %d machines, %d kept, want at most MaxSharedMachines = %d", cores, n, MaxSharedMachines)
		}
	}
	runtime.KeepAlive(held)
	n := machines.len()
	if _, err := DecodeTopology(`{"cpus":[{"cpu":0}]`, "", nil); err == nil {
		t.Fatal("DecodeTopology accepted a truncated document")
	}
	if got := machines.len(); got != n {
		t.Errorf("a malformed document changed the kept machines from %d to %d", n, got)
	}
	pub, err := DecodeTopology(first, "", nil)
	if err != nil || pub.Topology.Online().Size() != 1 {
		t.Errorf("the first machine read again: %v, %v; want 1 CPU", pub.Topology, err)
	}
}

// BenchmarkDecodeJudgeNode decodes and judges (DecodeTopology,
// JudgeTopology) nodes of the fixture machines at random occupancy, as the
// scheduler plugin and extender do once per node change. One op is one
// node.
func BenchmarkDecodeJudgeNode(b *testing.B) {
	type node struct {
		topo, assigned string
		set            *string
	}
	var nodes []node
	for _, name := range testutil.Fixtures(b) {
		m, err := topology.Discover(testutil.SysfsFromTarBz2(b, name), topology.WithoutCgroup())
		if err != nil {
			b.Fatal(err)
		}
		for k := range 4 {
			topo, assigned, set := publishedNode(b, m, k*m.Allowed().Size()/8)
			nodes = append(nodes, node{topo, assigned, set})
		}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		n := nodes[i%len(nodes)]
		i++
		judge(b, n.topo, n.assigned, n.set)
	}
}
