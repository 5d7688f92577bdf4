package helm

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/corepin/corepin/test/kube/kubetest"
)

// env names what make test-chart hands the tests.
const (
	envBin      = "COREPIN_KUBE_BIN"     // directory with etcd and kube-apiserver
	envRequired = "COREPIN_E2E_REQUIRED" // 1: a missing binary fails instead of skipping
)

// startAPIServer starts etcd and kube-apiserver with RBAC authorization
// (the chart's ClusterRole is what lets the plugin act at all), or skips
// outside make test-chart.
func startAPIServer(t *testing.T) *kubetest.ControlPlane {
	t.Helper()
	bin := os.Getenv(envBin)
	missing := ""
	if bin == "" {
		missing = envBin + " unset"
	}
	for _, b := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(bin, b)); missing == "" && err != nil {
			missing = err.Error()
		}
	}
	if missing != "" {
		if os.Getenv(envRequired) == "1" {
			t.Fatalf("no control plane binaries (%s): make test-chart builds them", missing)
		}
		t.Skipf("run through make test-chart (%s)", missing)
	}
	// A short directory: etcd's unix sockets must stay under 108 bytes.
	dir, err := os.MkdirTemp("", "corepin-chart-")
	if err != nil {
		t.Fatal(err)
	}
	ps := &kubetest.Procs{T: t}
	t.Cleanup(func() {
		ps.Stop()
		os.RemoveAll(dir)
	})
	cp := kubetest.StartControlPlane(t, ps, bin, dir, "--authorization-mode=RBAC")
	t.Logf("kube-apiserver ready %.1f s after etcd started", cp.Ready.Seconds())
	return cp
}

// warnings collects the API server's warnings (deprecated APIs, fields
// it drops).
type warnings struct {
	mu   sync.Mutex
	list []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.list
	w.list = nil
	return out
}

// applier creates rendered objects through the API server, as a client
// of cfg, finding each kind's resource by discovery.
type applier struct {
	dyn    dynamic.Interface
	mapper meta.RESTMapper
}

func newApplier(t *testing.T, cfg *rest.Config) *applier {
	t.Helper()
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &applier{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}
}

func (a *applier) create(ctx context.Context, o *unstructured.Unstructured, opts metav1.CreateOptions) error {
	gvk := o.GroupVersionKind()
	m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return fmt.Errorf("finding the resource of %s: %w", gvk, err)
	}
	var ri dynamic.ResourceInterface = a.dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		ri = a.dyn.Resource(m.Resource).Namespace(o.GetNamespace())
	}
	_, err = ri.Create(ctx, o, opts)
	return err
}

func createNamespace(ctx context.Context, t *testing.T, cs kubernetes.Interface, name string) {
	t.Helper()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestOnTheAPIServer runs the rendered chart through a real
// kube-apiserver: every combination's objects pass a server-side dry run
// with strict field validation, and the shipped policy holds each node's
// plugin to its own node.
func TestOnTheAPIServer(t *testing.T) {
	combos := rendered(t) // before the control plane: a render failure needs none
	cp := startAPIServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	createNamespace(ctx, t, cp.Client, namespace)

	t.Run("server-side dry run of every combination", func(t *testing.T) {
		w := &warnings{}
		cfg := rest.CopyConfig(cp.Config)
		cfg.WarningHandler = w
		a := newApplier(t, cfg)
		n := 0
		for _, c := range combos {
			for _, o := range c.objects {
				err := a.create(ctx, o, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: metav1.FieldValidationStrict})
				if err != nil {
					t.Errorf("--set %s: %s %s refused: %v", c.name, o.GetKind(), o.GetName(), err)
				}
				for _, w := range w.take() {
					t.Errorf("--set %s: %s %s: the API server warns: %s", c.name, o.GetKind(), o.GetName(), w)
				}
				n++
			}
		}
		t.Logf("%d distinct renderings of %d combinations, %d objects, each accepted by a server-side dry run (strict field validation)",
			len(combos), len(combinations()), n)
	})

	t.Run("each node's plugin changes only its own node", func(t *testing.T) {
		ownNode(ctx, t, cp)
	})
}

// The policy test's nodes and what the plugin may write on them.
const (
	nodeA = "node-a"
	nodeB = "node-b"
	// policyName is the shipped ValidatingAdmissionPolicy's; its denials
	// name it, RBAC's do not.
	policyName = "corepin-nri-own-node"
)

var nrtResource = schema.GroupVersionResource{Group: "topology.node.k8s.io", Version: "v1alpha2", Resource: "noderesourcetopologies"}

// ownNode installs the chart as a plugin that publishes NRT objects and
// annotates its node, binds a plugin pod to each of two nodes, and acts
// with node A's pod's token.
func ownNode(ctx context.Context, t *testing.T, cp *kubetest.ControlPlane) {
	dyn, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	kubetest.InstallNRTCRD(ctx, t, dyn, "v1alpha2")
	m, err := template(t, values(t, "nodeResourceTopology.publish=true", "annotateNode=true"))
	if err != nil {
		t.Fatal(err)
	}
	a := newApplier(t, cp.Config)
	var ds appsv1.DaemonSet
	for _, o := range objects(t, m) {
		if err := a.create(ctx, o, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict}); err != nil {
			t.Fatalf("installing %s %s: %v", o.GetKind(), o.GetName(), err)
		}
		if o.GetKind() == "DaemonSet" {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &ds); err != nil {
				t.Fatal(err)
			}
		}
	}
	if ds.Name == "" {
		t.Fatal("the chart rendered no DaemonSet")
	}

	for _, name := range []string{nodeA, nodeB} {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels:      map[string]string{corev1.LabelHostname: name},
			Annotations: map[string]string{"example.com/owner": "ops", "corepin.io/allocator": "{}"}}}
		if _, err := cp.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Node B's NRT, as node B's plugin published it.
	if _, err := dyn.Resource(nrtResource).Create(ctx, nrtObject(nodeB, 4), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	tokenA := podToken(ctx, t, cp, &ds, nodeA)
	podToken(ctx, t, cp, &ds, nodeB) // node B's plugin is there too
	asA := clients(t, cp, tokenA)
	tr, err := cp.Client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, "corepin-nri", &authnv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	unbound := clients(t, cp, tr.Status.Token)
	waitPolicyEnforced(ctx, t, unbound, nodeA)

	type attempt struct {
		name string
		do   func() error
		want string // in the policy's message; "" for allowed
	}
	annotate := func(node, key string, value any) func() error {
		return asA.mergePatchNode(ctx, node, map[string]any{"metadata": map[string]any{"annotations": map[string]any{key: value}}})
	}
	for _, tc := range []attempt{
		{name: "patch node B's corepin annotation", do: annotate(nodeB, "corepin.io/numa-free", "[4]"), want: "may change only its own Node, not node-b"},
		{name: "add a label to its own node", do: asA.mergePatchNode(ctx, nodeA, map[string]any{"metadata": map[string]any{"labels": map[string]any{"corepin.io/pinned": "true"}}}),
			want: "may not change a Node's labels"},
		{name: "change a label of its own node", do: asA.mergePatchNode(ctx, nodeA, map[string]any{"metadata": map[string]any{"labels": map[string]any{corev1.LabelHostname: "elsewhere"}}}),
			want: "may not change a Node's labels"},
		{name: "taint its own node", do: asA.mergePatchNode(ctx, nodeA, map[string]any{"spec": map[string]any{"taints": []any{map[string]any{"key": "corepin.io/busy", "effect": "NoSchedule"}}}}),
			want: "may not change a Node's spec"},
		{name: "cordon its own node", do: asA.mergePatchNode(ctx, nodeA, map[string]any{"spec": map[string]any{"unschedulable": true}}),
			want: "may not change a Node's spec"},
		{name: "add another's annotation to its own node", do: annotate(nodeA, "example.com/role", "db"), want: "may change only the corepin.io/ annotations"},
		{name: "change another's annotation on its own node", do: annotate(nodeA, "example.com/owner", "me"), want: "may change only the corepin.io/ annotations"},
		{name: "remove another's annotation from its own node", do: annotate(nodeA, "example.com/owner", nil), want: "may change only the corepin.io/ annotations"},
		// Issue 27 §3.6: a merge patch of managedFields takes another
		// manager's fields (the admin's entry is replaced by one of its own).
		{name: "take another manager's fields through managedFields", do: asA.mergePatchNode(ctx, nodeA, map[string]any{"metadata": map[string]any{
			"managedFields": []any{map[string]any{"manager": "corepin", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1",
				"fieldsV1": map[string]any{"f:metadata": map[string]any{"f:annotations": map[string]any{"f:example.com/owner": map[string]any{}},
					"f:labels": map[string]any{"f:" + corev1.LabelHostname: map[string]any{}}}}}}}}),
			want: "may not change a Node's managedFields beyond its own corepin.io/ annotations"},
		{name: "create node B's NRT", do: asA.createNRT(ctx, nodeB), want: "may write only its own node's NodeResourceTopology, not node-b"},
		{name: "patch node B's NRT", do: asA.mergePatchNRT(ctx, nodeB), want: "may write only its own node's NodeResourceTopology, not node-b"},
		// What the plugin does (--annotate-node, --publish-nrt).
		{name: "its own node's corepin annotations", do: annotate(nodeA, "corepin.io/numa-free", "[4,0]")},
		{name: "remove its own node's corepin annotation", do: annotate(nodeA, "corepin.io/allocator", nil)},
		{name: "create its own node's NRT", do: asA.createNRT(ctx, nodeA)},
		{name: "patch its own node's NRT", do: asA.mergePatchNRT(ctx, nodeA)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.do()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want == "":
			case err == nil:
				t.Fatalf("allowed, want refused by %s (%s)", policyName, tc.want)
			case !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+policyName+"'") || !strings.Contains(err.Error(), tc.want):
				t.Fatalf("refused with %v\nwant a refusal by ValidatingAdmissionPolicy %s saying %q (not RBAC's)", err, policyName, tc.want)
			}
		})
	}

	got, err := cp.Client.CoreV1().Nodes().Get(ctx, nodeA, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"example.com/owner": "ops", "corepin.io/numa-free": "[4,0]"}
	if fmt.Sprint(got.Annotations) != fmt.Sprint(want) || got.Labels[corev1.LabelHostname] != nodeA || len(got.Spec.Taints) != 0 || got.Spec.Unschedulable {
		t.Errorf("node A after the attempts: annotations %v labels %v taints %v unschedulable %v; want annotations %v and the rest as created",
			got.Annotations, got.Labels, got.Spec.Taints, got.Spec.Unschedulable, want)
	}
	if b, err := cp.Client.CoreV1().Nodes().Get(ctx, nodeB, metav1.GetOptions{}); err != nil || b.Annotations["corepin.io/numa-free"] != "" {
		t.Errorf("node B after the attempts: %v %v", b.Annotations, err)
	}

	t.Run("a token bound to no pod changes nothing", func(t *testing.T) {
		err := unbound.mergePatchNode(ctx, nodeA, map[string]any{"metadata": map[string]any{"annotations": map[string]any{"corepin.io/numa-free": "[1]"}}})()
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "the request's token names no node") {
			t.Fatalf("patching node A's corepin annotation with an unbound token: %v, want the policy's refusal", err)
		}
	})
	t.Run("the plugin's own publisher writes its node's NRT and annotations, not node B's", func(t *testing.T) {
		pluginPublishes(ctx, t, cp, dyn, tokenA)
	})
}

// waitPolicyEnforced waits until the API server enforces the policy (it
// reaches the admission plugin through an informer): until a dry run of a
// patch of node's corepin annotation with unbound, a token of the
// plugin's service account bound to no pod, is refused for naming no node
// (the policy's first rule; RBAC allows the patch). A dry run passes
// admission and persists nothing.
func waitPolicyEnforced(ctx context.Context, t *testing.T, unbound asToken, node string) {
	t.Helper()
	patch := []byte(`{"metadata":{"annotations":{"corepin.io/numa-free":"[0]"}}}`)
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, last = unbound.cs.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
		return last != nil && strings.Contains(last.Error(), policyName), nil
	})
	if err != nil {
		t.Fatalf("the policy is not enforced after a minute: the last dry run of a patch of %s gave %v", node, last)
	}
}

// podToken creates the plugin's pod on node from the chart's DaemonSet
// and returns a token of the plugin's service account bound to it, as the
// kubelet would project it.
func podToken(ctx context.Context, t *testing.T, cp *kubetest.ControlPlane, ds *appsv1.DaemonSet, node string) string {
	t.Helper()
	pod := &corev1.Pod{ObjectMeta: ds.Spec.Template.ObjectMeta, Spec: ds.Spec.Template.Spec}
	pod.Name, pod.Namespace, pod.Spec.NodeName = ds.Name+"-"+node, ds.Namespace, node
	created, err := cp.Client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating the plugin's pod on %s: %v", node, err)
	}
	exp := int64(3600)
	tr, err := cp.Client.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, pod.Spec.ServiceAccountName, &authnv1.TokenRequest{
		Spec: authnv1.TokenRequestSpec{ExpirationSeconds: &exp, BoundObjectRef: &authnv1.BoundObjectReference{
			Kind: "Pod", APIVersion: "v1", Name: created.Name, UID: created.UID}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("a token of %s bound to pod %s: %v", pod.Spec.ServiceAccountName, created.Name, err)
	}
	return tr.Status.Token
}

// asToken is a client of the API server with a service-account token,
// making the plugin's kinds of request.
type asToken struct {
	cs  kubernetes.Interface
	dyn dynamic.Interface
}

func clients(t *testing.T, cp *kubetest.ControlPlane, token string) asToken {
	t.Helper()
	cfg := &rest.Config{Host: cp.API, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return asToken{cs: cs, dyn: dyn}
}

// mergePatchNode is the plugin's kind of node write (--annotate-node: a
// JSON merge patch).
func (a asToken) mergePatchNode(ctx context.Context, node string, patch map[string]any) func() error {
	return func() error {
		b, err := jsonOf(patch)
		if err != nil {
			return err
		}
		_, err = a.cs.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, b, metav1.PatchOptions{})
		return err
	}
}

// createNRT creates node's NodeResourceTopology (--publish-nrt's first
// publication).
func (a asToken) createNRT(ctx context.Context, node string) func() error {
	return func() error {
		_, err := a.dyn.Resource(nrtResource).Create(ctx, nrtObject(node, 2), metav1.CreateOptions{})
		return err
	}
}

// mergePatchNRT is --publish-nrt's later publications: a merge patch of
// the zones.
func (a asToken) mergePatchNRT(ctx context.Context, node string) func() error {
	return func() error {
		b, err := jsonOf(map[string]any{"zones": nrtObject(node, 1).Object["zones"]})
		if err != nil {
			return err
		}
		_, err = a.dyn.Resource(nrtResource).Patch(ctx, node, types.MergePatchType, b, metav1.PatchOptions{})
		return err
	}
}

// nrtObject is node's NodeResourceTopology with free CPUs on its one NUMA
// node, in the shape corepin nri --publish-nrt writes.
func nrtObject(node string, free int) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": nrtResource.GroupVersion().String(), "kind": "NodeResourceTopology",
		"metadata":         map[string]any{"name": node},
		"topologyPolicies": []any{"None"},
		"zones": []any{map[string]any{"name": "node-0", "type": "Node", "resources": []any{
			map[string]any{"name": "cpu", "capacity": "8", "allocatable": "8", "available": fmt.Sprint(free)}}}},
	}}
}

func jsonOf(v map[string]any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding a patch: %w", err)
	}
	return b, nil
}
