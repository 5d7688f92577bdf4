// Package e2ecluster runs corepin's scheduler extender and sweep Jobs
// against a real control plane: etcd, kube-apiserver and kube-scheduler
// binaries built from the Kubernetes modules (make e2e-cluster caches
// them), the real `corepin extender`, and the scheduler configuration the
// deploy manifests ship; and corepin-scheduler, kube-scheduler with
// corepin's framework plugin (make sched), in place of the extender. There
// is no kubelet: nodes are API objects, pods
// are bound or refused and Jobs are accepted, none runs.
package e2ecluster

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/corepin/corepin/kube/extender"
	"github.com/corepin/corepin/test/kube/kubetest"
)

// env names what make e2e-cluster hands the test.
const (
	envBin     = "COREPIN_KUBE_BIN" // directory with etcd, kube-apiserver, kube-scheduler
	envCorepin = "COREPIN_BIN"      // the corepin binary
	envReport  = "COREPIN_E2E_REPORT"
)

// cluster is one running control plane.
type cluster struct {
	t       *testing.T
	dir     string
	bin     string
	token   string
	api     string // https://127.0.0.1:port
	kc      string // kubeconfig file
	ps      *kubetest.Procs
	cfg     *rest.Config
	cs      kubernetes.Interface
	timings []string
}

func (c *cluster) note(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	c.t.Log(line)
	c.timings = append(c.timings, line)
}

func (c *cluster) write(name string, data []byte) string {
	c.t.Helper()
	p := filepath.Join(c.dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		c.t.Fatal(err)
	}
	return p
}

func need(t *testing.T) (bin, corepin string) {
	bin, corepin = os.Getenv(envBin), os.Getenv(envCorepin)
	if bin == "" || corepin == "" {
		t.Skipf("run through make e2e-cluster (%s and %s unset)", envBin, envCorepin)
	}
	for _, b := range []string{filepath.Join(bin, "etcd"), filepath.Join(bin, "kube-apiserver"), filepath.Join(bin, "kube-scheduler"), corepin} {
		if _, err := os.Stat(b); err != nil {
			t.Fatalf("%v (make e2e-cluster builds it)", err)
		}
	}
	return bin, corepin
}

// startControlPlane starts etcd and kube-apiserver (bearer-token admin,
// AlwaysAllow, self-signed serving cert) and returns a client.
func startControlPlane(t *testing.T, bin string) *cluster {
	dir, err := os.MkdirTemp("", "kc-")
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t, dir: dir, bin: bin, ps: &kubetest.Procs{T: t}}
	t.Cleanup(func() {
		c.ps.Stop()
		os.RemoveAll(dir)
	})

	cp := kubetest.StartControlPlane(t, c.ps, bin, dir)
	c.note("kube-apiserver ready %.1f s after etcd started", cp.Ready.Seconds())
	c.api, c.token, c.cfg, c.cs, c.kc = cp.API, cp.Token, cp.Config, cp.Client, cp.Kubeconfig
	return c
}

func (c *cluster) kubeconfig() string { return c.kc }

// chartSchedulerConfig is the scheduler configuration the Helm chart ships
// for its second scheduler in extender mode (scheduler.enabled,
// scheduler.mode extender: kube-scheduler beside corepin's extender),
// rendered with the extender's port, with the kubeconfig the pod's service
// account stands in for here (the chart's client qps and burst kept).
func chartSchedulerConfig(t *testing.T, kubeconfig string, extPort int) []byte {
	t.Helper()
	cfg := kubetest.ChartSchedulerConfig(t, map[string]any{"mode": "extender", "extenderPort": extPort})
	cc, _ := cfg["clientConnection"].(map[string]any)
	if cc == nil {
		cc = map[string]any{}
	}
	cc["kubeconfig"] = kubeconfig
	cfg["clientConnection"] = cc
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// startExtender runs the real corepin extender with args besides its
// address and returns its port once /healthz answers ok.
func (c *cluster) startExtender(corepin string, args ...string) int {
	_, ports := kubetest.StartServing(c.t, 1, time.Minute, func(ports []int) (*kubetest.Proc, string, string) {
		return c.ps.Start(strings.Join(append([]string{"corepin extender"}, args...), " "), nil, corepin,
				append([]string{"extender", "--listen", fmt.Sprintf("127.0.0.1:%d", ports[0])}, args...)...),
			fmt.Sprintf("http://127.0.0.1:%d/healthz", ports[0]), ""
	})
	return ports[0]
}

// startScheduler runs kube-scheduler with configuration cfg and the flags
// the chart runs it with beside the extender: a pod the extender refused
// is tried again within a minute even when no event comes (it refuses
// for pods bound and not yet admitted, and one of them may go before the
// extender hears of it; deploy/kubernetes/scheduler/scheduler-config.yaml).
func (c *cluster) startScheduler(name string, cfg []byte) {
	kc := c.kubeconfig()
	path := c.write(name+".yaml", cfg)
	begin := time.Now()
	kubetest.StartServing(c.t, 1, 60*time.Second, func(ports []int) (*kubetest.Proc, string, string) {
		return c.ps.Start(name, nil, filepath.Join(c.bin, "kube-scheduler"), "--config="+path,
			fmt.Sprintf("--secure-port=%d", ports[0]), "--bind-address=127.0.0.1",
			"--authentication-kubeconfig="+kc, "--authorization-kubeconfig="+kc,
			"--pod-max-in-unschedulable-pods-duration=30s"), fmt.Sprintf("https://127.0.0.1:%d/healthz", ports[0]), ""
	})
	c.note("%s healthy %.1f s after start", name, time.Since(begin).Seconds())
}

// create creates pod and returns when it was created.
func (c *cluster) create(ctx context.Context, pod *corev1.Pod) time.Time {
	c.t.Helper()
	created := time.Now()
	if _, err := c.cs.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		c.t.Fatalf("creating pod %s: %v", pod.Name, err)
	}
	return created
}

// waitBound waits until pod is bound and returns the pod as bound. It
// allows the scheduler's retry of a refused pod with no event to come
// (startScheduler: up to 30 s unschedulable plus the 30 s flush period).
func (c *cluster) waitBound(ctx context.Context, pod *corev1.Pod) *corev1.Pod {
	c.t.Helper()
	var got *corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := c.cs.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		got = p
		return err == nil && p.Spec.NodeName != "", err
	})
	if err != nil {
		c.t.Fatalf("pod %s not bound: %v", pod.Name, err)
	}
	return got
}

// waitUnschedulable waits until the scheduler marks pod Unschedulable
// with a message that starts with want (any message, if want is empty) and
// returns the message; the pod being bound fails the test. A scheduler
// that judged the pod before its informers had every node, pod or update
// judges it again (a refusal is retried on backoff and on a node's
// change), so waiting for the message waits for the scheduler to catch up.
func (c *cluster) waitUnschedulable(ctx context.Context, pod *corev1.Pod, want string) string {
	c.t.Helper()
	var msg string
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := c.cs.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable {
				msg = cond.Message
				return strings.HasPrefix(msg, want), nil
			}
		}
		if p.Spec.NodeName != "" {
			return false, fmt.Errorf("pod %s bound to %s", p.Name, p.Spec.NodeName)
		}
		return false, nil
	})
	if err != nil {
		c.t.Fatalf("pod %s not Unschedulable with a message starting %q: %v (last message %q)", pod.Name, want, err, msg)
	}
	return msg
}

// bindAndRefuse creates the 6-CPU pod that only "aligned" can take and the
// 9-CPU pod no node can, for scheduler schedulerName ("" is the default).
func (c *cluster) bindAndRefuse(ctx context.Context, schedulerName string) {
	t := c.t
	suffix := ""
	if schedulerName != "" {
		suffix = "-" + schedulerName
	}
	enc := kubetest.CPUPod("enc"+suffix, "default", "6")
	enc.Spec.SchedulerName = schedulerName
	created := c.create(ctx, enc)
	pod := c.waitBound(ctx, enc)
	bound := time.Since(created)
	if pod.Spec.NodeName != "aligned" {
		t.Fatalf("pod %s bound to %q, want aligned", pod.Name, pod.Spec.NodeName)
	}
	c.note("pod %s (6 CPUs, single-numa-node, scheduler %s) bound to %s %d ms after creation", pod.Name, pod.Spec.SchedulerName, pod.Spec.NodeName, bound.Milliseconds())

	big := kubetest.CPUPod("big"+suffix, "default", "9")
	big.Spec.SchedulerName = schedulerName
	c.create(ctx, big)
	want := "0/3 nodes are available: 3 no NUMA node with 9 free CPUs."
	msg := c.waitUnschedulable(ctx, big, want)
	if !strings.HasPrefix(msg, want) {
		t.Fatalf("pod %s: message %q, want it to start %q", big.Name, msg, want)
	}
	if !strings.Contains(msg, "Preemption is not helpful") {
		t.Fatalf("pod %s: message %q: want preemption ruled out (FailedAndUnresolvableNodes)", big.Name, msg)
	}
	c.note("pod %s (9 CPUs, single-numa-node, scheduler %s): Unschedulable: %s", big.Name, cmp.Or(schedulerName, corev1.DefaultSchedulerName), msg)

	// Leave the nodes as they were for the next round.
	zero := int64(0)
	for _, name := range []string{pod.Name, big.Name} {
		if err := c.cs.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			t.Fatal(err)
		}
	}
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := c.cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) == 0, err
	})
	if err != nil {
		t.Fatalf("deleting the round's pods: %v", err)
	}
	// The other scheduler's caches follow by watch: the next round waits
	// for its outcomes, which it reaches once they have.
}

// TestRealSchedulerWithShippedConfig runs two real kube-schedulers beside
// one real corepin extender: the cluster's default scheduler under
// deploy/kubernetes/scheduler/scheduler-config.yaml, and the Helm chart's
// second scheduler (corepin-scheduler) under the configuration its
// ConfigMap holds. Each binds the pod only one node can align and leaves
// the pod no node can align Unschedulable with corepin's reason.
func TestRealSchedulerWithShippedConfig(t *testing.T) {
	bin, corepin := need(t)
	c := startControlPlane(t, bin)
	port := c.startExtender(corepin)
	c.startScheduler("kube-scheduler", kubetest.ShippedSchedulerConfig(t, c.kubeconfig(), port))
	c.startScheduler("corepin-scheduler", chartSchedulerConfig(t, c.kubeconfig(), port))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, n := range kubetest.Nodes(t) {
		if _, err := c.cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating node %s: %v", n.Name, err)
		}
	}
	// A pod created before the schedulers' informers see the three nodes
	// is judged on fewer, then again: bindAndRefuse waits for the outcome.
	c.bindAndRefuse(ctx, "")
	c.bindAndRefuse(ctx, "corepin-scheduler")
	c.report(t)
}

// plain is a Guaranteed pod of cpus whole CPUs naming topology policy
// policy, or none at all when policy is "" (the node's default applies).
func plain(name, cpus, policy string) *corev1.Pod {
	p := kubetest.CPUPod(name, "default", cpus)
	delete(p.Annotations, extender.AnnotationNUMAPolicy)
	if policy != "" {
		p.Annotations[extender.AnnotationNUMAPolicy] = policy
	}
	return p
}

// TestRealSchedulerHonoursNodeSettings gives the three nodes the settings
// a corepin node publishes beside its state (corepin.io/allocator) with a
// node-wide default topology policy single-numa-node, as `corepin nri
// --topology-policy single-numa-node --annotate-node` does. Pods that
// name no topology policy then get the node's: the 6-CPU one is bound to
// the only node that can align it and the 9-CPU one is Unschedulable with
// the reason naming the node's default, while a 9-CPU pod that names
// policy none itself is bound.
func TestRealSchedulerHonoursNodeSettings(t *testing.T) {
	bin, corepin := need(t)
	c := startControlPlane(t, bin)
	port := c.startExtender(corepin)
	c.startScheduler("kube-scheduler", kubetest.ShippedSchedulerConfig(t, c.kubeconfig(), port))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, n := range kubetest.Nodes(t) {
		n.Annotations[extender.AnnotationAllocator] = `{"policy":"corepin","topology_policy":"single-numa-node"}`
		if _, err := c.cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating node %s: %v", n.Name, err)
		}
	}
	enc := plain("enc-plain", "6", "")
	c.create(ctx, enc)
	if got := c.waitBound(ctx, enc).Spec.NodeName; got != "aligned" {
		t.Fatalf("pod %s (6 CPUs, no topology policy of its own) bound to %q, want aligned: the nodes' default is single-numa-node", enc.Name, got)
	}
	c.note("pod %s (6 CPUs, no corepin.io/numa-policy; nodes default single-numa-node) bound to aligned", enc.Name)

	big := plain("big-plain", "9", "")
	c.create(ctx, big)
	want := "0/3 nodes are available: 3 no NUMA node with 9 free CPUs (the node's default topology policy single-numa-node)."
	msg := c.waitUnschedulable(ctx, big, want)
	if !strings.HasPrefix(msg, want) {
		t.Fatalf("pod %s: message %q, want it to start %q", big.Name, msg, want)
	}
	c.note("pod %s (9 CPUs, no corepin.io/numa-policy): Unschedulable: %s", big.Name, msg)

	// The pod's own annotation overrides the node's default: 9 CPUs
	// spread over both NUMA nodes fit on split (10 free).
	spread := plain("big-none", "9", "none")
	c.create(ctx, spread)
	if got := c.waitBound(ctx, spread).Spec.NodeName; got != "split" {
		t.Fatalf("pod %s (9 CPUs, corepin.io/numa-policy: none) bound to %q, want split, the only node with 9 free CPUs", spread.Name, got)
	}
	c.note("pod %s (9 CPUs, corepin.io/numa-policy: none) bound to split", spread.Name)
	c.report(t)
}

// jobsResource maps the kinds `corepin kube jobs` writes to API resources.
var jobsResource = map[string]schema.GroupVersionResource{
	"batch/v1/Job": {Group: "batch", Version: "v1", Resource: "jobs"},
	"v1/ConfigMap": {Version: "v1", Resource: "configmaps"},
	"v1/Namespace": {Version: "v1", Resource: "namespaces"},
	"v1/Pod":       {Version: "v1", Resource: "pods"},
}

func TestKubeJobsAcceptedByRealAPIServer(t *testing.T) {
	bin, corepin := need(t)
	c := startControlPlane(t, bin)
	dyn, err := dynamic.NewForConfig(c.cfg)
	if err != nil {
		t.Fatal(err)
	}
	topo := c.write("node-type.json", []byte(kubetest.TopologyDoc(t)))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, sweep := range []string{"concurrency", "threads", "throughput"} {
		for _, quick := range []bool{true, false} {
			// Each variant in its namespace: the quick and full sweeps name
			// their Jobs alike.
			ns, name := "corepin-"+sweep+"-full", sweep
			args := []string{"kube", "jobs", "--sweep", sweep, "--topology", topo, "--image", "corepin/corepin:e2e", "--repeats", "2"}
			if quick {
				ns, name = "corepin-"+sweep+"-quick", sweep+" --quick"
				args = append(args, "--quick")
			}
			args = append(args, "--namespace", ns)
			if !quick {
				// The full sweeps as they run under the chart's scheduler.
				args = append(args, "--scheduler-name", "corepin-scheduler", "--numa-policy", "single-numa-node", "--host-network")
				name += " --scheduler-name corepin-scheduler --numa-policy single-numa-node --host-network"
			}
			var stderr bytes.Buffer
			cmd := exec.CommandContext(ctx, corepin, args...)
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("corepin %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
			}
			objs := decodeYAMLStream(t, out)
			if len(objs) == 0 {
				t.Fatalf("%s: no objects", name)
			}
			kinds := map[string]int{}
			for _, o := range objs {
				gvk := o.GroupVersionKind()
				key := strings.TrimPrefix(gvk.Group+"/"+gvk.Version+"/"+gvk.Kind, "/")
				res, ok := jobsResource[key]
				if !ok {
					t.Fatalf("%s: object %s of kind %s: the test knows no resource for it", name, o.GetName(), key)
				}
				kinds[gvk.Kind]++
				if got := o.GetNamespace(); got != ns {
					t.Fatalf("%s: object %s in namespace %q, want --namespace %s", name, o.GetName(), got, ns)
				}
				var ri dynamic.ResourceInterface = dyn.Resource(res)
				if ns != "" {
					if _, err := c.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !isAlreadyExists(err) {
						t.Fatal(err)
					}
					ri = dyn.Resource(res).Namespace(ns)
				}
				// Server-side dry run: full validation and admission, nothing stored.
				if _, err := ri.Create(ctx, o, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"}); err != nil {
					t.Fatalf("%s: server-side dry run of %s %s refused: %v", name, gvk.Kind, o.GetName(), err)
				}
				if quick {
					// And for real: the quick sweep is created and read back.
					if _, err := ri.Create(ctx, o, metav1.CreateOptions{FieldValidation: "Strict"}); err != nil {
						t.Fatalf("%s: creating %s %s: %v", name, gvk.Kind, o.GetName(), err)
					}
				}
			}
			c.note("corepin kube jobs --sweep %s: %d objects %v accepted by kube-apiserver (server-side dry run, strict field validation)", name, len(objs), kinds)
		}
	}
	jobs, err := c.cs.BatchV1().Jobs("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs.Items) == 0 {
		t.Fatal("no Jobs stored after creating the quick sweeps")
	}
	c.note("%d Jobs of the quick sweeps created and listed back", len(jobs.Items))
	c.report(t)
}

func isAlreadyExists(err error) bool {
	return err != nil && strings.Contains(err.Error(), "already exists")
}

// decodeYAMLStream reads a multi-document YAML (or JSON) stream, as
// kubectl apply -f does, and flattens List objects.
func decodeYAMLStream(t *testing.T, data []byte) []*unstructured.Unstructured {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			t.Fatalf("decoding corepin kube jobs output: %v", err)
		}
		if m == nil {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if u.IsList() {
			l, err := u.ToList()
			if err != nil {
				t.Fatal(err)
			}
			for i := range l.Items {
				out = append(out, &l.Items[i])
			}
			continue
		}
		out = append(out, u)
	}
}

// report appends the test's figures to $COREPIN_E2E_REPORT.
func (c *cluster) report(t *testing.T) {
	path := os.Getenv(envReport)
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Logf("report: %v", err)
		return
	}
	defer f.Close()
	b, _ := json.Marshal(map[string]any{"test": t.Name(), "at": time.Now().UTC().Format(time.RFC3339), "notes": c.timings})
	fmt.Fprintf(f, "%s\n", b)
}

// TestHundredNodes schedules 50 pods one after another on 100 nodes
// through the real kube-scheduler and the real extender, and reports each
// pod's creation-to-binding time and the extender's own call durations
// (its /metrics histogram): the extender's cost in a cluster of 100 nodes
// as the scheduler sees it, beside `make bench`'s BenchmarkFilterPrioritize100Nodes.
// The extender runs as the chart runs it (--track-pods) and every node
// names its admitted pods (pod_uids), so each pod bound counts on its
// node's CPUs until the node publishes it (here it never does).
func TestHundredNodes(t *testing.T) {
	bin, corepin := need(t)
	c := startControlPlane(t, bin)
	port := c.startExtender(corepin, "--track-pods", "--kubeconfig", c.kubeconfig(), "--nrt-sync-timeout", "1m")
	c.startScheduler("kube-scheduler", kubetest.ShippedSchedulerConfig(t, c.kubeconfig(), port))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const nodes, pods = 100, 50
	for i := range nodes {
		// A different CPU held on each node: distinct states.
		n := kubetest.Node(t, fmt.Sprintf("node-%03d", i), fmt.Sprintf(`[{"id":"x/held","cpuset":"%d","qos":"LSE"}]`, i%16))
		n.Annotations[extender.AnnotationAllocator] = `{"policy":"corepin","pod_uids":true}`
		if _, err := c.cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	metricsURL := fmt.Sprintf("http://127.0.0.1:%d/metrics", port)
	// filterCounts is how many /filter calls the extender answered and how
	// many nodes they judged in all.
	filterCounts := func() (calls, judged float64) {
		m := kubetest.Scrape(t, metricsURL)
		return m[`corepin_extender_request_duration_seconds_count{verb="filter"}`],
			m[`corepin_extender_filtered_nodes_total{result="kept"}`] + m[`corepin_extender_filtered_nodes_total{result="failed"}`] +
				m[`corepin_extender_filtered_nodes_total{result="unresolvable"}`]
	}
	// The extender is handed only the nodes kube-scheduler's own filters
	// kept, and those drop a node whose 16 CPUs are all requested: four
	// pods of 4 CPUs. (The nodes' published assignments never change
	// here, no plugin runs, so the extender may well favour one node until
	// it is full.) open is how many nodes the next pod's /filter call
	// should judge.
	perNode := map[string]int{}
	open := func() float64 {
		full := 0
		for _, n := range perNode {
			if n >= 16/4 {
				full++
			}
		}
		return float64(nodes - full)
	}
	bind := func(name string) time.Duration {
		t.Helper()
		created := time.Now()
		p, err := c.cs.CoreV1().Pods("default").Create(ctx, kubetest.CPUPod(name, "default", "4"), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		err = wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			got, err := c.cs.CoreV1().Pods("default").Get(ctx, p.Name, metav1.GetOptions{})
			return err == nil && got.Spec.NodeName != "", err
		})
		if err != nil {
			t.Fatalf("pod %s not bound: %v", p.Name, err)
		}
		took := time.Since(created)
		got, err := c.cs.CoreV1().Pods("default").Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		perNode[got.Spec.NodeName]++
		return took
	}
	// Warm-up pods until one /filter call judged every open node: the
	// scheduler's node informer has caught up with the creations (a fixed
	// sleep was not enough on a loaded machine).
	for i := 0; ; i++ {
		c0, j0 := filterCounts()
		want := open()
		bind(fmt.Sprintf("warm-%02d", i))
		c1, j1 := filterCounts()
		if c1 > c0 && j1-j0 == (c1-c0)*want {
			break
		}
		if i == 20 {
			t.Fatalf("after %d warm-up pods the scheduler still sends fewer than %v nodes per /filter call (last: %v calls, %v nodes)", i+1, want, c1-c0, j1-j0)
		}
		time.Sleep(500 * time.Millisecond)
	}
	calls0, judged0 := filterCounts()
	var lat []time.Duration
	wantJudged := 0.0
	for i := range pods {
		wantJudged += open()
		lat = append(lat, bind(fmt.Sprintf("enc-%02d", i)))
	}
	most := 0
	for _, n := range perNode {
		most = max(most, n)
	}
	slices.Sort(lat)
	c.note("%d pods (4 CPUs, single-numa-node) on %d nodes, one at a time: creation to binding p50 %d ms, p99 %d ms, max %d ms",
		pods, nodes, lat[len(lat)/2].Milliseconds(), lat[len(lat)*99/100].Milliseconds(), lat[len(lat)-1].Milliseconds())

	// The extender counts a call once its answer is written, so the last
	// call may show a moment after the pod is bound: poll briefly.
	var calls, judged float64
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		c1, j1 := filterCounts()
		calls, judged = c1-calls0, j1-judged0
		return calls >= pods && judged >= wantJudged, nil
	})
	if err != nil || calls != pods || judged != wantJudged {
		t.Fatalf("extender: %v filter calls judged %v nodes, want %d calls judging %v nodes in all (every node kube-scheduler's own filters kept; %d nodes full, at most %d pods on one)",
			calls, judged, pods, wantJudged, nodes-int(open()), most)
	}
	c.note("extender /filter judged %v nodes over %v calls (%d nodes filled by kube-scheduler's own filters first; at most %d pods on one node)", judged, calls, nodes-int(open()), most)
	// Every pod bound counts on its node (--track-pods): the extender
	// keeps them all.
	total := 0
	for _, n := range perNode {
		total += n
	}
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return kubetest.Scrape(t, metricsURL)["corepin_extender_bound_pods"] == float64(total), nil
	})
	if err != nil {
		t.Fatalf("extender keeps %v bound pods, want the %d bound", kubetest.Scrape(t, metricsURL)["corepin_extender_bound_pods"], total)
	}
	m := kubetest.Scrape(t, metricsURL)
	for _, verb := range []string{"filter", "prioritize"} {
		n := m[fmt.Sprintf(`corepin_extender_request_duration_seconds_count{verb=%q}`, verb)]
		sum := m[fmt.Sprintf(`corepin_extender_request_duration_seconds_sum{verb=%q}`, verb)]
		c.note("extender /%s: %v calls of %d nodes, mean %.2f ms, p99 at most %s (histogram bucket)", verb, n, nodes,
			1000*sum/n, p99Bucket(m, verb))
	}
	c.report(t)
}

// p99Bucket is the upper bound of the histogram bucket holding verb's 99th
// percentile call.
func p99Bucket(m map[string]float64, verb string) string {
	total := m[fmt.Sprintf(`corepin_extender_request_duration_seconds_count{verb=%q}`, verb)]
	type bucket struct {
		le    float64
		count float64
	}
	var bs []bucket
	prefix := `corepin_extender_request_duration_seconds_bucket{verb="` + verb + `",le="`
	for k, v := range m {
		le, ok := strings.CutPrefix(k, prefix)
		if !ok {
			continue
		}
		le = strings.TrimSuffix(le, `"}`)
		var f float64
		if le == "+Inf" {
			f = math.Inf(1)
		} else if _, err := fmt.Sscan(le, &f); err != nil {
			continue
		}
		bs = append(bs, bucket{f, v})
	}
	slices.SortFunc(bs, func(a, b bucket) int { return cmp.Compare(a.le, b.le) })
	for _, b := range bs {
		if b.count >= 0.99*total {
			return fmt.Sprintf("%g ms", 1000*b.le)
		}
	}
	return "?"
}
