package e2ekubelet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/test/kube/kubetest"
	"github.com/corepin/corepin/topology"
)

// What make e2e-deploy hands TestChartInstalledOnTheNode besides
// make e2e-kubelet's.
const (
	envImageDir     = "COREPIN_IMAGE_DIR"     // make image's output: one docker-archive per platform
	envImageVersion = "COREPIN_IMAGE_VERSION" // the chart's appVersion, the image's tag
	envRender       = "COREPIN_HELM_RENDER"   // test/helm's render: helm template through Helm's own module
	envStatefile    = "COREPIN_STATEFILE"     // test/e2enode's statefile: a state file's assignments, read only
	envChart        = "COREPIN_CHART"         // deploy/helm/corepin
)

const (
	releaseNS = "corepin-system"
	dsName    = "corepin-nri"
	dsLabel   = "app.kubernetes.io/name=corepin-nri"
	// The network of a pod not on the host's: the chart's pods ask for
	// the host's here (hostNetwork, to reach the API server on loopback),
	// as every test pod does, so none uses it; it is the runtime's network
	// configuration, which the node needs to be Ready, and the one a
	// plugin pod off the host network gets. Such a pod needs a network
	// interface with an address: the runtime refuses a sandbox whose
	// network has none. The host-device
	// CNI plugin moves this interface (one end of a veth pair whose other
	// end, peerLink, stays down on the host: kernels without the dummy
	// driver have veth) into the pod and back out when the sandbox goes,
	// so one pod at a time holds it (a DaemonSet's rolling update, one pod
	// down before the next starts, fits) and nothing of the host's network
	// (routes, forwarding, iptables) changes.
	podLink  = "cpdeploy0"
	peerLink = "cpdeploy1"
	podAddr  = "192.0.2.20/24" // TEST-NET-1, routed nowhere
	// requiredPlugins is containerd's default NRI validator's pod
	// annotation: a container of such a pod is refused unless every plugin
	// it names is connected.
	requiredPlugins = "required-plugins.noderesource.dev"
	upgradeSuffix   = "-upgrade"
)

var deployCNI = fmt.Sprintf(`{"cniVersion": "1.0.0", "name": "corepin-e2e-dev", "plugins": [
  {"type": "host-device", "device": %q, "ipam": {"type": "static", "addresses": [{"address": %q}]}}]}`, podLink, podAddr)

// deploy is what the install test adds to the cluster.
type deploy struct {
	*cluster
	rt         *cri
	render     string
	statefile  string
	chart      string
	image      string // the chart's image as make image named it
	schedImage string // corepin-scheduler's, likewise
	version    string // their tag, the chart's appVersion
	stateDir   string
	dyn        dynamic.Interface
	mapper     meta.RESTMapper
	objs       []*unstructured.Unstructured // the last rendering applied
	pluginCtr  string                       // the plugin pod's container ID
	schedCtr   string                       // corepin-scheduler's
	// groupsBefore are the cgroups named corepin before the test (other
	// runs' on a shared machine): not the release's.
	groupsBefore []string
}

// TestChartInstalledOnTheNode installs the chart, rendered by Helm, on the
// real kubelet and containerd: corepin nri runs as the DaemonSet's pod
// from make image's image, with the hostPath state directory, the NRI
// socket mount and the RBAC as shipped. A Guaranteed pod of a whole CPU
// is pinned by that plugin, the kernel shows the cpuset the state file
// records; a rolling upgrade to a second tag moves no pinned pod and
// doubles no CPU, and pods created meanwhile are placed once the new
// plugin is up; the uninstall leaves no plugin connection and no cgroup,
// only the state file.
//
// The chart runs with scheduler.enabled (mode plugin): corepin-scheduler
// runs as the Deployment's pod from make image's corepin-scheduler image
// and leads; the quick sweep's Jobs, created at once after the upgrade,
// are bound by it and admitted by the plugin. Pods mount service-account
// tokens (the plugin annotates its node, the scheduler watches the
// cluster) and reach the API server through apiServer.host on the host's
// network, this node having no kube-proxy. The uninstall leaves no
// Deployment, and no lease once the namespace goes.
func TestChartInstalledOnTheNode(t *testing.T) {
	c := need(t)
	imageDir, version := os.Getenv(envImageDir), os.Getenv(envImageVersion)
	d := &deploy{cluster: c, render: os.Getenv(envRender), statefile: os.Getenv(envStatefile), chart: os.Getenv(envChart), version: version}
	if d.render == "" || d.statefile == "" || d.chart == "" || imageDir == "" || version == "" {
		missing(t, "run through make e2e-deploy (%s, %s, %s, %s or %s unset)", envRender, envStatefile, envChart, envImageDir, envImageVersion)
	}
	archive := filepath.Join(imageDir, fmt.Sprintf("corepin-%s-linux-%s.tar", version, runtime.GOARCH))
	schedArchive := filepath.Join(imageDir, "scheduler", fmt.Sprintf("corepin-scheduler-%s-linux-%s.tar", version, runtime.GOARCH))
	for _, a := range []string{archive, schedArchive} {
		if _, err := os.Stat(a); err != nil {
			t.Fatalf("%v (make image writes it)", err)
		}
	}
	before := takeSnapshot(t)
	d.groupsBefore = cgroupsNow(t, "/nonexistent-root")
	dir, err := os.MkdirTemp("", "kd-")
	if err != nil {
		t.Fatal(err)
	}
	c.dir, c.cgroupRoot, c.ps = dir, "/"+filepath.Base(dir), &kubetest.Procs{T: t}
	d.stateDir = c.path("corepin-state")
	t.Cleanup(func() {
		c.teardown(before, d.rt)
		delLink(t)
	})

	// The DaemonSet controller rolls the plugin, the Deployment and
	// ReplicaSet controllers the scheduler; the garbage collector removes
	// their pods when they go, the namespace controller a deleted
	// namespace's objects, as on any cluster. Pods mount their service
	// account's token.
	c.serviceAccounts = true
	c.startControlPlaneWith("job,podgc,daemonset,garbagecollector,deployment-controller,replicaset-controller," +
		"serviceaccount-controller,root-ca-certificate-publisher-controller,namespace-controller")
	addLink(t)
	d.rt = c.startRuntime(deployCNI)
	c.ctr("images", "import", archive)
	c.ctr("images", "import", schedArchive)
	objs := d.renderChart()
	d.image, d.schedImage = d.imageOf(objs), d.schedImageOf(objs)
	for _, img := range []string{d.image, d.schedImage} {
		if !strings.HasSuffix(img, ":"+version) {
			t.Fatalf("the chart names the image %s, make image tagged it %s", img, version)
		}
		c.ctr("images", "tag", img, img+upgradeSuffix)
	}
	c.startKubelet()
	d.connectAPI()

	d.install()
	pinned := d.pinnedPod()
	d.upgrade(pinned)
	d.sweepThroughScheduler()
	d.uninstall()
}

// values are the chart's values on this node: the images make image
// imported (never pulled: there is no registry), the private containerd's
// NRI socket, a state directory of the run's own, and corepin-scheduler
// (schedulerValues).
func (d *deploy) values(extra ...string) []string {
	vals := append([]string{"image.pullPolicy=Never", "nriSocket=" + d.path("run/nri.sock"), "stateDir=" + d.stateDir}, d.schedulerValues()...)
	return append(vals, extra...)
}

// renderChart is helm template of the chart with values(extra) in
// releaseNS, through test/helm's render (Helm's own module).
func (d *deploy) renderChart(extra ...string) []*unstructured.Unstructured {
	t := d.t
	args := []string{"--chart", d.chart, "--namespace", releaseNS}
	for _, s := range d.values(extra...) {
		args = append(args, "--set", s)
	}
	out := run(t, nil, d.render, args...)
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(out), 4096)
	for {
		u := &unstructured.Unstructured{}
		err := dec.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("decoding Helm's rendering: %v", err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
	return objs
}

// imageOf is the DaemonSet's container image in a rendering.
func (d *deploy) imageOf(objs []*unstructured.Unstructured) string {
	for _, o := range objs {
		if o.GetKind() != "DaemonSet" {
			continue
		}
		ctrs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		if len(ctrs) == 1 {
			if img, _ := ctrs[0].(map[string]any)["image"].(string); img != "" {
				return img
			}
		}
	}
	d.t.Fatalf("the rendered chart has no DaemonSet with one container image")
	return ""
}

func (d *deploy) connectAPI() {
	t := d.t
	cfg := &rest.Config{Host: d.api, BearerToken: d.token, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	var err error
	if d.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	d.mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
}

func (d *deploy) resource(o *unstructured.Unstructured) dynamic.ResourceInterface {
	gvk := o.GroupVersionKind()
	m, err := d.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		d.t.Fatalf("finding the resource of %s: %v", gvk, err)
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return d.dyn.Resource(m.Resource).Namespace(o.GetNamespace())
	}
	return d.dyn.Resource(m.Resource)
}

// apply server-side applies objs as Helm 4's install and upgrade do
// (field manager helm, conflicts forced).
func (d *deploy) apply(ctx context.Context, objs []*unstructured.Unstructured) {
	t := d.t
	force := true
	for _, o := range objs {
		if o.GetNamespace() == "" && d.namespaced(o) {
			o.SetNamespace(releaseNS)
		}
		body, err := o.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.resource(o).Patch(ctx, o.GetName(), types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: "helm", Force: &force}); err != nil {
			t.Fatalf("applying %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	d.objs = objs
}

func (d *deploy) namespaced(o *unstructured.Unstructured) bool {
	gvk := o.GroupVersionKind()
	m, err := d.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	return err == nil && m.Scope.Name() == meta.RESTScopeNameNamespace
}

// install creates the release's namespace and applies the chart, then
// waits for the plugin's pod to run and synchronise with containerd.
func (d *deploy) install() {
	t := d.t
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, ns := range []string{releaseNS, namespace} {
		if _, err := d.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		d.waitServiceAccount(ctx, ns)
	}
	objs := d.renderChart()
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.GetKind()+"/"+o.GetName())
	}
	begin := time.Now()
	d.apply(ctx, objs)
	p := d.waitPlugin(ctx, d.image, "")
	d.note("chart installed (Helm's rendering, %d objects: %s); plugin pod %s Running from %s and synchronised with containerd %s after the apply",
		len(objs), strings.Join(kinds, ", "), p.Name, d.image, fmtDur(time.Since(begin)))
	s := d.waitScheduler(ctx, d.schedImage, "")
	d.note("corepin-scheduler pod %s Running, Ready and leader (lease %s/%s) from %s %s after the apply",
		s.Name, releaseNS, schedName, d.schedImage, fmtDur(time.Since(begin)))
}

// waitPlugin waits for the DaemonSet's one pod running image, other than
// the pod named old, to run and log that it synchronised with containerd.
func (d *deploy) waitPlugin(ctx context.Context, image, old string) corev1.Pod {
	t := d.t
	var got corev1.Pod
	var why string
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		l, err := d.cs.CoreV1().Pods(releaseNS).List(ctx, metav1.ListOptions{LabelSelector: dsLabel})
		if err != nil {
			return false, err
		}
		for _, p := range l.Items {
			if p.Name == old || p.DeletionTimestamp != nil || p.Spec.Containers[0].Image != image {
				continue
			}
			got = p
			if p.Status.Phase != corev1.PodRunning {
				why = fmt.Sprintf("pod %s %s %+v", p.Name, p.Status.Phase, p.Status.ContainerStatuses)
				return false, nil
			}
			if log := d.pluginLog(ctx, p.Name); !strings.Contains(log, `"msg":"synchronized"`) {
				why = "no synchronized in its log:\n" + kubetest.Tail(log, 2048)
				return false, nil
			}
			return true, nil
		}
		why = fmt.Sprintf("no pod of the DaemonSet runs %s yet (%d pods)", image, len(l.Items))
		return false, nil
	})
	if err != nil {
		d.explainNS(releaseNS)
		t.Fatalf("the plugin's pod from %s did not run and synchronise: %v; %s", image, err, why)
	}
	return got
}

func (d *deploy) pluginLog(ctx context.Context, pod string) string {
	return d.logOf(ctx, releaseNS, pod)
}

// explainNS logs the namespace's pods and events.
func (d *deploy) explainNS(ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if l, err := d.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, p := range l.Items {
			d.t.Logf("pod %s/%s: %s node %q %+v\nlog:\n%s", ns, p.Name, p.Status.Phase, p.Spec.NodeName, p.Status.ContainerStatuses,
				kubetest.Tail(d.logOf(ctx, ns, p.Name), 4096))
		}
	}
	if ev, err := d.cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, e := range ev.Items {
			d.t.Logf("event %s/%s: %s %s", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
		}
	}
}

// logOf is pod's log through the API server, or "" where it has none.
func (d *deploy) logOf(ctx context.Context, ns, pod string) string {
	rc, err := d.cs.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{}).Stream(ctx)
	if err != nil {
		return ""
	}
	defer rc.Close()
	b, _ := io.ReadAll(io.LimitReader(rc, maxLogBytes))
	return string(b)
}

// testPod is a pod of the busybox + corepin image sleeping on the host
// network in namespace, cpu its request and limit (Guaranteed) or, with
// burstable, its request only.
func testPod(name, cpu string, burstable bool, annotations map[string]string) *corev1.Pod {
	zero := int64(0)
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("32Mi")}
	rr := corev1.ResourceRequirements{Requests: res, Limits: res}
	if burstable {
		rr.Limits = nil
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Annotations: annotations},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, HostNetwork: true, TerminationGracePeriodSeconds: &zero,
			Containers: []corev1.Container{{Name: "main", Image: corepinImage, Command: []string{"/bin/sleep", "3600"}, Resources: rr}}},
	}
}

func (d *deploy) createPod(ctx context.Context, p *corev1.Pod) {
	if _, err := d.cs.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		d.t.Fatalf("creating pod %s: %v", p.Name, err)
	}
}

// running is a test pod's running container: its ID and the kernel's view.
type running struct {
	id   string
	live live
}

// waitRunning waits for pod's container to run and returns it.
func (d *deploy) waitRunning(ctx context.Context, ns, pod string) running {
	t := d.t
	var r running
	var last *corev1.Pod
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		p, err := d.cs.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = p
		if len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Running == nil {
			return false, nil
		}
		_, id, _ := strings.Cut(p.Status.ContainerStatuses[0].ContainerID, "://")
		v, ok := d.rt.liveOf(ctx, id)
		r = running{id: id, live: v}
		return ok, nil
	})
	if err != nil {
		d.explainNS(ns)
		t.Fatalf("pod %s/%s not running: %v (last %+v)", ns, pod, err, last)
	}
	return r
}

// assignment is one entry of the plugin's state file (statefile's JSON).
type assignment struct {
	Name      string `json:"name"`
	Cpuset    string `json:"cpuset"`
	QoS       string `json:"qos"`
	Container string `json:"container"` // the ID asked about it names
}

func (d *deploy) stateFile() string { return filepath.Join(d.stateDir, "agent.db") }

// assignments reads the state file on the node's hostPath, read only,
// each assignment of one of the containers ids naming it.
func (d *deploy) assignments(ids ...string) []assignment {
	out := run(d.t, nil, d.statefile, append([]string{d.stateFile()}, ids...)...)
	var as []assignment
	if err := json.Unmarshal([]byte(out), &as); err != nil {
		d.t.Fatalf("statefile: %v\n%s", err, out)
	}
	return as
}

// recorded is the state file's assignment of container id.
func (d *deploy) recorded(id string) (assignment, bool) {
	for _, a := range d.assignments(id) {
		if a.Container == id {
			return a, true
		}
	}
	return assignment{}, false
}

// pinnedPod runs a Guaranteed pod of as many whole CPUs as the node
// leaves after the chart's reserved CPU (0) and checks that the in-pod
// plugin pinned it: the container's own affinity (Cpus_allowed_list) and
// its cpuset cgroup equal the cpuset the state file records for it.
func (d *deploy) pinnedPod() running {
	t := d.t
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	topo, err := topology.Open("/")
	if err != nil {
		t.Fatal(err)
	}
	free := topo.Allowed().Difference(cpuset.New(0))
	if free.IsEmpty() {
		missing(t, "the machine has one CPU, the chart reserves it")
	}
	d.createPod(ctx, testPod("pinned", fmt.Sprint(free.Size()), false, nil))
	r := d.waitRunning(ctx, namespace, "pinned")
	a, ok := d.recorded(r.id)
	if !ok {
		t.Fatalf("the state file %s records no assignment for the pinned pod's container %s: %+v", d.stateFile(), r.id, d.assignments())
	}
	want, err := cpuset.Parse(a.Cpuset)
	if err != nil {
		t.Fatalf("the state file's cpuset %q: %v", a.Cpuset, err)
	}
	if a.QoS != "LSE" || !want.Equals(free) {
		t.Errorf("the state file records %s on %s for the pinned pod, want LSE on %s (all CPUs but the reserved 0)", a.QoS, want, free)
	}
	if r.live.Affinity != a.Cpuset || r.live.CPUs != a.Cpuset {
		t.Fatalf("the pinned pod's container runs with Cpus_allowed_list %q and cpuset.cpus %q, the state file records %q", r.live.Affinity, r.live.CPUs, a.Cpuset)
	}
	d.note("Guaranteed pod of %d CPU(s) pinned by the in-pod plugin: Cpus_allowed_list %s, cpuset.cpus %s, the state file (%s on the hostPath) records %s %s",
		free.Size(), r.live.Affinity, r.live.CPUs, d.stateFile(), a.QoS, a.Cpuset)
	return r
}

// upgrade rolls the DaemonSet to the same image under a second tag (helm
// upgrade --set image.tag=...: the chart rendered again and applied)
// while the pinned pod runs. Two pods are created as soon as the old
// plugin's pod is gone: "during" (no annotation) and "required" (the
// default validator's annotation naming corepin).
//
// While no plugin is connected NRI fails open: containerd creates a
// container without asking anyone, so "during", if its container starts
// in that gap, runs on every CPU, the pinned pod's included, until the
// new plugin connects: its Synchronize admits the running container and
// containerd applies the cpuset it returns. "required" is refused in that
// gap instead (containerd's default validator: required plugin "corepin"
// not present; the kubelet retries) and starts once the plugin is back.
// Either way, once the new plugin is up both run beside the pinned pod,
// never on its CPUs, and the pinned pod's cpuset never changed.
func (d *deploy) upgrade(pinned running) {
	t := d.t
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	old := d.waitPlugin(ctx, d.image, "")
	oldSched := d.waitScheduler(ctx, d.schedImage, "")
	tag, newTag := d.image+upgradeSuffix, d.version+upgradeSuffix
	begin := time.Now()
	d.apply(ctx, d.renderChart("image.tag="+newTag))
	if got := d.imageOf(d.objs); got != tag {
		t.Fatalf("the chart rendered with image.tag=%s names %s, want %s", newTag, got, tag)
	}
	// The old pod goes first (maxUnavailable 1, no surge): the gap.
	err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := d.cs.CoreV1().Pods(releaseNS).Get(ctx, old.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("the old plugin's pod %s was not removed by the rolling update: %v", old.Name, err)
	}
	gone := time.Since(begin)
	d.createPod(ctx, testPod("during", "100m", true, nil))
	d.createPod(ctx, testPod("required", "100m", true, map[string]string{requiredPlugins: `["corepin"]`}))
	p := d.waitPlugin(ctx, tag, old.Name)
	up := time.Since(begin)
	_, d.pluginCtr, _ = strings.Cut(p.Status.ContainerStatuses[0].ContainerID, "://")

	during := d.waitRunning(ctx, namespace, "during")
	required := d.waitRunning(ctx, namespace, "required")
	want := d.sharedPool(pinned)
	for name, r := range map[string]*running{"during": &during, "required": &required} {
		// Synchronize's updates reach the kernel shortly after the
		// plugin logs it synchronised.
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			v, ok := d.rt.liveOf(ctx, r.id)
			r.live = v
			return ok && v.Affinity == want.String() && v.CPUs == want.String(), nil
		})
		if err != nil {
			t.Errorf("pod %s, created during the upgrade, runs on affinity %q cpuset %q after the new plugin is up, want the shared pool %s",
				name, r.live.Affinity, r.live.CPUs, want)
		}
	}
	now, ok := d.rt.liveOf(ctx, pinned.id)
	if !ok || now != pinned.live {
		t.Errorf("the pinned pod's container runs on %+v after the upgrade, before it %+v", now, pinned.live)
	}
	a, ok := d.recorded(pinned.id)
	if !ok || a.Cpuset != pinned.live.CPUs {
		t.Errorf("after the upgrade the state file records %+v (found %v) for the pinned pod, before it %s", a, ok, pinned.live.CPUs)
	}
	if doubled := d.doubled(pinned); len(doubled) > 0 {
		t.Fatalf("after the upgrade, containers share the pinned pod's CPUs: %s", strings.Join(doubled, "; "))
	}
	log := d.pluginLog(ctx, p.Name)
	gap := "after the new plugin was up (admitted at creation)"
	if lineWith(log, during.id, "admitted a running container") {
		gap = "in the gap (created fail-open on every CPU; the new plugin's Synchronize, or its PostStartContainer where the start came after, moved it)"
	}
	refused := d.refusedRequired(ctx, "required")
	sched := d.waitScheduler(ctx, d.schedImage+upgradeSuffix, oldSched.Name)
	_, d.schedCtr, _ = strings.Cut(sched.Status.ContainerStatuses[0].ContainerID, "://")
	d.note("corepin-scheduler rolled to %s: pod %s leads %s after the apply", sched.Spec.Containers[0].Image, sched.Name, fmtDur(time.Since(begin)))
	d.note("rolling upgrade to %s: old pod gone %s and the new plugin synchronised %s after the apply; the pinned pod stayed on %s (state file alike), "+
		"0 CPUs doubled; pod \"during\" started %s, pod \"required\" (%s) refused %d time(s) while no plugin ran; both then on the shared pool %s",
		tag, fmtDur(gone), fmtDur(up), pinned.live.CPUs, gap, requiredPlugins, refused, want)
}

// sharedPool is where corepin places a Burstable pod beside the pinned
// one: every CPU but the pinned pod's (the reserved CPU included).
func (d *deploy) sharedPool(pinned running) cpuset.CPUSet {
	topo, err := topology.Open("/")
	if err != nil {
		d.t.Fatal(err)
	}
	p, _ := cpuset.Parse(pinned.live.CPUs)
	return topo.Allowed().Difference(p)
}

// doubled lists the running containers, other than the pinned pod's,
// whose cpuset cgroup shares a CPU with it.
func (d *deploy) doubled(pinned running) []string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, _ := cpuset.Parse(pinned.live.CPUs)
	l, err := d.rt.rt.ListContainers(ctx, nil)
	if err != nil {
		d.t.Fatal(err)
	}
	var out []string
	for _, ctr := range l.Containers {
		if ctr.Id == pinned.id {
			continue
		}
		v, ok := d.rt.liveOf(ctx, ctr.Id)
		if !ok {
			continue
		}
		if s, err := cpuset.Parse(v.CPUs); err == nil && s.Intersects(p) {
			out = append(out, fmt.Sprintf("%s/%s on %s", ctr.Labels["io.kubernetes.pod.name"], ctr.Metadata.GetName(), v.CPUs))
		}
	}
	return out
}

func lineWith(log string, words ...string) bool {
	for _, l := range strings.Split(log, "\n") {
		all := true
		for _, w := range words {
			all = all && strings.Contains(l, w)
		}
		if all {
			return true
		}
	}
	return false
}

// refusedRequired counts the events of pod whose message is containerd's
// default validator refusing it for want of corepin (0 where the events
// can not be listed: callers poll, or only report the count).
func (d *deploy) refusedRequired(ctx context.Context, pod string) int {
	ev, err := d.cs.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod})
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range ev.Items {
		if strings.Contains(e.Message, `required plugin "corepin" not present`) {
			n += max(1, int(e.Count))
		}
	}
	return n
}

// uninstall deletes the test's pods (the plugin releases their CPUs),
// then the release's objects as helm uninstall does, and checks what the
// node keeps: no NRI connection of the plugin (a pod requiring corepin is
// refused by containerd's default validator, one that does not runs on
// every CPU: fail-open), no cgroup of the release or its pods, and the
// state file, with no assignment left in it.
func (d *deploy) uninstall() {
	t := d.t
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	d.deleteTestPods(ctx)
	// What stays is the chart's containers' (LS): the plugin's own and
	// corepin-scheduler's. Once the release goes, the scheduler's may
	// stay too, when its pod outlived the plugin's.
	chart := func(schedMayGo bool) bool {
		var plugin, sched, other int
		for _, a := range d.assignments(d.pluginCtr, d.schedCtr) {
			switch a.Container {
			case d.pluginCtr:
				plugin++
			case d.schedCtr:
				sched++
			default:
				other++
			}
		}
		return plugin == 1 && other == 0 && (sched == 1 || schedMayGo && sched == 0)
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return chart(false), nil
	})
	if err != nil {
		t.Errorf("the plugin did not release the deleted pods' CPUs: the state file records %+v, want the plugin's container %s and the scheduler's %s only",
			d.assignments(d.pluginCtr, d.schedCtr), d.pluginCtr, d.schedCtr)
	}
	if n := d.corepinConnected(); n != 1 {
		t.Errorf("containerd's log shows %d corepin plugins connected while the plugin runs, want one", n)
	}

	bg := metav1.DeletePropagationBackground
	for i := len(d.objs) - 1; i >= 0; i-- {
		o := d.objs[i]
		if err := d.resource(o).Delete(ctx, o.GetName(), metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
			t.Errorf("deleting %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	err = wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		l, err := d.cs.CoreV1().Pods(releaseNS).List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) == 0 && d.corepinConnected() == 0, nil
	})
	if err != nil {
		d.explainNS(releaseNS)
		t.Fatalf("after the uninstall the plugin's pod or its NRI connection stayed (containerd: %d connected): %v", d.corepinConnected(), err)
	}
	if err := d.cs.CoreV1().Namespaces().Delete(ctx, releaseNS, metav1.DeleteOptions{}); err != nil {
		t.Errorf("deleting namespace %s: %v", releaseNS, err)
	}
	d.schedulerGone(ctx)

	// No plugin: containerd's default validator refuses a pod that
	// requires corepin; a pod that does not runs fail-open on every CPU.
	d.createPod(ctx, testPod("after-required", "100m", true, map[string]string{requiredPlugins: `["corepin"]`}))
	d.createPod(ctx, testPod("after", "100m", true, nil))
	after := d.waitRunning(ctx, namespace, "after")
	topo, err := topology.Open("/")
	if err != nil {
		t.Fatal(err)
	}
	if all := topo.Allowed().String(); after.live.Affinity != all || after.live.CPUs != all {
		t.Errorf("with corepin uninstalled a pod runs on affinity %q cpuset %q, want every CPU %s (NRI fails open)", after.live.Affinity, after.live.CPUs, all)
	}
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		return d.refusedRequired(ctx, "after-required") > 0, nil
	})
	if err != nil {
		d.explainNS(namespace)
		t.Errorf("with corepin uninstalled, a pod annotated %s: [\"corepin\"] was not refused by containerd's default validator", requiredPlugins)
	}
	if p, err := d.cs.CoreV1().Pods(namespace).Get(ctx, "after-required", metav1.GetOptions{}); err == nil && p.Status.Phase == corev1.PodRunning {
		t.Errorf("pod after-required runs without the plugin it requires")
	}
	for _, p := range []string{"after", "after-required"} {
		d.deletePod(ctx, namespace, p)
	}

	groups := d.corepinGroups(ctx)
	if len(groups) > 0 {
		t.Errorf("cgroups left after the uninstall: %s", strings.Join(groups, ", "))
	}
	st, err := os.Stat(d.stateFile())
	if err != nil {
		t.Fatalf("the state file is gone after the uninstall: %v", err)
	}
	if !chart(true) {
		t.Errorf("the state file after the uninstall records %+v, want the last plugin container's own (%s), and the scheduler's (%s) at most",
			d.assignments(d.pluginCtr, d.schedCtr), d.pluginCtr, d.schedCtr)
	}
	d.note("uninstall: containerd holds 0 corepin plugins (a pod requiring corepin refused %d time(s) by the default validator; one that does not ran fail-open on %s), "+
		"0 corepin or pod cgroups left on the node; the state file %s stays (%d bytes; its %d assignment(s) are the last plugin container's own and the scheduler's where its pod outlived the plugin's, "+
		"which a reinstall's Synchronize releases as gone): rm -r %s on each node removes it",
		d.refusedRequired(ctx, "after-required"), after.live.CPUs, d.stateFile(), st.Size(), len(d.assignments()), d.stateDir)
}

// deleteTestPods deletes the pods pinnedPod and upgrade created, if they
// are still there.
func (d *deploy) deleteTestPods(ctx context.Context) {
	for _, p := range []string{"pinned", "during", "required"} {
		d.deletePod(ctx, namespace, p)
	}
	// A pod deleted with no grace leaves the API at once, before the
	// kubelet has removed its containers and the plugin released their
	// CPUs: wait until the runtime holds none of them, or the sweep's
	// first pods meet the pinned pod's CPU still held.
	for _, p := range []string{"pinned", "during", "required"} {
		d.rt.waitNoContainer(ctx, d.t, p)
	}
}

// deletePod deletes a pod at once and waits until it is gone.
func (d *deploy) deletePod(ctx context.Context, ns, name string) {
	zero := int64(0)
	if err := d.cs.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil && !apierrors.IsNotFound(err) {
		d.t.Errorf("deleting pod %s: %v", name, err)
	}
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := d.cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		d.t.Fatalf("pod %s/%s not gone: %v", ns, name, err)
	}
}

// corepinConnected is how many corepin plugins containerd holds
// connected, by its own log: each registration ends "connected and
// synchronized", each end "connection to plugin ... closed".
func (d *deploy) corepinConnected() int {
	log := d.ctd.Log.String()
	return strings.Count(log, `plugin \"10-corepin\" connected and synchronized`) - strings.Count(log, `connection to plugin \"10-corepin\" closed`)
}

// corepinGroups waits up to a minute for the kubelet to remove the
// deleted pods' cgroups, then lists what is left: any cgroup under the
// kubelet's root but its QoS tiers, and any cgroup named corepin
// anywhere on the node that was not there before the test (groupsBefore).
func (d *deploy) corepinGroups(ctx context.Context) []string {
	var left []string
	wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		left = nil
		for _, p := range cgroupsNow(d.t, d.cgroupRoot) {
			if !slices.Contains(d.groupsBefore, p) {
				left = append(left, p)
			}
		}
		return len(left) == 0, nil
	})
	return left
}

// cgroupsNow lists the cgroups under root but the kubelet's QoS tiers,
// and every cgroup named corepin (to a depth of 4).
func cgroupsNow(t *testing.T, root string) []string {
	var out []string
	for _, ctrl := range cgroupControllers(t) {
		top := filepath.Join("/sys/fs/cgroup", ctrl)
		filepath.WalkDir(top, func(p string, e fs.DirEntry, err error) error {
			if err != nil || !e.IsDir() || p == top {
				return nil
			}
			rel := strings.TrimPrefix(p, top)
			under, ok := strings.CutPrefix(rel, root)
			switch {
			case ok && (under == "" || under == "/kubepods" || under == "/kubepods/burstable" || under == "/kubepods/besteffort"):
			case ok && strings.HasPrefix(under, "/"):
				out = append(out, p)
			case strings.Contains(strings.ToLower(rel), "corepin"):
				out = append(out, p)
			}
			if strings.Count(rel, "/") >= 4 {
				return fs.SkipDir
			}
			return nil
		})
	}
	return out
}

// addLink creates the veth pair podLink-peerLink, podLink being the
// interface the plugin's pod gets.
func addLink(t *testing.T) {
	t.Helper()
	delLink(t) // left by a killed run
	if out, err := exec.Command("ip", "link", "add", podLink, "type", "veth", "peer", "name", peerLink).CombinedOutput(); err != nil {
		missing(t, "a veth pair for the plugin's pod network: %v: %s", err, out)
	}
}

// delLink removes the pair (deleting either end deletes both) where an
// end is on the host; with podLink in a pod's network namespace,
// removing that namespace removed the pair.
func delLink(t *testing.T) {
	for _, l := range []string{podLink, peerLink} {
		if _, err := net.InterfaceByName(l); err != nil {
			continue
		}
		if out, err := exec.Command("ip", "link", "del", l).CombinedOutput(); err != nil {
			t.Errorf("removing %s: %v: %s", l, err, out)
		}
		return
	}
}
