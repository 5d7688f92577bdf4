package nodeview

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/kube/nodestate"
	"github.com/corepin/corepin/kube/nodestate/nodestatetest"
	"github.com/corepin/corepin/topology"
)

// machine, publish and nrtObjectFor build nodes' published states
// (nodestatetest).
var (
	machine      = nodestatetest.SmallState
	publish      = nodestatetest.Publish
	nrtObjectFor = nodestatetest.NRTAt
)

func baseNode(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// TestHeartbeatDecodesNothing: an update of a node that leaves its corepin
// annotations alone keeps the decoded state.
func TestHeartbeatDecodesNothing(t *testing.T) {
	node := publish(t, baseNode("n1"), machine(t), "", map[string]string{})
	c := New()
	c.SetNode(node)
	before := c.get("n1")
	beat := node.DeepCopy()
	beat.Labels = map[string]string{"heartbeat": "1"}
	beat.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	c.SetNode(beat)
	if c.get("n1") != before {
		t.Fatal("a heartbeat decoded the node's state again")
	}
	plain := beat.DeepCopy()
	delete(plain.Annotations, nodestate.AnnotationTopology)
	c.SetNode(plain)
	if c.get("n1") != nil {
		t.Fatal("a node that stopped publishing is still judged")
	}
}

// TestSummaryRefuses: the summary refuses what the node cannot hold
// without running the allocator, with the words the allocator's refusal
// gets; where it cannot decide, the allocator does.
func TestSummaryRefuses(t *testing.T) {
	own := machine(t)
	// One thread of a core on each NUMA node is held: 6 CPUs free, 3 on
	// each NUMA node, 4 of them in whole cores (2 on each).
	topo := own.Topology()
	held := cpuset.New(topo.CoreCPUs(0).List()[0], topo.CoreCPUs(2).List()[0])
	if err := own.Assign(alloc.Assignment{ID: "x/held", QoS: alloc.LSE, CPUs: held}); err != nil {
		t.Fatal(err)
	}
	for _, policy := range []alloc.TopologyPolicy{"", alloc.TopologySingleNUMANode, alloc.TopologyRestricted} {
		node := publish(t, baseNode("n1"), own, policy, map[string]string{})
		c := New()
		c.SetNode(node)
		n := c.get("n1")
		for _, tc := range []struct {
			name       string
			req        alloc.Request
			bySummary  bool
			wantReason string
		}{
			{name: "7 of 6 free", req: alloc.Request{ID: "a/b", CPUs: 7, QoS: alloc.LSE}, bySummary: true},
			{name: "6 whole of 4 whole", req: alloc.Request{ID: "a/b", CPUs: 6, QoS: alloc.LSE, Bind: alloc.BindFullPCPUs}, bySummary: true},
			// Under restricted, 4 CPUs fit one NUMA node of the empty
			// machine, and neither has 4 free.
			{name: "4 of 3 per NUMA node", req: alloc.Request{ID: "a/b", CPUs: 4, QoS: alloc.LSE}, bySummary: policy != ""},
			{name: "4 whole of 2 whole per NUMA node", req: alloc.Request{ID: "a/b", CPUs: 4, QoS: alloc.LSE, Bind: alloc.BindFullPCPUs},
				bySummary: policy != ""},
			{name: "3 whole-core", req: alloc.Request{ID: "a/b", CPUs: 3, QoS: alloc.LSE, Bind: alloc.BindFullPCPUs}},
			{name: "3 of 3 per NUMA node", req: alloc.Request{ID: "a/b", CPUs: 3, QoS: alloc.LSE}},
			{name: "6 of 6 free", req: alloc.Request{ID: "a/b", CPUs: 6, QoS: alloc.LSE}, bySummary: policy == alloc.TopologySingleNUMANode},
			{name: "LS", req: alloc.Request{ID: "a/b", MilliCPUs: 1500, QoS: alloc.LS}, bySummary: true}, // the pool holds it
		} {
			t.Run(string(policy)+"/"+tc.name, func(t *testing.T) {
				v := judge(n, tc.req, nil)
				if v.byAllocator == tc.bySummary {
					t.Errorf("byAllocator = %v, want %v", v.byAllocator, !tc.bySummary)
				}
				// The allocator's own answer, with the summary left out.
				req, nodeDefault, err := nodestate.RequestOn(n.pub.j.Settings, tc.req)
				if err == nil {
					_, err = n.st.Clone().Admit(req)
				}
				if (err == nil) != v.OK {
					t.Fatalf("ok = %v, allocator's error %v", v.OK, err)
				}
				if err != nil {
					if want := nodestate.Refusal(req, err, nodeDefault, "", ""); v.Reason != want {
						t.Errorf("reason = %q, want the allocator's %q", v.Reason, want)
					}
					if strings.Contains(v.Reason, nodestate.ComingSuffix) {
						t.Errorf("reason %q counts pods on their way on a node with none", v.Reason)
					}
				}
			})
		}
	}
}

// TestEmptySharedByMachineType: nodes publishing the same machine and
// settings share one empty state (what refusesEmpty asks), whatever they
// hold; a node of other reserved CPUs or another machine has its own; and
// each node's unresolvable answer is the one it gives decoded alone.
func TestEmptySharedByMachineType(t *testing.T) {
	own := machine(t)
	other := own.Clone()
	if _, err := other.Admit(alloc.Request{ID: "x/held", QoS: alloc.LSE, CPUs: 3}); err != nil {
		t.Fatal(err)
	}
	// Two nodes holding more, sharing the empty state: both refuse
	// requests the empty state takes (resolvable), asked of it once.
	fuller := own.Clone()
	for i, cpus := range []int{4, 3} {
		if _, err := fuller.Admit(alloc.Request{ID: fmt.Sprintf("x/held%d", i), QoS: alloc.LSE, CPUs: cpus}); err != nil {
			t.Fatal(err)
		}
	}
	reserved, err := alloc.NewState(own.Topology(), alloc.NodeSettings{ReservedCount: 2})
	if err != nil {
		t.Fatal(err)
	}
	bigger, err := alloc.NewState(topology.MustSynthetic(topology.Shape{Sockets: 1, NodesPerSocket: 2, L3PerNode: 1, CoresPerL3: 3, ThreadsPerCore: 2}), alloc.NodeSettings{})
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]*alloc.State{"n1": own, "n2": other, "n3": reserved, "n4": bigger, "n5": fuller, "n6": fuller}
	c := New()
	for name, st := range states {
		c.SetNode(publish(t, baseNode(name), st, alloc.TopologySingleNUMANode, map[string]string{}))
	}
	emptyOf := func(name string) *empty { return c.get(name).pub.empty }
	if emptyOf("n1") == nil || emptyOf("n1") != emptyOf("n2") || emptyOf("n1") != emptyOf("n5") || emptyOf("n1") != emptyOf("n6") {
		t.Fatalf("n1, n2, n5 and n6 (one machine, one setting) have empty states %p, %p, %p and %p, want one shared",
			emptyOf("n1"), emptyOf("n2"), emptyOf("n5"), emptyOf("n6"))
	}
	if emptyOf("n3") == emptyOf("n1") || emptyOf("n4") == emptyOf("n1") || emptyOf("n4") == emptyOf("n3") {
		t.Fatal("a node of other reserved CPUs or another machine shares n1's empty state")
	}
	for name, st := range states {
		alone := New()
		alone.SetNode(publish(t, baseNode(name), st, alloc.TopologySingleNUMANode, map[string]string{}))
		for cpus := 1; cpus <= 14; cpus++ {
			req := alloc.Request{ID: "a/b", QoS: alloc.LSE, CPUs: cpus, TopologyPolicy: alloc.TopologySingleNUMANode}
			got, want := judge(c.get(name), req, nil), judge(alone.get(name), req, nil)
			if got != want {
				t.Fatalf("%s, %d CPUs: verdict %+v among the fleet, %+v alone", name, cpus, got, want)
			}
			// As a scheduler judges: the answers of the shared empty
			// state kept by the request's key are the same.
			if got := c.Judge(name, req, nil, c.Key(req)); got != want {
				t.Fatalf("%s, %d CPUs: verdict %+v among the fleet under its key, %+v alone", name, cpus, got, want)
			}
		}
	}
}

// TestVerdictKeptPerEntry: the pods of a burst with the same wish are
// judged once per node state: the second asks the allocator nothing; a
// reservation on the node (a new entry) judges again, and the answer
// kept is the one judging anew gives.
func TestVerdictKeptPerEntry(t *testing.T) {
	node := publish(t, baseNode("n1"), machine(t), "", map[string]string{})
	c := New()
	c.SetNode(node)
	req := alloc.Request{ID: "default/p1", CPUs: 2, QoS: alloc.LSE}
	other := req
	other.ID = "default/p2"
	runs := judgeRuns.Load()
	first := c.Judge("n1", req, nil, c.Key(req))
	if c.Judge("n1", other, nil, c.Key(other)) != first || judgeRuns.Load()-runs != 1 {
		t.Fatalf("two pods of one wish on one node state: %d judgements, want 1", judgeRuns.Load()-runs)
	}
	if err := c.Reserve("uid-p1", "n1", req); err != nil {
		t.Fatal(err)
	}
	runs = judgeRuns.Load()
	v := c.Judge("n1", other, nil, c.Key(other))
	if judgeRuns.Load()-runs != 1 {
		t.Fatal("the node's state changed by a reservation, and the verdict of before was kept")
	}
	if fresh := judge(c.get("n1"), other, nil); fresh != v {
		t.Fatalf("kept verdict %+v, judging anew %+v", v, fresh)
	}
	bigger := other
	bigger.CPUs = 4
	runs = judgeRuns.Load()
	c.Judge("n1", bigger, nil, c.Key(bigger))
	if judgeRuns.Load()-runs != 1 {
		t.Fatal("a request of another shape got a kept verdict")
	}
}

// TestBindingKeepsVerdicts: a pod reserved on a node and then bound
// changes no verdict there, so the entry Bound makes keeps those found
// before it, in the slots and past them, and judges none again.
func TestBindingKeepsVerdicts(t *testing.T) {
	c := New()
	c.SetNode(publish(t, baseNode("n1"), machine(t), "", map[string]string{}))
	if err := c.Reserve("uid-p0", "n1", alloc.Request{ID: "default/p0", CPUs: 1, QoS: alloc.LSE}); err != nil {
		t.Fatal(err)
	}
	req := alloc.Request{ID: "default/p1", CPUs: 2, QoS: alloc.LSE}
	past := req
	past.CPUs = 3
	for c.Key(past) < verdictSlots { // a key past the slots
		c.Key(alloc.Request{ID: "default/x", MilliCPUs: 100 + int(c.Key(past)), QoS: alloc.LS})
		past.CPUs++
	}
	want := map[Key]Verdict{c.Key(req): c.Judge("n1", req, nil, c.Key(req)), c.Key(past): c.Judge("n1", past, nil, c.Key(past))}
	c.Bound("uid-p0")
	runs := judgeRuns.Load()
	for k, v := range want {
		r := req
		if k == c.Key(past) {
			r = past
		}
		if got := c.Judge("n1", r, nil, k); got != v {
			t.Errorf("key %d after the binding: %+v, want %+v", k, got, v)
		}
	}
	if n := judgeRuns.Load() - runs; n != 0 {
		t.Errorf("after the binding %d verdicts judged again, want 0", n)
	}
}

// TestJudgeByObject: a node's entry found by the Node object the view
// was last set with is the one found by its name, through every change
// of the entry (a reservation, the node republishing, its deletion); an
// object the view was set with before (a snapshot not yet updated) is
// judged by the name, and the view keeps one object per node, none once
// the node is gone.
func TestJudgeByObject(t *testing.T) {
	c := New()
	st := machine(t)
	first := publish(t, baseNode("n1"), st, "", map[string]string{})
	c.SetNode(first)
	req := alloc.Request{ID: "default/p1", CPUs: 4, QoS: alloc.LSE, TopologyPolicy: alloc.TopologySingleNUMANode}
	same := func(step string, n *corev1.Node) {
		t.Helper()
		k := c.Key(req)
		if got, want := c.JudgeNode(n, req, nil, k), c.Judge("n1", req, nil, k); got != want {
			t.Errorf("%s: by the object %+v, by the name %+v", step, got, want)
		}
		if got, want := c.JudgeSeen(n, req, nil, k), c.Judge("n1", req, nil, k); got != want {
			t.Errorf("%s: seen by the object %+v, by the name %+v", step, got, want)
		}
	}
	same("set", first)
	if err := c.Reserve("uid-p0", "n1", alloc.Request{ID: "default/p0", CPUs: 4, QoS: alloc.LSE}); err != nil {
		t.Fatal(err)
	}
	same("after a reservation", first)
	held := st.Clone()
	if _, err := held.Admit(alloc.Request{ID: "x/held", QoS: alloc.LSE, CPUs: 3}); err != nil {
		t.Fatal(err)
	}
	second := publish(t, baseNode("n1"), held, "", map[string]string{})
	c.SetNode(second)
	same("republished", second)
	same("the object of before", first)
	if len(c.byObj) != 1 || c.byObj[second] == nil {
		t.Errorf("after the node republished the view indexes %d objects, want its last one", len(c.byObj))
	}
	c.DeleteNode("n1")
	if got := c.JudgeSeen(second, req, nil, c.Key(req)); !got.OK || got.Score != 0 {
		t.Errorf("a deleted node: %+v, want taken with score 0 (not judged)", got)
	}
	if len(c.byObj)+len(c.objOf) != 0 {
		t.Errorf("after the node's deletion the view keeps %d objects", len(c.byObj)+len(c.objOf))
	}
}

// TestVerdictsBeyondTheSlots: keys past the lock-free slots are kept too.
func TestVerdictsBeyondTheSlots(t *testing.T) {
	vs := newVerdicts()
	for _, id := range []Key{0, verdictSlots - 1, verdictSlots, verdictSlots + 9} {
		if _, ok := vs.load(id); ok {
			t.Fatalf("key %d kept before it was stored", id)
		}
		vs.store(id, Verdict{OK: true, Score: int64(id)})
		if v, ok := vs.load(id); !ok || v.Score != int64(id) {
			t.Fatalf("key %d: %+v, %v", id, v, ok)
		}
	}
}

// TestNRTNode: a node publishing no corepin annotations is judged by its
// NodeResourceTopology object, as the extender judges it (its default
// topology policy included); a pod reserved there takes its CPUs until
// the object changes after the pod was bound; a node publishing
// annotations is judged by them, not by its object.
func TestNRTNode(t *testing.T) {
	c := New()
	c.SetNRT(nrtObjectFor(t, "n1", "1", 4, 3))
	if c.get("n1") != nil {
		t.Fatal("an object judged before its Node is known")
	}
	c.SetNode(baseNode("n1"))
	four := alloc.Request{ID: "default/p", CPUs: 4, QoS: alloc.LSE} // no policy of its own: the object's single-numa-node
	if v := judge(c.get("n1"), four, nil); !v.OK {
		t.Fatalf("4 CPUs on a node with 4 free on NUMA node 0: refused: %s", v.Reason)
	}
	if err := c.Reserve("uid-p1", "n1", four); err != nil {
		t.Fatal(err)
	}
	want := "no NUMA node with 4 free CPUs (the node's default topology policy single-numa-node)"
	v := judge(c.get("n1"), four, nil)
	if v.OK || v.Reason != want+" (counting pods bound there and not yet admitted)" {
		t.Fatalf("second 4-CPU pod: ok %v, reason %q, want %q and the pods on their way", v.OK, v.Reason, want)
	}
	// The object changes before p1 is bound: p1 stays reserved.
	c.SetNRT(nrtObjectFor(t, "n1", "2", 4, 3))
	if got := c.Reserved(); got != 1 {
		t.Fatalf("Reserved() = %d after a change before binding, want 1", got)
	}
	// p1 is bound, then the object shows it held.
	c.Bound("uid-p1")
	c.SetNRT(nrtObjectFor(t, "n1", "3", 0, 3))
	if got := c.Reserved(); got != 0 {
		t.Fatalf("Reserved() = %d after the object changed past the binding, want 0", got)
	}
	if v := judge(c.get("n1"), four, nil); v.OK || v.Reason != want {
		t.Fatalf("4 CPUs on a node with 0 and 3 free: ok %v, reason %q, want %q", v.OK, v.Reason, want)
	}
	// Annotations win over the object.
	c.SetNode(publish(t, baseNode("n1"), machine(t), "", map[string]string{}))
	if v := judge(c.get("n1"), four, nil); !v.OK {
		t.Fatalf("a node publishing 8 free CPUs in annotations refused 4: %s", v.Reason)
	}
	c.DeleteNRT("n1")
	if c.get("n1") == nil {
		t.Fatal("deleting the object forgot a node judged by its annotations")
	}
}
