package extender

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

// strictAnswers is what the typed path (DecodeArgs, Filter, Prioritize)
// answers for body, as the scheduler decodes it.
func strictAnswers(t testing.TB, body []byte, maxNodes int, opts ...Option) (*extenderv1.ExtenderFilterResult, extenderv1.HostPriorityList, error) {
	t.Helper()
	args, err := DecodeArgs(body, maxNodes)
	if err != nil {
		return nil, nil, err
	}
	e := New(append([]Option{WithMaxNodes(maxNodes)}, opts...)...)
	// Through JSON, as the scheduler reads them.
	var fr extenderv1.ExtenderFilterResult
	var pr extenderv1.HostPriorityList
	b, _ := json.Marshal(e.Filter(args))
	if err := json.Unmarshal(b, &fr); err != nil {
		t.Fatalf("decoding the typed filter result: %v", err)
	}
	b, _ = json.Marshal(e.Prioritize(args))
	if err := json.Unmarshal(b, &pr); err != nil {
		t.Fatalf("decoding the typed priorities: %v", err)
	}
	return &fr, pr, nil
}

// handlerAnswers is what the handler answers for body: status codes and
// bodies of /filter and /prioritize.
func handlerAnswers(t testing.TB, body []byte, maxNodes int, opts ...Option) (fcode int, fbody []byte, pcode int, pbody []byte) {
	t.Helper()
	h := New(append([]Option{WithMaxNodes(maxNodes)}, opts...)...).Handler()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/filter", bytes.NewReader(body)))
	fcode, fbody = rec.Code, rec.Body.Bytes()
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/prioritize", bytes.NewReader(body)))
	return fcode, fbody, rec.Code, rec.Body.Bytes()
}

// checkSameAnswers fails unless the handler answers body as the typed path
// does, each an Extender of opts (and WithMaxNodes(maxNodes)). The fast path decodes only a node's name and annotations, so a
// body whose other node fields do not decode into corev1.Node may be
// answered by the handler where DecodeArgs refuses it (nothing else); its
// filter answer is then still JSON.
func checkSameAnswers(t testing.TB, body []byte, maxNodes int, opts ...Option) {
	t.Helper()
	sfr, spr, serr := strictAnswers(t, body, maxNodes, opts...)
	fcode, fbody, pcode, pbody := handlerAnswers(t, body, maxNodes, opts...)
	if serr != nil {
		if fcode == http.StatusOK && !strings.Contains(serr.Error(), "parsing Nodes") {
			t.Fatalf("DecodeArgs refuses the body (%v) but the handler answered /filter", serr)
		}
		if fcode == http.StatusOK && !json.Valid(fbody) {
			t.Fatalf("the handler's filter answer is not JSON: %q", fbody)
		}
		return
	}
	if fcode != http.StatusOK || pcode != http.StatusOK {
		t.Fatalf("the typed path answers but the handler says %d, %d", fcode, pcode)
	}
	var ffr extenderv1.ExtenderFilterResult
	var fpr extenderv1.HostPriorityList
	if err := json.Unmarshal(fbody, &ffr); err != nil {
		t.Fatalf("decoding the handler's filter result %q: %v", fbody, err)
	}
	if err := json.Unmarshal(pbody, &fpr); err != nil {
		t.Fatalf("decoding the handler's priorities %q: %v", pbody, err)
	}
	// The handler sends the kept items as the scheduler sent them; the
	// typed path re-encodes them, dropping empty maps ("annotations":{}),
	// which the scheduler reads the same.
	if diff := cmp.Diff(sfr, &ffr, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("filter result (-typed +handler):\n%s", diff)
	}
	if diff := cmp.Diff(spr, fpr); diff != "" {
		t.Fatalf("priorities (-typed +handler):\n%s", diff)
	}
}

func TestHandlerAnswersAsTheTypedPath(t *testing.T) {
	single, err := os.ReadFile("testdata/filter-single-numa.json")
	if err != nil {
		t.Fatal(err)
	}
	pod := guaranteedPod("enc", "6", map[string]string{AnnotationNUMAPolicy: "single-numa-node"}, nil)
	mixed := args(t, pod,
		topoNode(t, "busy", `[{"id":"a/x","cpuset":"0-2","qos":"LSE"},{"id":"a/y","cpuset":"4-6","qos":"LSE"}]`),
		topoNode(t, "free", ""),
		node("coarse", map[string]string{AnnotationNUMAFree: "[8,2]"}),
		node("bad", map[string]string{AnnotationNUMAFree: "[-1]"}),
		node("foreign", map[string]string{"x": "y"}))
	tests := []struct {
		name string
		body string
		fast bool // read by the fast path, not the typed fallback
	}{
		{name: "testdata filter-single-numa", body: string(single), fast: true},
		{name: "kept, failed and foreign nodes", body: string(mixed), fast: true},
		{name: "bad pod metadata", fast: true, body: string(args(t, guaranteedPod("p", "1500m", nil, map[string]string{LabelQoSClass: "LSE"}),
			node("a", map[string]string{AnnotationNUMAFree: "[4]"})))},
		{name: "whitespace and node fields kept", fast: true, body: `{ "Pod" : {"metadata":{"name":"p","namespace":"n"}} ,
			"Nodes" : { "items" : [ {"metadata":{"name":"a","labels":{"k":"v"},"annotations":{"corepin.io/numa-free":"[2]"}},
			"status":{"capacity":{"cpu":"2"}}} , {"metadata":{"name":"b"}} ] } }`},
		{name: "node names beside nodes", fast: true, body: `{"Pod":{},"Nodes":{"items":[{"metadata":{"name":"a"}}]},"NodeNames":["a"]}`},
		{name: "escaped annotation and name", fast: true, body: `{"Pod":{},"Nodes":{"items":[{"metadata":{"name":"n\u0041","annotations":{"corepin.io/numa-free":"[\u0034]"}}}]}}`},
		{name: "key in another case", body: `{"pod":{},"nodes":{"Items":[{"Metadata":{"Name":"a","annotations":{"corepin.io/numa-free":"[2]"}}}]}}`},
		{name: "key given twice", body: `{"Pod":{},"Nodes":{"items":[{"metadata":{"name":"a","name":"b"}}]}}`},
		{name: "escaped key", body: `{"Pod":{},"Nodes":{"items":[{"metadata":{"n\u0061me":"a"}}]}}`},
		{name: "null metadata and annotations", fast: true, body: `{"Pod":{},"Nodes":{"items":[{"metadata":null},{"metadata":{"name":"b","annotations":null}}]}}`},
		{name: "annotation not a string", body: `{"Pod":{},"Nodes":{"items":[{"metadata":{"name":"a","annotations":{"corepin.io/numa-free":4}}}]}}`},
		{name: "too many nodes", body: `{"Pod":{},"Nodes":{"items":[{},{},{}]}}`},
		{name: "no items", fast: true, body: `{"Pod":{},"Nodes":{}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			max := 2 + strings.Count(tc.body, "metadata")
			if fast := walksEveryNode(t, []byte(tc.body), max); fast != tc.fast {
				t.Errorf("read by the fast path: %v, want %v", fast, tc.fast)
			}
			checkSameAnswers(t, []byte(tc.body), max)
		})
	}
	t.Run("items come back as sent", func(t *testing.T) {
		body := `{"Pod":{},"Nodes":{"items":[{"metadata":{"name":"a"},"spec":{"futureField":{"x":[1,2]}}}]}}`
		rec := httptest.NewRecorder()
		New().Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/filter", strings.NewReader(body)))
		if want := `"items":[{"metadata":{"name":"a"},"spec":{"futureField":{"x":[1,2]}}}]`; !strings.Contains(rec.Body.String(), want) {
			t.Errorf("filter answer %s does not carry the node as sent (%s)", rec.Body.String(), want)
		}
	})
}

// walksEveryNode reports whether the body reads and the walker reads every
// node item of it (none goes through corev1.Node).
func walksEveryNode(t *testing.T, body []byte, maxNodes int) bool {
	t.Helper()
	fast := true
	err := readStream(bytes.NewReader(body), maxNodes, func([]byte) error { return nil }, func(raw []byte) error {
		_, ok := readNode(raw)
		fast = fast && ok
		return nil
	})
	return err == nil && fast
}

// FuzzHandlerMatchesTypedPath checks, for any body, that the handler (its
// fast path or its fallback) answers what DecodeArgs, Filter and
// Prioritize answer.
func FuzzHandlerMatchesTypedPath(f *testing.F) {
	seed, err := os.ReadFile("testdata/filter-single-numa.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte(`{"Pod":{"metadata":{"labels":{"koordinator.sh/qosClass":"LS"}}},"Nodes":{"items":[{"metadata":{"name":"a","annotations":{"corepin.io/numa-free":"[1,2]"}}},{"metadata":{"name":"b"}}]}}`))
	f.Add([]byte(`{"Pod":{},"Nodes":{"items":[{"metadata":{"name":"n\u0041","annotations":{"corepin.io/topology":"{\"cpus\":[{\"cpu\":0,\"online\":true,\"allowed\":true}]}"}}}]}}`))
	f.Add([]byte(`{"Pod":{},"Nodes":{"items":[{"metadata":{"name":"a","name":"b"}}]},"NodeNames":null}`))
	f.Add([]byte(`{"Pod":{},"Nodes":{"items":[{"metadata":{"name":1}}, null, 3, "x", {"metadata":[]}]}}`))
	// Nodes publishing their allocator settings (corepin.io/allocator),
	// good and bad, beside either form, and a pod naming no topology
	// policy (the node's default applies) or one.
	f.Add([]byte(`{"Pod":{"spec":{"containers":[{"resources":{"requests":{"cpu":"3"},"limits":{"cpu":"3"}}}]}},"Nodes":{"items":[{"metadata":{"name":"a","annotations":{"corepin.io/numa-free":"[2,2]","corepin.io/allocator":"{\"policy\":\"kubelet\",\"options\":[\"full-pcpus-only\"],\"topology_policy\":\"single-numa-node\"}"}}},{"metadata":{"name":"b","annotations":{"corepin.io/numa-free":"[2,2]"}}}]}}`))
	f.Add([]byte(`{"Pod":{"metadata":{"annotations":{"corepin.io/numa-policy":"none"}}},"Nodes":{"items":[{"metadata":{"name":"a","annotations":{"corepin.io/allocator":"{\"topology_policy\":\"restricted\"}","corepin.io/topology":"{\"cpus\":[{\"cpu\":0,\"online\":true,\"allowed\":true},{\"cpu\":1,\"online\":true,\"allowed\":true,\"core\":1}]}","corepin.io/assigned":"[{\"id\":\"(reserved)\",\"cpuset\":\"0\",\"qos\":\"LSE\"}]"}}}]}}`))
	f.Add([]byte(`{"Pod":{},"Nodes":{"items":[{"metadata":{"name":"a","annotations":{"corepin.io/numa-free":"[1]","corepin.io/allocator":"{\"policy\":\"static\"}"}}},{"metadata":{"name":"b","annotations":{"corepin.io/allocator":"null","corepin.io/numa-free":"[1]","corepin.io/allocator":"{}"}}}]}}`))
	// Koordinator's node labels on nodes the store judges by Koordinator's
	// objects (labelStore: k-none, k-none-snn, k-static, k-static-snn,
	// k-full), by zones (z) or by corepin annotations: known values,
	// escaped, unknown, empty, null, not strings, given twice.
	const three = `{"spec":{"containers":[{"resources":{"requests":{"cpu":"3","memory":"1Gi"},"limits":{"cpu":"3","memory":"1Gi"}}}]}}`
	const nine = `{"spec":{"containers":[{"resources":{"requests":{"cpu":"9","memory":"1Gi"},"limits":{"cpu":"9","memory":"1Gi"}}}]}}`
	f.Add([]byte(`{"Pod":` + three + `,"Nodes":{"items":[{"metadata":{"name":"k-none","labels":{"node.koordinator.sh/cpu-bind-policy":"FullPCPUsOnly"}}},{"metadata":{"name":"k-static","labels":{"node.koordinator.sh/cpu-bind-policy":"Full\u0050CPUsOnly","x":"y"}}},{"metadata":{"name":"k-full","labels":{"node.koordinator.sh/cpu-bind-policy":"SpreadByPCPUs"}}},{"metadata":{"name":"k-none-snn","labels":{"node.koordinator.sh/cpu-bind-policy":"None"}}}]}}`))
	f.Add([]byte(`{"Pod":` + nine + `,"Nodes":{"items":[{"metadata":{"name":"k-none","labels":{"node.koordinator.sh/numa-topology-policy":"SingleNUMANode"}}},{"metadata":{"name":"k-none-snn","labels":{"node.koordinator.sh/numa-topology-policy":"None"}}},{"metadata":{"labels":{"node.koordinator.sh/numa-topology-policy":"SingleNUMANode"},"name":"k-static"}},{"metadata":{"name":"k-static-snn","labels":{"node.koordinator.sh/numa-topology-policy":""}}}]}}`))
	f.Add([]byte(`{"Pod":{},"Nodes":{"items":[{"metadata":{"name":"k-none","labels":{"node.koordinator.sh/cpu-bind-policy":"fullpcpusonly"}}},{"metadata":{"name":"k-static","labels":{"node.koordinator.sh/numa-topology-policy":"Some\\times\""}}},{"metadata":{"name":"z","labels":{"node.koordinator.sh/numa-topology-policy":"bogus"}}},{"metadata":{"name":"c","annotations":{"corepin.io/numa-free":"[2,2]"},"labels":{"node.koordinator.sh/cpu-bind-policy":"bogus"}}}]}}`))
	f.Add([]byte(`{"Pod":{},"Nodes":{"items":[{"metadata":{"name":"k-none","labels":{"node.koordinator.sh/numa-allocate-strategy":"LeastAllocated"}}},{"metadata":{"name":"k-static","labels":{"node.koordinator.sh/numa-allocate-strategy":"Least\u0041llocated","node.koordinator.sh/cpu-bind-policy":"SpreadByPCPUs"}}},{"metadata":{"name":"k-full","labels":{"node.koordinator.sh/numa-allocate-strategy":"most"}}}]}}`))
	f.Add([]byte(`{"Pod":{},"Nodes":{"items":[{"metadata":{"name":"k-none","labels":null}},{"metadata":{"name":"k-static","labels":{"node.koordinator.sh/cpu-bind-policy":1}}}]}}`))
	f.Add([]byte(`{"Pod":{},"Nodes":{"items":[{"metadata":{"name":"k-none","labels":{"node.koordinator.sh/cpu-bind-policy":"None","node.koordinator.sh/cpu-bind-policy":"FullPCPUsOnly"}}}]}}`))
	f.Add([]byte(`{"Pod":{},"Nodes":{"items":[{"metadata":{"name":"k-none","labels":{"Node.koordinator.sh/cpu-bind-policy":"FullPCPUsOnly"},"Labels":{}}}]}}`))
	store := labelStore(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		checkSameAnswers(t, body, 8, WithNRT(store))
	})
}

// benchNodes are 100 nodes publishing a 16-CPU topology, each holding a
// different CPU (100 distinct states).
func benchNodes(t testing.TB) []corev1.Node {
	var ns []corev1.Node
	for i := range 100 {
		ns = append(ns, topoNode(t, fmt.Sprintf("node-%03d", i), fmt.Sprintf(`[{"id":"x/held","cpuset":"%d","qos":"LSE"}]`, i%16)))
	}
	return ns
}

func TestHandlerAnswersTheBenchmarkAsTheTypedPath(t *testing.T) {
	checkSameAnswers(t, args(t, guaranteedPod("enc", "4", map[string]string{AnnotationNUMAPolicy: "single-numa-node"}, nil), benchNodes(t)...), 100)
	checkSameAnswers(t, args(t, guaranteedPod("big", "9", map[string]string{AnnotationNUMAPolicy: "single-numa-node"}, nil), benchNodes(t)...), 100)
}
