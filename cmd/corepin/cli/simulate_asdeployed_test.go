package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corepin/corepin/kube/nodestate/fromcluster"
	"github.com/corepin/corepin/sim"
)

// deployedReport is what the as-deployed tests read of simulate -o json.
type deployedReport struct {
	Scenarios []sim.Result          `json:"scenarios"`
	Skipped   []fromcluster.Skipped `json:"skipped_nodes"`
	Sources   []fromcluster.Source  `json:"node_sources"`
}

// lseTrace is a trace of LSE jobs of the given sizes that stay.
func lseTrace(sizes ...int) string {
	var b strings.Builder
	for i, n := range sizes {
		fmt.Fprintf(&b, `{"t": %d, "op": "arrive", "id": "job-%d", "request": {"cpus": %d, "qos": "LSE"}}`+"\n", i, i, n)
	}
	return b.String()
}

// TestSimulateAsDeployedFromCluster replays over three nodes of one
// 16-CPU machine (two NUMA nodes of 4 cores, 2 threads each) that publish
// different settings: "strict" the kubelet's static policy with
// full-pcpus-only, "single" corepin's engine with topology policy
// single-numa-node, "plain" none; "broken" publishes settings that do not
// read and is skipped. Two 1-CPU jobs and three 12-CPU jobs, first fit:
// strict refuses both odd jobs (full-pcpus-only), takes the first 12 on
// six whole cores; the next two go to single, where no NUMA node holds 12.
// Every uniform scenario under the nodes' topology policy none admits all
// five, or (koord-most/least, bind FullPCPUs) refuses the 1-CPU jobs, so
// as-deployed differs from each, under either node choice.
func TestSimulateAsDeployedFromCluster(t *testing.T) {
	node := settingsNodes(t)
	srv, _ := fakeAPIServer(t, nil,
		node("strict", `{"policy":"kubelet","options":["full-pcpus-only"]}`),
		node("single", `{"policy":"corepin","topology_policy":"single-numa-node"}`),
		node("plain", ""),
		node("broken", `{"policy":"kubelet","options":["spread-everything"]}`),
	)
	kc := writeKubeconfig(t, srv)
	trace := lseTrace(1, 1, 12, 12, 12)
	code, out, errs := corepin(t, trace, "simulate", "--trace", "-", "--from-cluster", "--kubeconfig", kc, "--context", "sweep",
		"--topology-policy", "none", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rep deployedReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("simulate output %q: %v", out, err)
	}
	// --policies all: the five named scenarios and, as nodes publish
	// settings, as-deployed; each under both node choices.
	if len(rep.Scenarios) != 12 {
		t.Fatalf("%d result rows, want 12 (6 scenarios x 2 node choices)", len(rep.Scenarios))
	}
	got := map[string]sim.Result{}
	for _, r := range rep.Scenarios {
		got[r.Scenario+"/"+string(r.NodeChoice)] = r
	}
	type counts struct {
		Admitted, Rejected int
		RejectedBy         map[string]int
	}
	for key, want := range map[string]counts{
		"as-deployed/first-fit": {1, 4, map[string]int{"full-pcpus-only": 2, "single-numa-node": 2}},
		"as-deployed/best-fit":  {4, 1, map[string]int{"single-numa-node": 1}},
	} {
		r, ok := got[key]
		if !ok {
			t.Fatalf("no %s row in %v", key, out)
		}
		if diff := cmp.Diff(want, counts{r.Admitted, r.Rejected, r.RejectedBy}); diff != "" {
			t.Errorf("%s (-want +got):\n%s", key, diff)
		}
	}
	for _, r := range rep.Scenarios {
		d := got["as-deployed/"+string(r.NodeChoice)]
		if r.Scenario != "as-deployed" && r.Admitted == d.Admitted && r.Rejected == d.Rejected {
			t.Errorf("%s/%s admitted %d, rejected %d, as as-deployed did; want each uniform scenario to differ", r.Scenario, r.NodeChoice, r.Admitted, r.Rejected)
		}
	}
	wantSources := []fromcluster.Source{
		{Node: "strict", Source: "corepin", Settings: &sim.SettingsDoc{Policy: "kubelet", Options: []string{"full-pcpus-only"}, TopologyPolicy: "none"}},
		{Node: "single", Source: "corepin", Settings: &sim.SettingsDoc{Policy: "corepin", Options: []string{}, TopologyPolicy: "single-numa-node"}},
		{Node: "plain", Source: "corepin"},
	}
	if diff := cmp.Diff(wantSources, rep.Sources); diff != "" {
		t.Errorf("node_sources (-want +got):\n%s", diff)
	}
	if len(rep.Skipped) != 1 || rep.Skipped[0].Node != "broken" || !strings.Contains(rep.Skipped[0].Reason, "corepin.io/allocator") ||
		!strings.Contains(rep.Skipped[0].Reason, "spread-everything") {
		t.Errorf("skipped %+v, want broken, its corepin.io/allocator naming the unknown option", rep.Skipped)
	}
	if d := got["as-deployed/first-fit"]; d.Policy != "mixed" || len(d.NodeSettings) != 3 || d.NodeSettings[2].Published {
		t.Errorf("as-deployed policy %q, node settings %+v; want mixed and three groups, the last publishing none", d.Policy, d.NodeSettings)
	}

	// Text: the as-deployed rows and what each node ran.
	code, out, errs = corepin(t, trace, "simulate", "--trace", "-", "--from-cluster", "--kubeconfig", kc, "--context", "sweep",
		"--topology-policy", "none", "--policies", "as-deployed", "--node-choice", "first-fit")
	for _, want := range []string{"as-deployed  ", "rejected by (as-deployed/first-fit): full-pcpus-only 2, single-numa-node 2",
		"as-deployed: each node under its own settings: 1 node kubelet full-pcpus-only, topology policy none; 1 node corepin, topology policy single-numa-node; 1 node publishing none (corepin's defaults): corepin, topology policy none"} {
		if !strings.Contains(out, want) {
			t.Errorf("text output lacks %q (exit %d, stderr %q):\n%s", want, code, errs, out)
		}
	}
	if !strings.Contains(errs, "skipped node broken: corepin.io/allocator") {
		t.Errorf("stderr %q, want the skipped node with its reason", errs)
	}
}

// TestSimulateAllWithoutPublishedSettings: --policies all over nodes that
// publish no settings replays the named scenarios only (as-deployed would
// be corepin's run again); asked for by name it runs, with a note.
func TestSimulateAllWithoutPublishedSettings(t *testing.T) {
	doc, err := os.ReadFile(writeNode(t))
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := fakeAPIServer(t, nil, corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a", Annotations: map[string]string{"corepin.io/topology": string(doc)}}})
	kc := writeKubeconfig(t, srv)
	code, out, errs := corepin(t, lseTrace(2), "simulate", "--trace", "-", "--from-cluster", "--kubeconfig", kc, "--context", "sweep", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rep deployedReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range rep.Scenarios {
		if r.NodeChoice == sim.FirstFit {
			names = append(names, r.Scenario)
		}
	}
	if diff := cmp.Diff(sim.ScenarioNames(), names); diff != "" {
		t.Errorf("scenarios (-want +got):\n%s", diff)
	}
	// Asked for, it runs, saying every node runs corepin's defaults.
	code, _, errs = corepin(t, lseTrace(2), "simulate", "--trace", "-", "--from-cluster", "--kubeconfig", kc, "--context", "sweep", "--policies", "as-deployed")
	if code != 0 || !strings.Contains(errs, "as-deployed: no simulated node publishes allocator settings") {
		t.Errorf("--policies as-deployed: exit %d, stderr %q; want 0 and the note", code, errs)
	}
}

// TestSimulateAsDeployedKoordinatorBindLabel: a Koordinator node (koordlet's
// object, its kubelet's CPU manager policy none: corepin's engine) labelled
// node.koordinator.sh/cpu-bind-policy=FullPCPUsOnly runs with
// full-pcpus-only and bind FullPCPUs forced on every exclusive job: of
// 1-CPU, 1-CPU and 2-CPU jobs asking SpreadByPCPUs it admits only the
// 2-CPU one. Without the label it admits all three.
func TestSimulateAsDeployedKoordinatorBindLabel(t *testing.T) {
	obj := koordNRT(t, "koord-a")
	obj["metadata"].(map[string]any)["annotations"].(map[string]any)["kubelet.koordinator.sh/cpu-manager-policy"] = `{"policy":"none"}`
	var trace strings.Builder
	for i, n := range []int{1, 1, 2} {
		fmt.Fprintf(&trace, `{"t": %d, "op": "arrive", "id": "job-%d", "request": {"cpus": %d, "qos": "LSE", "bind": "SpreadByPCPUs"}}`+"\n", i, i, n)
	}
	for _, tc := range []struct {
		name       string
		label      string
		admitted   int
		rejectedBy map[string]int
		settings   *sim.SettingsDoc
	}{
		{name: "FullPCPUsOnly", label: "FullPCPUsOnly", admitted: 1, rejectedBy: map[string]int{"FullPCPUs": 2},
			settings: &sim.SettingsDoc{Policy: "corepin", Options: []string{"full-pcpus-only"}, TopologyPolicy: "single-numa-node", Bind: "FullPCPUs"}},
		{name: "no label", admitted: 3, rejectedBy: map[string]int{},
			settings: &sim.SettingsDoc{Policy: "corepin", Options: []string{}, TopologyPolicy: "single-numa-node"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "koord-a"}}
			if tc.label != "" {
				n.Labels = map[string]string{"node.koordinator.sh/cpu-bind-policy": tc.label}
			}
			srv, _ := nrtAPIServer(t, "v1alpha1", []corev1.Node{n}, obj)
			kc := writeKubeconfig(t, srv)
			code, out, errs := corepin(t, trace.String(), "simulate", "--trace", "-", "--from-cluster", "--nrt", "--kubeconfig", kc, "--context", "sweep",
				"--policies", "as-deployed", "--node-choice", "first-fit", "-o", "json")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			var rep deployedReport
			if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Scenarios) != 1 || len(rep.Sources) != 1 {
				t.Fatalf("simulate output %q: %v", out, err)
			}
			r := rep.Scenarios[0]
			if r.Admitted != tc.admitted || !cmp.Equal(r.RejectedBy, tc.rejectedBy) {
				t.Errorf("admitted %d, rejected by %v; want %d, %v", r.Admitted, r.RejectedBy, tc.admitted, tc.rejectedBy)
			}
			if diff := cmp.Diff(tc.settings, rep.Sources[0].Settings); diff != "" {
				t.Errorf("settings (-want +got):\n%s", diff)
			}
		})
	}
}
