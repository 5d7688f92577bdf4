package extender

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/topology"
)

// post sends body to path on a fresh extender and returns the status and
// the response body.
func post(t *testing.T, h http.Handler, path string, body []byte) (int, []byte) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body)))
	return rec.Code, rec.Body.Bytes()
}

func filter(t *testing.T, h http.Handler, body []byte) extenderv1.ExtenderFilterResult {
	t.Helper()
	code, out := post(t, h, "/filter", body)
	if code != http.StatusOK {
		t.Fatalf("POST /filter = %d %s, want 200", code, out)
	}
	var res extenderv1.ExtenderFilterResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("decoding filter result: %v", err)
	}
	return res
}

func prioritize(t *testing.T, h http.Handler, body []byte) map[string]int64 {
	t.Helper()
	code, out := post(t, h, "/prioritize", body)
	if code != http.StatusOK {
		t.Fatalf("POST /prioritize = %d %s, want 200", code, out)
	}
	var res extenderv1.HostPriorityList
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("decoding priorities: %v", err)
	}
	m := map[string]int64{}
	for _, p := range res {
		m[p.Host] = p.Score
	}
	return m
}

func names(l *corev1.NodeList) []string {
	var out []string
	for _, n := range l.Items {
		out = append(out, n.Name)
	}
	return out
}

// guaranteedPod asks for cpus whole CPUs with requests equal to limits.
func guaranteedPod(name, cpus string, annotations, labels map[string]string) *corev1.Pod {
	rl := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpus), corev1.ResourceMemory: resource.MustParse("1Gi")}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "bench", Annotations: annotations, Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: rl, Limits: rl}}}},
	}
}

// withCPU sets the cpu request and limit of pod's first container: "" keeps
// it, "-" removes it.
func withCPU(pod *corev1.Pod, request, limit string) *corev1.Pod {
	r := &pod.Spec.Containers[0].Resources
	r.Requests, r.Limits = maps.Clone(r.Requests), maps.Clone(r.Limits) // guaranteedPod shares one map
	for _, q := range []struct {
		list corev1.ResourceList
		v    string
	}{{r.Requests, request}, {r.Limits, limit}} {
		switch q.v {
		case "":
		case "-":
			delete(q.list, corev1.ResourceCPU)
		default:
			q.list[corev1.ResourceCPU] = resource.MustParse(q.v)
		}
	}
	return pod
}

// withInitCPU gives pod an init container named init limiting cpu to limit.
func withInitCPU(pod *corev1.Pod, limit string) *corev1.Pod {
	pod.Spec.InitContainers = append(pod.Spec.InitContainers, corev1.Container{Name: "init",
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(limit)}}})
	return pod
}

func node(name string, annotations map[string]string) corev1.Node {
	return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations}}
}

func args(t testing.TB, pod *corev1.Pod, nodes ...corev1.Node) []byte {
	t.Helper()
	b, err := json.Marshal(extenderv1.ExtenderArgs{Pod: pod, Nodes: &corev1.NodeList{Items: nodes}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestFilterSingleNUMANodeKeepsTheOnlyAlignedNode(t *testing.T) {
	body, err := os.ReadFile("testdata/filter-single-numa.json")
	if err != nil {
		t.Fatal(err)
	}
	h := New().Handler()
	res := filter(t, h, body)
	if diff := cmp.Diff([]string{"whole"}, names(res.Nodes)); diff != "" {
		t.Errorf("kept nodes (-want +got):\n%s", diff)
	}
	want := extenderv1.FailedNodesMap{"split": "no NUMA node with 6 free CPUs", "lopsided": "no NUMA node with 6 free CPUs"}
	if diff := cmp.Diff(want, res.FailedNodes); diff != "" {
		t.Errorf("failed nodes (-want +got):\n%s", diff)
	}
	if res.Error != "" {
		t.Errorf("Error = %q, want none", res.Error)
	}
}

func TestFilterNoNodeCanAlign(t *testing.T) {
	pod := guaranteedPod("big", "9", map[string]string{AnnotationNUMAPolicy: "single-numa-node"}, nil)
	body := args(t, pod,
		node("a", map[string]string{AnnotationNUMAFree: "[8,8]"}),
		node("b", map[string]string{AnnotationNUMAFree: "[4,4]"}),
		node("c", map[string]string{AnnotationNUMAFree: "[0,6]"}))
	res := filter(t, New().Handler(), body)
	if len(res.Nodes.Items) != 0 {
		t.Errorf("kept %v, want none", names(res.Nodes))
	}
	reason := "no NUMA node with 9 free CPUs"
	want := extenderv1.FailedNodesMap{"a": reason, "b": reason, "c": reason}
	if diff := cmp.Diff(want, res.FailedNodes); diff != "" {
		t.Errorf("failed nodes (-want +got):\n%s", diff)
	}
	// A node that publishes no corepin state is not corepin's to judge.
	res = filter(t, New().Handler(), args(t, pod, node("foreign", nil)))
	if diff := cmp.Diff([]string{"foreign"}, names(res.Nodes)); diff != "" || len(res.FailedNodes) != 0 {
		t.Errorf("foreign node: kept (-want +got):\n%s failed %v", diff, res.FailedNodes)
	}
	// Without the policy the 9 CPUs fit across the two nodes of a.
	pod.Annotations = nil
	res = filter(t, New().Handler(), args(t, pod, node("a", map[string]string{AnnotationNUMAFree: "[8,8]"})))
	if diff := cmp.Diff([]string{"a"}, names(res.Nodes)); diff != "" {
		t.Errorf("without a policy, kept nodes (-want +got):\n%s", diff)
	}
}

func TestPrioritizePrefersTighterAlignedNode(t *testing.T) {
	pod := guaranteedPod("enc", "4", map[string]string{AnnotationNUMAPolicy: "single-numa-node"}, nil)
	body := args(t, pod,
		node("tight", map[string]string{AnnotationNUMAFree: "[4,0]"}),
		node("roomy", map[string]string{AnnotationNUMAFree: "[8,8]"}),
		node("split", map[string]string{AnnotationNUMAFree: "[2,2]"}),
		node("foreign", nil))
	got := prioritize(t, New().Handler(), body)
	want := map[string]int64{"tight": 10, "roomy": 7, "split": 0, "foreign": 0}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("scores (-want +got):\n%s", diff)
	}
	// Without a topology policy split can take the pod, but only across
	// its two NUMA nodes, and scores below both aligned nodes.
	pod.Annotations = nil
	got = prioritize(t, New().Handler(), args(t, pod,
		node("roomy", map[string]string{AnnotationNUMAFree: "[8,8]"}),
		node("split", map[string]string{AnnotationNUMAFree: "[2,2]"})))
	if got["split"] >= got["roomy"] || got["split"] == 0 {
		t.Errorf("scores %v: want split (two NUMA nodes) above 0 and below roomy", got)
	}
}

// topoNode publishes a synthetic machine (2 sockets, 1 NUMA node each, 4
// cores of 2 threads) with the given assignments.
func topoNode(t testing.TB, name, assigned string) corev1.Node {
	t.Helper()
	topo := topology.MustSynthetic(topology.Shape{Sockets: 2, NodesPerSocket: 1, L3PerNode: 1, CoresPerL3: 4, ThreadsPerCore: 2})
	doc, err := json.Marshal(topo.Doc())
	if err != nil {
		t.Fatal(err)
	}
	ann := map[string]string{AnnotationTopology: string(doc)}
	if assigned != "" {
		ann[AnnotationAssigned] = assigned
	}
	return node(name, ann)
}

func TestFilterPublishedTopologyHonoursAssignments(t *testing.T) {
	ext := New()
	h := ext.Handler()
	pod := guaranteedPod("enc", "6", map[string]string{AnnotationNUMAPolicy: "single-numa-node"}, nil)
	// In the synthetic x86 order node 0 is CPUs 0-3,8-11 and node 1 is
	// 4-7,12-15; "busy" holds 0-2 and 4-6, leaving 5 free on each node.
	busy := topoNode(t, "busy", `[{"id":"a/x","cpuset":"0-2","qos":"LSE"},{"id":"a/y","cpuset":"4-6","qos":"LSE"}]`)
	free := topoNode(t, "free", "")
	free2 := topoNode(t, "free2", "")
	res := filter(t, h, args(t, pod, busy, free, free2))
	if diff := cmp.Diff([]string{"free", "free2"}, names(res.Nodes)); diff != "" {
		t.Errorf("kept nodes (-want +got):\n%s", diff)
	}
	if got, want := res.FailedNodes["busy"], "no NUMA node with 6 free CPUs"; got != want {
		t.Errorf("reason for busy = %q, want %q", got, want)
	}
	if n := ext.view.States(); n != 2 {
		t.Errorf("the view holds %d states, want 2 (free and free2 share one)", n)
	}
}

func TestFilterBadNodeAndPodMetadata(t *testing.T) {
	tests := []struct {
		name   string
		pod    *corev1.Pod
		node   corev1.Node
		reason string // a substring of the failed node's reason
	}{
		{name: "numa-free not a list", pod: guaranteedPod("p", "2", nil, nil),
			node: node("n", map[string]string{AnnotationNUMAFree: "4,0"}), reason: "corepin.io/numa-free"},
		{name: "numa-free negative", pod: guaranteedPod("p", "2", nil, nil),
			node: node("n", map[string]string{AnnotationNUMAFree: "[-1]"}), reason: "free CPUs must be"},
		{name: "topology garbage", pod: guaranteedPod("p", "2", nil, nil),
			node: node("n", map[string]string{AnnotationTopology: `{"cpus":7}`}), reason: "corepin.io/topology"},
		{name: "assigned outside the machine", pod: guaranteedPod("p", "2", nil, nil),
			node: topoNode(t, "n", `[{"id":"x","cpuset":"99","qos":"LSE"}]`), reason: "corepin.io/assigned"},
		{name: "unknown topology policy", pod: guaranteedPod("p", "2", map[string]string{AnnotationNUMAPolicy: "single"}, nil),
			node: node("n", map[string]string{AnnotationNUMAFree: "[4]"}), reason: `annotation corepin.io/numa-policy "single" is not one of none, best-effort, restricted, single-numa-node`},
		{name: "exclusive class with a fraction", pod: guaranteedPod("p", "1500m", nil, map[string]string{LabelQoSClass: "LSE"}),
			node: node("n", map[string]string{AnnotationNUMAFree: "[4]"}), reason: "class LSE needs whole CPUs"},
		{name: "resource-spec unknown key", pod: guaranteedPod("p", "2", map[string]string{AnnotationResourceSpec: `{"bind":"FullPCPUs"}`}, nil),
			node: node("n", map[string]string{AnnotationNUMAFree: "[4]"}), reason: "scheduling.koordinator.sh/resource-spec"},
		// Issue 17: these quantities were read as 0 CPUs, and the pod
		// passed as a BE or LS pod of nothing.
		{name: "negative cpu", pod: guaranteedPod("p", "-2", nil, nil),
			node: node("n", map[string]string{AnnotationNUMAFree: "[4]"}), reason: "pod bench/p: invalid pod metadata: container c: cpu request -2 is negative"},
		{name: "cpu limit overflowing", pod: withCPU(guaranteedPod("p", "1", nil, nil), "", "1e30"),
			node: node("n", map[string]string{AnnotationNUMAFree: "[4]"}), reason: "container c: cpu limit 1e30 is more than the"},
		{name: "cpu request wrapping 64-bit millicpus", pod: withCPU(guaranteedPod("p", "1", nil, nil), "9223372036854775807", "-"),
			node: node("n", map[string]string{AnnotationNUMAFree: "[4]"}), reason: "container c: cpu request 9223372036854775807 is more than the"},
		{name: "negative limit of an init container", pod: withInitCPU(guaranteedPod("p", "1", nil, nil), "-500m"),
			node: node("n", map[string]string{AnnotationNUMAFree: "[4]"}), reason: "init container init: cpu limit -500m is negative"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := filter(t, New().Handler(), args(t, tc.pod, tc.node))
			if len(res.Nodes.Items) != 0 {
				t.Fatalf("kept %v, want the node failed", names(res.Nodes))
			}
			// Bad metadata is not helped by preempting pods.
			if got := res.FailedAndUnresolvableNodes["n"]; !strings.Contains(got, tc.reason) {
				t.Errorf("unresolvable reason = %q, want it to contain %q", got, tc.reason)
			}
			if got, ok := res.FailedNodes["n"]; ok {
				t.Errorf("also in FailedNodes (%q): preemption would be tried in vain", got)
			}
		})
	}
}

// TestFilterTellsPreemptionWhatCannotHelp: a node refused only because of
// what it holds is a FailedNode (preempting pods there may make room); a
// node that could not place the pod even empty (no NUMA node that large,
// or its reserved CPUs in the way) is FailedAndUnresolvable, so the
// scheduler does not evict pods for nothing.
func TestFilterTellsPreemptionWhatCannotHelp(t *testing.T) {
	h := New().Handler()
	busy := topoNode(t, "busy", `[{"id":"a/x","cpuset":"0-2","qos":"LSE"},{"id":"a/y","cpuset":"4-6","qos":"LSE"}]`)
	reserved := topoNode(t, "reserved", `[{"id":"(reserved)","cpuset":"0,4","qos":"LSE"}]`)
	cases := []struct {
		cpus                     string
		wantFailed, wantUnresolv []string
	}{
		// 6 on one NUMA node: busy could after preemption; reserved's
		// nodes keep 7 free each, it fits there.
		{"6", []string{"busy"}, nil},
		// 8: busy could after preemption (8 per NUMA node), reserved
		// never (7 per NUMA node besides its reserved CPUs).
		{"8", []string{"busy"}, []string{"reserved"}},
		// 9: no NUMA node of 8 CPUs ever.
		{"9", nil, []string{"busy", "reserved"}},
	}
	for _, c := range cases {
		pod := guaranteedPod("p"+c.cpus, c.cpus, map[string]string{AnnotationNUMAPolicy: "single-numa-node"}, nil)
		res := filter(t, h, args(t, pod, busy, reserved))
		var failed, unresolv []string
		for n := range res.FailedNodes {
			failed = append(failed, n)
		}
		for n := range res.FailedAndUnresolvableNodes {
			unresolv = append(unresolv, n)
		}
		slices.Sort(failed)
		slices.Sort(unresolv)
		if !slices.Equal(failed, c.wantFailed) || !slices.Equal(unresolv, c.wantUnresolv) {
			t.Errorf("%s CPUs: failed %v unresolvable %v, want %v and %v", c.cpus, failed, unresolv, c.wantFailed, c.wantUnresolv)
		}
		for n, r := range res.FailedAndUnresolvableNodes {
			if want := "no NUMA node with " + c.cpus + " free CPUs"; r != want {
				t.Errorf("%s CPUs: node %s reason %q, want %q", c.cpus, n, r, want)
			}
		}
	}
}

func TestHandlerRefusesBadBodies(t *testing.T) {
	good := args(t, guaranteedPod("p", "2", nil, nil), node("n", nil))
	tests := []struct {
		name string
		body string
		max  int64
		code int
		msg  string
	}{
		{name: "not JSON", body: "hello", code: 400, msg: "parsing ExtenderArgs"},
		{name: "unknown key", body: `{"Pod":{},"Nodes":{"items":[]},"Extra":1}`, code: 400, msg: "unknown field"},
		{name: "two documents", body: string(good) + string(good), code: 400, msg: "trailing data"},
		{name: "no pod", body: `{"Nodes":{"items":[]}}`, code: 400, msg: "no Pod"},
		{name: "node names only", body: `{"Pod":{},"NodeNames":["a"]}`, code: 400, msg: "nodeCacheCapable: false"},
		{name: "pod of the wrong type", body: `{"Pod":[],"Nodes":{"items":[]}}`, code: 400, msg: "parsing Pod"},
		{name: "too large", body: string(good), max: 64, code: 413, msg: "too large"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var opts []Option
			if tc.max > 0 {
				opts = append(opts, WithMaxBodyBytes(tc.max))
			}
			h := New(opts...).Handler()
			for _, path := range []string{"/filter", "/prioritize"} {
				code, out := post(t, h, path, []byte(tc.body))
				if code != tc.code || !strings.Contains(string(out), tc.msg) {
					t.Errorf("POST %s = %d %q, want %d containing %q", path, code, out, tc.code, tc.msg)
				}
			}
		})
	}
	t.Run("too many nodes", func(t *testing.T) {
		code, out := post(t, New(WithMaxNodes(1)).Handler(), "/filter", args(t, guaranteedPod("p", "2", nil, nil), node("a", nil), node("b", nil)))
		if code != 400 || !strings.Contains(string(out), "more than the 1 nodes allowed") {
			t.Errorf("POST /filter = %d %q, want 400 about more than 1 node", code, out)
		}
	})
	t.Run("GET filter", func(t *testing.T) {
		rec := httptest.NewRecorder()
		New().Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/filter", nil))
		if rec.Code != http.StatusMethodNotAllowed {
			t.Errorf("GET /filter = %d, want 405", rec.Code)
		}
	})
}

func TestRequestOf(t *testing.T) {
	burstable := guaranteedPod("b", "2", nil, nil)
	burstable.Spec.Containers[0].Resources.Limits = nil
	bestEffort := guaranteedPod("e", "2", nil, nil)
	bestEffort.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
	withInit := guaranteedPod("i", "2", nil, nil)
	withInit.Spec.InitContainers = []corev1.Container{{Name: "init", Resources: guaranteedPod("", "5", nil, nil).Spec.Containers[0].Resources}}
	tests := []struct {
		name string
		pod  *corev1.Pod
		want alloc.Request
		err  error
	}{
		{name: "guaranteed whole CPUs is LSE", pod: guaranteedPod("g", "4", nil, nil),
			want: alloc.Request{ID: "bench/g", CPUs: 4, QoS: alloc.LSE}},
		{name: "guaranteed fraction is LS", pod: guaranteedPod("f", "1500m", nil, nil),
			want: alloc.Request{ID: "bench/f", MilliCPUs: 1500, QoS: alloc.LS}},
		{name: "burstable is LS", pod: burstable, want: alloc.Request{ID: "bench/b", MilliCPUs: 2000, QoS: alloc.LS}},
		{name: "best effort is BE", pod: bestEffort, want: alloc.Request{ID: "bench/e", QoS: alloc.BE}},
		{name: "init container larger", pod: withInit, want: alloc.Request{ID: "bench/i", CPUs: 5, QoS: alloc.LSE}},
		{name: "koordinator label and resource spec", pod: guaranteedPod("k", "2",
			map[string]string{AnnotationResourceSpec: `{"preferredCPUBindPolicy":"FullPCPUs","preferredCPUExclusivePolicy":"PCPULevel"}`, AnnotationNUMAPolicy: "restricted"},
			map[string]string{LabelQoSClass: "LSR"}),
			want: alloc.Request{ID: "bench/k", CPUs: 2, QoS: alloc.LSR, Bind: alloc.BindFullPCPUs, Exclusive: alloc.ExclusivePCPULevel, TopologyPolicy: alloc.TopologyRestricted}},
		{name: "unknown class", pod: guaranteedPod("u", "2", nil, map[string]string{LabelQoSClass: "GOLD"}), err: ErrPod},
		{name: "resource spec trailing data", pod: guaranteedPod("t", "2", map[string]string{AnnotationResourceSpec: `{}{}`}, nil), err: ErrPod},
		{name: "no pod", err: ErrPod},
		// Read as the NRI plugin reads it (podmeta): these passed before.
		{name: "SYSTEM label", pod: guaranteedPod("s", "2", nil, map[string]string{LabelQoSClass: "SYSTEM"}), err: ErrPod},
		{name: "disagreeing binds", pod: guaranteedPod("d", "2", map[string]string{AnnotationResourceSpec: `{"requiredCPUBindPolicy":"FullPCPUs","preferredCPUBindPolicy":"SpreadByPCPUs"}`}, nil), err: ErrPod},
		{name: "resource spec key twice", pod: guaranteedPod("t", "2", map[string]string{AnnotationResourceSpec: `{"preferredCPUBindPolicy":"FullPCPUs","preferredCPUBindPolicy":"Default"}`}, nil), err: ErrPod},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := RequestOf(tc.pod)
			if !errors.Is(err, tc.err) {
				t.Fatalf("RequestOf() error = %v, want %v", err, tc.err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("RequestOf() (-want +got):\n%s", diff)
			}
		})
	}
}

// TestConcurrentCallsShareTheCache runs filter and prioritize calls at once
// on one Extender (run with -race): the cached states are only read, each
// decision works on its own copy, so every call gets the same answer.
func TestConcurrentCallsShareTheCache(t *testing.T) {
	ext := New()
	h := ext.Handler()
	pod := guaranteedPod("enc", "6", map[string]string{AnnotationNUMAPolicy: "single-numa-node"}, nil)
	body := args(t, pod, topoNode(t, "a", `[{"id":"x","cpuset":"0-2","qos":"LSE"}]`), topoNode(t, "b", ""))
	want := filter(t, h, body)
	errc := make(chan string, 8)
	for range 8 {
		go func() {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/filter", bytes.NewReader(body)))
			var got extenderv1.ExtenderFilterResult
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				errc <- err.Error()
				return
			}
			errc <- cmp.Diff(names(want.Nodes), names(got.Nodes)) + cmp.Diff(want.FailedNodes, got.FailedNodes)
		}()
	}
	for range 8 {
		if d := <-errc; d != "" {
			t.Errorf("a concurrent call differs: %s", d)
		}
	}
	if n := ext.view.States(); n != 2 {
		t.Errorf("the view holds %d states, want 2", n)
	}
}

// TestFilterKeepsTheNodesSharedPoolsAlive: a node whose LS pods hold 10
// CPUs of quota in its 16-CPU shared pool refuses an exclusive pod of 8
// (the NRI plugin's admission, alloc.State.GuardPools: 8 shared CPUs
// cannot carry 10 CPUs of committed quota), so the extender must too,
// while it keeps the node for 6; the same node empty of LS pods takes 8,
// so preemption may help. A node with BE pods and every other CPU held
// refuses to leave them none.
func TestFilterKeepsTheNodesSharedPoolsAlive(t *testing.T) {
	h := New().Handler()
	ls := topoNode(t, "ls", `[{"id":"a/web","cpus":6,"qos":"LS"},{"id":"a/api","cpus":4,"qos":"LS"}]`)
	be := topoNode(t, "be", `[{"id":"a/x","cpuset":"0-7,8-13","qos":"LSE"},{"id":"a/batch","cpus":1,"qos":"BE"}]`)
	for _, c := range []struct {
		pod          string
		node         corev1.Node
		kept         bool
		reason       string
		unresolvable bool
	}{
		{"6", ls, true, "", false},
		{"8", ls, false, "8 exclusive CPUs would leave the shared pool fewer CPUs than its LS pods hold", false},
		{"2", be, false, "2 exclusive CPUs would leave no CPU for the node's BE pods", false},
		{"1", be, true, "", false},
	} {
		pod := guaranteedPod("p", c.pod, nil, nil)
		res := filter(t, h, args(t, pod, c.node))
		kept := len(res.Nodes.Items) == 1
		reason, unresolvable := res.FailedNodes[c.node.Name], false
		if r, ok := res.FailedAndUnresolvableNodes[c.node.Name]; ok {
			reason, unresolvable = r, true
		}
		if kept != c.kept || reason != c.reason || unresolvable != c.unresolvable {
			t.Errorf("%s CPUs on %s: kept %v, reason %q, unresolvable %v; want %v, %q, %v",
				c.pod, c.node.Name, kept, reason, unresolvable, c.kept, c.reason, c.unresolvable)
		}
	}
}

// TestFilterNamesAWholeCoreShapeError: under whole-core placement a CPU
// count that is not a multiple of the threads per core is refused for its
// shape, whatever the node holds and whatever topology policy the pod
// asks, so the reason says that (not "no NUMA node with 3 free CPUs") and
// preemption is ruled out.
func TestFilterNamesAWholeCoreShapeError(t *testing.T) {
	h := New().Handler()
	for _, settings := range []string{`{"policy":"kubelet","options":["full-pcpus-only"]}`, `{"policy":"corepin","options":["full-pcpus-only"]}`} {
		n := topoNode(t, "smt", "")
		n.Annotations[AnnotationAllocator] = settings
		for _, ann := range []map[string]string{nil, {AnnotationNUMAPolicy: "single-numa-node"}} {
			res := filter(t, h, args(t, guaranteedPod("odd", "3", ann, nil), n))
			want := "3 CPUs is not a whole number of 2-thread cores"
			if got, ok := res.FailedAndUnresolvableNodes["smt"]; !ok || got != want {
				t.Errorf("%s, pod annotations %v: unresolvable %v, failed %v; want smt unresolvable: %q", settings, ann, res.FailedAndUnresolvableNodes, res.FailedNodes, want)
			}
		}
	}
}
