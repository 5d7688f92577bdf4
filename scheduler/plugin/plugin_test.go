package plugin

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/internal/testutil"
	"github.com/corepin/corepin/kube/nodestate"
	"github.com/corepin/corepin/kube/nodestate/nodestatetest"
	"github.com/corepin/corepin/kube/nodeview"
	"github.com/corepin/corepin/kube/podmeta"
)

// machine, publish and nrtObjectFor build nodes' published states
// (nodestatetest).
var (
	machine      = nodestatetest.SmallState
	publish      = nodestatetest.Publish
	nrtObjectFor = nodestatetest.NRTAt
)

// guaranteed is a Guaranteed pod of cpus whole CPUs asking for one NUMA
// node.
func guaranteed(name string, cpus int64) *corev1.Pod {
	rl := corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(cpus, resource.DecimalSI), corev1.ResourceMemory: resource.MustParse("1Gi")}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name),
			Annotations: map[string]string{podmeta.AnnotationNUMAPolicy: string(alloc.TopologySingleNUMANode)}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: rl, Limits: rl}}}},
	}
}

// harness is a framework running the plugin against a fake API server's
// informers.
type harness struct {
	t      *testing.T
	ctx    context.Context
	fw     framework.Framework
	client *fake.Clientset
	p      *Plugin
	// log is what the plugin logged.
	log ktesting.Buffer
}

func newHarness(t *testing.T, nodes ...*corev1.Node) *harness {
	t.Helper()
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	t.Cleanup(cancel)
	objs := make([]runtime.Object, 0, len(nodes))
	for _, n := range nodes {
		objs = append(objs, n)
	}
	client := fake.NewSimpleClientset(objs...)
	// The fake clientset has no resource versions: an object created
	// after an informer's list but before its watch opens is never seen
	// (nor its deletion). The harness returns only once the node and pod
	// watches are open.
	var mu sync.Mutex
	open := map[string]bool{}
	client.PrependWatchReactor("*", func(action k8stesting.Action) (bool, watch.Interface, error) {
		var opts metav1.ListOptions
		if wa, ok := action.(k8stesting.WatchActionImpl); ok {
			opts = wa.ListOptions
		}
		w, err := client.Tracker().Watch(action.GetResource(), action.GetNamespace(), opts)
		if err != nil {
			return false, nil, err
		}
		mu.Lock()
		open[action.GetResource().Resource] = true
		mu.Unlock()
		return true, w, nil
	})
	f := informers.NewSharedInformerFactory(client, 0)
	h := &harness{t: t, ctx: ctx, client: client, log: logger.GetSink().(ktesting.Underlier).GetBuffer()}
	factory := func(ctx context.Context, obj runtime.Object, handle fwk.Handle) (fwk.Plugin, error) {
		p, err := New(ctx, obj, handle)
		if err == nil {
			h.p = p.(*Plugin)
		}
		return p, err
	}
	fw, err := tf.NewFramework(ctx, []tf.RegisterPluginFunc{
		tf.RegisterQueueSortPlugin(queuesort.Name, queuesort.New),
		tf.RegisterBindPlugin(defaultbinder.Name, defaultbinder.New),
		tf.RegisterPluginAsExtensions(Name, factory, "PreFilter", "Filter", "Score", "Reserve", "PostBind"),
	}, "", frameworkruntime.WithInformerFactory(f), frameworkruntime.WithClientSet(client),
		frameworkruntime.WithSnapshotSharedLister(internalcache.NewSnapshot(nil, nodes)))
	if err != nil {
		t.Fatalf("NewFramework: %v", err)
	}
	h.fw = fw
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	deadline := time.Now().Add(testutil.Patience)
	for {
		mu.Lock()
		ready := open["nodes"] && open["pods"]
		mu.Unlock()
		if ready {
			return h
		}
		if time.Now().After(deadline) {
			t.Fatal("the informers' node and pod watches never opened")
		}
		time.Sleep(time.Millisecond)
	}
}

// update writes node to the API server and waits until the plugin's
// view holds what it publishes.
func (h *harness) update(node *corev1.Node) {
	h.t.Helper()
	if _, err := h.client.CoreV1().Nodes().Update(h.ctx, node, metav1.UpdateOptions{}); err != nil {
		h.t.Fatal(err)
	}
	deadline := time.Now().Add(testutil.Patience)
	for {
		if h.p.view.Current(node) {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("the plugin's view never saw node %s's new state", node.Name)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// schedule runs one scheduling cycle of pod on node through the
// framework, up to Reserve and PostBind when Filter keeps the node; it
// returns Filter's status (nil: kept and reserved).
func (h *harness) schedule(pod *corev1.Pod, node *corev1.Node) *fwk.Status {
	h.t.Helper()
	state := framework.NewCycleState()
	if _, s, _ := h.fw.RunPreFilterPlugins(h.ctx, state, pod); !s.IsSuccess() {
		h.t.Fatalf("PreFilter %s: %v", pod.Name, s)
	}
	ni := framework.NewNodeInfo()
	ni.SetNode(node)
	if s := h.fw.RunFilterPlugins(h.ctx, state, pod, ni); !s.IsSuccess() {
		return s
	}
	if _, s := h.fw.RunScorePlugins(h.ctx, state, pod, []fwk.NodeInfo{ni}); !s.IsSuccess() {
		h.t.Fatalf("Score %s: %v", pod.Name, s)
	}
	if s := h.fw.RunReservePluginsReserve(h.ctx, state, pod, node.Name); !s.IsSuccess() {
		h.t.Fatalf("Reserve %s: %v", pod.Name, s)
	}
	h.fw.RunPostBindPlugins(h.ctx, state, pod, node.Name)
	return nil
}

// scheduleAll schedules pods on node one after the other, each kept.
func (h *harness) scheduleAll(node *corev1.Node, pods ...*corev1.Pod) {
	h.t.Helper()
	for _, p := range pods {
		if s := h.schedule(p, node); s != nil {
			h.t.Fatalf("%s refused: %v", p.Name, s)
		}
	}
}

func baseNode(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// TestBurstNeverDoubleBooked: pods reserved on a node before its
// annotations catch up take their CPUs at once; the node's new state
// replaces the view's state with the pods it does not include yet placed again,
// and once it includes them all, their reservations go.
func TestBurstNeverDoubleBooked(t *testing.T) {
	own := machine(t)
	node := publish(t, baseNode("n1"), own, alloc.TopologySingleNUMANode, map[string]string{})
	h := newHarness(t, node)
	h.update(node)

	p1, p2, p3 := guaranteed("p1", 4), guaranteed("p2", 4), guaranteed("p3", 4)
	h.scheduleAll(node, p1, p2)
	wantComing := "no NUMA node with 4 free CPUs" + nodestate.ComingSuffix
	if s := h.schedule(p3, node); s == nil || s.Code() != fwk.Unschedulable || s.Message() != wantComing {
		t.Fatalf("third 4-CPU pod on a node of two 4-CPU NUMA nodes: status %v, want Unschedulable %q", s, wantComing)
	}
	if got := h.p.view.Reserved(); got != 2 {
		t.Fatalf("Reserved() = %d, want 2", got)
	}

	// The node admits p1 and publishes: p2 stays reserved, p3 stays out.
	req := func(p *corev1.Pod) alloc.Request {
		return alloc.Request{ID: p.Namespace + "/" + p.Name, CPUs: 4, QoS: alloc.LSE, TopologyPolicy: alloc.TopologySingleNUMANode}
	}
	if _, err := own.Admit(req(p1)); err != nil {
		t.Fatal(err)
	}
	uids := map[string]string{"default/p1": string(p1.UID)}
	node = publish(t, node, own, alloc.TopologySingleNUMANode, uids)
	h.update(node)
	if got := h.p.view.Reserved(); got != 1 {
		t.Fatalf("after the node published p1: Reserved() = %d, want 1 (p2)", got)
	}
	if s := h.schedule(p3, node); s == nil || s.Message() != wantComing {
		t.Fatalf("p3 after the node published p1 only: status %v, want %q", s, wantComing)
	}

	// The node admits p2: nothing is reserved, and p3 is refused by what
	// the node publishes alone.
	if _, err := own.Admit(req(p2)); err != nil {
		t.Fatal(err)
	}
	uids["default/p2"] = string(p2.UID)
	node = publish(t, node, own, alloc.TopologySingleNUMANode, uids)
	h.update(node)
	if got := h.p.view.Reserved(); got != 0 {
		t.Fatalf("after the node published p1 and p2: Reserved() = %d, want 0", got)
	}
	want := "no NUMA node with 4 free CPUs"
	if s := h.schedule(p3, node); s == nil || s.Message() != want || s.Code() != fwk.Unschedulable {
		t.Fatalf("p3 on a full node: status %v, want Unschedulable %q", s, want)
	}
}

// TestUnreserve: a reservation released gives its CPUs back at once.
func TestUnreserve(t *testing.T) {
	node := publish(t, baseNode("n1"), machine(t), "", map[string]string{})
	h := newHarness(t, node)
	h.update(node)
	p1, p2, p3 := guaranteed("p1", 4), guaranteed("p2", 4), guaranteed("p3", 4)
	h.scheduleAll(node, p1, p2)
	if s := h.schedule(p3, node); s == nil {
		t.Fatal("p3 kept on a node whose 8 CPUs p1 and p2 hold")
	}
	h.fw.RunReservePluginsUnreserve(h.ctx, framework.NewCycleState(), p2, node.Name)
	if got := h.p.view.Reserved(); got != 1 {
		t.Fatalf("after Unreserve(p2): Reserved() = %d, want 1", got)
	}
	if s := h.schedule(p3, node); s != nil {
		t.Fatalf("p3 after p2 was unreserved: %v", s)
	}
}

// TestPodDeletedReleases: a reserved pod deleted before its node
// published it gives its CPUs back.
func TestPodDeletedReleases(t *testing.T) {
	node := publish(t, baseNode("n1"), machine(t), "", map[string]string{})
	h := newHarness(t, node)
	h.update(node)
	p1 := guaranteed("p1", 4)
	if _, err := h.client.CoreV1().Pods("default").Create(h.ctx, p1, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if s := h.schedule(p1, node); s != nil {
		t.Fatalf("p1: %v", s)
	}
	if err := h.client.CoreV1().Pods("default").Delete(h.ctx, p1.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(testutil.Patience)
	for h.p.view.Reserved() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the deleted pod's reservation was never released")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestNotCorepinNode: a node publishing no corepin state is not judged.
func TestNotCorepinNode(t *testing.T) {
	node := baseNode("plain")
	h := newHarness(t, node)
	if s := h.schedule(guaranteed("p1", 64), node); s != nil {
		t.Fatalf("a plain node refused a pod: %v", s)
	}
	if got := h.p.view.Reserved(); got != 0 {
		t.Fatalf("Reserved() = %d on a plain node, want 0", got)
	}
}

// TestNodeBeforeItsEvent: a node the scheduler's snapshot holds before
// the plugin's informer handler has run is judged by what it publishes,
// not passed as a plain node.
func TestNodeBeforeItsEvent(t *testing.T) {
	node := publish(t, baseNode("n1"), machine(t), "", map[string]string{})
	p := NewWithView(nodeview.New())
	state := framework.NewCycleState()
	pod := guaranteed("big", 9)
	if _, s := p.PreFilter(context.Background(), state, pod, nil); !s.IsSuccess() {
		t.Fatalf("PreFilter: %v", s)
	}
	ni := framework.NewNodeInfo()
	ni.SetNode(node)
	s := p.Filter(context.Background(), state, pod, ni)
	if want := "no NUMA node with 9 free CPUs"; s.IsSuccess() || s.Message() != want {
		t.Fatalf("a 9-CPU single-numa-node pod on an 8-CPU node unseen by the informer: status %v, want %q", s, want)
	}
}

// TestNodeNamingNoPods: a node whose annotations name no pod UIDs (an
// older corepin) is taken to include the pods bound before it published
// again; a pod reserved and not yet bound stays placed on the new state.
func TestNodeNamingNoPods(t *testing.T) {
	own := machine(t)
	node := publish(t, baseNode("n1"), own, alloc.TopologySingleNUMANode, nil)
	h := newHarness(t, node)
	h.update(node)
	p1, p2, p3 := guaranteed("p1", 4), guaranteed("p2", 4), guaranteed("p3", 4)
	h.scheduleAll(node, p1) // reserved and bound
	state := framework.NewCycleState()
	if _, s, _ := h.fw.RunPreFilterPlugins(h.ctx, state, p2); !s.IsSuccess() {
		t.Fatal(s)
	}
	if s := h.fw.RunReservePluginsReserve(h.ctx, state, p2, node.Name); !s.IsSuccess() {
		t.Fatalf("Reserve p2: %v", s) // reserved, its binding under way
	}
	// The node admits p1 and publishes, naming no pods.
	if _, err := own.Admit(alloc.Request{ID: "default/p1", CPUs: 4, QoS: alloc.LSE, TopologyPolicy: alloc.TopologySingleNUMANode}); err != nil {
		t.Fatal(err)
	}
	node = publish(t, node, own, alloc.TopologySingleNUMANode, nil)
	h.update(node)
	if got := h.p.view.Reserved(); got != 1 {
		t.Fatalf("after the node published again: Reserved() = %d, want 1 (p2, not bound yet)", got)
	}
	if s := h.schedule(p3, node); s == nil {
		t.Fatal("p3 kept on a node whose published state holds p1 and where p2 is reserved")
	}
}

// TestSaysWhenNodesDecoded: once its Node handler has seen the informer's
// first list, the plugin logs that every node's state is decoded, with
// their count (make bench-sched waits for it before a burst).
func TestSaysWhenNodesDecoded(t *testing.T) {
	var nodes []*corev1.Node
	for _, name := range []string{"n1", "n2", "n3"} {
		nodes = append(nodes, publish(t, baseNode(name), machine(t), "", map[string]string{}))
	}
	h := newHarness(t, nodes...)
	deadline := time.Now().Add(testutil.Patience)
	for !strings.Contains(h.log.String(), "corepin: node states decoded nodes=3 ") {
		if time.Now().After(deadline) {
			t.Fatalf("no line saying the 3 nodes are decoded in:\n%s", h.log.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestFilterReadsItsOwnCycle: Filter and Score find the pod's request in
// the cycle state they are handed, not in the last one PreFilter wrote: a
// state from before the next pod's PreFilter (as preemption and the
// nominated pods' pass hand over copies of) still judges its own pod.
func TestFilterReadsItsOwnCycle(t *testing.T) {
	node := publish(t, baseNode("n1"), machine(t), alloc.TopologySingleNUMANode, map[string]string{})
	p := NewWithView(nodeview.New())
	p.view.SetNode(node)
	ni := framework.NewNodeInfo()
	ni.SetNode(node)
	ctx := context.Background()
	big, small := framework.NewCycleState(), framework.NewCycleState()
	if _, s := p.PreFilter(ctx, big, guaranteed("big", 6), nil); !s.IsSuccess() {
		t.Fatal(s)
	}
	if _, s := p.PreFilter(ctx, small, guaranteed("small", 2), nil); !s.IsSuccess() {
		t.Fatal(s)
	}
	for _, tc := range []struct {
		name  string
		state fwk.CycleState
		ok    bool
	}{
		{name: "the last cycle", state: small, ok: true},
		{name: "the cycle before", state: big, ok: false}, // 6 CPUs on no NUMA node of 4
		{name: "a copy of the last", state: small.Clone(), ok: true},
		{name: "a copy of the one before", state: big.Clone(), ok: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if s := p.Filter(ctx, tc.state, nil, ni); s.IsSuccess() != tc.ok {
				t.Errorf("Filter = %v, want kept %v", s, tc.ok)
			}
			sc, s := p.Score(ctx, tc.state, nil, ni)
			if !s.IsSuccess() || (sc > 0) != tc.ok {
				t.Errorf("Score = %d, %v; want a score > 0: %v", sc, s, tc.ok)
			}
		})
	}
}

// TestPreScoreSkipsEqualScores: PreScore skips Score when every node
// Filter kept scores the same, and only then: an LS pod on nodes that all
// place it in their shared pool, but not beside a node corepin does not
// judge (score 0), nor an exclusive pod on nodes of different room.
func TestPreScoreSkipsEqualScores(t *testing.T) {
	roomy := publish(t, baseNode("roomy"), machine(t), "", map[string]string{})
	tight := machine(t)
	if _, err := tight.Admit(alloc.Request{ID: "x/held", QoS: alloc.LSE, CPUs: 4}); err != nil {
		t.Fatal(err)
	}
	full := publish(t, baseNode("tight"), tight, "", map[string]string{})
	ls := guaranteed("ls", 1)
	ls.Annotations = nil
	ls.Spec.Containers[0].Resources.Limits = nil // Burstable: LS
	for _, tc := range []struct {
		name  string
		pod   *corev1.Pod
		nodes []*corev1.Node
		skip  bool
	}{
		{name: "LS on judged nodes", pod: ls, nodes: []*corev1.Node{roomy, full}, skip: true},
		{name: "LS beside a node not judged", pod: ls, nodes: []*corev1.Node{roomy, baseNode("plain")}},
		{name: "exclusive on nodes of different room", pod: guaranteed("lse", 2), nodes: []*corev1.Node{roomy, full}},
		{name: "exclusive on one node", pod: guaranteed("lse", 2), nodes: []*corev1.Node{roomy}, skip: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := NewWithView(nodeview.New())
			ctx := context.Background()
			state := framework.NewCycleState()
			if _, s := p.PreFilter(ctx, state, tc.pod, nil); !s.IsSuccess() {
				t.Fatal(s)
			}
			var infos []fwk.NodeInfo
			scores := map[int64]bool{}
			for _, n := range tc.nodes {
				p.view.SetNode(n)
				ni := framework.NewNodeInfo()
				ni.SetNode(n)
				if s := p.Filter(ctx, state, tc.pod, ni); !s.IsSuccess() {
					t.Fatalf("Filter on %s: %v", n.Name, s)
				}
				sc, _ := p.Score(ctx, state, tc.pod, ni)
				scores[sc] = true
				infos = append(infos, ni)
			}
			if s := p.PreScore(ctx, state, tc.pod, infos); s.IsSkip() != tc.skip {
				t.Errorf("PreScore = %v, want skip %v (the scores: %v)", s, tc.skip, scores)
			}
			if tc.skip != (len(scores) == 1) {
				t.Errorf("the nodes score %v: want them all the same %v", scores, tc.skip)
			}
		})
	}
}
