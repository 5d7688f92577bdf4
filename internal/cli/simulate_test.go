package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corepin/corepin/internal/testutil"
	"github.com/corepin/corepin/sim"
	"github.com/corepin/corepin/topology"
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
