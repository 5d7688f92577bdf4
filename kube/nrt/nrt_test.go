package nrt

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/topology"
)

var twoNodes = topology.Shape{Sockets: 2, NodesPerSocket: 1, L3PerNode: 1, CoresPerL3: 4, ThreadsPerCore: 2}

func TestBuildCountsFreeCPUsPerNUMANode(t *testing.T) {
	topo := topology.MustSynthetic(twoNodes)
	st, err := alloc.NewState(topo, alloc.NodeSettings{Reserved: cpuset.New(0, 8)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Allocate(alloc.Request{ID: "a", CPUs: 4, QoS: alloc.LSE, TopologyPolicy: alloc.TopologySingleNUMANode}); err != nil {
		t.Fatal(err)
	}
	got := Build("n1", topo, st.Pools(), "single-numa-node")
	var avail []string
	for _, z := range got.Zones {
		avail = append(avail, z.Name+":"+z.Resources[0].Capacity+"/"+z.Resources[0].Allocatable+"/"+z.Resources[0].Available)
	}
	// One node gave 4 CPUs to the LSE workload; node 0 also keeps 2 reserved.
	want := map[string]bool{"node-0:8/6/2,node-1:8/8/8": true, "node-0:8/6/6,node-1:8/8/4": true}
	if !want[strings.Join(avail, ",")] {
		t.Errorf("zones capacity/allocatable/available = %v, want 4 CPUs taken on one node and 2 reserved on node 0", avail)
	}
	if diff := cmp.Diff([]Cost{{Name: "node-0", Value: 10}, {Name: "node-1", Value: int64(topology.MustSynthetic(twoNodes).Distance(0, 1))}}, got.Zones[0].Costs); diff != "" {
		t.Errorf("node-0 costs (-want +got):\n%s", diff)
	}
	if got.APIVersion != APIVersion || got.Kind != Kind || got.Metadata.Name != "n1" || got.Attributes[0].Value != "single-numa-node" {
		t.Errorf("object header %s %s %s %v", got.APIVersion, got.Kind, got.Metadata.Name, got.Attributes)
	}
}

// fakeAPI is an API server holding NodeResourceTopology objects.
type fakeAPI struct {
	mu   sync.Mutex
	objs map[string]map[string]any
	reqs []string
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs = append(f.reqs, r.Method+" "+r.URL.Path)
	if r.Header.Get("Authorization") != "Bearer tok" {
		http.Error(w, `{"reason":"Unauthorized"}`, http.StatusUnauthorized)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var doc map[string]any
	if err := json.Unmarshal(body, &doc); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	name := strings.TrimPrefix(r.URL.Path, resource+"/")
	switch {
	case r.Method == http.MethodPost && r.URL.Path == resource:
		md, _ := doc["metadata"].(map[string]any)
		f.objs[md["name"].(string)] = doc
		w.WriteHeader(http.StatusCreated)
	case r.Method == http.MethodPatch && r.Header.Get("Content-Type") == "application/merge-patch+json":
		o, ok := f.objs[name]
		if !ok {
			http.Error(w, `{"reason":"NotFound"}`, http.StatusNotFound)
			return
		}
		for k, v := range doc {
			o[k] = v
		}
	default:
		http.Error(w, "unexpected", http.StatusMethodNotAllowed)
	}
}

func TestPublishCreatesThenPatches(t *testing.T) {
	api := &fakeAPI{objs: map[string]map[string]any{}}
	srv := httptest.NewServer(api)
	defer srv.Close()
	p := &Publisher{Server: srv.URL, Token: "tok"}
	topo := topology.MustSynthetic(twoNodes)
	st, _ := alloc.NewState(topo, alloc.NodeSettings{})
	ctx := context.Background()
	if err := p.Publish(ctx, Build("n1", topo, st.Pools(), "")); err != nil {
		t.Fatalf("first Publish: %v", err)
	}
	st.Allocate(alloc.Request{ID: "a", CPUs: 2, QoS: alloc.LSE})
	if err := p.Publish(ctx, Build("n1", topo, st.Pools(), "")); err != nil {
		t.Fatalf("second Publish: %v", err)
	}
	want := []string{"PATCH " + resource + "/n1", "POST " + resource, "PATCH " + resource + "/n1"}
	if diff := cmp.Diff(want, api.reqs); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	b, _ := json.Marshal(api.objs["n1"]["zones"])
	if !strings.Contains(string(b), `"available":"6"`) || api.objs["n1"]["kind"] != Kind {
		t.Errorf("stored object %v does not show 2 CPUs taken", api.objs["n1"])
	}
	bad := &Publisher{Server: srv.URL, Token: "wrong"}
	if err := bad.Publish(ctx, Build("n1", topo, st.Pools(), "")); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("Publish with a wrong token = %v, want an error naming 401", err)
	}
}
