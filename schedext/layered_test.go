package schedext_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corepin/corepin/enforce"
	"github.com/corepin/corepin/kube/nri"
	"github.com/corepin/corepin/nodecore"
	"github.com/corepin/corepin/schedext"
)

// TestLayeredConfigJSON checks the document scx_layered reads: the
// externally tagged enum forms of its serde types ({"Open": {...}},
// {"CgroupPrefix": "..."}), each class's preempt and weight, and a last
// layer matching everything.
func TestLayeredConfigJSON(t *testing.T) {
	data, err := schedext.MarshalLayered(schedext.LayeredConfig())
	if err != nil {
		t.Fatal(err)
	}
	var got []map[string]any
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatalf("unmarshal: %v\n%s", err, data)
	}
	want := []map[string]any{
		{
			"name":    "be",
			"comment": "corepin BE: best-effort runs and pods under the idle parent; never preempts",
			"matches": []any{[]any{map[string]any{"CgroupPrefix": "corepin-be/"}}, []any{map[string]any{"CgroupContains": "kubepods/corepin-be/"}}},
			"kind":    map[string]any{"Open": map[string]any{"preempt": false, "weight": 1.0}},
		},
		{
			"name":    "ls",
			"comment": "corepin LSE, LSR and LS runs: preempts the other layers",
			"matches": []any{[]any{map[string]any{"CgroupPrefix": "corepin/"}}},
			"kind":    map[string]any{"Open": map[string]any{"preempt": true, "weight": 1000.0}},
		},
		{
			"name":    "normal",
			"comment": "everything else",
			"matches": []any{[]any{}},
			"kind":    map[string]any{"Open": map[string]any{"preempt": false}},
		},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("LayeredConfig JSON (-want +got):\n%s\n%s", d, data)
	}
}

// TestLayeredConfigNamesCorepinGroups ties the layers' cgroup names to the
// groups corepin really makes: a renamed root must move its layer too.
func TestLayeredConfigNamesCorepinGroups(t *testing.T) {
	for _, tc := range []struct{ name, got, want string }{
		{"run root", schedext.RunRoot, enforce.DefaultRoot},
		{"BE run root", schedext.BERunRoot, nodecore.BERunRoot},
		{"pod idle parent", schedext.PodIdleParent, "kubepods/" + nri.IdleGroup},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("schedext %s = %q, want %q", tc.name, tc.got, tc.want)
			}
		})
	}
}

// TestLayerOf places the groups corepin and the kubelet make: BE runs and
// BE pods in "be", corepin's other runs in "ls", everything else in
// "normal", and a group that merely starts with "corepin" is no run.
func TestLayerOf(t *testing.T) {
	layers := schedext.LayeredConfig()
	for _, tc := range []struct{ name, path, want string }{
		{"LS run", "/corepin/job-3", schedext.LayerLS},
		{"run root itself", "/corepin", schedext.LayerLS},
		{"LSE run, scx_layered's form", "corepin/enc-1/", schedext.LayerLS},
		{"BE run", "/corepin-be/batch-0", schedext.LayerBE},
		{"BE pod", "/kubepods/corepin-be/pod1234/abcd", schedext.LayerBE},
		{"BE pod under a cgroup root", "/node/kubepods/corepin-be/pod1/c", schedext.LayerBE},
		{"burstable pod", "/kubepods/burstable/pod99/c", schedext.LayerNormal},
		{"agent workload", "/corepin-agent/ls1", schedext.LayerNormal},
		{"look-alike group", "/corepinned/x", schedext.LayerNormal},
		{"system", "/system.slice/sshd.service", schedext.LayerNormal},
		{"cgroup root", "/", schedext.LayerNormal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := schedext.LayerOf(layers, tc.path); got != tc.want {
				t.Errorf("LayerOf(%q) = %q, want %q", tc.path, got, tc.want)
			}
		})
	}
}

// TestMarshalLayeredRefuses: what scx_layered would refuse at its start
// is refused here first, with the reason.
func TestMarshalLayeredRefuses(t *testing.T) {
	open := schedext.Kind{Open: &schedext.Open{}}
	all := schedext.Layer{Name: "all", Matches: [][]schedext.Match{{}}, Kind: open}
	for _, tc := range []struct {
		name   string
		layers []schedext.Layer
		want   string
	}{
		{"no layer", nil, "no layer"},
		{"no name", []schedext.Layer{{Matches: [][]schedext.Match{{}}, Kind: open}}, "has no name"},
		{"no kind", []schedext.Layer{{Name: "x", Matches: [][]schedext.Match{{}}}}, "has no kind"},
		{"last matches a group", []schedext.Layer{{Name: "x", Matches: [][]schedext.Match{{{CgroupPrefix: "a/"}}}, Kind: open}}, "must match everything"},
		{"catch-all first", []schedext.Layer{all, all}, "empty group of matches"},
		{"no matches first", []schedext.Layer{{Name: "x", Kind: open}, all}, "has no matches"},
		{"empty match", []schedext.Layer{{Name: "x", Matches: [][]schedext.Match{{{}}}, Kind: open}, all}, "no condition"},
		{"two conditions", []schedext.Layer{{Name: "x", Matches: [][]schedext.Match{{{CgroupPrefix: "a/", CgroupContains: "b/"}}}, Kind: open}, all}, "two conditions"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := schedext.MarshalLayered(tc.layers)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("MarshalLayered() error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}
