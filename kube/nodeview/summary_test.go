package nodeview

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/kube/nodestate"
	"github.com/corepin/corepin/kube/nodestate/nodestatetest"
	"github.com/corepin/corepin/topology"
)

// TestSummaryNeverRefusesWhatTheAllocatorTakes: on machines of several
// sockets and NUMA nodes per socket, under both engines, with and without
// align-by-socket and full-pcpus-only, at random occupancy, every request
// the summary refuses (per NUMA node, per socket, whole cores) is refused
// by the allocator too, in the same words (but for the kubelet engine's
// requests beyond the node's free CPUs); and the summary does decide
// some of each topology policy's refusals, restricted's included.
func TestSummaryNeverRefusesWhatTheAllocatorTakes(t *testing.T) {
	shapes := []topology.Shape{
		{Sockets: 2, NodesPerSocket: 2, L3PerNode: 1, CoresPerL3: 4, ThreadsPerCore: 2},
		{Sockets: 2, NodesPerSocket: 4, L3PerNode: 1, CoresPerL3: 2, ThreadsPerCore: 2},
		{Sockets: 4, NodesPerSocket: 1, L3PerNode: 2, CoresPerL3: 2, ThreadsPerCore: 1},
	}
	settings := []alloc.NodeSettings{
		{},
		{Options: []string{alloc.OptFullPCPUsOnly}},
		{Policy: alloc.PolicyKubelet},
		{Policy: alloc.PolicyKubelet, Options: []string{alloc.OptAlignBySocket}},
		{Policy: alloc.PolicyKubelet, Options: []string{alloc.OptFullPCPUsOnly, alloc.OptAlignBySocket}},
	}
	policies := []alloc.TopologyPolicy{alloc.TopologyNone, alloc.TopologyBestEffort, alloc.TopologyRestricted, alloc.TopologySingleNUMANode}
	rng := rand.New(rand.NewPCG(7, 8))
	bySummary := map[alloc.TopologyPolicy]int{}
	byRestrictedRule := 0
	for _, sh := range shapes {
		topo := topology.MustSynthetic(sh)
		for _, set := range settings {
			for round := range 12 {
				st := scattered(t, topo, set, rng)
				node := publish(t, baseNode("n1"), st, "", map[string]string{})
				c := New()
				c.SetNode(node)
				n := c.get("n1")
				for k := 1; k <= topo.Allowed().Size(); k++ {
					for _, policy := range policies {
						if policy == alloc.TopologySingleNUMANode && slices.Contains(set.Options, alloc.OptAlignBySocket) {
							continue // a combination the kubelet engine refuses as invalid
						}
						req := alloc.Request{ID: "a/b", CPUs: k, QoS: alloc.LSE, TopologyPolicy: policy}
						if set.Policy != alloc.PolicyKubelet && rng.IntN(2) == 0 {
							req.Bind = alloc.BindFullPCPUs
						}
						v := judge(n, req, nil)
						r, nodeDefault, err := nodestate.RequestOn(n.pub.j.Settings, req)
						if err != nil {
							t.Fatal(err)
						}
						_, aerr := n.st.Clone().Admit(r)
						if !v.byAllocator && !v.OK {
							bySummary[policy]++
							if policy == alloc.TopologyRestricted && n.sum.refusesRestricted(r.CPUs, n.pub.opts.alignBySocket) {
								byRestrictedRule++
							}
							if aerr == nil {
								t.Fatalf("%+v %v round %d: the summary refuses %+v (%s), the allocator takes it", sh, set, round, req, v.Reason)
							}
						}
						if (aerr == nil) != v.OK {
							t.Fatalf("%+v %v: ok %v, allocator %v", sh, set, v.OK, aerr)
						}
						// The kubelet engine words a request beyond the whole
						// node's free CPUs by its topology policy or options
						// first: the summary leaves those to it (issue 29).
						if aerr != nil && !v.byAllocator {
							if want := nodestate.Refusal(r, aerr, nodeDefault, "", ""); v.Reason != want {
								t.Fatalf("%+v %v %+v: reason %q, the allocator's %q", sh, set, req, v.Reason, want)
							}
						}
					}
				}
			}
		}
	}
	for _, policy := range policies {
		if bySummary[policy] == 0 {
			t.Errorf("the summary decided no refusal under %s", policy)
		}
	}
	if byRestrictedRule == 0 {
		t.Error("the summary's restricted rule (per NUMA node and socket) decided no refusal")
	}
	t.Logf("refusals the summary decided: %v, %d by the restricted rule", bySummary, byRestrictedRule)
}

// TestSharedAnsweredAsTheAllocator: a shared (LS, BE) request is answered
// from the summary exactly as the allocator answers it (taken or refused,
// in the same words, scored 5), on random states of both engines, with
// reserved CPUs under strict-cpu-reservation and without, LS quotas and
// exclusive CPUs held; the allocator runs for none of the usual ones.
func TestSharedAnsweredAsTheAllocator(t *testing.T) {
	topo := topology.MustSynthetic(topology.Shape{Sockets: 2, NodesPerSocket: 1, L3PerNode: 1, CoresPerL3: 2, ThreadsPerCore: 2})
	settings := []alloc.NodeSettings{
		{},
		{ReservedCount: 1},
		{ReservedCount: 2, Options: []string{alloc.OptStrictCPUReservation}},
		{Policy: alloc.PolicyKubelet, ReservedCount: 1},
	}
	rng := rand.New(rand.NewPCG(9, 10))
	decided := 0
	for _, set := range settings {
		for round := range 60 {
			st, err := alloc.NewState(topo, set)
			if err != nil {
				t.Fatal(err)
			}
			for k := range rng.IntN(6) {
				req := alloc.Request{ID: fmt.Sprintf("held/%d", k), QoS: alloc.LSE, CPUs: 1 + rng.IntN(2)}
				if rng.IntN(2) == 0 {
					req = alloc.Request{ID: req.ID, QoS: alloc.LS, MilliCPUs: 250 * (1 + rng.IntN(8))}
				}
				_, _ = st.Admit(req)
			}
			if round%5 == 0 { // every CPU exclusive: the shared pools empty
				_ = st.Assign(alloc.Assignment{ID: "held/all", QoS: alloc.LSE, CPUs: st.Pools().LS})
			}
			node := publish(t, baseNode("n1"), st, "", map[string]string{})
			c := New()
			c.SetNode(node)
			n := c.get("n1")
			for _, q := range []alloc.QoS{alloc.LS, alloc.BE} {
				for _, milli := range []int{0, 100, 1000, 2500, 4000, 9000} {
					for _, id := range []string{"a/b", "held/0"} {
						req := alloc.Request{ID: id, QoS: q, MilliCPUs: milli}
						v := judge(n, req, nil)
						r, nodeDefault, err := nodestate.RequestOn(n.pub.j.Settings, req)
						if err != nil {
							t.Fatal(err)
						}
						pl, aerr := n.st.Clone().Admit(r)
						if !v.byAllocator {
							decided++
						}
						if (aerr == nil) != v.OK {
							t.Fatalf("%v round %d %+v: ok %v (%s), the allocator: %v", set, round, req, v.OK, v.Reason, aerr)
						}
						if aerr == nil && v.Score != nodestate.Score(pl, n.free) {
							t.Fatalf("%v %+v: score %d, the allocator's placement scores %d", set, req, v.Score, nodestate.Score(pl, n.free))
						}
						if aerr != nil {
							if want := nodestate.Refusal(r, aerr, nodeDefault, "", ""); v.Reason != want {
								t.Fatalf("%v %+v: reason %q, the allocator's %q", set, req, v.Reason, want)
							}
						}
					}
				}
			}
		}
	}
	if decided == 0 {
		t.Fatal("the summary answered no shared request")
	}
}

// TestExactAnswersAsTheAllocator: on the six fixture machines (the 2x64x2
// 8-NUMA one among them) under both engines, with and without reserved
// CPUs and options, at random occupancy (whole workloads, LS quotas,
// single threads of cores), every request kind of every policy is
// answered by judge exactly as the allocator answers it: taken or not,
// and scored as the allocator's placement scores. The summary answers
// some takes without the allocator (placesWhole) on every machine whose
// units it predicts.
func TestExactAnswersAsTheAllocator(t *testing.T) {
	settings := []alloc.NodeSettings{
		{},
		{ReservedCount: 2},
		{Options: []string{alloc.OptFullPCPUsOnly}},
		{Policy: alloc.PolicyKubelet},
		{ReservedCount: 2, Options: []string{alloc.OptStrictCPUReservation}},
	}
	policies := []alloc.TopologyPolicy{alloc.TopologyNone, alloc.TopologyBestEffort, alloc.TopologyRestricted, alloc.TopologySingleNUMANode}
	rng := rand.New(rand.NewPCG(11, 12))
	rounds := 8
	if testing.Short() {
		rounds = 2
	}
	for _, topo := range nodestatetest.FixtureMachines(t) {
		exact, judged := 0, 0
		_, predicted := exactUnits(mustState(t, topo, alloc.NodeSettings{}))
		for _, set := range settings {
			for round := range rounds {
				st, err := alloc.NewState(topo, set)
				if err != nil {
					continue // settings this machine refuses
				}
				total := topo.Allowed().Size()
				target := int(float64(total) * 0.9 * rng.Float64())
				for k := 0; total-st.Pools().LS.Size() < target && k < 200; k++ {
					req := alloc.Request{ID: fmt.Sprintf("held/w%d", k), QoS: alloc.LSE, CPUs: 1 + rng.IntN(8)}
					switch rng.IntN(5) {
					case 0:
						req = alloc.Request{ID: req.ID, QoS: alloc.LS, MilliCPUs: 250 * (1 + rng.IntN(8))}
					case 1:
						req.CPUs = 1 // a thread: cores partly held
					}
					_, _ = st.Admit(req)
				}
				if round%2 == 1 { // LS quotas up to the pool's size: GuardPools refuses some
					for k := 0; k < 64; k++ {
						_, _ = st.Admit(alloc.Request{ID: fmt.Sprintf("held/q%d", k), QoS: alloc.LS, MilliCPUs: 250 * (1 + rng.IntN(8))})
					}
				}
				node := publish(t, baseNode("n1"), st, "", map[string]string{})
				c := New()
				c.SetNode(node)
				n := c.get("n1")
				for cpus := 1; cpus <= min(total, 24); cpus++ {
					for _, policy := range policies {
						for _, req := range []alloc.Request{
							{ID: "a/b", CPUs: cpus, QoS: alloc.LSE, TopologyPolicy: policy},
							{ID: "a/b", CPUs: cpus, QoS: alloc.LSE, TopologyPolicy: policy, Bind: alloc.BindFullPCPUs},
							{ID: "a/b", CPUs: cpus, QoS: alloc.LSR, TopologyPolicy: policy},
							{ID: "a/b", CPUs: cpus, QoS: alloc.LSE, TopologyPolicy: policy, NUMA: alloc.LeastAllocated},
							{ID: "held/w0", CPUs: cpus, QoS: alloc.LSE, TopologyPolicy: policy},
							{ID: "a/b", MilliCPUs: 250 * cpus, QoS: alloc.LS, TopologyPolicy: policy},
						} {
							if set.Policy == alloc.PolicyKubelet && (req.Bind != "" || req.NUMA != "") {
								continue // the kubelet engine has no bind or strategy
							}
							v := judge(n, req, nil)
							r, _, err := nodestate.RequestOn(n.pub.j.Settings, req)
							if err != nil {
								t.Fatal(err)
							}
							pl, aerr := n.st.Clone().Admit(r)
							judged++
							if v.OK && !v.byAllocator && r.QoS == alloc.LSE {
								exact++
							}
							if (aerr == nil) != v.OK {
								t.Fatalf("%s %+v round %d: %+v: ok %v (%s, by the allocator %v), the allocator: %v",
									topo.Summary(), set, round, req, v.OK, v.Reason, v.byAllocator, aerr)
							}
							if aerr == nil && v.Score != nodestate.Score(pl, n.free) {
								t.Fatalf("%s %+v round %d: %+v: score %d (by the allocator %v), the allocator's placement %s %+v scores %d",
									topo.Summary(), set, round, req, v.Score, v.byAllocator, pl.CPUs, pl.Quality, nodestate.Score(pl, n.free))
							}
						}
					}
				}
			}
		}
		if predicted && exact == 0 {
			t.Errorf("%s: the summary answered none of %d requests without the allocator", topo.Summary(), judged)
		}
		t.Logf("%s: %d of %d answered by the summary's exact rule (units predicted: %v)", topo.Summary(), exact, judged, predicted)
	}
}

// scattered is a state of topo under set with single CPUs held at random
// (rng): free CPUs of uneven spread.
func scattered(t *testing.T, topo *topology.Topology, set alloc.NodeSettings, rng *rand.Rand) *alloc.State {
	t.Helper()
	st, err := alloc.NewState(topo, set)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range topo.Allowed().List() {
		if rng.IntN(3) == 0 {
			_ = st.Assign(alloc.Assignment{ID: fmt.Sprintf("held/%d", c), QoS: alloc.LSE, CPUs: cpuset.New(c)})
		}
	}
	return st
}

func mustState(t *testing.T, topo *topology.Topology, set alloc.NodeSettings) *alloc.State {
	t.Helper()
	st, err := alloc.NewState(topo, set)
	if err != nil {
		t.Fatal(err)
	}
	return st
}
