package nodeview

import (
	"fmt"
	"math/rand/v2"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/kube/nodestate/nodestatetest"
)

// randomRequest is a request of a random class, size, bind, exclusivity,
// NUMA strategy and topology policy (rng).
func randomRequest(rng *rand.Rand) alloc.Request {
	req := alloc.Request{ID: "default/p", QoS: []alloc.QoS{alloc.LSE, alloc.LSR, alloc.LS, alloc.BE, ""}[rng.IntN(5)]}
	switch req.QoS {
	case alloc.LS, alloc.BE:
		req.MilliCPUs = 250 * rng.IntN(16)
	default:
		req.CPUs = 1 + rng.IntN(32)
	}
	req.TopologyPolicy = []alloc.TopologyPolicy{"", alloc.TopologyNone, alloc.TopologyBestEffort,
		alloc.TopologyRestricted, alloc.TopologySingleNUMANode}[rng.IntN(5)]
	if rng.IntN(3) == 0 {
		req.Bind = []alloc.Bind{alloc.BindDefault, alloc.BindFullPCPUs, alloc.BindSpreadByPCPUs}[rng.IntN(3)]
	}
	if rng.IntN(6) == 0 {
		req.Exclusive = []alloc.Exclusive{alloc.ExclusivePCPULevel, alloc.ExclusiveNUMANodeLevel}[rng.IntN(2)]
	}
	if rng.IntN(6) == 0 {
		req.NUMA = []alloc.NUMAStrategy{alloc.LeastAllocated, alloc.DistributeEvenly}[rng.IntN(2)]
	}
	return req
}

// candidateFleet is a view of nodes of the fixture machines at random
// occupancy (nodestatetest.BusyNodes), nodes of each machine under other
// settings (both engines, options, a node's bind and topology policy),
// with single CPUs held at random, a node publishing nothing and one the
// view was never given; the nodes as a scheduler's snapshot hands them
// over.
func candidateFleet(t *testing.T, rng *rand.Rand) (*View, []*corev1.Node) {
	t.Helper()
	machines := nodestatetest.FixtureMachines(t)
	nodes := nodestatetest.BusyNodes(t, 3*len(machines), rng, machines...)
	settings := []alloc.NodeSettings{
		{Options: []string{alloc.OptFullPCPUsOnly}},
		{Policy: alloc.PolicyKubelet},
		{Policy: alloc.PolicyKubelet, Options: []string{alloc.OptFullPCPUsOnly}},
		{Bind: alloc.BindFullPCPUs, TopologyPolicy: alloc.TopologySingleNUMANode},
		{TopologyPolicy: alloc.TopologyRestricted},
	}
	for i, topo := range machines {
		for j, set := range settings {
			st := scattered(t, topo, set, rng)
			nodes = append(nodes, publish(t, baseNode(fmt.Sprintf("s%d-%d", i, j)), st, set.TopologyPolicy, map[string]string{}))
		}
	}
	vw := New()
	for _, n := range nodes {
		vw.SetNode(n)
	}
	unseen := publish(t, baseNode("unseen"), machine(t), "", map[string]string{})
	return vw, append(nodes, baseNode("plain"), unseen)
}

// TestCandidatesHoldEveryNodeJudgeKeeps: on fixture machines at random
// occupancy, under both engines and several settings, with pods reserved
// between the rounds, every node JudgeNode keeps for a random request is
// among the nodes Candidates names; and Candidates does leave nodes out,
// by their summary and by a verdict kept.
func TestCandidatesHoldEveryNodeJudgeKeeps(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	vw, nodes := candidateFleet(t, rng)
	left, leftByKept := 0, 0
	for round := range 300 {
		req := randomRequest(rng)
		k := vw.Key(req)
		if round%2 == 1 {
			// Some verdicts kept before: Candidates reads them.
			for _, n := range nodes[:len(nodes)/2] {
				vw.JudgeNode(n, req, nil, k)
			}
		}
		named := make([]bool, len(nodes))
		vw.Candidates(req, nil, k, len(nodes), func(i int) *corev1.Node { return nodes[i] },
			func(i int) bool { named[i] = true; return true })
		var keptBy []string
		for i, n := range nodes {
			v := vw.JudgeNode(n, req, nil, k)
			switch {
			case v.OK && !named[i]:
				t.Fatalf("round %d: node %s takes %+v (score %d), Candidates left it out", round, n.Name, req, v.Score)
			case !named[i]:
				left++
				if round%2 == 1 && i < len(nodes)/2 {
					leftByKept++
				}
			case v.OK:
				keptBy = append(keptBy, n.Name)
			}
		}
		if len(keptBy) > 0 && rng.IntN(2) == 0 && req.QoS != "" {
			name := keptBy[rng.IntN(len(keptBy))]
			if err := vw.Reserve(fmt.Sprintf("uid-%d", round), name, req); err != nil {
				t.Fatalf("round %d: reserving %+v on %s, which takes it: %v", round, req, name, err)
			}
		}
	}
	if left == 0 || leftByKept == 0 {
		t.Fatalf("Candidates left out %d nodes, %d by a kept verdict: want some of each", left, leftByKept)
	}
	t.Logf("Candidates left out %d node verdicts, %d of them by a verdict kept", left, leftByKept)
}

// TestCandidatesStop: Candidates stops when keep says so.
func TestCandidatesStop(t *testing.T) {
	vw, nodes := candidateFleet(t, rand.New(rand.NewPCG(13, 14)))
	req := alloc.Request{ID: "default/p", QoS: alloc.BE}
	calls := 0
	vw.Candidates(req, nil, vw.Key(req), len(nodes), func(i int) *corev1.Node { return nodes[i] },
		func(int) bool { calls++; return calls < 3 })
	if calls != 3 {
		t.Fatalf("keep called %d times after it said stop at the third, want 3", calls)
	}
}
