package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/internal/testutil"
	"github.com/corepin/corepin/topology"
)

// shapeJSON renders a synthetic machine in the topology form plan accepts.
func shapeJSON(t testing.TB, s topology.Shape) string {
	t.Helper()
	topo := topology.MustSynthetic(s)
	b, err := json.Marshal(map[string]any{"cpus": topo.CPUs(), "numa_distances": topo.Distances()})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// 2 sockets x 1 node x 2 L3 x 4 cores x 2 threads: CPU c and c+16 are siblings.
var planShape = topology.Shape{Sockets: 2, NodesPerSocket: 1, L3PerNode: 2, CoresPerL3: 4, ThreadsPerCore: 2}

func noLive() (*topology.Topology, error) {
	return nil, errors.New("live discovery not expected in this test")
}

func TestPlanResults(t *testing.T) {
	topo := shapeJSON(t, planShape)
	tests := []struct {
		name  string
		input string
		want  []planResult
	}{
		{
			name:  "corepin fits a 4-cpu request into the partly used L3, on whole cores",
			input: `{"topology": ` + topo + `, "reserved": "0,16", "requests": [{"id": "enc-1", "cpus": 4, "qos": "LSE"}]}`,
			want: []planResult{{ID: "enc-1", CPUSet: ptr("1-2,17-18"), NUMANodes: ptr("0"),
				Quality: &alloc.Quality{NUMANodes: 1, Sockets: 1, L3Groups: 1, FreeCores: 13, FreeL3Groups: 3, FreeNUMANodes: 1}}},
		},
		{
			name:  "kubelet packs into the partly used L3 and takes cores 1 and 2",
			input: `{"topology": ` + topo + `, "policy": "kubelet", "reserved": "0,16", "requests": [{"id": "pod", "cpus": 4}]}`,
			want: []planResult{{ID: "pod", CPUSet: ptr("1-2,17-18"), NUMANodes: ptr("0"),
				Quality: &alloc.Quality{NUMANodes: 1, Sockets: 1, L3Groups: 1, FreeCores: 13, FreeL3Groups: 3, FreeNUMANodes: 1}}},
		},
		{
			name:  "single-numa-node rejection names the numbers",
			input: `{"topology": ` + topo + `, "available": "1-10,17-26", "requests": [{"id": "big", "cpus": 15, "topology_policy": "single-numa-node"}]}`,
			want:  []planResult{{ID: "big", Error: "single-numa-node: 15 CPUs needed on one NUMA node; the most free on any node is 14 (node 0)"}},
		},
		{
			name:  "FullPCPUs refuses an odd count",
			input: `{"topology": ` + topo + `, "requests": [{"id": "odd", "cpus": 3, "bind": "FullPCPUs"}]}`,
			want:  []planResult{{ID: "odd", Error: "FullPCPUs: 3 CPUs is not a whole number of cores (2 threads per core); request a multiple of 2"}},
		},
		{
			name: "assigned LSE cpus are avoided and LS gets the rest of the pool",
			input: `{"topology": ` + topo + `, "assigned": [{"id": "x", "cpuset": "0-3,16-19", "qos": "LSE"}],
			        "requests": [{"id": "ls", "cpus": 1.5}]}`,
			want: []planResult{{ID: "ls", CPUSet: ptr("4-15,20-31"), NUMANodes: ptr("0-1"),
				Quality: &alloc.Quality{NUMANodes: 2, Sockets: 2, L3Groups: 3, FreeCores: 12, FreeL3Groups: 3, FreeNUMANodes: 1}}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, _, err := runPlan([]byte(tc.input), noLive)
			if err != nil {
				t.Fatalf("runPlan: %v", err)
			}
			if diff := cmp.Diff(tc.want, out.Results); diff != "" {
				t.Errorf("results (-want +got):\n%s", diff)
			}
		})
	}
}

func ptr(s string) *string { return &s }

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

func FuzzPlan(f *testing.F) {
	topo := shapeJSON(f, topology.Shape{Sockets: 1, NodesPerSocket: 2, L3PerNode: 1, CoresPerL3: 2, ThreadsPerCore: 2})
	for _, s := range []string{
		`{"topology": ` + topo + `, "requests": [{"id": "a", "cpus": 2}]}`,
		`{"topology": ` + topo + `, "policy": "kubelet", "options": ["full-pcpus-only"], "reserved": "0", "requests": [{"id": "a", "cpus": 2, "topology_policy": "restricted"}]}`,
		`{"topology": ` + topo + `, "available": "1-5", "requests": [{"id": "a", "cpus": 0.5, "qos": "LS"}, {"id": "b", "cpus": 3, "bind": "SpreadByPCPUs", "exclusive": "PCPULevel"}]}`,
		`{"topology": ` + topo + `, "assigned": [{"id": "x", "cpuset": "2,6", "qos": "LSR"}], "requests": [{"id": "be", "cpus": 1, "qos": "BE"}]}`,
		`{"topology": {"cpus": [{"cpu": 0, "online": true, "allowed": true, "numa": 0, "l3": -1}]}, "requests": [{"id": "a", "cpus": 1, "numa": "DistributeEvenly"}]}`,
		`{"topology": ` + topo + `, "policy": "kubelet", "options": ["distribute-cpus-across-numa"], "requests": [{"id": "a", "cpus": 6}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		out, _, err := runPlan(data, noLive)
		if err != nil {
			var ue *UsageError
			if !errors.As(err, &ue) && !strings.Contains(err.Error(), "live discovery not expected") {
				t.Fatalf("runPlan error %v is not a usage error", err)
			}
			return
		}
		if _, err := json.Marshal(out); err != nil {
			t.Fatalf("output does not marshal: %v", err)
		}
		// Same input, same output.
		again, _, err := runPlan(data, noLive)
		if err != nil || !cmp.Equal(out, again) {
			t.Fatalf("second run differs: %v", err)
		}
	})
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
