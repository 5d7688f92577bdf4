package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corepin/corepin/kube/nodestate/fromcluster"
	"github.com/corepin/corepin/sim"
)

// nrtAPIServer is an API server (bearer token sweep-token, as
// writeKubeconfig gives) serving nodes and, when version is not empty, the
// NodeResourceTopology resource at that version only, its objects one per
// page. It records the limit and continue of every NodeResourceTopology
// list.
func nrtAPIServer(t *testing.T, version string, nodes []corev1.Node, objects ...map[string]any) (*httptest.Server, func() []string) {
	t.Helper()
	var mu sync.Mutex
	var lists []string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer sweep-token" {
			http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Unauthorized","code":401}`, http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		gv := "/apis/topology.node.k8s.io/" + version
		switch {
		case r.URL.Path == "/api/v1/nodes":
			json.NewEncoder(w).Encode(corev1.NodeList{TypeMeta: metav1.TypeMeta{Kind: "NodeList", APIVersion: "v1"}, Items: nodes})
		case version != "" && r.URL.Path == gv:
			json.NewEncoder(w).Encode(metav1.APIResourceList{GroupVersion: "topology.node.k8s.io/" + version,
				APIResources: []metav1.APIResource{{Name: "noderesourcetopologies", Kind: "NodeResourceTopology", Verbs: []string{"list", "watch"}}}})
		case version != "" && r.URL.Path == gv+"/noderesourcetopologies":
			mu.Lock()
			lists = append(lists, "limit="+r.URL.Query().Get("limit")+" continue="+r.URL.Query().Get("continue"))
			mu.Unlock()
			i := 0
			if c := r.URL.Query().Get("continue"); c != "" {
				i, _ = strconv.Atoi(c)
			}
			list := map[string]any{"apiVersion": "topology.node.k8s.io/" + version, "kind": "NodeResourceTopologyList", "metadata": map[string]any{}, "items": []any{}}
			if i < len(objects) {
				list["items"] = []any{objects[i]}
				if i+1 < len(objects) {
					list["metadata"] = map[string]any{"continue": strconv.Itoa(i + 1)}
				}
			}
			json.NewEncoder(w).Encode(list)
		default:
			http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`, http.StatusNotFound)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), lists...)
	}
}

// koordNRT is kube/extender's koordlet object (two sockets of 4 cores, 2
// threads each, one NUMA node per socket) renamed name: reserved 0,8,
// default/web holding 1,9, Koordinator's LSE pods 4-5,12-13 and LSR pods
// 6,14; free are 2-3,10-11 on NUMA node 0 and 7,15 on node 1.
func koordNRT(t *testing.T, name string) map[string]any {
	t.Helper()
	b, err := os.ReadFile("../../../kube/nodestate/testdata/koordinator-nrt-v1alpha1.json")
	if err != nil {
		t.Fatal(err)
	}
	var o map[string]any
	if err := json.Unmarshal(b, &o); err != nil {
		t.Fatal(err)
	}
	o["metadata"].(map[string]any)["name"] = name
	delete(o["metadata"].(map[string]any), "ownerReferences")
	return o
}

// zonesNRT is a v1alpha2 object as NFD's topology-updater writes it: one
// Node zone per NUMA node with free[i] CPUs available of 8, and the
// kubelet's topology policy tp as an attribute.
func zonesNRT(name, tp string, free ...int) map[string]any {
	var zones []any
	for i, f := range free {
		zones = append(zones, map[string]any{"name": fmt.Sprintf("node-%d", i), "type": "Node", "resources": []any{
			map[string]any{"name": "cpu", "capacity": "8", "allocatable": "8", "available": strconv.Itoa(f)}}})
	}
	return map[string]any{"apiVersion": "topology.node.k8s.io/v1alpha2", "kind": "NodeResourceTopology",
		"metadata": map[string]any{"name": name}, "zones": zones,
		"attributes": []any{map[string]any{"name": "topologyManagerPolicy", "value": tp}, map[string]any{"name": "topologyManagerScope", "value": "container"}}}
}

// nrtReport is what the tests read of simulate --from-cluster -o json.
type nrtReport struct {
	Nodes          int    `json:"nodes"`
	CPUs           int    `json:"cpus"`
	HeldCPUs       int    `json:"held_cpus"`
	TopologyPolicy string `json:"topology_policy"`
	Scenarios      []struct {
		Admitted int `json:"admitted"`
		Rejected int `json:"rejected"`
	} `json:"scenarios"`
	Skipped     []fromcluster.Skipped `json:"skipped_nodes"`
	Sources     []fromcluster.Source  `json:"node_sources"`
	NRTResource *string               `json:"nrt_resource"`
}

// fourCPUJobs is a trace of n LSE jobs of 4 CPUs that stay.
func fourCPUJobs(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{"t": %d, "op": "arrive", "id": "job-%d", "request": {"cpus": 4, "qos": "LSE"}}`+"\n", i, i)
	}
	return b.String()
}

func simulateNRT(t *testing.T, kc string, flags ...string) (nrtReport, string) {
	t.Helper()
	args := append([]string{"simulate", "--trace", "-", "--from-cluster", "--kubeconfig", kc, "--context", "sweep",
		"--policies", "corepin", "--node-choice", "best-fit", "-o", "json"}, flags...)
	code, out, errs := corepin(t, fourCPUJobs(6), args...)
	if code != 0 {
		t.Fatalf("%v: exit %d: %s", args, code, errs)
	}
	var rep nrtReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Scenarios) != 1 {
		t.Fatalf("simulate output %q: %v", out, err)
	}
	return rep, errs
}

// TestSimulateFromClusterNRTKoordinator replays over a Koordinator cluster
// (v1alpha1 only): a node described by koordlet's object, one with
// corepin's annotations and an object (corepin's win), one whose object
// does not read and one with none. Six 4-CPU LSE jobs under
// single-numa-node: the corepin node takes 4 (two per NUMA node); with
// --nrt the Koordinator node takes a fifth on NUMA node 0 (2-3,10-11 free)
// and none on node 1 (only 7,15 free).
func TestSimulateFromClusterNRTKoordinator(t *testing.T) {
	doc, err := os.ReadFile(writeNode(t))
	if err != nil {
		t.Fatal(err)
	}
	broken := zonesNRT("broken", "none", 4)
	broken["zones"] = "nope"
	nodes := []corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "corepin-a", Annotations: map[string]string{"corepin.io/topology": string(doc)}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "koord-a"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "broken"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "plain"}},
	}
	srv, lists := nrtAPIServer(t, "v1alpha1", nodes, koordNRT(t, "corepin-a"), koordNRT(t, "koord-a"), broken)
	kc := writeKubeconfig(t, srv)

	without, _ := simulateNRT(t, kc)
	if without.Nodes != 1 || without.CPUs != 16 || without.Scenarios[0].Admitted != 4 || without.Scenarios[0].Rejected != 2 || without.NRTResource != nil {
		t.Errorf("without --nrt: %d nodes, %d CPUs, admitted %d rejected %d, nrt_resource %v; want the corepin node alone: 1, 16, 4, 2, absent",
			without.Nodes, without.CPUs, without.Scenarios[0].Admitted, without.Scenarios[0].Rejected, without.NRTResource)
	}
	if len(lists()) != 0 {
		t.Errorf("without --nrt it listed NodeResourceTopology objects: %v", lists())
	}

	with, _ := simulateNRT(t, kc, "--nrt")
	if with.Nodes != 2 || with.CPUs != 32 || with.HeldCPUs != 10 || with.Scenarios[0].Admitted != 5 || with.Scenarios[0].Rejected != 1 {
		t.Errorf("with --nrt: %d nodes, %d CPUs, %d held, admitted %d rejected %d; want 2, 32, 10 (Koordinator's reserved 0,8, web 1,9, LSE 4-5,12-13, LSR 6,14), 5, 1",
			with.Nodes, with.CPUs, with.HeldCPUs, with.Scenarios[0].Admitted, with.Scenarios[0].Rejected)
	}
	// The corepin node publishes no settings; koordlet's object its
	// kubelet's static policy with full-pcpus-only and single-numa-node.
	koordSettings := &sim.SettingsDoc{Policy: "kubelet", Options: []string{"full-pcpus-only"}, TopologyPolicy: "single-numa-node"}
	if diff := cmp.Diff([]fromcluster.Source{{Node: "corepin-a", Source: "corepin"}, {Node: "koord-a", Source: "nrt-koordinator", Settings: koordSettings}}, with.Sources); diff != "" {
		t.Errorf("node_sources (-want +got):\n%s", diff)
	}
	if with.NRTResource == nil || *with.NRTResource != "topology.node.k8s.io/v1alpha1" {
		t.Errorf("nrt_resource %v, want topology.node.k8s.io/v1alpha1", with.NRTResource)
	}
	if len(with.Skipped) != 2 || with.Skipped[0].Node != "broken" || !strings.Contains(with.Skipped[0].Reason, "zones is not a list") ||
		with.Skipped[1].Node != "plain" || !strings.Contains(with.Skipped[1].Reason, "no NodeResourceTopology object") {
		t.Errorf("skipped %+v, want broken (its zones) and plain (no object)", with.Skipped)
	}
	// One object per page, each list asking the page size.
	if diff := cmp.Diff([]string{"limit=500 continue=", "limit=500 continue=1", "limit=500 continue=2"}, lists()); diff != "" {
		t.Errorf("NodeResourceTopology lists (-want +got):\n%s", diff)
	}

	code, out, errs := corepin(t, fourCPUJobs(6), "simulate", "--trace", "-", "--from-cluster", "--nrt", "--kubeconfig", kc, "--context", "sweep", "--policies", "corepin")
	if code != 0 || !strings.Contains(errs, "1 nodes from NodeResourceTopology topology.node.k8s.io/v1alpha1: 1 Koordinator") ||
		!strings.Contains(errs, "skipped node broken") || !strings.Contains(out, "over 2 nodes") {
		t.Errorf("text: exit %d, stdout %q, stderr %q; want the NodeResourceTopology count and skipped nodes on stderr", code, out, errs)
	}
}

// TestSimulateFromClusterNRTZones replays over an NFD cluster (v1alpha2):
// each node a stand-in machine of its zones' free CPUs, under the
// topology policy their attributes name.
func TestSimulateFromClusterNRTZones(t *testing.T) {
	nodes := []corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "nfd-a"}}, {ObjectMeta: metav1.ObjectMeta{Name: "nfd-b"}}}
	srv, _ := nrtAPIServer(t, "v1alpha2", nodes, zonesNRT("nfd-a", "single-numa-node", 4, 4), zonesNRT("nfd-b", "single-numa-node", 6, 2))
	kc := writeKubeconfig(t, srv)
	rep, errs := simulateNRT(t, kc, "--nrt", "--topology-policy", "none")
	// Under none, four 4-CPU jobs fill the 16 free CPUs.
	if rep.Nodes != 2 || rep.CPUs != 16 || rep.HeldCPUs != 0 || rep.TopologyPolicy != "none" || rep.Scenarios[0].Admitted != 4 {
		t.Errorf("--topology-policy none: %d nodes, %d CPUs, %d held, policy %s, admitted %d; want 2, 16, 0, none, 4", rep.Nodes, rep.CPUs, rep.HeldCPUs, rep.TopologyPolicy, rep.Scenarios[0].Admitted)
	}
	// Under the nodes' own single-numa-node, nfd-b's 6+2 take one job:
	// three in all.
	rep, errs = simulateNRT(t, kc, "--nrt")
	if rep.TopologyPolicy != "single-numa-node" || rep.Scenarios[0].Admitted != 3 || !strings.Contains(errs, "the default every node publishes") {
		t.Errorf("nodes' policy: %s, admitted %d, stderr %q; want single-numa-node taken from the objects, 3 admitted", rep.TopologyPolicy, rep.Scenarios[0].Admitted, errs)
	}
	// Their attributes name a topology policy: settings of corepin's
	// engine under it.
	zoneSettings := &sim.SettingsDoc{Policy: "corepin", Options: []string{}, TopologyPolicy: "single-numa-node"}
	if diff := cmp.Diff([]fromcluster.Source{{Node: "nfd-a", Source: "nrt-zones", Settings: zoneSettings}, {Node: "nfd-b", Source: "nrt-zones", Settings: zoneSettings}}, rep.Sources); diff != "" {
		t.Errorf("node_sources (-want +got):\n%s", diff)
	}
	if rep.NRTResource == nil || *rep.NRTResource != "topology.node.k8s.io/v1alpha2" {
		t.Errorf("nrt_resource %v, want topology.node.k8s.io/v1alpha2", rep.NRTResource)
	}
}

// TestSimulateFromClusterNRTBadInput: without the CRD --nrt fails (exit
// 1) naming it; --nrt without --from-cluster is bad input; a cluster where
// nothing reads is bad input naming both sources.
func TestSimulateFromClusterNRTBadInput(t *testing.T) {
	nodes := []corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "plain"}}}
	srv, _ := nrtAPIServer(t, "", nodes)
	kc := writeKubeconfig(t, srv)
	code, out, errs := corepin(t, "", "simulate", "--gen", "farm", "--from-cluster", "--nrt", "--kubeconfig", kc, "--context", "sweep")
	if code != 1 || out != "" || !strings.Contains(errs, "NodeResourceTopology CRD is not installed") || !strings.Contains(errs, "noderesourcetopologies.topology.node.k8s.io") {
		t.Errorf("no CRD: exit %d, stdout %q, stderr %q; want exit 1 naming the CRD", code, out, errs)
	}
	code, _, errs = corepin(t, "", "simulate", "--gen", "farm", "--topology", writeNode(t), "--nrt")
	if code != 2 || !strings.Contains(errs, "give --from-cluster too") {
		t.Errorf("--nrt alone: exit %d, stderr %q; want 2 asking for --from-cluster", code, errs)
	}
	srv, _ = nrtAPIServer(t, "v1alpha2", nodes, zonesNRT("other", "none", 4))
	kc = writeKubeconfig(t, srv)
	code, _, errs = corepin(t, "", "simulate", "--gen", "farm", "--from-cluster", "--nrt", "--kubeconfig", kc, "--context", "sweep")
	if code != 2 || !strings.Contains(errs, "or has a readable NodeResourceTopology") || !strings.Contains(errs, "1 nodes skipped") {
		t.Errorf("nothing to replay over: exit %d, stderr %q; want 2 naming both sources", code, errs)
	}
}
