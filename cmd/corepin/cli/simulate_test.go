package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"context"
	"github.com/corepin/corepin/internal/testutil"
	"github.com/corepin/corepin/kube/kubeclient/kubeclienttest"
	"github.com/corepin/corepin/kube/nodestate/fromcluster"
	"github.com/corepin/corepin/sim"
	"github.com/corepin/corepin/topology"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// simTopoFile writes a synthetic machine as corepin topo -o json would.
func simTopoFile(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "topo.json")
	if err := os.WriteFile(p, []byte(shapeJSON(t, planShape)), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func runMain(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb strings.Builder
	code = Main(args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

func TestSimulateGenJSON(t *testing.T) {
	topo := simTopoFile(t)
	code, out, errs := runMain(t, "", "simulate", "--gen", "farm", "--jobs", "300", "--nodes", "4", "--topology", topo, "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	var rep sim.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("output is not a report: %v\n%s", err, out)
	}
	if rep.Nodes != 4 || rep.Jobs != 300 || rep.TopologyPolicy != "single-numa-node" || len(rep.Results) != 10 {
		t.Errorf("nodes %d jobs %d topology policy %q results %d, want 4 300 single-numa-node 10", rep.Nodes, rep.Jobs, rep.TopologyPolicy, len(rep.Results))
	}
	var keys map[string]any
	if err := json.Unmarshal([]byte(out), &keys); err != nil {
		t.Fatal(err)
	}
	first := keys["scenarios"].([]any)[0].(map[string]any)
	for _, k := range []string{"scenario", "node_choice", "admitted", "rejected", "avoidable_rejections", "rejected_by", "alignment", "fragmentation", "timing"} {
		if _, ok := first[k]; !ok {
			t.Errorf("scenario JSON lacks %q", k)
		}
	}
	series := first["fragmentation"].(map[string]any)["series"].([]any)
	for _, k := range []string{"event", "t", "free_cores", "free_l3_groups", "free_numa_nodes"} {
		if _, ok := series[0].(map[string]any)[k]; !ok {
			t.Errorf("fragmentation sample lacks %q", k)
		}
	}
}

func TestSimulateTraceText(t *testing.T) {
	topo := simTopoFile(t)
	code, trace, errs := runMain(t, "", "simulate", "gen", "mixed", "--jobs", "200", "--seed", "3", "--capacity", "64")
	if code != 0 {
		t.Fatalf("gen: exit %d, stderr %q", code, errs)
	}
	if _, err := sim.ReadTrace(strings.NewReader(trace)); err != nil {
		t.Fatalf("gen wrote an unreadable trace: %v", err)
	}
	code, out, errs := runMain(t, trace, "simulate", "--trace", "-", "--nodes", "2", "--topology", topo,
		"--policies", "corepin,kubelet:full-pcpus-only", "--node-choice", "best-fit", "--topology-policy", "none")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	for _, want := range []string{"200 jobs (400 events", "over 2 nodes", "topology policy none", "SCENARIO", "AVOIDABLE",
		"corepin  ", "kubelet:full-pcpus-only", "best-fit", "wall time"} {
		if !strings.Contains(out, want) {
			t.Errorf("text output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "first-fit") {
		t.Errorf("--node-choice best-fit printed first-fit rows:\n%s", out)
	}
}

func TestSimulateSysfsFixture(t *testing.T) {
	root := testutil.ExtractTarBz2(t, "16em64t-4s2c2t")
	code, out, errs := runMain(t, "", "simulate", "--gen", "farm", "--jobs", "200", "--nodes", "10", "--sysfs-root", root,
		"--policies", "kubelet-packed,koord-least", "--node-choice", "first-fit", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	var rep sim.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.NodeCPUs != 16 || len(rep.Results) != 2 || rep.Results[1].Scenario != "koord-least" {
		t.Errorf("node cpus %d, %d results: want 16 and [kubelet-packed koord-least]", rep.NodeCPUs, len(rep.Results))
	}
}

func TestSimulateBadInput(t *testing.T) {
	topo := simTopoFile(t)
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.jsonl")
	if err := os.WriteFile(bad, []byte(`{"t": 1, "op": "arrive", "id": "a", "request": {"cpus": 2}}
{"t": 0.5, "op": "depart", "id": "a"}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{name: "time backwards", args: []string{"--trace", bad, "--topology", topo}, wantErr: "trace line 2: time 0.5 goes backwards"},
		{name: "missing file", args: []string{"--trace", filepath.Join(dir, "nope"), "--topology", topo}, wantErr: "no such file"},
		{name: "trace and gen", args: []string{"--trace", bad, "--gen", "farm", "--topology", topo}, wantErr: "either --trace"},
		{name: "neither", args: []string{"--topology", topo}, wantErr: "either --trace"},
		{name: "unknown generator", args: []string{"--gen", "hpc", "--topology", topo}, wantErr: `unknown generator "hpc"`},
		{name: "unknown policy", args: []string{"--gen", "farm", "--topology", topo, "--policies", "corepin,volcano"}, wantErr: `unknown scenario "volcano"`},
		{name: "unknown node choice", args: []string{"--gen", "farm", "--topology", topo, "--node-choice", "worst-fit"}, wantErr: `unknown node choice "worst-fit"`},
		{name: "bad topology policy", args: []string{"--gen", "farm", "--topology", topo, "--topology-policy", "strict"}, wantErr: "--topology-policy"},
		{name: "two stdins", args: []string{"--trace", "-", "--topology", "-"}, wantErr: "both read stdin"},
		{name: "zero nodes", args: []string{"--gen", "farm", "--topology", topo, "--nodes", "0"}, wantErr: "--nodes 0"},
		// Issue 8 §3: these ran out of memory instead of failing.
		{name: "nodes 1e9", args: []string{"--gen", "farm", "--topology", topo, "--nodes", "1000000000"}, wantErr: "--nodes 1000000000: want 1 to 10000"},
		{name: "jobs 1e9", args: []string{"--gen", "farm", "--topology", topo, "--jobs", "1000000000"}, wantErr: "--jobs 1000000000: want 1 to 1000000"},
		{name: "parallel 0", args: []string{"--gen", "farm", "--topology", topo, "--parallel", "0"}, wantErr: "--parallel 0: want 1 to 64"},
		{name: "both topologies", args: []string{"--gen", "farm", "--topology", topo, "--sysfs-root", dir}, wantErr: "not both"},
		{name: "no sysfs", args: []string{"--gen", "farm", "--sysfs-root", dir}, wantErr: "no sys/devices/system/cpu"},
		{name: "gen flag with trace", args: []string{"--trace", bad, "--topology", topo, "--jobs", "5"}, wantErr: "--jobs applies to --gen"},
		{name: "kubelet options refused together", args: []string{"--gen", "farm", "--topology", topo, "--policies", "kubelet:full-pcpus-only+distribute-cpus-across-cores"}, wantErr: "can not be used together"},
		{name: "bad reserved", args: []string{"--gen", "farm", "--topology", topo, "--reserved-cpus", "3-1"}, wantErr: "--reserved-cpus"},
		{name: "as-deployed without a cluster", args: []string{"--gen", "farm", "--topology", topo, "--policies", "corepin,as-deployed"}, wantErr: "as-deployed replays each node under the allocator settings it publishes: it needs --from-cluster"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errs := runMain(t, "", append([]string{"simulate"}, tc.args...)...)
			if code != 2 {
				t.Errorf("exit %d, want 2 (stderr %q)", code, errs)
			}
			if !strings.Contains(errs, tc.wantErr) {
				t.Errorf("stderr %q, want it to contain %q", errs, tc.wantErr)
			}
		})
	}
	code, _, errs := runMain(t, "", "simulate", "gen", "farm", "--jobs", "1000000000")
	if code != 2 || !strings.Contains(errs, "want 1 to 1000000") {
		t.Errorf("gen --jobs 1e9: exit %d stderr %q, want 2 with the cap", code, errs)
	}
	code, _, errs = runMain(t, "", "simulate", "gen", "farm", "--capacity", "0")
	if code != 2 || !strings.Contains(errs, "--capacity") {
		t.Errorf("gen --capacity 0: exit %d stderr %q, want 2 naming --capacity", code, errs)
	}
}

// The topology file is the corepin topo -o json document.
func TestSimulateTopologyIsTopoJSON(t *testing.T) {
	root := testutil.ExtractTarBz2(t, "8em64t-2s2ca2c")
	code, doc, errs := runMain(t, "", "topo", "--sysfs-root", root, "-o", "json")
	if code != 0 {
		t.Fatalf("topo: exit %d, %s", code, errs)
	}
	code, out, errs := runMain(t, doc, "simulate", "--gen", "farm", "--jobs", "50", "--nodes", "3", "--topology", "-",
		"--policies", "corepin", "--node-choice", "first-fit", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	var rep sim.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	var d topology.Doc
	if err := json.Unmarshal([]byte(doc), &d); err != nil {
		t.Fatal(err)
	}
	if rep.NodeCPUs != len(d.CPUs) {
		t.Errorf("node cpus %d, want %d", rep.NodeCPUs, len(d.CPUs))
	}
}

// settingsNodes returns a maker of Nodes publishing writeNode's machine
// (corepin.io/topology) and, when settings is not empty, those allocator
// settings (corepin.io/allocator).
func settingsNodes(t *testing.T) func(name, settings string) corev1.Node {
	t.Helper()
	doc, err := os.ReadFile(writeNode(t))
	if err != nil {
		t.Fatal(err)
	}
	return func(name, settings string) corev1.Node {
		ann := map[string]string{"corepin.io/topology": string(doc)}
		if settings != "" {
			ann["corepin.io/allocator"] = settings
		}
		return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: ann}}
	}
}

// TestSimulateFromClusterTakesTheNodesTopologyPolicy: nodes that all
// publish the same default topology policy (corepin.io/allocator) are
// replayed under it unless --topology-policy says otherwise; nodes that
// differ, or one without the annotation, leave the flag's default.
func TestSimulateFromClusterTakesTheNodesTopologyPolicy(t *testing.T) {
	node := settingsNodes(t)
	for _, tc := range []struct {
		name       string
		nodes      []corev1.Node
		flags      []string
		want       string
		wantStderr bool
	}{
		{"all publish none", []corev1.Node{node("a", `{"policy":"corepin"}`), node("b", `{"policy":"kubelet","topology_policy":"none"}`)}, nil, "none", true},
		{"all publish restricted", []corev1.Node{node("a", `{"policy":"corepin","topology_policy":"restricted"}`), node("b", `{"policy":"corepin","topology_policy":"restricted"}`)}, nil, "restricted", true},
		{"the flag overrides", []corev1.Node{node("a", `{"policy":"corepin"}`), node("b", `{"policy":"corepin"}`)}, []string{"--topology-policy", "best-effort"}, "best-effort", false},
		{"nodes differ", []corev1.Node{node("a", `{"policy":"corepin"}`), node("b", `{"policy":"corepin","topology_policy":"restricted"}`)}, nil, "single-numa-node", false},
		{"one publishes none", []corev1.Node{node("a", `{"policy":"corepin"}`), node("b", "")}, nil, "single-numa-node", false},
		// A node whose settings do not read is skipped (the extender
		// fails it): the other one's none is every node's.
		{"one publishes a broken one", []corev1.Node{node("a", `{"policy":"corepin"}`), node("b", `{"policy":"x"}`)}, nil, "none", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, _ := fakeAPIServer(t, nil, tc.nodes...)
			kc := writeKubeconfig(t, srv)
			args := append([]string{"simulate", "--gen", "farm", "--jobs", "20", "--from-cluster", "--kubeconfig", kc, "--context", "sweep",
				"--policies", "corepin", "-o", "json"}, tc.flags...)
			code, out, errs := corepin(t, "", args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			var rep sim.Report
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatal(err)
			}
			if rep.TopologyPolicy != tc.want {
				t.Errorf("replayed under topology policy %q, want %q", rep.TopologyPolicy, tc.want)
			}
			if got := strings.Contains(errs, "the default every node publishes"); got != tc.wantStderr {
				t.Errorf("stderr %q: says the nodes' default: %v, want %v", errs, got, tc.wantStderr)
			}
		})
	}
}

// TestSimulateFromCluster replays a kube jobs sweep over a cluster's nodes
// read from a fake API server: two nodes publish their topology (one with
// 4 CPUs held), one publishes none and one a broken one; both of those are
// listed as skipped.
func TestSimulateFromCluster(t *testing.T) {
	nodeFile := writeNode(t)
	doc, err := os.ReadFile(nodeFile)
	if err != nil {
		t.Fatal(err)
	}
	node := func(name string, ann map[string]string) corev1.Node {
		return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: ann}}
	}
	srv, seen := fakeAPIServer(t, nil,
		node("n1", map[string]string{"corepin.io/topology": string(doc), "corepin.io/assigned": `[{"id":"ns/db","cpuset":"0-3","qos":"LSE"}]`}),
		node("n2", map[string]string{"corepin.io/topology": string(doc)}),
		node("n3", nil),
		node("n4", map[string]string{"corepin.io/topology": `{"cpus":`}),
	)
	kc := writeKubeconfig(t, srv)
	code, trace, errs := corepin(t, "", "kube", "jobs", "--sweep", "concurrency", "--quick", "--repeats", "1", "--topology", nodeFile, "--sim-trace")
	if code != 0 {
		t.Fatalf("kube jobs --sim-trace: exit %d: %s", code, errs)
	}
	code, out, errs := corepin(t, trace, "simulate", "--trace", "-", "--from-cluster", "--kubeconfig", kc, "--context", "sweep",
		"--policies", "corepin", "--node-choice", "best-fit", "-o", "json")
	if code != 0 {
		t.Fatalf("simulate --from-cluster: exit %d: %s (requests %q)", code, errs, *seen)
	}
	var rep struct {
		Nodes     int    `json:"nodes"`
		Topology  string `json:"topology"`
		CPUs      int    `json:"cpus"`
		HeldCPUs  int    `json:"held_cpus"`
		Jobs      int    `json:"jobs"`
		Scenarios []struct {
			Admitted int `json:"admitted"`
			Rejected int `json:"rejected"`
		} `json:"scenarios"`
		Skipped []fromcluster.Skipped `json:"skipped_nodes"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Scenarios) != 1 {
		t.Fatalf("simulate output %q: %v", out, err)
	}
	if rep.Nodes != 2 || rep.CPUs != 32 || rep.HeldCPUs != 4 || rep.Jobs != 28 || rep.Scenarios[0].Admitted != 28 {
		t.Errorf("replayed %d jobs over %d nodes, %d CPUs, %d held, admitted %d; want 28 over 2 nodes, 32 CPUs, 4 held, all admitted",
			rep.Jobs, rep.Nodes, rep.CPUs, rep.HeldCPUs, rep.Scenarios[0].Admitted)
	}
	if len(rep.Skipped) != 2 || rep.Skipped[0].Node != "n3" || !strings.Contains(rep.Skipped[0].Reason, "no corepin.io/topology") ||
		rep.Skipped[1].Node != "n4" || !strings.Contains(rep.Skipped[1].Reason, "invalid node annotation") {
		t.Errorf("skipped %+v, want n3 (no annotation) and n4 (invalid annotation)", rep.Skipped)
	}
	// Text output names the skipped nodes on stderr.
	code, out, errs = corepin(t, trace, "simulate", "--trace", "-", "--from-cluster", "--kubeconfig", kc, "--context", "sweep", "--policies", "corepin", "--node-choice", "best-fit")
	if code != 0 || !strings.Contains(errs, "skipped node n3") || !strings.Contains(out, "over 2 nodes of") || !strings.Contains(out, "4 held before the trace") {
		t.Errorf("text: exit %d, stdout %q, stderr %q; want the table and the skipped nodes", code, out, errs)
	}
	for _, args := range [][]string{
		{"simulate", "--gen", "farm", "--from-cluster", "--kubeconfig", kc, "--context", "sweep", "--nodes", "3"},
		{"simulate", "--gen", "farm", "--from-cluster", "--kubeconfig", kc, "--context", "sweep", "--topology", nodeFile},
		{"simulate", "--gen", "farm", "--kubeconfig", kc, "--topology", nodeFile},
		{"simulate", "--gen", "farm", "--from-cluster", "--kubeconfig", kc, "--context", "nope"},
	} {
		code, out, errs := corepin(t, "", args...)
		if code != 2 || out != "" || strings.Count(errs, "\n") != 1 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2, one line on stderr", args, code, out, errs)
		}
	}
}

// TestSimulateFromClusterWithoutCorepinNodes: a cluster where no node
// publishes its topology is bad input, naming what to run.
func TestSimulateFromClusterWithoutCorepinNodes(t *testing.T) {
	srv, _ := fakeAPIServer(t, nil, corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "plain"}})
	kc := writeKubeconfig(t, srv)
	code, out, errs := corepin(t, "", "simulate", "--gen", "farm", "--from-cluster", "--kubeconfig", kc, "--context", "sweep")
	if code != 2 || out != "" || !strings.Contains(errs, "no node of the cluster") || !strings.Contains(errs, "1 nodes skipped") {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit 2 saying no node publishes its topology", code, out, errs)
	}
}

// TestClusterNodesPages reads nodes from client-go's fake clientset one
// at a time and shares one topology between nodes of the same machine.
func TestClusterNodesPages(t *testing.T) {
	doc, err := os.ReadFile(writeNode(t))
	if err != nil {
		t.Fatal(err)
	}
	var items []corev1.Node
	for _, n := range []string{"a", "b", "c"} {
		items = append(items, corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Annotations: map[string]string{"corepin.io/topology": string(doc)}}})
	}
	cs := fake.NewClientset()
	var limits []int64
	cs.PrependReactor("list", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		l := a.(k8stesting.ListActionImpl)
		limits = append(limits, l.ListOptions.Limit)
		i := 0
		if l.ListOptions.Continue != "" {
			i = int(l.ListOptions.Continue[0] - '0')
		}
		out := &corev1.NodeList{Items: items[i : i+1]}
		if i+1 < len(items) {
			out.Continue = string(rune('0' + i + 1))
		}
		return true, out, nil
	})
	view, err := fromcluster.Read(context.Background(), kubeclienttest.Reader{Interface: cs}, schema.GroupVersionResource{})
	nodes := view.Nodes
	if err != nil || len(nodes) != 3 || len(view.Skipped) != 0 || len(limits) != 3 || limits[0] != fromcluster.PageSize {
		t.Fatalf("fromcluster.Read() = %d nodes, %d skipped, %v after %d lists (limits %v); want 3 nodes over 3 pages of limit %d", len(nodes), len(view.Skipped), err, len(limits), limits, fromcluster.PageSize)
	}
	if nodes[0].Topology != nodes[2].Topology {
		t.Errorf("nodes publishing the same machine have distinct topologies; want one shared")
	}
}
