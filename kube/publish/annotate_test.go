package publish

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/kube/nodestate"
	"github.com/corepin/corepin/topology"
)

// twoNodes is a machine of two NUMA nodes, one per socket, of 4 cores of
// 2 threads each.
var twoNodes = topology.Shape{Sockets: 2, NodesPerSocket: 1, L3PerNode: 1, CoresPerL3: 4, ThreadsPerCore: 2}

// fakeNodes is an API server holding Node objects' annotations and
// applying JSON merge patches to them.
type fakeNodes struct {
	mu    sync.Mutex
	ann   map[string]map[string]string
	ctype []string
}

func (f *fakeNodes) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ctype = append(f.ctype, r.Method+" "+r.Header.Get("Content-Type"))
	if r.Header.Get("Authorization") != "Bearer tok" {
		http.Error(w, `{"reason":"Unauthorized"}`, http.StatusUnauthorized)
		return
	}
	name, ok := strings.CutPrefix(r.URL.Path, "/api/v1/nodes/")
	ann, exists := f.ann[name]
	if !ok || r.Method != http.MethodPatch || !exists {
		http.Error(w, `{"reason":"NotFound"}`, http.StatusNotFound)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var patch struct {
		Metadata struct {
			Annotations map[string]*string `json:"annotations"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(body, &patch); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	for k, v := range patch.Metadata.Annotations {
		if v == nil {
			delete(ann, k)
		} else {
			ann[k] = *v
		}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"apiVersion": "v1", "kind": "Node", "metadata": map[string]any{"name": name, "annotations": ann}})
}

// publisherOf is a Publisher of the API server at url with bearer token
// token.
func publisherOf(t *testing.T, url, token string) *Publisher {
	t.Helper()
	p, err := New(&rest.Config{Host: url, BearerToken: token})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestAnnotatorPatchesTheNode(t *testing.T) {
	api := &fakeNodes{ann: map[string]map[string]string{"n1": {"other": "kept", nodestate.AnnotationNUMAFree: "[1,1]"}}}
	srv := httptest.NewServer(api)
	defer srv.Close()
	topo := topology.MustSynthetic(twoNodes)
	st, err := alloc.NewState(topo, alloc.NodeSettings{Reserved: cpuset.New(0)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Allocate(alloc.Request{ID: "a", CPUs: 2, QoS: alloc.LSE, Exclusive: alloc.ExclusivePCPULevel}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Allocate(alloc.Request{ID: "b", MilliCPUs: 1500, QoS: alloc.LS}); err != nil {
		t.Fatal(err)
	}
	a := &Annotator{Publisher: publisherOf(t, srv.URL, "tok"), Node: "n1"}
	if err := a.Annotate(context.Background(), st, nil); err != nil {
		t.Fatalf("Annotate: %v", err)
	}
	got := api.ann["n1"]
	if got["other"] != "kept" {
		t.Errorf("another annotation was lost: %v", got)
	}
	if _, ok := got[nodestate.AnnotationNUMAFree]; ok {
		t.Errorf("%s left beside the topology: %v", nodestate.AnnotationNUMAFree, got)
	}
	var assigned []map[string]any
	if err := json.Unmarshal([]byte(got[nodestate.AnnotationAssigned]), &assigned); err != nil {
		t.Fatalf("%s %q: %v", nodestate.AnnotationAssigned, got[nodestate.AnnotationAssigned], err)
	}
	want := []map[string]any{
		{"id": nodestate.ReservedID, "cpuset": "0", "qos": "LSE", "exclusive": "", "cpus": nil},
		{"id": "a", "cpuset": st.Assignments()[0].CPUs.String(), "qos": "LSE", "exclusive": "PCPULevel", "cpus": nil},
		{"id": "b", "cpuset": "", "qos": "LS", "exclusive": "", "cpus": 1.5},
	}
	if diff := cmp.Diff(want, assigned); diff != "" {
		t.Errorf("%s (-want +got):\n%s", nodestate.AnnotationAssigned, diff)
	}
	if doc, _ := json.Marshal(topo.Doc()); got[nodestate.AnnotationTopology] != string(doc) {
		t.Errorf("%s = %.80s..., want the compact topo document", nodestate.AnnotationTopology, got[nodestate.AnnotationTopology])
	}
	if diff := cmp.Diff([]string{"PATCH application/merge-patch+json"}, api.ctype); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	gone := &Annotator{Publisher: publisherOf(t, srv.URL, "tok"), Node: "n2"}
	if err := gone.Annotate(context.Background(), st, nil); err == nil || !strings.Contains(err.Error(), "no such node") {
		t.Errorf("Annotate on a missing node = %v, want an error saying so", err)
	}
	bad := &Annotator{Publisher: publisherOf(t, srv.URL, "wrong"), Node: "n1"}
	if err := bad.Annotate(context.Background(), st, nil); !apierrors.IsUnauthorized(err) || !strings.Contains(err.Error(), "annotating node n1") {
		t.Errorf("Annotate with a wrong token = %v, want Unauthorized, naming the node", err)
	}
}

// A node whose topology passes nodestate.MaxAnnotationBytes is published
// coarse, and the Annotator says so once.
func TestAnnotatorLogsTheCoarseFormOnce(t *testing.T) {
	big := topology.MustSynthetic(topology.Shape{Sockets: 8, NodesPerSocket: 2, L3PerNode: 2, CoresPerL3: 48, ThreadsPerCore: 2})
	st, err := alloc.NewState(big, alloc.NodeSettings{Reserved: cpuset.New(0)})
	if err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	api := &fakeNodes{ann: map[string]map[string]string{"n1": {}}}
	srv := httptest.NewServer(api)
	defer srv.Close()
	a := &Annotator{Publisher: publisherOf(t, srv.URL, "tok"), Node: "n1", Log: slog.New(slog.NewTextHandler(&logs, nil))}
	for range 3 {
		if err := a.Annotate(context.Background(), st, nil); err != nil {
			t.Fatal(err)
		}
	}
	if n := strings.Count(logs.String(), "too large"); n != 1 {
		t.Errorf("logged the fallback %d times, want once:\n%s", n, logs.String())
	}
}

func TestAnnotatorPublishesItsTopologyPolicy(t *testing.T) {
	api := &fakeNodes{ann: map[string]map[string]string{"n1": {}}}
	srv := httptest.NewServer(api)
	defer srv.Close()
	st, err := alloc.NewState(topology.MustSynthetic(twoNodes), alloc.NodeSettings{Policy: alloc.PolicyKubelet})
	if err != nil {
		t.Fatal(err)
	}
	a := &Annotator{Publisher: publisherOf(t, srv.URL, "tok"), Node: "n1", TopologyPolicy: "best-effort"}
	if err := a.Annotate(context.Background(), st, nil); err != nil {
		t.Fatal(err)
	}
	if got, want := api.ann["n1"][nodestate.AnnotationAllocator], `{"policy":"kubelet","topology_policy":"best-effort"}`; got != want {
		t.Errorf("%s on the node = %s, want %s", nodestate.AnnotationAllocator, got, want)
	}
}
