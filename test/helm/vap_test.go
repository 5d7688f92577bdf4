package helm

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// perCallLimit is the API server's runtime cost limit of one CEL
// expression (k8s.io/apiserver/pkg/apis/cel: PerCallLimit).
const perCallLimit = 1000000

// ownNodePolicy is the rendered corepin-nri-own-node policy's variables
// and validations, compiled with cel-go as the API server's admission
// evaluates them: object, oldObject and request as dynamic maps (it hands
// them over as runtime.DefaultUnstructuredConverter makes them), optional
// syntax on, each expression within the per-call cost limit.
type ownNodePolicy struct {
	vars  []namedProgram
	rules []namedProgram
}

type namedProgram struct {
	name, message string
	prg           cel.Program
}

func compileOwnNodePolicy(t *testing.T) ownNodePolicy {
	t.Helper()
	m, err := template(t, values(t))
	if err != nil {
		t.Fatal(err)
	}
	var vap *unstructured.Unstructured
	for _, o := range objects(t, m) {
		if o.GetKind() == "ValidatingAdmissionPolicy" && o.GetName() == policyName {
			vap = o
		}
	}
	if vap == nil {
		t.Fatalf("the chart's defaults render no ValidatingAdmissionPolicy %s", policyName)
	}
	env, err := cel.NewEnv(cel.OptionalTypes(),
		cel.Variable("object", cel.DynType), cel.Variable("oldObject", cel.DynType), cel.Variable("request", cel.DynType),
		cel.Variable("variables", cel.MapType(cel.StringType, cel.DynType)))
	if err != nil {
		t.Fatal(err)
	}
	compile := func(name, expr, message string) namedProgram {
		ast, iss := env.Compile(expr)
		if iss.Err() != nil {
			t.Fatalf("compiling %s: %v\n%s", name, iss.Err(), expr)
		}
		prg, err := env.Program(ast, cel.CostLimit(perCallLimit), cel.EvalOptions(cel.OptTrackCost))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return namedProgram{name: name, message: message, prg: prg}
	}
	var p ownNodePolicy
	vars, _, _ := unstructured.NestedSlice(vap.Object, "spec", "variables")
	for _, v := range vars {
		v := v.(map[string]any)
		p.vars = append(p.vars, compile(v["name"].(string), v["expression"].(string), ""))
	}
	rules, _, _ := unstructured.NestedSlice(vap.Object, "spec", "validations")
	for i, r := range rules {
		r := r.(map[string]any)
		msg, _ := r["message"].(string)
		if msg == "" {
			msg, _ = r["messageExpression"].(string)
		}
		p.rules = append(p.rules, compile(fmt.Sprintf("validation %d", i), r["expression"].(string), msg))
	}
	return p
}

// deny evaluates the policy on an update of oldNode to newNode by node's
// plugin: the messages of the validations that deny it, in order.
func (p ownNodePolicy) deny(t *testing.T, node string, oldNode, newNode *corev1.Node) []string {
	t.Helper()
	in := map[string]any{
		"object": unstructuredOf(t, newNode), "oldObject": unstructuredOf(t, oldNode),
		"request": map[string]any{
			"name":     newNode.Name,
			"resource": map[string]any{"group": "", "version": "v1", "resource": "nodes"},
			"userInfo": map[string]any{"username": "system:serviceaccount:" + namespace + ":corepin-nri",
				"extra": map[string]any{"authentication.kubernetes.io/node-name": []any{node}}},
		},
	}
	vars := map[string]any{}
	in["variables"] = vars
	for _, v := range p.vars {
		out, _, err := v.prg.Eval(in)
		if err != nil {
			t.Fatalf("variable %s: %v", v.name, err)
		}
		vars[v.name] = out.Value()
	}
	var denied []string
	for _, r := range p.rules {
		out, det, err := r.prg.Eval(in)
		if err != nil {
			t.Fatalf("%s (%s): %v", r.name, r.message, err)
		}
		if c := det.ActualCost(); c == nil || *c > perCallLimit/10 {
			t.Errorf("%s costs %v, near the API server's limit of %d", r.name, c, perCallLimit)
		}
		if out.Value() != true {
			denied = append(denied, r.message)
		}
	}
	return denied
}

// unstructuredOf is n as the API server hands it to CEL.
func unstructuredOf(t *testing.T, n *corev1.Node) map[string]any {
	t.Helper()
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(n)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// entry is a managedFields entry of manager at time owning fields (the
// API server's fieldsV1 JSON).
func entry(t *testing.T, manager, at string, fields map[string]any) metav1.ManagedFieldsEntry {
	t.Helper()
	raw, err := json.Marshal(fields)
	if err != nil {
		t.Fatal(err)
	}
	tm, err := timeAt(at)
	if err != nil {
		t.Fatal(err)
	}
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
		Time: &tm, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: raw}}
}

func timeAt(s string) (metav1.Time, error) {
	var tm metav1.Time
	err := tm.UnmarshalQueryParameter(s)
	return tm, err
}

// annotations is a fieldsV1 owning the annotation keys given.
func annotations(keys ...string) map[string]any {
	a := map[string]any{".": map[string]any{}}
	for _, k := range keys {
		a["f:"+k] = map[string]any{}
	}
	return map[string]any{"f:metadata": map[string]any{"f:annotations": a}}
}

// TestOwnNodePolicyKeepsManagedFields (issue 27 §3.6): the policy left
// metadata.managedFields open to the plugin's merge patch, so node A's
// plugin could take another manager's field ownership (rewrite, drop or
// add entries). Updates that change managedFields beyond the plugin's own
// corepin.io/ annotations are denied; what the API server itself writes
// for the plugin's annotation patches (its own entry, a corepin.io/
// annotation taken from another manager) is allowed.
func TestOwnNodePolicyKeepsManagedFields(t *testing.T) {
	p := compileOwnNodePolicy(t)
	admin := func(at string, extra ...string) metav1.ManagedFieldsEntry {
		f := annotations(append([]string{"example.com/owner"}, extra...)...)
		f["f:metadata"].(map[string]any)["f:labels"] = map[string]any{".": map[string]any{}, "f:" + corev1.LabelHostname: map[string]any{}}
		return entry(t, "kubectl-create", at, f)
	}
	kubelet := func(at string) metav1.ManagedFieldsEntry {
		status := map[string]any{"f:conditions": map[string]any{}, "f:images": map[string]any{}, "f:nodeInfo": map[string]any{}}
		for i := range 40 {
			status["f:conditions"].(map[string]any)[fmt.Sprintf(`k:{"type":"Cond%d"}`, i)] = map[string]any{
				".": map[string]any{}, "f:lastHeartbeatTime": map[string]any{}, "f:status": map[string]any{}, "f:type": map[string]any{}}
		}
		e := entry(t, "kubelet", at, map[string]any{"f:status": status})
		e.Subresource = "status"
		return e
	}
	node := func(ann map[string]string, mf ...metav1.ManagedFieldsEntry) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeA, Labels: map[string]string{corev1.LabelHostname: nodeA},
			Annotations: ann, ManagedFields: mf}}
	}
	const t0, t1, t2 = "2026-11-28T04:00:00Z", "2026-11-28T04:10:00Z", "2026-11-28T04:20:00Z"
	before := node(map[string]string{"example.com/owner": "ops", "corepin.io/allocator": "{}", "corepin.io/numa-free": "[1]"},
		admin(t0, "corepin.io/allocator"), kubelet(t0), entry(t, "corepin", t1, annotations("corepin.io/numa-free")))
	u := unstructuredOf(t, before)
	if _, ok := u["metadata"].(map[string]any)["managedFields"].([]any)[0].(map[string]any)["fieldsV1"].(map[string]any)["f:metadata"]; !ok {
		t.Fatalf("fieldsV1 does not reach CEL as a map: %v", u["metadata"])
	}
	managedDenial := "corepin-nri may not change a Node's managedFields beyond its own corepin.io/ annotations"
	for _, tc := range []struct {
		name        string
		from, after *corev1.Node // from: before when nil
		want        string       // in the one denial; "" for allowed
	}{
		// What the API server writes for the plugin's patches.
		{name: "its own annotation, its own entry's time", after: node(map[string]string{"example.com/owner": "ops", "corepin.io/allocator": "{}", "corepin.io/numa-free": "[2]"},
			admin(t0, "corepin.io/allocator"), kubelet(t0), entry(t, "corepin", t2, annotations("corepin.io/numa-free")))},
		{name: "a new annotation of its own", after: node(map[string]string{"example.com/owner": "ops", "corepin.io/allocator": "{}", "corepin.io/numa-free": "[1]", "corepin.io/x": "1"},
			admin(t0, "corepin.io/allocator"), kubelet(t0), entry(t, "corepin", t2, annotations("corepin.io/numa-free", "corepin.io/x")))},
		{name: "removing a corepin.io/ annotation another manager set", after: node(map[string]string{"example.com/owner": "ops", "corepin.io/numa-free": "[1]"},
			admin(t0), kubelet(t0), entry(t, "corepin", t1, annotations("corepin.io/numa-free")))},
		{name: "taking a corepin.io/ annotation another manager set", after: node(map[string]string{"example.com/owner": "ops", "corepin.io/allocator": "[]", "corepin.io/numa-free": "[1]"},
			admin(t0), kubelet(t0), entry(t, "corepin", t2, annotations("corepin.io/numa-free", "corepin.io/allocator")))},
		{name: "its first write", from: node(map[string]string{"example.com/owner": "ops"}, admin(t0), kubelet(t0)),
			after: node(map[string]string{"example.com/owner": "ops", "corepin.io/numa-free": "[1]"}, admin(t0), kubelet(t0), entry(t, "corepin", t2, annotations("corepin.io/numa-free")))},
		// Issue 27 §3.6: a merge patch of metadata.managedFields.
		{name: "taking over another manager's fields", after: node(before.Annotations,
			kubelet(t0), entry(t, "corepin", t2, annotations("corepin.io/numa-free", "corepin.io/allocator", "example.com/owner"))), want: managedDenial},
		{name: "dropping another manager's entry", after: node(before.Annotations,
			kubelet(t0), entry(t, "corepin", t1, annotations("corepin.io/numa-free"))), want: managedDenial},
		{name: "narrowing another manager's entry", after: node(before.Annotations,
			entry(t, "kubectl-create", t0, annotations("example.com/owner", "corepin.io/allocator")), kubelet(t0), entry(t, "corepin", t1, annotations("corepin.io/numa-free"))), want: managedDenial},
		{name: "dropping another manager's annotation", after: node(before.Annotations,
			func() metav1.ManagedFieldsEntry {
				f := annotations("corepin.io/allocator")
				f["f:metadata"].(map[string]any)["f:labels"] = map[string]any{".": map[string]any{}, "f:" + corev1.LabelHostname: map[string]any{}}
				return entry(t, "kubectl-create", t0, f)
			}(), kubelet(t0), entry(t, "corepin", t1, annotations("corepin.io/numa-free"))), want: managedDenial},
		{name: "renaming another manager", after: node(before.Annotations,
			admin(t0, "corepin.io/allocator"), func() metav1.ManagedFieldsEntry { e := kubelet(t0); e.Manager = "corepin"; return e }(),
			entry(t, "corepin", t1, annotations("corepin.io/numa-free"))), want: managedDenial},
		// A manager's time is when it last wrote: no ownership.
		{name: "another manager's time", after: node(before.Annotations,
			admin(t2, "corepin.io/allocator"), kubelet(t0), entry(t, "corepin", t1, annotations("corepin.io/numa-free")))},
		// The plugin's manager shared with another writer (both the same
		// binary): one entry grows by a corepin.io/ annotation.
		{name: "a manager shared with the plugin", after: node(map[string]string{"example.com/owner": "ops", "corepin.io/allocator": "{}", "corepin.io/numa-free": "[1]", "corepin.io/x": "1"},
			admin(t2, "corepin.io/allocator", "corepin.io/x"), kubelet(t0), entry(t, "corepin", t1, annotations("corepin.io/numa-free")))},
		{name: "a shared manager's entry growing beyond corepin.io/", after: node(before.Annotations,
			admin(t2, "corepin.io/allocator", "example.com/role"), kubelet(t0), entry(t, "corepin", t1, annotations("corepin.io/numa-free"))), want: managedDenial},
		{name: "claiming the spec", after: node(before.Annotations,
			admin(t0, "corepin.io/allocator"), kubelet(t0), entry(t, "corepin", t2, map[string]any{"f:spec": map[string]any{"f:taints": map[string]any{}}})), want: managedDenial},
		{name: "emptying managedFields", after: node(before.Annotations), want: managedDenial},
	} {
		t.Run(tc.name, func(t *testing.T) {
			from := tc.from
			if from == nil {
				from = before
			}
			got := p.deny(t, nodeA, from, tc.after)
			switch {
			case tc.want == "" && len(got) > 0:
				t.Fatalf("denied: %q", got)
			case tc.want != "" && (len(got) != 1 || !strings.Contains(got[0], tc.want)):
				t.Fatalf("denials %q, want only %q", got, tc.want)
			}
		})
	}
}
