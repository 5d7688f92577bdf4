package extender

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	discoveryfake "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/corepin/corepin/internal/testutil"
	"github.com/corepin/corepin/kube/nodestate"
	"github.com/corepin/corepin/kube/nodestate/nodestatetest"
)

// koordObject is ../nodestate/testdata/koordinator-nrt-v1alpha1.json, the object
// koordlet writes for node koord-a (two sockets of 4 cores, 2 threads per
// core, one NUMA node each: core c holds CPUs c and c+8), renamed name,
// with the Koordinator annotations of over set (an empty value removes
// one). As published: kubelet static with full-pcpus-only and reserved
// CPU 0, the node reserving CPU 8, the kubelet holding 1,9 for
// default/web, Koordinator's LSE pods 4-5,12-13 and LSR pods 6,14 (as the
// shared pools show), topology policy SingleNUMANodeContainerLevel, and
// zones with capacity and allocatable only. Free for an exclusive pod:
// cores 2 and 3 (2-3,10-11) on NUMA node 0, core 7 (7,15) on node 1.
func koordObject(t testing.TB, name string, over map[string]string) *unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile("../nodestate/testdata/koordinator-nrt-v1alpha1.json")
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(b); err != nil {
		t.Fatal(err)
	}
	u.SetName(name)
	ann := u.GetAnnotations()
	for k, v := range over {
		if v == "" {
			delete(ann, k)
			continue
		}
		ann[k] = v
	}
	u.SetAnnotations(ann)
	return u
}

// Shared pools for koordObject's machine.
const (
	// koordAllShared: nothing held.
	koordAllShared = `[{"socket":0,"node":0,"cpuset":"0-3,8-11"},{"socket":1,"node":1,"cpuset":"4-7,12-15"}]`
	// koordOneCorePerNode: Koordinator's LSE pods hold all but core 3
	// (3,11) of node 0 and core 7 (7,15) of node 1 (0 and 8 are reserved).
	koordOneCorePerNode = `[{"socket":0,"node":0,"cpuset":"0,3,11"},{"socket":1,"node":1,"cpuset":"7,15"}]`
)

func numaPod(name, cpus, policy string) *corev1.Pod {
	return guaranteedPod(name, cpus, map[string]string{AnnotationNUMAPolicy: policy}, nil)
}

func TestKoordinatorNRTJudged(t *testing.T) {
	s, _, log := watchedStoreOf(t, NRTResourceV1alpha1,
		koordObject(t, "koord-a", nil),
		// Nothing held but the reserved CPUs 0 and 8.
		koordObject(t, "koord-free", map[string]string{nodestate.AnnotationKoordPodCPUAllocs: "null", nodestate.AnnotationKoordCPUSharedPools: koordAllShared,
			nodestate.AnnotationKoordBECPUSharedPools: koordAllShared}),
		// One whole core free per NUMA node.
		koordObject(t, "koord-split", map[string]string{nodestate.AnnotationKoordPodCPUAllocs: "null", nodestate.AnnotationKoordCPUSharedPools: koordOneCorePerNode,
			nodestate.AnnotationKoordBECPUSharedPools: koordOneCorePerNode}),
	)
	if s.Len() != 3 {
		t.Fatalf("store kept %d nodes, want 3; log:\n%s", s.Len(), log.String())
	}
	h := New(WithNRT(s)).Handler()
	nodes := []corev1.Node{node("koord-a", nil), node("koord-free", nil), node("koord-split", nil)}
	cases := []struct {
		name         string
		pod          *corev1.Pod
		kept         []string
		failed       extenderv1.FailedNodesMap
		unresolvable extenderv1.FailedNodesMap
	}{
		{
			// The node's default single-numa-node (topologyPolicies) and
			// what is held: koord-a has 4 free CPUs on node 0, koord-split
			// 2 per node.
			name: "four, node default single-numa-node", pod: guaranteedPod("four", "4", nil, nil),
			kept:   []string{"koord-a", "koord-free"},
			failed: extenderv1.FailedNodesMap{"koord-split": "no NUMA node with 4 free CPUs"},
		},
		{
			name: "four across NUMA nodes", pod: numaPod("four", "4", "none"),
			kept: []string{"koord-a", "koord-free", "koord-split"},
		},
		{
			// Held CPUs count: 6 free CPUs on koord-a in all, 4 on node 0;
			// preempting its pods frees node 0's 6 unreserved CPUs.
			name: "six", pod: guaranteedPod("six", "6", nil, nil),
			kept:   []string{"koord-free"},
			failed: extenderv1.FailedNodesMap{"koord-a": "no NUMA node with 6 free CPUs", "koord-split": "no NUMA node with 6 free CPUs"},
		},
		{
			// Reserved CPUs are never given: 14 of 16 CPUs fit on an idle
			// node, 16 on none even after preemption.
			name: "fourteen", pod: numaPod("fourteen", "14", "none"),
			kept:   []string{"koord-free"},
			failed: extenderv1.FailedNodesMap{"koord-a": "fewer than 14 free CPUs in whole cores", "koord-split": "fewer than 14 free CPUs in whole cores"},
		},
		{
			name: "sixteen", pod: numaPod("sixteen", "16", "none"),
			unresolvable: extenderv1.FailedNodesMap{"koord-a": "fewer than 16 free CPUs in whole cores", "koord-free": "fewer than 16 free CPUs in whole cores",
				"koord-split": "fewer than 16 free CPUs in whole cores"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := args(t, tc.pod, nodes...)
			res := filter(t, h, body)
			if diff := cmp.Diff(tc.kept, names(res.Nodes)); diff != "" {
				t.Errorf("kept (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.failed, res.FailedNodes, cmpReasons); diff != "" {
				t.Errorf("failed (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.unresolvable, res.FailedAndUnresolvableNodes, cmpReasons); diff != "" {
				t.Errorf("unresolvable (-want +got):\n%s", diff)
			}
			typed := New(WithNRT(s)).Filter(decode(t, body))
			if diff := cmp.Diff(res.FailedNodes, typed.FailedNodes, cmpReasons); diff != "" {
				t.Errorf("typed path: failed (-fast +typed):\n%s", diff)
			}
		})
	}

	// Prioritize prefers the node the pod fills (koord-a: all 4 free CPUs
	// of node 0) to an idle one, and scores a refusing node 0.
	sc := prioritize(t, h, args(t, guaranteedPod("four", "4", nil, nil), nodes...))
	if sc["koord-a"] <= sc["koord-free"] || sc["koord-free"] == 0 || sc["koord-split"] != 0 {
		t.Errorf("scores %v: want koord-a above koord-free above koord-split at 0", sc)
	}
	if l := log.String(); l != "" {
		t.Errorf("log = %q, want nothing for koordlet's objects", l)
	}
}

// cmpReasons compares failure maps treating an empty map as nil and a
// wanted reason as a substring of the reason given.
var cmpReasons = cmp.Comparer(func(a, b extenderv1.FailedNodesMap) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || !(strings.Contains(v, w) || strings.Contains(w, v)) {
			return false
		}
	}
	return true
})

// TestKoordinatorFullPCPUsOnly: under the kubelet's static policy with
// full-pcpus-only a pod takes whole cores, and the kubelet's reserved
// CPUs take their whole cores. Here the kubelet reserves 0-1 (halves of
// cores 0 and 1) and Koordinator's LSE pods hold NUMA node 1: node 0 has 6
// free CPUs (2-3,8-11) but only 2 whole free cores (2,10 and 3,11). A pod
// of 6 under single-numa-node fits by free CPUs per NUMA node (as the
// coarse corepin.io/numa-free [6,0] says) but not in whole cores; without
// the option it fits.
func TestKoordinatorFullPCPUsOnly(t *testing.T) {
	pools := `[{"socket":0,"node":0,"cpuset":"0-3,8-11"}]`
	over := func(policy string) map[string]string {
		return map[string]string{nodestate.AnnotationKoordCPUSharedPools: pools, nodestate.AnnotationKoordBECPUSharedPools: pools,
			nodestate.AnnotationKoordPodCPUAllocs: "null", nodestate.AnnotationKoordReservation: "", nodestate.AnnotationKoordKubeletPolicy: policy}
	}
	strict := koordObject(t, "strict", over(`{"policy":"static","options":{"full-pcpus-only":"true"},"reservedCPUs":"0-1"}`))
	loose := koordObject(t, "loose", over(`{"policy":"static","options":{"full-pcpus-only":"false"},"reservedCPUs":"0-1"}`))
	s, _, log := watchedStoreOf(t, NRTResourceV1alpha1, strict, loose)
	if s.Len() != 2 {
		t.Fatalf("store kept %d nodes, want 2; log:\n%s", s.Len(), log.String())
	}
	h := New(WithNRT(s)).Handler()
	coarse := node("coarse", map[string]string{AnnotationNUMAFree: "[6,0]", AnnotationAllocator: `{"policy":"kubelet","options":["full-pcpus-only"]}`})
	body := args(t, guaranteedPod("six", "6", nil, nil), node("strict", nil), node("loose", nil), coarse)
	res := filter(t, h, body)
	if diff := cmp.Diff([]string{"loose", "coarse"}, names(res.Nodes)); diff != "" {
		t.Errorf("kept (-want +got):\n%s", diff)
	}
	// Resolvable: preempting node 1's pods frees whole cores.
	want := extenderv1.FailedNodesMap{"strict": "no NUMA node with 6 free CPUs (the node's default topology policy single-numa-node)"}
	if diff := cmp.Diff(want, res.FailedNodes, cmpReasons); diff != "" || len(res.FailedAndUnresolvableNodes) != 0 {
		t.Errorf("failed (-want +got):\n%s unresolvable %v", diff, res.FailedAndUnresolvableNodes)
	}
	// The whole cores are there: a pod of 4 fits.
	if res := filter(t, h, args(t, guaranteedPod("four", "4", nil, nil), node("strict", nil))); len(res.Nodes.Items) != 1 {
		t.Errorf("four on strict: failed %v %v, want kept", res.FailedNodes, res.FailedAndUnresolvableNodes)
	}
}

func TestKoordinatorMalformedAnnotationFailsNode(t *testing.T) {
	cases := []struct {
		name, annotation, value, want string
	}{
		{name: "cpu-twice", annotation: nodestate.AnnotationKoordCPUTopology, value: `{"detail":[{"id":0,"core":0,"socket":0,"node":0},{"id":0,"core":1,"socket":0,"node":0}]}`, want: "cpu 0 listed twice"},
		{name: "held-outside", annotation: nodestate.AnnotationKoordPodCPUAllocs, value: `[{"namespace":"a","name":"b","cpuset":"15-16"}]`, want: "CPUs 16 are not in"},
		{name: "policy", annotation: nodestate.AnnotationKoordKubeletPolicy, value: `{"policy":"dynamic"}`, want: "want static or none"},
	}
	var objs []runtime.Object
	for _, tc := range cases {
		objs = append(objs, koordObject(t, tc.name, map[string]string{tc.annotation: tc.value}))
	}
	s, _, _ := watchedStoreOf(t, NRTResourceV1alpha1, objs...)
	h := New(WithNRT(s)).Handler()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := args(t, guaranteedPod("two", "2", nil, nil), node(tc.name, nil))
			res := filter(t, h, body)
			r := res.FailedAndUnresolvableNodes[tc.name]
			if !strings.Contains(r, nodestate.ErrNRT.Error()) || !strings.Contains(r, tc.annotation) || !strings.Contains(r, tc.want) {
				t.Errorf("unresolvable reason %q: want %q naming %s and saying %q (kept %v)", r, nodestate.ErrNRT, tc.annotation, tc.want, names(res.Nodes))
			}
			typed := New(WithNRT(s)).Filter(decode(t, body))
			if typed.FailedAndUnresolvableNodes[tc.name] != r {
				t.Errorf("typed path: %q, fast path %q", typed.FailedAndUnresolvableNodes[tc.name], r)
			}
		})
	}
}

// TestKoordinatorUpdate: an informer update of pod-cpu-allocs changes the
// node's state key and verdict.
func TestKoordinatorUpdate(t *testing.T) {
	s, client, _ := watchedStoreOf(t, NRTResourceV1alpha1, koordObject(t, "koord-a", nil))
	before, _ := s.get("koord-a")
	h := New(WithNRT(s)).Handler()
	// Six on node 0 needs 1,9 (the kubelet's) back.
	body := args(t, guaranteedPod("six", "6", nil, nil), node("koord-a", nil))
	if res := filter(t, h, body); len(res.FailedNodes) != 1 {
		t.Fatalf("before: failed %v, want koord-a", res.FailedNodes)
	}
	// web ends; koordlet frees its CPUs into the pools.
	pools := `[{"socket":0,"node":0,"cpuset":"0-3,9-11"},{"socket":1,"node":1,"cpuset":"7,15"}]`
	upd := koordObject(t, "koord-a", map[string]string{nodestate.AnnotationKoordPodCPUAllocs: "null", nodestate.AnnotationKoordCPUSharedPools: pools,
		nodestate.AnnotationKoordBECPUSharedPools: pools})
	if _, err := client.Resource(NRTResourceV1alpha1).Update(t.Context(), upd, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "koord-a updated", func() bool { e, _ := s.get("koord-a"); return e.key != before.key })
	if res := filter(t, h, body); len(res.FailedNodes) != 0 || len(res.Nodes.Items) != 1 {
		t.Errorf("after web ended: kept %v, failed %v; want koord-a kept", names(res.Nodes), res.FailedNodes)
	}
}

// TestNRTTopologyPolicies: a v1alpha1 object without Koordinator detail
// is judged by its zones, with topologyPolicies as the node's default
// topology policy unless the topologyManagerPolicy attribute says
// otherwise.
func TestNRTTopologyPolicies(t *testing.T) {
	obj := func(name string, policies []any, attrs ...nodestate.Attribute) *unstructured.Unstructured {
		u := nodestatetest.NRT(t, name, 4, 4)
		u.SetAPIVersion("topology.node.k8s.io/v1alpha1")
		u.Object["topologyPolicies"] = policies
		if attrs == nil {
			delete(u.Object, "attributes")
		} else {
			var list []any
			for _, a := range attrs {
				list = append(list, map[string]any{"name": a.Name, "value": a.Value})
			}
			u.Object["attributes"] = list
		}
		return u
	}
	s, _, log := watchedStoreOf(t, NRTResourceV1alpha1,
		obj("single", []any{"SingleNUMANodePodLevel"}),
		obj("none", []any{"None"}),
		obj("attr-wins", []any{"SingleNUMANodeContainerLevel"}, nodestate.Attribute{Name: nodestate.AttrTopologyPolicy, Value: "none"}),
		obj("bogus", []any{"Sometimes"}),
	)
	res := filter(t, New(WithNRT(s)).Handler(), args(t, guaranteedPod("six", "6", nil, nil),
		node("single", nil), node("none", nil), node("attr-wins", nil), node("bogus", nil)))
	// bogus's policies do not read: it takes no 6-CPU pinned pod (issue 27 §3).
	if diff := cmp.Diff([]string{"none", "attr-wins"}, names(res.Nodes)); diff != "" {
		t.Errorf("kept (-want +got):\n%s", diff)
	}
	if r := res.FailedAndUnresolvableNodes["bogus"]; !strings.Contains(r, nodestate.ErrNRT.Error()) || !strings.Contains(r, "Sometimes") {
		t.Errorf("bogus: unresolvable reason %q, want %q naming its policy", r, nodestate.ErrNRT)
	}
	if r, want := res.FailedNodes["single"], "no NUMA node with 6 free CPUs (the node's default topology policy single-numa-node)"; r != want {
		t.Errorf("single: reason %q, want %q", r, want)
	}
	if l := log.String(); !strings.Contains(l, "node=bogus") || !strings.Contains(l, `Sometimes`) {
		t.Errorf("log %q: want a warning naming bogus and its policy", l)
	}
}

func TestNRTResourceOf(t *testing.T) {
	list := func(gv string, resources ...string) *metav1.APIResourceList {
		l := &metav1.APIResourceList{GroupVersion: gv}
		for _, r := range resources {
			l.APIResources = append(l.APIResources, metav1.APIResource{Name: r, Kind: "NodeResourceTopology"})
		}
		return l
	}
	v2, v1 := "topology.node.k8s.io/v1alpha2", "topology.node.k8s.io/v1alpha1"
	cases := []struct {
		name   string
		served []*metav1.APIResourceList
		want   schema.GroupVersionResource
	}{
		{name: "both", served: []*metav1.APIResourceList{list(v1, "noderesourcetopologies"), list(v2, "noderesourcetopologies")}, want: NRTResource},
		{name: "v1alpha2", served: []*metav1.APIResourceList{list(v2, "noderesourcetopologies")}, want: NRTResource},
		{name: "v1alpha1 (Koordinator)", served: []*metav1.APIResourceList{list("v1", "nodes"), list(v1, "noderesourcetopologies")}, want: NRTResourceV1alpha1},
		{name: "v1alpha2 without the resource", served: []*metav1.APIResourceList{list(v2, "other"), list(v1, "noderesourcetopologies")}, want: NRTResourceV1alpha1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := &discoveryfake.FakeDiscovery{Fake: &clienttesting.Fake{Resources: tc.served}}
			got, err := NRTResourceOf(d)
			if err != nil || got != tc.want {
				t.Errorf("NRTResourceOf = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
	d := &discoveryfake.FakeDiscovery{Fake: &clienttesting.Fake{Resources: []*metav1.APIResourceList{list("v1", "nodes"), list(v2, "other")}}}
	if got, err := NRTResourceOf(d); !errors.Is(err, ErrNoNRT) || err.Error() != "the NodeResourceTopology CRD is not installed (topology.node.k8s.io serves neither v1alpha2 nor v1alpha1)" {
		t.Errorf("NRTResourceOf without the CRD = %v, %v; want ErrNoNRT", got, err)
	}
	fake := &clienttesting.Fake{}
	fake.AddReactor("get", "resource", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{}, "", errors.New("no discovery for you"))
	})
	if got, err := NRTResourceOf(&discoveryfake.FakeDiscovery{Fake: fake}); err == nil || errors.Is(err, ErrNoNRT) || !apierrors.IsForbidden(err) {
		t.Errorf("NRTResourceOf refused = %v, %v; want the refusal, not ErrNoNRT", got, err)
	}
}

func TestHTTPDiscoverer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/apis/topology.node.k8s.io/v1alpha1":
			io.WriteString(w, `{"kind":"APIResourceList","groupVersion":"topology.node.k8s.io/v1alpha1","resources":[{"name":"noderesourcetopologies","namespaced":false,"kind":"NodeResourceTopology","verbs":["list","watch"]}]}`)
		case "/apis/broken.example/v1":
			http.Error(w, "etcd is on fire", http.StatusInternalServerError)
		case "/apis/garbage.example/v1":
			io.WriteString(w, "<html>")
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	d := HTTPDiscoverer{Ctx: t.Context(), Host: srv.URL, Client: srv.Client()}
	if got, err := NRTResourceOf(d); err != nil || got != NRTResourceV1alpha1 {
		t.Errorf("NRTResourceOf = %v, %v; want v1alpha1", got, err)
	}
	if _, err := d.ServerResourcesForGroupVersion("topology.node.k8s.io/v1alpha2"); !apierrors.IsNotFound(err) {
		t.Errorf("v1alpha2: %v, want not found", err)
	}
	if _, err := d.ServerResourcesForGroupVersion("broken.example/v1"); err == nil || !strings.Contains(err.Error(), "500") || !strings.Contains(err.Error(), "etcd is on fire") {
		t.Errorf("broken: %v, want the status and body", err)
	}
	if _, err := d.ServerResourcesForGroupVersion("garbage.example/v1"); err == nil || !strings.Contains(err.Error(), "parsing") {
		t.Errorf("garbage: %v, want a parse error", err)
	}
}
