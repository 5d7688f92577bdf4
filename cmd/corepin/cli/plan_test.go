package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/corepin/corepin/internal/testutil"
	"github.com/corepin/corepin/plan"
	"github.com/corepin/corepin/topology"
)

// shapeJSON renders a synthetic machine in the topology form plan accepts.
func shapeJSON(t testing.TB, s topology.Shape) string {
	t.Helper()
	b, err := json.Marshal(plan.TopologyOf(topology.MustSynthetic(s)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// 2 sockets x 1 node x 2 L3 x 4 cores x 2 threads: CPU c and c+16 are siblings.
var planShape = topology.Shape{Sockets: 2, NodesPerSocket: 1, L3PerNode: 2, CoresPerL3: 4, ThreadsPerCore: 2}

func TestPlanBadInputExitsTwo(t *testing.T) {
	topo := shapeJSON(t, planShape)
	tests := []struct {
		name, input, wantErr string
	}{
		{"bad json", `{"requests": [`, "parsing plan input"},
		{"unknown key", `{"topology": ` + topo + `, "request": []}`, `unknown field "request"`},
		{"two documents", `{"topology": ` + topo + `} {}`, "more than one JSON document"},
		{"unknown policy", `{"topology": ` + topo + `, "policy": "static"}`, `unknown policy "static"`},
		{"unknown option", `{"topology": ` + topo + `, "options": ["spread"]}`, `unknown option "spread"`},
		{"conflicting options", `{"topology": ` + topo + `, "options": ["full-pcpus-only", "distribute-cpus-across-cores"]}`, "can not be used together"},
		{"unknown qos", `{"topology": ` + topo + `, "requests": [{"id": "a", "cpus": 1, "qos": "GOLD"}]}`, `unknown qos "GOLD"`},
		{"fractional LSE", `{"topology": ` + topo + `, "requests": [{"id": "a", "cpus": 1.5, "qos": "LSE"}]}`, "takes whole CPUs"},
		{"available and assigned", `{"topology": ` + topo + `, "available": "1-3", "assigned": []}`, "not both"},
		{"duplicate id", `{"topology": ` + topo + `, "requests": [{"id": "a", "cpus": 1}, {"id": "a", "cpus": 1}]}`, "appears twice"},
		{"overlapping assigned", `{"topology": ` + topo + `, "assigned": [{"id": "a", "cpuset": "1-2"}, {"id": "b", "cpuset": "2"}]}`, "already assigned to a"},
		{"bad reserved", `{"topology": ` + topo + `, "reserved": "3-1"}`, "reversed"},
		{"kubelet with koordinator bind", `{"topology": ` + topo + `, "policy": "kubelet", "requests": [{"id": "a", "cpus": 2, "bind": "FullPCPUs"}]}`, "kubelet policy has no bind"},
		{"no cpus", `{"topology": ` + topo + `, "requests": [{"id": "a"}]}`, "has no cpus"},
		// Issue 8 §3: a node id past what a cpuset can carry panicked.
		{"numa node id above 65535", `{"topology": {"cpus": [{"cpu": 0, "online": true, "allowed": true, "numa": 70000, "l3": -1}]}, "requests": [{"id": "a", "cpus": 1}]}`, "numa node 70000 outside"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := Main([]string{"plan", "-o", "json"}, strings.NewReader(tc.input), &stdout, &stderr)
			if code != 2 {
				t.Fatalf("exit code = %d, want 2 (stderr %q)", code, stderr.String())
			}
			if got := stderr.String(); !strings.Contains(got, tc.wantErr) || strings.Count(got, "\n") != 1 {
				t.Errorf("stderr = %q, want one line containing %q", got, tc.wantErr)
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout = %q, want nothing", stdout.String())
			}
		})
	}
}

func TestPlanTextMarksPlacements(t *testing.T) {
	in := `{"topology": ` + shapeJSON(t, planShape) + `, "reserved": "0,16", "requests": [{"id": "enc-1", "cpus": 2}, {"id": "no", "cpus": 99}]}` // enc-1 packs next to the reserved core
	var stdout, stderr bytes.Buffer
	if code := Main([]string{"plan"}, strings.NewReader(in), &stdout, &stderr); code != 0 {
		t.Fatalf("exit code = %d, stderr %q", code, stderr.String())
	}
	got := stdout.String()
	for _, want := range []string{
		"enc-1        cpus 1,17",
		"no           error: capacity: 99 CPUs requested",
		"legend: A enc-1",
		"l3 0   [0r 16r] [1A 17A] [2. 18.] [3. 19.]",
		"l3 1   [4. 20.] [5. 21.]",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("text output lacks %q:\n%s", want, got)
		}
	}
}

// A NUMA node spanning several sockets is labelled with all of them
// (16em64t: one node, four packages).
func TestPlanTextNodeSpanningSockets(t *testing.T) {
	root := testutil.ExtractTarBz2(t, "16em64t-4s2c2t")
	in := `{"topology": {"sysfs_root": "` + root + `"}, "requests": [{"id": "a", "cpus": 2}]}`
	var stdout, stderr bytes.Buffer
	if code := Main([]string{"plan"}, strings.NewReader(in), &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "numa 0 (sockets 0-3)") {
		t.Errorf("plan text lacks the node's sockets:\n%s", stdout.String())
	}
}
