package plugin

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/kube/nodestate/nodestatetest"
	"github.com/corepin/corepin/topology"
)

// TestFeasibleToFind: kube-scheduler's count of feasible nodes to find
// (pkg/scheduler numFeasibleNodesToFind), which the plugin reckons with.
func TestFeasibleToFind(t *testing.T) {
	hundred := int32(100)
	for _, tc := range []struct {
		name  string
		pct   *int32
		nodes int
		want  int
	}{
		{name: "few nodes", nodes: 80, want: 80},
		{name: "1000 nodes", nodes: 1000, want: 420},
		{name: "5000 nodes", nodes: 5000, want: 500},
		{name: "10000 nodes", nodes: 10000, want: 500},
		{name: "floor", nodes: 150, want: 100},
		{name: "the profile's 100%", pct: &hundred, nodes: 5000, want: 5000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := feasibleToFind(tc.pct, tc.nodes); got != tc.want {
				t.Errorf("feasibleToFind(%d) = %d, want %d", tc.nodes, got, tc.want)
			}
		})
	}
}

// TestNarrowingWorth: the nodes PreFilter names are worth naming when the
// scheduler then visits and scores fewer nodes by more than naming them
// costs: at 1000 nodes most of them, at 5000 and 10,000 fewer than about
// half, and when the profile scores every node.
func TestNarrowingWorth(t *testing.T) {
	hundred := int32(100)
	for _, tc := range []struct {
		name     string
		pct      *int32
		nodes, m int
		want     bool
	}{
		{name: "1000 of them 600", nodes: 1000, m: 600, want: true},
		{name: "5000 of them 2000", nodes: 5000, m: 2000, want: true},
		{name: "5000 of them 3600", nodes: 5000, m: 3600},
		{name: "10000 of them 7000", nodes: 10000, m: 7000},
		{name: "10000 of them 3000", nodes: 10000, m: 3000, want: true},
		{name: "all", nodes: 5000, m: 5000},
		{name: "every node scored", pct: &hundred, nodes: 5000, m: 3000, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nw := &narrowing{pct: tc.pct}
			nw.bounds(tc.nodes)
			if got := nw.worth(tc.m); got != tc.want {
				t.Errorf("worth(%d of %d) = %v, want %v (lo %d, hi %d)", tc.m, tc.nodes, got, tc.want, nw.lo, nw.hi)
			}
		})
	}
}

// TestPreFilterNamesTheNodesThatMayTakeThePod: on 300 fixture nodes at
// random occupancy (and a node publishing nothing), PreFilter names,
// for a pod that needs aligned CPUs, every node whose Filter keeps it,
// and leaves some out; none for a pod that needs nothing of corepin. A
// set it named stays as it was after the next cycle.
func TestPreFilterNamesTheNodesThatMayTakeThePod(t *testing.T) {
	topos := nodestatetest.FixtureMachines(t)
	nodes := append(nodestatetest.BusyNodes(t, 300, rand.New(rand.NewPCG(21, 22)), topos...), baseNode("plain"))
	h := newHarness(t, nodes...)
	for _, n := range nodes {
		h.p.view.SetNode(n)
	}
	ls := guaranteed("ls", 1)
	ls.Annotations = nil
	ls.Spec.Containers[0].Resources.Limits = nil // Burstable: LS
	var prev, before sets.Set[string]
	for i, pod := range []*corev1.Pod{guaranteed("p8", 8), guaranteed("p12", 12), guaranteed("p10", 10), ls} {
		state := framework.NewCycleState()
		res, s, _ := h.fw.RunPreFilterPlugins(h.ctx, state, pod)
		if !s.IsSuccess() {
			t.Fatalf("PreFilter %s: %v", pod.Name, s)
		}
		if pod == ls {
			if !res.AllNodes() {
				t.Fatalf("PreFilter named %d nodes for an LS pod, want all", len(res.NodeNames))
			}
			break
		}
		if res.AllNodes() {
			t.Fatalf("PreFilter named no nodes for %s", pod.Name)
		}
		if i > 0 && !prev.Equal(before) {
			t.Fatal("the set PreFilter named in the cycle before changed")
		}
		kept := 0
		for _, n := range nodes {
			ni := framework.NewNodeInfo()
			ni.SetNode(n)
			if s := h.fw.RunFilterPlugins(h.ctx, state, pod, ni); s.IsSuccess() {
				kept++
				if !res.NodeNames.Has(n.Name) {
					t.Fatalf("%s: Filter keeps node %s, PreFilter did not name it", pod.Name, n.Name)
				}
			}
		}
		if len(res.NodeNames) >= len(nodes) || kept == 0 {
			t.Fatalf("%s: PreFilter named %d of %d nodes, Filter kept %d: want some left out, some kept", pod.Name, len(res.NodeNames), len(nodes), kept)
		}
		t.Logf("%s: PreFilter named %d of %d nodes, Filter kept %d", pod.Name, len(res.NodeNames), len(nodes), kept)
		prev, before = res.NodeNames, res.NodeNames.Clone()
	}
}

// TestPreFilterNamesNoNodesBeyondWorth: at 5000 nodes, most of which take
// the pod, PreFilter names none (naming them would have the scheduler
// look for more nodes than among all of them), and at 1000 it does.
func TestPreFilterNamesNoNodesBeyondWorth(t *testing.T) {
	topo, err := topology.Synthetic(topology.Shape{Sockets: 1, NodesPerSocket: 2, L3PerNode: 1, CoresPerL3: 2, ThreadsPerCore: 2})
	if err != nil {
		t.Fatal(err)
	}
	busy := func(i int) bool { return i%4 == 0 } // a quarter of the nodes hold every CPU
	for _, tc := range []struct {
		name  string
		nodes int
		named bool
	}{
		{name: "1000 nodes", nodes: 1000, named: true},
		{name: "5000 nodes", nodes: 5000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var nodes []*corev1.Node
			for i := range tc.nodes {
				st, err := alloc.NewState(topo, alloc.NodeSettings{})
				if err != nil {
					t.Fatal(err)
				}
				if busy(i) {
					if _, err := st.Admit(alloc.Request{ID: "held/all", QoS: alloc.LSE, CPUs: 7}); err != nil {
						t.Fatal(err)
					}
				}
				nodes = append(nodes, publish(t, baseNode(fmt.Sprintf("n%05d", i)), st, "", map[string]string{}))
			}
			p, infos := cached(nodes)
			res, s := p.PreFilter(context.Background(), framework.NewCycleState(), guaranteed("p", 2), infos)
			if !s.IsSuccess() {
				t.Fatal(s)
			}
			if named := !res.AllNodes(); named != tc.named {
				t.Fatalf("PreFilter named nodes: %v, want %v", named, tc.named)
			}
			if tc.named && len(res.NodeNames) != tc.nodes*3/4 {
				t.Fatalf("PreFilter named %d nodes, want the %d with free CPUs", len(res.NodeNames), tc.nodes*3/4)
			}
		})
	}
}

// TestPostFilterSaysWhatTheNodesLeftOutLack: when the pod fits none of
// the nodes PreFilter named, PostFilter says how many it left out and
// why one of them refuses the pod, in Filter's words; nothing when
// PreFilter named every node, nor in a fleet of fewer than 100 nodes,
// where it names none (each node's status is then corepin's reason).
func TestPostFilterSaysWhatTheNodesLeftOutLack(t *testing.T) {
	full := machine(t)
	if _, err := full.Admit(alloc.Request{ID: "held/all", QoS: alloc.LSE, CPUs: 7}); err != nil {
		t.Fatal(err)
	}
	var nodes []*corev1.Node
	for i := range 120 {
		st := machine(t)
		if i%2 == 0 {
			st = full
		}
		nodes = append(nodes, publish(t, baseNode(fmt.Sprintf("n%03d", i)), st, "", map[string]string{}))
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		nodes []*corev1.Node
		pod   *corev1.Pod
		want  string
	}{
		{name: "nodes left out", nodes: nodes, pod: guaranteed("p2", 2),
			want: "corepin: 60 node(s) left out before Filter, each refusing the pod (node n000: no NUMA node with 2 free CPUs)"},
		{name: "none left out", nodes: nodes, pod: guaranteed("p1", 1)},
		{name: "fewer than 100 nodes", nodes: nodes[:99], pod: guaranteed("p2", 2)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, infos := cached(tc.nodes)
			state := framework.NewCycleState()
			if _, s := p.PreFilter(ctx, state, tc.pod, infos); !s.IsSuccess() {
				t.Fatal(s)
			}
			_, s := p.PostFilter(ctx, state, tc.pod, nil)
			if s.Code() != fwk.Unschedulable || s.Message() != tc.want {
				t.Fatalf("PostFilter = %v %q, want Unschedulable %q", s.Code(), s.Message(), tc.want)
			}
		})
	}
}
