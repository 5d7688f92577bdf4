package nodestate_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/kube/nodestate"
	"github.com/corepin/corepin/kube/nodeview"
	"github.com/corepin/corepin/nodecore"
	"github.com/corepin/corepin/sim"
	"github.com/corepin/corepin/store"
	"github.com/corepin/corepin/topology"
)

// answer is a door's verdict on a request, reduced to what every door
// says: admitted, or refused by which rule (a Rejection's constraint, or
// alloc.ErrNoStrategy's text for the kubelet engine's refusal of a pod's
// own strategy).
type answer struct {
	ok    bool
	cause string
}

func (a answer) String() string {
	if a.ok {
		return "admit"
	}
	return "refuse (" + a.cause + ")"
}

// causeOf reduces a door's error to its answer; a reason that is neither
// is the whole error, so that it shows in the failure.
func causeOf(err error) answer {
	var rj alloc.Rejection
	switch {
	case err == nil:
		return answer{ok: true}
	case errors.Is(err, alloc.ErrNoStrategy):
		return answer{cause: alloc.ErrNoStrategy.Error()}
	case errors.As(err, &rj):
		return answer{cause: rj.Constraint}
	}
	return answer{cause: "error: " + err.Error()}
}

// TestOneAnswerPerRule (issue 29, "one answer per rule"): every request
// shape on every node setting gets the same verdict and the same refusing
// rule from the three doors that judge it:
//   - the node: nodecore.Admit on the node's state file, as the agent, the
//     NRI plugin and a run admit;
//   - the scheduler: the node's state as it publishes it
//     (NodeAnnotations), decoded and judged as both scheduler doors
//     (kube/extender, scheduler/plugin) judge it: Prejudge, RequestOn,
//     alloc.State.Try, Refusal; and through the node view both doors
//     judge by (kube/nodeview, its summary included), which must give
//     the same verdict and reason;
//   - the simulator: sim.Replay of the one request on the one node under
//     the as-deployed scenario.
//
// Each node holds one exclusive workload (4 CPUs) before the request.
// Where the node refuses for a rule, the scheduler's reason is the node's
// refusal worded by nodestate.Refusal.
func TestOneAnswerPerRule(t *testing.T) {
	topo := topology.MustSynthetic(topology.Shape{Sockets: 2, NodesPerSocket: 1, L3PerNode: 1, CoresPerL3: 4, ThreadsPerCore: 2})
	reserved := cpuset.New(0, 8) // one core's two threads
	settings := []struct {
		name string
		set  alloc.NodeSettings
	}{
		{name: "corepin", set: alloc.NodeSettings{Policy: alloc.PolicyCorepin}},
		{name: "corepin reserved single-numa-node", set: alloc.NodeSettings{Policy: alloc.PolicyCorepin, Reserved: reserved,
			TopologyPolicy: alloc.TopologySingleNUMANode}},
		{name: "corepin full-pcpus-only reserved", set: alloc.NodeSettings{Policy: alloc.PolicyCorepin, Reserved: reserved,
			Options: []string{alloc.OptFullPCPUsOnly}}},
		{name: "kubelet reserved", set: alloc.NodeSettings{Policy: alloc.PolicyKubelet, Reserved: reserved}},
		{name: "kubelet full-pcpus-only strict restricted", set: alloc.NodeSettings{Policy: alloc.PolicyKubelet, Reserved: reserved,
			Options: []string{alloc.OptFullPCPUsOnly, alloc.OptStrictCPUReservation}, TopologyPolicy: alloc.TopologyRestricted}},
	}
	type shape struct{ Bind, Exclusive, NUMA, TopologyPolicy, Isolated string }
	shapes := []shape{
		{},
		{Bind: string(alloc.BindFullPCPUs)},
		{Bind: string(alloc.BindSpreadByPCPUs)},
		{Bind: string(alloc.BindDefault)},
		{Exclusive: string(alloc.ExclusivePCPULevel)},
		{Exclusive: string(alloc.ExclusiveNUMANodeLevel)},
		{NUMA: string(alloc.LeastAllocated)},
		{NUMA: string(alloc.DistributeEvenly)},
		{TopologyPolicy: string(alloc.TopologySingleNUMANode)},
		{TopologyPolicy: string(alloc.TopologyRestricted)},
		{TopologyPolicy: string(alloc.TopologyBestEffort)},
		{TopologyPolicy: string(alloc.TopologyNone)},
		{Isolated: string(alloc.IsolatedPrefer)},
		{Isolated: string(alloc.IsolatedRequire)},
		{Bind: string(alloc.BindFullPCPUs), TopologyPolicy: string(alloc.TopologySingleNUMANode)},
		{Exclusive: string(alloc.ExclusivePCPULevel), NUMA: string(alloc.LeastAllocated), TopologyPolicy: string(alloc.TopologyRestricted)},
	}
	sizes := map[string][]float64{
		string(alloc.LSE): {1, 2, 3, 4, 7, 11}, string(alloc.LSR): {1, 2, 4, 11}, "": {2, 5},
		string(alloc.LS): {0.5, 2.5, 12, 20}, string(alloc.BE): {0.25, 4, 16},
	}
	held := nodecore.Spec{Name: "held", QoS: string(alloc.LSE), CPUs: ptr(4)}
	cases, prefiltered, refused := 0, 0, map[string]int{}
	capacity := answer{cause: "capacity"}
	for _, ns := range settings {
		t.Run(ns.name, func(t *testing.T) {
			db, err := store.Open(filepath.Join(t.TempDir(), "state.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			ad, err := nodecore.Admit(db, topo, ns.set, nodecore.Record{Spec: held}, cpuset.CPUSet{})
			if err != nil {
				t.Fatalf("admitting the held workload: %v", err)
			}
			// The scheduler's view: the node's state as it publishes it.
			ann, coarse, err := nodestate.NodeAnnotations(ad.State, ns.set.TopologyPolicy, nil)
			if err != nil || coarse {
				t.Fatalf("NodeAnnotations: coarse %v, %v", coarse, err)
			}
			pub, err := nodestate.DecodeTopology(*ann[nodestate.AnnotationTopology], *ann[nodestate.AnnotationAssigned], ann[nodestate.AnnotationAllocator])
			if err != nil {
				t.Fatal(err)
			}
			j, err := nodestate.JudgeTopology(pub)
			if err != nil {
				t.Fatal(err)
			}
			view := nodeview.New()
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Annotations: map[string]string{}}}
			for k, v := range ann {
				if v != nil {
					n.Annotations[k] = *v
				}
			}
			view.SetNode(n)
			simSet := ns.set
			cluster := sim.Config{Cluster: []sim.Node{{Name: "n", Topology: topo, Held: ad.State.Assignments(), Settings: &simSet}},
				Reserved: ns.set.Reserved}
			for _, qos := range []string{string(alloc.LSE), string(alloc.LSR), "", string(alloc.LS), string(alloc.BE)} {
				for _, cpus := range sizes[qos] {
					for _, sh := range shapes {
						name := fmt.Sprintf("%s/%v/%+v", qos, cpus, sh)
						spec := nodecore.Spec{Name: "w", QoS: qos, CPUs: ptr(cpus), Bind: sh.Bind, Exclusive: sh.Exclusive,
							NUMA: sh.NUMA, TopologyPolicy: sh.TopologyPolicy, Isolated: sh.Isolated}
						req, err := alloc.RequestSpec{CPUs: spec.CPUs, QoS: qos, Bind: sh.Bind, Exclusive: sh.Exclusive, NUMA: sh.NUMA,
							TopologyPolicy: sh.TopologyPolicy, Isolated: sh.Isolated}.Request("w")
						if err != nil {
							continue // not a request any door takes in (a fraction of an exclusive CPU, isolated on a shared class)
						}
						cases++
						node, nodeErr := nodeAnswer(db, topo, ns.set, spec)
						sched, reason := schedulerAnswer(j, req)
						if v := view.Judge("n", req, nil, view.Key(req)); v.OK != sched.ok || !v.OK && v.Reason != reason {
							t.Errorf("%s: the node view says %+v, the scheduler's rule %v (%s)", name, v, sched, reason)
						}
						simulated := simAnswer(t, cluster, req)
						// The simulator's cluster scheduler asks a node only
						// when its allocatable CPUs (allowed less reserved)
						// less those held have room, as the kube-scheduler's
						// resource fit does before any door of corepin's
						// (a BE pod asks for none): then its answer is the
						// fit's.
						need := float64(req.CPUs)
						if req.QoS == alloc.LS || req.QoS == alloc.BE {
							need = float64(req.MilliCPUs) / 1000
						}
						if fit := req.QoS == alloc.BE || need <= float64(topo.Allowed().Size()-ns.set.Reserved.Size()-4); !fit {
							if simulated != capacity {
								t.Errorf("%s: the simulator's resource fit passed %v CPUs: %v", name, need, simulated)
							}
							prefiltered++
							simulated = node
						}
						if node != sched || node != simulated {
							t.Errorf("%s: node %v (%v), scheduler %v (%s), simulator %v", name, node, nodeErr, sched, reason, simulated)
							continue
						}
						if !node.ok {
							refused[node.cause]++
							r, nodeDefault, _ := nodestate.RequestOn(j.Settings, req)
							want := nodestate.Refusal(r, nodeErr, nodeDefault, j.BindLabel, j.PolicyLabel)
							if node.cause != alloc.ErrNoStrategy.Error() && reason != want {
								t.Errorf("%s: the scheduler's reason %q, the node's refusal worded %q", name, reason, want)
							}
						}
					}
				}
			}
		})
	}
	t.Logf("%d requests through three doors (%d refused by the simulator's resource fit before its node); refused by rule: %v", cases, prefiltered, refused)
	if refused[alloc.ErrNoStrategy.Error()] == 0 || len(refused) < 4 {
		t.Errorf("the table reaches too few rules: %v", refused)
	}
}

func ptr(f float64) *float64 { return &f }

// nodeAnswer admits spec on the node's state file and deletes it again.
func nodeAnswer(db *store.DB, topo *topology.Topology, set alloc.NodeSettings, spec nodecore.Spec) (answer, error) {
	_, err := nodecore.Admit(db, topo, set, nodecore.Record{Spec: spec}, cpuset.CPUSet{})
	if err == nil {
		if derr := db.DeleteAssignment(spec.Name); derr != nil {
			return answer{cause: "error: " + derr.Error()}, derr
		}
	}
	return causeOf(err), err
}

// schedulerAnswer judges req on j as the scheduler doors do, and their
// reason for a refusal.
func schedulerAnswer(j nodestate.Judged, req alloc.Request) (answer, string) {
	if pv, ok := nodestate.Prejudge(true, req, nil, nil, j.State != nil); ok {
		if pv.OK {
			return answer{ok: true}, ""
		}
		return answer{cause: "prejudged: " + pv.Reason}, pv.Reason
	}
	r, nodeDefault, err := nodestate.RequestOn(j.Settings, req)
	if err == nil {
		_, err = j.State.Try(r)
	}
	if err == nil {
		return answer{ok: true}, ""
	}
	return causeOf(err), nodestate.Refusal(r, err, nodeDefault, j.BindLabel, j.PolicyLabel)
}

// simAnswer replays req alone on the node of cfg, as deployed.
func simAnswer(t *testing.T, cfg sim.Config, req alloc.Request) answer {
	t.Helper()
	deployed, err := sim.ParseScenario(sim.AsDeployed)
	if err != nil {
		t.Fatal(err)
	}
	evs := []sim.Event{{Op: sim.Arrive, ID: req.ID, Request: req}}
	rep, err := sim.Replay(evs, cfg, sim.Runs([]sim.Scenario{deployed}, []sim.NodeChoice{sim.FirstFit}))
	if err != nil {
		return answer{cause: "error: " + err.Error()}
	}
	res := rep.Results[0]
	if res.Admitted == 1 {
		return answer{ok: true}
	}
	for c := range res.RejectedBy {
		return answer{cause: c}
	}
	return answer{cause: fmt.Sprintf("no outcome: %+v", res)}
}
