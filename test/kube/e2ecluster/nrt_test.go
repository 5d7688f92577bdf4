package e2ecluster

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/corepin/corepin/kube/extender"
	"github.com/corepin/corepin/kube/nodestate"
	"github.com/corepin/corepin/kube/nodestate/nodestatetest"
	"github.com/corepin/corepin/test/kube/kubetest"
)

// startNRTExtender runs `corepin extender --nrt` and returns its port once
// /healthz answers ok, which it does only once its informer has listed the
// objects.
func (c *cluster) startNRTExtender(corepin string, args ...string) (int, *kubetest.Proc) {
	begin := time.Now()
	ext, ports := kubetest.StartServing(c.t, 1, time.Minute, func(ports []int) (*kubetest.Proc, string, string) {
		return c.ps.Start("corepin extender --nrt", nil, corepin, append([]string{"extender", "--listen", fmt.Sprintf("127.0.0.1:%d", ports[0]),
			"--nrt", "--kubeconfig", c.kubeconfig(), "--nrt-sync-timeout", "1m"}, args...)...), fmt.Sprintf("http://127.0.0.1:%d/healthz", ports[0]), ""
	})
	c.note("corepin extender --nrt synced %.1f s after start", time.Since(begin).Seconds())
	return ports[0], ext
}

// filterKeeps asks the extender's /filter, as kube-scheduler does, which of
// nodes can take pod, and returns their names.
func filterKeeps(t *testing.T, url string, pod *corev1.Pod, nodes []corev1.Node) []string {
	t.Helper()
	body, err := json.Marshal(extenderv1.ExtenderArgs{Pod: pod, Nodes: &corev1.NodeList{Items: nodes}})
	if err != nil {
		t.Fatal(err)
	}
	rsp, err := http.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer rsp.Body.Close()
	var res extenderv1.ExtenderFilterResult
	if err := json.NewDecoder(io.LimitReader(rsp.Body, 4<<20)).Decode(&res); err != nil {
		t.Fatalf("extender /filter: %v", err)
	}
	if res.Error != "" {
		t.Fatalf("extender /filter: %s", res.Error)
	}
	var names []string
	if res.Nodes != nil {
		for _, n := range res.Nodes.Items {
			names = append(names, n.Name)
		}
	}
	return names
}

// createNRTNodes installs the NodeResourceTopology CRD (v1alpha2) and
// creates three nodes that publish no corepin annotation, only a
// NodeResourceTopology each, with free CPUs per NUMA node [5,5]
// (nrt-split), [3,5] (nrt-lopsided) and [8,0] (nrt-aligned).
func (c *cluster) createNRTNodes(ctx context.Context, t *testing.T, dyn dynamic.Interface) {
	t.Helper()
	kubetest.InstallNRTCRD(ctx, t, dyn, "v1alpha2")
	free := map[string][]int{"nrt-split": {5, 5}, "nrt-lopsided": {3, 5}, "nrt-aligned": {8, 0}}
	for _, name := range []string{"nrt-split", "nrt-lopsided", "nrt-aligned"} {
		n := kubetest.Node(t, name, "")
		n.Annotations = nil // only the NodeResourceTopology speaks for it
		if _, err := c.cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating node %s: %v", name, err)
		}
		if _, err := dyn.Resource(nodestate.NRTResource).Create(ctx, nodestatetest.NRT(t, name, free[name]...), metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating the NodeResourceTopology of %s: %v", name, err)
		}
	}
}

// TestRealSchedulerWithNRT runs the real kube-scheduler (the shipped
// configuration) with the real `corepin extender --nrt` on three nodes
// that publish no corepin annotation, only a NodeResourceTopology each
// (free CPUs per NUMA node [5,5], [3,5], [8,0]): the 6-CPU
// single-numa-node pod is bound to the only node with 6 free CPUs on one
// NUMA node, and the 9-CPU one is Unschedulable with corepin's reason.
func TestRealSchedulerWithNRT(t *testing.T) {
	bin, corepin := need(t)
	c := startControlPlane(t, bin)
	dyn, err := dynamic.NewForConfig(c.cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c.createNRTNodes(ctx, t, dyn)

	port, ext := c.startNRTExtender(corepin)
	c.startScheduler("kube-scheduler", kubetest.ShippedSchedulerConfig(t, c.kubeconfig(), port))
	// The scheduler's informer may not have the three nodes yet: only
	// nrt-aligned passes the extender, and a pod refused on fewer nodes is
	// judged again as they arrive.

	pod := kubetest.CPUPod("enc-nrt", "default", "6")
	c.create(ctx, pod)
	pod = c.waitBound(ctx, pod)
	if pod.Spec.NodeName != "nrt-aligned" {
		t.Fatalf("pod enc-nrt bound to %q, want nrt-aligned (NUMA free [8,0])", pod.Spec.NodeName)
	}
	c.note("pod enc-nrt (6 CPUs, single-numa-node) bound to %s by NodeResourceTopology", pod.Spec.NodeName)

	// The publishers update their objects (the informer's events): the
	// aligned node now has [2,0] left, the lopsided one [3,6].
	for name, f := range map[string][]int{"nrt-aligned": {2, 0}, "nrt-lopsided": {3, 6}} {
		cur, err := dyn.Resource(extender.NRTResource).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		upd := nodestatetest.NRT(t, name, f...)
		upd.SetResourceVersion(cur.GetResourceVersion())
		if _, err := dyn.Resource(extender.NRTResource).Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("updating the NodeResourceTopology of %s: %v", name, err)
		}
	}
	// The extender's informer follows by watch: ask the extender itself,
	// as the scheduler would, until its answer reflects the update.
	nodes, err := c.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	probe := kubetest.CPUPod("probe", "default", "6")
	var kept []string
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		kept = filterKeeps(t, fmt.Sprintf("http://127.0.0.1:%d/filter", port), probe, nodes.Items)
		return len(kept) == 1 && kept[0] == "nrt-lopsided", nil
	})
	if err != nil {
		t.Fatalf("the extender keeps %v for a 6-CPU pod after the updates, want [nrt-lopsided]", kept)
	}
	second := kubetest.CPUPod("enc2-nrt", "default", "6")
	c.create(ctx, second)
	second = c.waitBound(ctx, second)
	if second.Spec.NodeName != "nrt-lopsided" {
		t.Fatalf("pod enc2-nrt bound to %q after the updates, want nrt-lopsided (NUMA free [3,6])", second.Spec.NodeName)
	}
	c.note("pod enc2-nrt (6 CPUs) bound to %s after the objects changed", second.Spec.NodeName)

	big := kubetest.CPUPod("big-nrt", "default", "9")
	c.create(ctx, big)
	want := "0/3 nodes are available: 3 no NUMA node with 9 free CPUs."
	msg := c.waitUnschedulable(ctx, big, want)
	if !strings.HasPrefix(msg, want) {
		t.Fatalf("pod big-nrt: message %q, want it to start %q", msg, want)
	}
	c.note("pod big-nrt (9 CPUs, single-numa-node): Unschedulable: %s", msg)
	if strings.Contains(ext.Log.String(), "NodeResourceTopology ignored") {
		t.Errorf("the extender ignored an object corepin's own builder made:\n%s", kubetest.Tail(ext.Log.String(), 2048))
	}
}

// koordNRT is the NodeResourceTopology koordlet writes for node koord-a
// (v1alpha1, the machine and what holds it in annotations, zones without
// available CPUs), kept beside the extender's unit tests.
const koordNRT = "../../../kube/nodestate/testdata/koordinator-nrt-v1alpha1.json"

// TestRealSchedulerWithKoordinatorNRT: an API server serving
// NodeResourceTopology at v1alpha1 only, as Koordinator installs it, and
// one node described by koordlet's object alone: 2 sockets of 4 two-thread
// cores, kubelet static with full-pcpus-only and CPU 0 reserved, CPU 8
// reserved by Koordinator, a kubelet pod on 1,9, Koordinator LSE on
// 4-5,12-13 and LSR on 6,14 (seen through its shared pools), topology
// policy SingleNUMANodeContainerLevel. Free: cores 2 and 3 on NUMA node 0,
// core 7 on node 1. The real scheduler, through `corepin extender --nrt`,
// binds what the node's own kubelet and Koordinator would take there and
// refuses the rest with the node's reason.
func TestRealSchedulerWithKoordinatorNRT(t *testing.T) {
	bin, corepin := need(t)
	c := startControlPlane(t, bin)
	dyn, err := dynamic.NewForConfig(c.cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	kubetest.InstallNRTCRD(ctx, t, dyn, "v1alpha1")

	raw, err := os.ReadFile(koordNRT)
	if err != nil {
		t.Fatal(err)
	}
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(raw); err != nil {
		t.Fatal(err)
	}
	n := kubetest.Node(t, obj.GetName(), "")
	n.Annotations = nil // only koordlet's object speaks for it
	node, err := c.cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Owned by the real Node, as koordlet writes it.
	refs := obj.GetOwnerReferences()
	refs[0].UID = node.UID
	obj.SetOwnerReferences(refs)
	if _, err := dyn.Resource(extender.NRTResourceV1alpha1).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating koordlet's NodeResourceTopology (v1alpha1): %v", err)
	}

	port, ext := c.startNRTExtender(corepin, "--track-pods")
	c.startScheduler("kube-scheduler", kubetest.ShippedSchedulerConfig(t, c.kubeconfig(), port))

	// Refusals first: a refused pod holds nothing, a bound one takes from
	// the node's 16 allocatable CPUs in the scheduler's own resource fit.
	for _, tc := range []struct {
		pod          *corev1.Pod
		want         string
		unresolvable bool
	}{
		// The node has 16 CPUs and 0 and 8 are reserved: not even an
		// empty node would do, so preemption cannot help.
		{plain("koord-16", "16", "none"), "0/1 nodes are available: 1 fewer than 16 free CPUs in whole cores.", true},
		// Free: cores 2 and 3 on NUMA node 0, core 7 on node 1, 6 CPUs
		// in whole cores, 4 of them on one NUMA node.
		{plain("koord-8", "8", "none"), "0/1 nodes are available: 1 fewer than 8 free CPUs in whole cores.", false},
		{plain("koord-6", "6", ""), "0/1 nodes are available: 1 no NUMA node with 6 free CPUs (the node's default topology policy single-numa-node).", false},
	} {
		c.create(ctx, tc.pod)
		msg := c.waitUnschedulable(ctx, tc.pod, tc.want)
		if !strings.HasPrefix(msg, tc.want) {
			t.Fatalf("pod %s: message %q, want it to start %q", tc.pod.Name, msg, tc.want)
		}
		if got := strings.Contains(msg, "Preemption is not helpful"); got != tc.unresolvable {
			t.Fatalf("pod %s: message %q: preemption ruled out %v, want %v", tc.pod.Name, msg, got, tc.unresolvable)
		}
		c.note("pod %s (%s CPUs): Unschedulable: %s", tc.pod.Name, tc.pod.Spec.Containers[0].Resources.Requests.Cpu(), msg)
	}
	bind := func(p *corev1.Pod) {
		t.Helper()
		if got := c.waitBound(ctx, p).Spec.NodeName; got != "koord-a" {
			t.Fatalf("pod %s bound to %q, want koord-a", p.Name, got)
		}
		c.note("pod %s (%s CPUs, topology policy %q) bound to koord-a by koordlet's NodeResourceTopology", p.Name,
			p.Spec.Containers[0].Resources.Requests.Cpu(), cmp.Or(p.Annotations[extender.AnnotationNUMAPolicy], "the node's"))
	}
	four := plain("koord-4", "4", "")
	c.create(ctx, four)
	bind(four)
	// koord-4 takes NUMA node 0's two free cores; koordlet has not
	// reported it (no koordlet runs here), but it was bound after the
	// object last changed (--track-pods): the 6 CPUs in whole cores the
	// object shows are 2 now.
	metrics := fmt.Sprintf("http://127.0.0.1:%d/metrics", port)
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return kubetest.Scrape(t, metrics)["corepin_extender_bound_pods"] == 1, nil
	}); err != nil {
		t.Fatal("the extender never kept koord-4")
	}
	sixNone := plain("koord-6-none", "6", "none")
	c.create(ctx, sixNone)
	want := "0/1 nodes are available: 1 fewer than 6 free CPUs in whole cores" + extender.ComingSuffix + "."
	msg := c.waitUnschedulable(ctx, sixNone, want)
	if !strings.HasPrefix(msg, want) {
		t.Fatalf("pod %s: message %q, want it to start %q", sixNone.Name, msg, want)
	}
	c.note("pod %s (6 CPUs, topology policy \"none\"): Unschedulable: %s", sixNone.Name, msg)
	zero := int64(0)
	if err := c.cs.CoreV1().Pods("default").Delete(ctx, four.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	bind(sixNone)
	if strings.Contains(ext.Log.String(), "NodeResourceTopology ignored") {
		t.Errorf("the extender ignored koordlet's object:\n%s", kubetest.Tail(ext.Log.String(), 2048))
	}
	c.simulateAgrees(corepin)
	c.report(t)
}

// simulateAgrees replays the same five pods, in the same order, with
// corepin simulate --from-cluster --nrt --policies as-deployed over the
// real API server's Node and koordlet's object: the replay reads the
// object through discovery and a list as the extender does, and refuses
// and admits exactly the pods the scheduler refused and bound, for the
// same causes (refused pods hold nothing): koord-6-none comes while
// koord-4 holds its CPUs, as the extender tracking bound pods judged it.
func (c *cluster) simulateAgrees(corepin string) {
	t := c.t
	trace := c.write("koord-trace.jsonl", []byte(strings.Join([]string{
		`{"t":0,"op":"arrive","id":"koord-16","request":{"cpus":16,"qos":"LSE","topology_policy":"none"}}`,
		`{"t":1,"op":"arrive","id":"koord-8","request":{"cpus":8,"qos":"LSE","topology_policy":"none"}}`,
		`{"t":2,"op":"arrive","id":"koord-6","request":{"cpus":6,"qos":"LSE"}}`,
		`{"t":3,"op":"arrive","id":"koord-4","request":{"cpus":4,"qos":"LSE"}}`,
		`{"t":4,"op":"arrive","id":"koord-6-none","request":{"cpus":6,"qos":"LSE","topology_policy":"none"}}`,
	}, "\n")+"\n"))
	cmd := exec.Command(corepin, "simulate", "--trace", trace, "--from-cluster", "--nrt", "--kubeconfig", c.kubeconfig(),
		"--policies", "as-deployed", "--node-choice", "first-fit", "-o", "json")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("corepin simulate --from-cluster --nrt: %v\n%s", err, out)
	}
	var rep struct {
		NodeSources []struct {
			Node, Source string
		} `json:"node_sources"`
		Results []struct {
			Scenario           string
			Admitted, Rejected int
			RejectedBy         map[string]int `json:"rejected_by"`
		} `json:"scenarios"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("corepin simulate -o json: %v\n%s", err, out)
	}
	if len(rep.NodeSources) != 1 || rep.NodeSources[0].Node != "koord-a" || rep.NodeSources[0].Source != "nrt-koordinator" {
		t.Fatalf("simulate's nodes %+v, want koord-a from koordlet's object (nrt-koordinator)\n%s", rep.NodeSources, out)
	}
	want := map[string]int{"capacity": 3, "single-numa-node": 1}
	if len(rep.Results) != 1 || rep.Results[0].Scenario != "as-deployed" || rep.Results[0].Admitted != 1 || rep.Results[0].Rejected != 4 ||
		!maps.Equal(rep.Results[0].RejectedBy, want) {
		t.Fatalf("simulate as-deployed: %+v, want 1 admitted and 4 rejected (%v), as the scheduler bound and refused them\n%s", rep.Results, want, out)
	}
	c.note("corepin simulate --from-cluster --nrt --policies as-deployed over koordlet's object: %d admitted, %d rejected, as the scheduler and extender decided", rep.Results[0].Admitted, rep.Results[0].Rejected)
}
