package helm

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/corepin/corepin/kube/manifests"
	"github.com/corepin/corepin/test/helm/helmrender"
)

const (
	chartDir = "../../deploy/helm/corepin"
	// namespace is the release's: not kube-system, so that a template
	// naming a namespace where it should take the release's shows.
	namespace = "corepin"
	// kubeVersion is the API server's the tests run against.
	kubeVersion = "v1.36.3"
)

// switches are the chart's documented switches (values.yaml and the
// README), each as Helm --set arguments: the default first, then the
// other setting. Every combination is linted, rendered and dry-run, but
// a switch that changes nothing given the settings before it (when, if
// set, is false) is taken at its default only: the scheduler's switches
// without the scheduler, the extender's in mode plugin, annotateNode
// with the scheduler (which implies it).
var switches = []struct {
	settings []string
	when     func(before []string) bool
}{
	{settings: []string{"scheduler.enabled=false", "scheduler.enabled=true"}},
	{settings: []string{"scheduler.mode=plugin", "scheduler.mode=extender"}, when: with("scheduler.enabled=true")},
	{settings: []string{"scheduler.nrt=false", "scheduler.nrt=true"}, when: with("scheduler.mode=extender")},
	{settings: []string{"scheduler.trackPods=true", "scheduler.trackPods=false"}, when: with("scheduler.mode=extender")},
	{settings: []string{"nodeResourceTopology.publish=false", "nodeResourceTopology.publish=true"}},
	{settings: []string{"annotateNode=false", "annotateNode=true"}, when: with("scheduler.enabled=false")},
	// The migration from the kubelet's static policy, as the README
	// describes it.
	{settings: []string{"policy=corepin", "policy=kubelet,policyOptions={full-pcpus-only,strict-cpu-reservation},topologyPolicy=single-numa-node,reservedCPUs=0-1"}},
	{settings: []string{"rbac.create=true", "rbac.create=false"}},
	{settings: []string{"rbac.ownNodeOnly=true", "rbac.ownNodeOnly=false"}},
	// The privileged helpers beside the plugin: irq-sync (issue 31 §2)
	// and scx_layered (issue 30 §2), each off by default. One switch for
	// both keeps the count of dry runs at twice, not four times, today's.
	{settings: []string{"irqIsolate=off,schedExt.enabled=false", "irqIsolate=pod,schedExt.enabled=true,schedExt.image=registry.example.com/scx:1.1.4"}},
	// A cluster without kube-proxy, as make e2e-deploy's node is.
	{settings: []string{"hostNetwork=false,apiServer.host=", "hostNetwork=true,apiServer.host=10.0.0.1,apiServer.port=6443"}},
}

// with is a switch's when: the setting s is among those before it.
func with(s string) func([]string) bool {
	return func(before []string) bool { return slices.Contains(before, s) }
}

// combination is one setting of every switch.
type combination struct {
	name string // the --set arguments, joined by spaces
	sets []string
}

// combinations are every setting of switches, the defaults first.
func combinations() []combination {
	out := []combination{{}}
	for _, sw := range switches {
		var next []combination
		for _, c := range out {
			settings := sw.settings
			if sw.when != nil && !sw.when(c.sets) {
				settings = settings[:1]
			}
			for _, s := range settings {
				next = append(next, combination{sets: append(slices.Clone(c.sets), s)})
			}
		}
		out = next
	}
	for i := range out {
		out[i].name = strings.Join(out[i].sets, " ")
	}
	return out
}

// values parses sets as helm --set does.
func values(t *testing.T, sets ...string) map[string]any {
	t.Helper()
	vals, err := helmrender.Values(sets...)
	if err != nil {
		t.Fatal(err)
	}
	return vals
}

// template is helm template (client only, as the helm CLI sets it up) of
// the chart with vals over values.yaml: the rendered manifest, or Helm's
// error.
func template(t *testing.T, vals map[string]any) (string, error) {
	t.Helper()
	return templateIn(t, namespace, vals)
}

// templateIn is template for a release in namespace ns.
func templateIn(t *testing.T, ns string, vals map[string]any) (string, error) {
	t.Helper()
	return helmrender.Template(chartDir, ns, kubeVersion, vals)
}

// lint is helm lint --strict: its messages, and whether it passed.
func lint(t *testing.T, vals map[string]any) ([]support.Message, []error) {
	t.Helper()
	kv, err := common.ParseKubeVersion(kubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	l := action.NewLint()
	l.Strict = true
	l.Namespace = namespace
	l.KubeVersion = kv
	res := l.Run([]string{chartDir}, vals)
	return res.Messages, res.Errors
}

// objects splits a manifest into its objects, each decoded strictly
// (a key twice is an error), and checks each names its kind and itself.
func objects(t *testing.T, manifest string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(manifest)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("reading the manifest: %v", err)
		}
		js, err := yaml.YAMLToJSONStrict(doc)
		if err != nil {
			t.Fatalf("a rendered document is not strict YAML: %v\n%s", err, doc)
		}
		if string(bytes.TrimSpace(js)) == "null" {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(js); err != nil {
			t.Fatalf("a rendered document is no Kubernetes object: %v\n%s", err, doc)
		}
		if u.GetName() == "" {
			t.Fatalf("a rendered %s has no name:\n%s", u.GetKind(), doc)
		}
		out = append(out, u)
	}
}

func TestLintIsClean(t *testing.T) {
	for _, c := range combinations() {
		msgs, errs := lint(t, values(t, c.sets...))
		for _, m := range msgs {
			// INFO is advice (Helm's "icon is recommended", as Chart.yaml
			// has no icon); anything above fails --strict.
			if m.Severity > support.InfoSev {
				t.Errorf("helm lint --strict --set %s: %s", c.name, m)
			} else if c.name == combinations()[0].name {
				t.Logf("helm lint, defaults: %s", m)
			}
		}
		for _, err := range errs {
			t.Errorf("helm lint --strict --set %s: %v", c.name, err)
		}
		if t.Failed() {
			t.FailNow() // the other combinations most likely say the same
		}
	}
}

// TestDefaultsAreTheFirstCombination checks that the first setting of
// every switch is values.yaml's own, so that the defaults are among the
// combinations checked.
func TestDefaultsAreTheFirstCombination(t *testing.T) {
	plain, err := template(t, nil)
	if err != nil {
		t.Fatalf("helm template with values.yaml: %v", err)
	}
	first, err := template(t, values(t, combinations()[0].sets...))
	if err != nil {
		t.Fatal(err)
	}
	if plain != first {
		t.Errorf("--set %s renders differently from values.yaml alone: a switch's first setting is not the default", combinations()[0].name)
	}
}

func TestTemplateEveryCombination(t *testing.T) {
	kinds := map[string]bool{}
	for _, c := range rendered(t) {
		for _, o := range c.objects {
			kinds[o.GetKind()] = true
			if ns := o.GetNamespace(); ns != "" && ns != namespace && !(o.GetKind() == "RoleBinding" && ns == "kube-system") {
				t.Errorf("--set %s: %s %s in namespace %s, want the release's %s", c.name, o.GetKind(), o.GetName(), ns, namespace)
			}
		}
	}
	want := []string{"ClusterRole", "ClusterRoleBinding", "ConfigMap", "DaemonSet", "Deployment", "Role", "RoleBinding",
		"ServiceAccount", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
	if got := slices.Sorted(maps.Keys(kinds)); !slices.Equal(got, want) {
		t.Errorf("the combinations render kinds %v, want %v", got, want)
	}
}

// renderedCombination is one combination's manifest, as objects.
type renderedCombination struct {
	combination
	objects []*unstructured.Unstructured
}

// rendered renders every combination with Helm; combinations that render
// the same manifest are kept once (the first).
func rendered(t *testing.T) []renderedCombination {
	t.Helper()
	seen := map[string]bool{}
	var out []renderedCombination
	for _, c := range combinations() {
		m, err := template(t, values(t, c.sets...))
		if err != nil {
			t.Fatalf("helm template --set %s: %v", c.name, err)
		}
		if seen[m] {
			continue
		}
		seen[m] = true
		out = append(out, renderedCombination{c, objects(t, m)})
	}
	return out
}

// TestSchemaRefusesBadValues: a wrong value stops helm template (and so
// install and upgrade, which validate the same way) and helm lint, and
// the message names the value.
func TestSchemaRefusesBadValues(t *testing.T) {
	tests := []struct {
		name string
		set  string
		want string // in Helm's message: the value's path
	}{
		{name: "unknown policy", set: "policy=pinned", want: "/policy"},
		{name: "unknown policy option", set: "policyOptions={full-pcpus-only,full-pcpu-only}", want: "/policyOptions/1"},
		{name: "unknown topology policy", set: "topologyPolicy=numa", want: "/topologyPolicy"},
		{name: "negative replicas", set: "scheduler.replicas=-1", want: "/scheduler/replicas"},
		{name: "zero weight", set: "scheduler.weight=0", want: "/scheduler/weight"},
		{name: "port out of range", set: "scheduler.extenderPort=70000", want: "/scheduler/extenderPort"},
		{name: "string for a boolean", set: "scheduler.enabled=yes", want: "/scheduler/enabled"},
		{name: "unknown scheduler mode", set: "scheduler.mode=builtin", want: "/scheduler/mode"},
		{name: "zero client qps", set: "scheduler.qps=0", want: "/scheduler/qps"},
		{name: "zero client burst", set: "scheduler.burst=0", want: "/scheduler/burst"},
		{name: "share of nodes scored over 100", set: "scheduler.percentageOfNodesToScore=101", want: "/scheduler/percentageOfNodesToScore"},
		{name: "negative share of nodes scored", set: "scheduler.percentageOfNodesToScore=-1", want: "/scheduler/percentageOfNodesToScore"},
		{name: "API server as a URL", set: "apiServer.host=https://10.0.0.1", want: "/apiServer/host"},
		{name: "API server port out of range", set: "apiServer.port=0", want: "/apiServer/port"},
		{name: "misspelt key", set: "schedular.enabled=true", want: "schedular"},
		{name: "unknown nested key", set: "nodeResourceTopology.publsh=true", want: "publsh"},
		{name: "bad quantity", set: "resources.requests.cpu=lots", want: "/resources/requests/cpu"},
		{name: "bad cpu list", set: "reservedCPUs=0-1;4", want: "/reservedCPUs"},
		{name: "relative socket path", set: "nriSocket=run/nri/nri.sock", want: "/nriSocket"},
		{name: "relative container info dir", set: "containerInfoDir=run/corepin", want: "/containerInfoDir"},
		{name: "the root as container info dir", set: "containerInfoDir=/", want: "/containerInfoDir"},
		{name: "unknown log format", set: "logFormat=yaml", want: "/logFormat"},
		{name: "unknown wake scan", set: "wakeScan=on", want: "/wakeScan"},
		{name: "unknown irq isolate", set: "irqIsolate=on", want: "/irqIsolate"},
		{name: "irq isolate as a boolean", set: "irqIsolate=false", want: "/irqIsolate"},
		{name: "map for a label value", set: "nodeSelector.pool.name=a", want: "/nodeSelector/pool"},
		{name: "layered route without an image", set: "schedExt.enabled=true", want: "/schedExt/image"},
		{name: "layered route's relative binary", set: "schedExt.binary=scx_layered", want: "/schedExt/binary"},
		{name: "layered route's own layer config", set: "schedExt.args={f:/etc/x.json}", want: "/schedExt/args/0"},
		{name: "misspelt layered route key", set: "schedExt.enable=true", want: "enable"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			vals := values(t, tc.set)
			_, err := template(t, vals)
			if err == nil {
				t.Fatalf("helm template --set %s succeeded", tc.set)
			}
			t.Logf("helm template --set %s: %v", tc.set, err)
			if !strings.Contains(err.Error(), "schema") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("helm template --set %s: %v\nwant a schema error naming %s", tc.set, err, tc.want)
			}
			_, errs := lint(t, vals)
			if !strings.Contains(fmt.Sprint(errs), tc.want) {
				t.Errorf("helm lint --set %s: %v\nwant an error naming %s", tc.set, errs, tc.want)
			}
		})
	}
}

// TestSchemaTakesTheValuesUsersType: the forms of the documented values
// the schema must not refuse.
func TestSchemaTakesTheValuesUsersType(t *testing.T) {
	for _, set := range []string{
		"reservedCPUs=2", "reservedCPUs=", "reservedCPUs=0-1\\,32-33", "resources.requests.cpu=1",
		"resources.limits.memory=1.5Gi", "image.tag=1.2.3", "nodeSelector.corepin\\.io/enabled=true",
		"policyOptions=null", "global.imageRegistry=example.com", "containerInfoDir=", "containerInfoDir=/var/run/corepin",
		"scheduler.qps=250", "apiServer.host=fd00::1", "apiServer.host=api.example.com", "scheduler.image=registry.example.com/ks:1",
		"scheduler.percentageOfNodesToScore=0", "scheduler.percentageOfNodesToScore=100",
	} {
		if _, err := template(t, values(t, set)); err != nil {
			t.Errorf("helm template --set %s: %v", set, err)
		}
	}
}

// TestOwnRendererAgreesWithHelm: kube/manifests renders the chart in the
// product's tests (which check what the objects say) and wrote
// deploy/kubernetes/corepin-nri.yaml; both stand only while its output is
// Helm's, object for object, for every combination.
func TestOwnRendererAgreesWithHelm(t *testing.T) {
	for _, c := range combinations() {
		m, err := template(t, values(t, c.sets...))
		if err != nil {
			t.Fatal(err)
		}
		own, err := manifests.Render(os.DirFS(chartDir), manifests.Release{Name: "corepin", Namespace: namespace}, values(t, c.sets...))
		if err != nil {
			t.Fatalf("kube/manifests --set %s: %v", c.name, err)
		}
		if diff := sameObjects(objects(t, m), objects(t, string(own))); diff != "" {
			t.Fatalf("--set %s: kube/manifests renders differently from Helm: %s", c.name, diff)
		}
	}
	plain, err := os.ReadFile(plainFile)
	if err != nil {
		t.Fatal(err)
	}
	m, err := templateIn(t, "kube-system", nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := sameObjects(objects(t, m), objects(t, string(plain))); diff != "" {
		t.Errorf("%s is not Helm's rendering of the defaults in kube-system (go test ./kube/manifests -update writes it): %s", plainFile, diff)
	}
}

// plainFile is the chart's defaults as plain manifests.
const plainFile = "../../deploy/kubernetes/corepin-nri.yaml"

// sameObjects says how helm's objects and other's differ, "" if not.
func sameObjects(helm, other []*unstructured.Unstructured) string {
	key := func(o *unstructured.Unstructured) string {
		return o.GetKind() + "/" + o.GetNamespace() + "/" + o.GetName()
	}
	index := func(list []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
		m := map[string]*unstructured.Unstructured{}
		for _, o := range list {
			m[key(o)] = o
		}
		return m
	}
	h, o := index(helm), index(other)
	if a, b := slices.Sorted(maps.Keys(h)), slices.Sorted(maps.Keys(o)); !slices.Equal(a, b) {
		return fmt.Sprintf("objects %v, Helm's %v", b, a)
	}
	for k, ho := range h {
		if !equality.Semantic.DeepEqual(ho.Object, o[k].Object) {
			return fmt.Sprintf("%s:\n%v\nHelm's:\n%v", k, o[k].Object, ho.Object)
		}
	}
	return ""
}

// renderClean is helm lint --strict and helm template of the chart with
// --set set: no lint finding above INFO, and kube/manifests renders the
// same objects as Helm. It returns Helm's manifest.
func renderClean(t *testing.T, set string) string {
	t.Helper()
	vals := values(t, set)
	msgs, errs := lint(t, vals)
	for _, m := range msgs {
		if m.Severity > support.InfoSev {
			t.Errorf("helm lint --strict --set %s: %s", set, m)
		}
	}
	for _, err := range errs {
		t.Errorf("helm lint --strict --set %s: %v", set, err)
	}
	m, err := template(t, vals)
	if err != nil {
		t.Fatalf("helm template --set %s: %v", set, err)
	}
	own, err := manifests.Render(os.DirFS(chartDir), manifests.Release{Name: "corepin", Namespace: namespace}, vals)
	if err != nil {
		t.Fatalf("kube/manifests --set %s: %v", set, err)
	}
	if diff := sameObjects(objects(t, m), objects(t, string(own))); diff != "" {
		t.Errorf("--set %s: kube/manifests renders differently from Helm: %s", set, diff)
	}
	return m
}
