package extender

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"
	toolscache "k8s.io/client-go/tools/cache"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/internal/testutil"
	"github.com/corepin/corepin/kube/nodestate"
	"github.com/corepin/corepin/kube/nodestate/nodestatetest"
	"github.com/corepin/corepin/topology"
)

// logBuf is a concurrency-safe log sink.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// watchedStore is a store kept by an informer on a fake dynamic client
// holding objs, synced and watching when it returns.
func watchedStore(t *testing.T, objs ...runtime.Object) (*NRTStore, *dynamicfake.FakeDynamicClient, *logBuf) {
	t.Helper()
	return watchedStoreOf(t, NRTResource, objs...)
}

// watchedStoreOf is watchedStore for the objects of resource res.
func watchedStoreOf(t *testing.T, res schema.GroupVersionResource, objs ...runtime.Object) (*NRTStore, *dynamicfake.FakeDynamicClient, *logBuf) {
	t.Helper()
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{res: "NodeResourceTopologyList"}, objs...)
	// The fake tracker sends a watcher only the changes made after it
	// exists: the test changes objects only once the informer watches.
	watching := make(chan struct{})
	var once sync.Once
	client.PrependWatchReactor("noderesourcetopologies", func(a clienttesting.Action) (bool, watch.Interface, error) {
		w, err := client.Tracker().Watch(a.GetResource(), a.GetNamespace())
		once.Do(func() { close(watching) })
		return true, w, err
	})
	log := &logBuf{}
	s := NewNRTStore(100, slog.New(slog.NewTextHandler(log, nil)))
	synced, err := s.Watch(t.Context(), client, res)
	if err != nil {
		t.Fatal(err)
	}
	if !toolscache.WaitForCacheSync(t.Context().Done(), synced) {
		t.Fatal("informer did not sync")
	}
	<-watching
	return s, client, log
}

func freeOf(s *NRTStore, node string) []int {
	e, ok := s.get(node)
	if !ok {
		return nil
	}
	return e.free
}

func TestNRTStoreJudgesNodesWithoutAnnotations(t *testing.T) {
	s, client, log := watchedStore(t, nodestatetest.NRT(t, "w1", 8, 2))
	if diff := cmp.Diff([]int{8, 2}, freeOf(s, "w1")); diff != "" {
		t.Fatalf("w1 free after sync (-want +got):\n%s", diff)
	}
	h := New(WithNRT(s)).Handler()
	pod := guaranteedPod("six", "6", map[string]string{AnnotationNUMAPolicy: "single-numa-node"}, nil)
	body := args(t, pod, node("w1", nil), node("foreign", nil))

	res := filter(t, h, body)
	if diff := cmp.Diff([]string{"w1", "foreign"}, names(res.Nodes)); diff != "" || len(res.FailedNodes)+len(res.FailedAndUnresolvableNodes) != 0 {
		t.Errorf("[8,2]: kept (-want +got):\n%s failed %v %v", diff, res.FailedNodes, res.FailedAndUnresolvableNodes)
	}
	if sc := prioritize(t, h, body); sc["w1"] == 0 || sc["foreign"] != 0 {
		t.Errorf("[8,2]: scores %v, want w1 above 0 and the unjudged node 0", sc)
	}

	// An update (an informer event) changes the answer: [5,5] has no
	// NUMA node with 6 free CPUs; the failure stays resolvable (the
	// stand-in machine does not say what preemption would free).
	upd := nodestatetest.NRT(t, "w1", 5, 5)
	if _, err := client.Resource(NRTResource).Update(t.Context(), upd, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "w1 at [5,5]", func() bool { return cmp.Equal([]int{5, 5}, freeOf(s, "w1")) })
	res = filter(t, h, body)
	want := extenderv1.FailedNodesMap{"w1": "no NUMA node with 6 free CPUs"}
	if diff := cmp.Diff(want, res.FailedNodes); diff != "" || len(res.FailedAndUnresolvableNodes) != 0 {
		t.Errorf("[5,5]: failed (-want +got):\n%s unresolvable %v", diff, res.FailedAndUnresolvableNodes)
	}
	if diff := cmp.Diff([]string{"foreign"}, names(res.Nodes)); diff != "" {
		t.Errorf("[5,5]: kept (-want +got):\n%s", diff)
	}
	// The typed path answers the same.
	typed := New(WithNRT(s)).Filter(decode(t, body))
	if diff := cmp.Diff(want, typed.FailedNodes); diff != "" {
		t.Errorf("[5,5], typed path: failed (-want +got):\n%s", diff)
	}

	// Deleting the object leaves the node unjudged.
	if err := client.Resource(NRTResource).Delete(t.Context(), "w1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "w1 forgotten", func() bool { return s.Len() == 0 })
	res = filter(t, h, body)
	if diff := cmp.Diff([]string{"w1", "foreign"}, names(res.Nodes)); diff != "" || len(res.FailedNodes) != 0 {
		t.Errorf("deleted: kept (-want +got):\n%s failed %v", diff, res.FailedNodes)
	}
	if l := log.String(); l != "" {
		t.Errorf("log = %q, want nothing for well-formed objects", l)
	}
}

func decode(t *testing.T, body []byte) *extenderv1.ExtenderArgs {
	t.Helper()
	a, err := DecodeArgs(body, 100)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestNRTAnnotationsWin(t *testing.T) {
	s, _, _ := watchedStore(t, nodestatetest.NRT(t, "w1", 8, 2))
	pod := guaranteedPod("six", "6", map[string]string{AnnotationNUMAPolicy: "single-numa-node"}, nil)
	body := args(t, pod, node("w1", map[string]string{AnnotationNUMAFree: "[5,5]"}))
	res := filter(t, New(WithNRT(s)).Handler(), body)
	if got := res.FailedNodes["w1"]; got != "no NUMA node with 6 free CPUs" {
		t.Errorf("w1 with annotation [5,5] and NRT [8,2]: reason %q, want the annotation's refusal", got)
	}
}

// TestNRTMalformedZonesFailNode: an object whose zones do not read fails
// its node for a pod that needs aligned CPUs, with the reason, and a
// warning names the node (issue 27 §3: it used to leave the node
// unjudged, so every pod passed it).
func TestNRTMalformedZonesFailNode(t *testing.T) {
	zone := func(name, typ, avail string) map[string]any {
		return map[string]any{"name": name, "type": typ, "resources": []any{map[string]any{"name": "cpu", "capacity": "8", "allocatable": "8", "available": avail}}}
	}
	obj := func(name string, zones any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": nodestate.NRTAPIVersion, "kind": nodestate.NRTKind,
			"metadata": map[string]any{"name": name}, "zones": zones}}
	}
	cases := []struct {
		name  string
		zones any
		warn  string
	}{
		{name: "fraction", zones: []any{zone("node-0", "Node", "1500m")}, warn: "want whole CPUs"},
		{name: "negative", zones: []any{zone("node-0", "Node", "-2")}, warn: "want 0 to"},
		{name: "garbage", zones: []any{zone("node-0", "Node", "lots")}, warn: "cpu available"},
		{name: "badname", zones: []any{zone("numa0", "Node", "4")}, warn: "want a name node-N"},
		{name: "twice", zones: []any{zone("node-0", "Node", "4"), zone("node-0", "Node", "4")}, warn: "given twice"},
		{name: "nonode", zones: []any{zone("socket-0", "Socket", "4")}, warn: "no zone of type Node"},
		{name: "notalist", zones: "node-0", warn: "zones is not a list"},
		{name: "badtype", zones: []any{map[string]any{"name": "node-0", "type": "Node", "resources": "cpu"}}, warn: "NodeResourceTopology zones"},
	}
	var objs []runtime.Object
	for _, tc := range cases {
		objs = append(objs, obj(tc.name, tc.zones))
	}
	s, _, log := watchedStore(t, objs...)
	if n := s.Len(); n != len(cases) {
		t.Errorf("store kept %d nodes, want all %d, failed", n, len(cases))
	}
	h := New(WithNRT(s)).Handler()
	pod := guaranteedPod("six", "6", map[string]string{AnnotationNUMAPolicy: "single-numa-node"}, nil)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := filter(t, h, args(t, pod, node(tc.name, nil)))
			if r := res.FailedAndUnresolvableNodes[tc.name]; !strings.Contains(r, nodestate.ErrNRT.Error()) || !strings.Contains(r, tc.warn) {
				t.Errorf("unresolvable reason %q (kept %v), want %q saying %q", r, names(res.Nodes), nodestate.ErrNRT, tc.warn)
			}
			found := false
			for _, l := range strings.Split(log.String(), "\n") {
				if strings.Contains(l, "node="+tc.name+" ") && strings.Contains(l, tc.warn) {
					found = true
				}
			}
			if !found {
				t.Errorf("no warning for node %s containing %q in log:\n%s", tc.name, tc.warn, log.String())
			}
		})
	}
}

func TestNRTStoreBounded(t *testing.T) {
	log := &logBuf{}
	s := NewNRTStore(2, slog.New(slog.NewTextHandler(log, nil)))
	z := nodestate.BuildNRT("x", topology.MustSynthetic(topology.Shape{Sockets: 1, NodesPerSocket: 1, L3PerNode: 1, CoresPerL3: 2, ThreadsPerCore: 1}), alloc.Pools{}, "").Zones
	for _, n := range []string{"a", "b", "c"} {
		s.Set(n, z)
	}
	if _, ok := s.get("c"); ok || s.Len() != 2 || !strings.Contains(log.String(), "the store is full") {
		t.Errorf("store of 2 after 3 objects: len %d, c kept %v, log %q; want a and b kept, c refused with a warning", s.Len(), ok, log.String())
	}
	s.Set("a", z) // an update of a known node is not refused
	s.Delete("b")
	s.Set("c", z)
	if _, ok := s.get("c"); !ok || s.Len() != 2 {
		t.Errorf("after deleting b: c kept %v, len %d; want c kept", ok, s.Len())
	}
}

func TestHealthzWaitsForSync(t *testing.T) {
	var mu sync.Mutex
	ready := false
	h := New(WithReady(func() bool { mu.Lock(); defer mu.Unlock(); return ready })).Handler()
	get := func() (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
		return rec.Code, rec.Body.String()
	}
	if code, body := get(); code != http.StatusServiceUnavailable || !strings.Contains(body, "NodeResourceTopology") {
		t.Errorf("before sync: GET /healthz = %d %q, want 503 naming the informer", code, body)
	}
	mu.Lock()
	ready = true
	mu.Unlock()
	if code, body := get(); code != http.StatusOK {
		t.Errorf("after sync: GET /healthz = %d %q, want 200", code, body)
	}
	if code, _ := post(t, New().Handler(), "/filter", args(t, guaranteedPod("p", "1", nil, nil), node("n", nil))); code != http.StatusOK {
		t.Errorf("without --nrt: POST /filter = %d, want 200", code)
	}
}

// FuzzNRTObject feeds arbitrary objects to the store's informer handler
// and judges a pod on what it kept: nothing may panic, and a kept node has
// a state (possibly refusing every pod), never a decoding error.
func FuzzNRTObject(f *testing.F) {
	f.Add([]byte(`{"apiVersion":"topology.node.k8s.io/v1alpha2","kind":"NodeResourceTopology","metadata":{"name":"n"},"zones":[{"name":"node-0","type":"Node","resources":[{"name":"cpu","available":"8"}]},{"name":"node-1","type":"Node","resources":[{"name":"cpu","available":"2"}]}]}`))
	f.Add([]byte(`{"metadata":{"name":"n"},"zones":[{"name":"node-0","type":"Node","resources":[{"name":"cpu","available":"1500m"}]}]}`))
	f.Add([]byte(`{"metadata":{"name":"n"},"zones":[{"name":"node-0","type":"Node","resources":[{"name":"cpu","available":4}]}]}`))
	f.Add([]byte(`{"metadata":{"name":"n"},"zones":{"node-0":1}}`))
	f.Add([]byte(`{"metadata":{"name":"n"},"zones":[{"name":"node-0","type":"Node","resources":[{"name":"cpu","available":"8"}]}],"attributes":[{"name":"topologyManagerPolicy","value":"single-numa-node"},{"name":"corepin.io/policy","value":"kubelet"},{"name":"corepin.io/options","value":"full-pcpus-only,strict-cpu-reservation"}]}`))
	f.Add([]byte(`{"metadata":{"name":"n"},"zones":[{"name":"node-0","type":"Node","resources":[{"name":"cpu","available":"8"}]}],"attributes":[{"name":"topologyManagerPolicy","value":"bogus"}]}`))
	f.Add([]byte(`{"metadata":{"name":"n"},"zones":[{"name":"node-0","type":"Node","resources":[{"name":"cpu","available":"8"}]}],"attributes":{"topologyManagerPolicy":1}}`))
	f.Add([]byte(`{"apiVersion":"topology.node.k8s.io/v1alpha1","kind":"NodeResourceTopology","metadata":{"name":"n","annotations":{"node.koordinator.sh/cpu-topology":"{\"detail\":[{\"id\":0,\"core\":0,\"socket\":0,\"node\":0},{\"id\":1,\"core\":1,\"socket\":0,\"node\":0},{\"id\":2,\"core\":2,\"socket\":0,\"node\":0},{\"id\":3,\"core\":3,\"socket\":0,\"node\":0},{\"id\":4,\"core\":0,\"socket\":0,\"node\":0},{\"id\":5,\"core\":1,\"socket\":0,\"node\":0},{\"id\":6,\"core\":2,\"socket\":0,\"node\":0},{\"id\":7,\"core\":3,\"socket\":0,\"node\":0}]}","kubelet.koordinator.sh/cpu-manager-policy":"{\"policy\":\"static\",\"options\":{\"full-pcpus-only\":\"true\"},\"reservedCPUs\":\"0\"}","node.koordinator.sh/pod-cpu-allocs":"[{\"namespace\":\"a\",\"name\":\"b\",\"uid\":\"u\",\"cpuset\":\"1,5\",\"managedByKubelet\":true}]","node.koordinator.sh/cpu-shared-pools":"[{\"socket\":0,\"node\":0,\"cpuset\":\"0,2-3,6\"}]","node.koordinator.sh/be-cpu-shared-pools":"[{\"socket\":0,\"node\":0,\"cpuset\":\"0,2-3,6-7\"}]","node.koordinator.sh/reservation":"{\"reservedCPUs\":\"4\"}"}},"topologyPolicies":["SingleNUMANodeContainerLevel"],"zones":[{"name":"node-0","type":"Node","resources":[{"name":"cpu","capacity":"8","allocatable":"8"}]}]}`))
	f.Add([]byte(`{"metadata":{"name":"n","annotations":{"node.koordinator.sh/cpu-topology":"{\"detail\":[{\"id\":0},{\"id\":0}]}"}},"topologyPolicies":["BestEffort"]}`))
	f.Add([]byte(`{"metadata":{"name":"n"},"topologyPolicies":"None","zones":[{"name":"node-0","type":"Node","resources":[{"name":"cpu","available":"8"}]}]}`))
	pod := guaranteedPod("six", "6", map[string]string{AnnotationNUMAPolicy: "single-numa-node"}, nil)
	req, reqErr := RequestOf(pod)
	// A pod naming no topology policy gets the object's default.
	plain, plainErr := RequestOf(guaranteedPod("seven", "7", nil, nil))
	f.Fuzz(func(t *testing.T, data []byte) {
		u := &unstructured.Unstructured{}
		if u.UnmarshalJSON(data) != nil {
			return
		}
		s := NewNRTStore(4, slog.New(slog.DiscardHandler))
		tu, err := trimNRT(u)
		if err != nil {
			t.Fatal(err)
		}
		s.onSet(tu)
		e := New(WithNRT(s))
		name := u.GetName()
		e.setNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}})
		if _, kept := s.get(name); kept != e.view.Known(name) {
			t.Errorf("store kept the object: %v; view judges the node: %v", kept, e.view.Known(name))
		}
		// A node whose object does not read refuses the pods that need
		// alignment for good, saying why.
		for _, r := range []struct {
			req alloc.Request
			err error
		}{{req, reqErr}, {plain, plainErr}} {
			v := e.view.Judge(name, r.req, r.err, e.view.Key(r.req))
			if ent, _ := s.get(name); ent.readErr != nil && (v.OK || !v.Unresolvable || v.Reason == "") {
				t.Errorf("object that does not read (%v): verdict %+v, want refused for good", ent.readErr, v)
			}
		}
	})
}
