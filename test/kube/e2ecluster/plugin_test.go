package e2ecluster

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/kube/nodestate"
	"github.com/corepin/corepin/kube/podreq"
	"github.com/corepin/corepin/test/kube/kubetest"
)

// envSched names the corepin-scheduler binary (make sched builds it).
const envSched = "COREPIN_SCHED_BIN"

// pluginScheduler is the scheduler name of the profile that runs corepin's
// framework plugin.
const pluginScheduler = "corepin"

// startPluginScheduler runs the real corepin-scheduler binary (kube-scheduler
// with corepin's framework plugin) with one profile, pluginScheduler,
// enabling the plugin at every extension point it implements, and client
// qps and burst for a burst of pods.
func (c *cluster) startPluginScheduler(t *testing.T) {
	sched := os.Getenv(envSched)
	if sched == "" {
		t.Skipf("run through make e2e-cluster (%s unset)", envSched)
	}
	cfg := fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: false
clientConnection:
  kubeconfig: %s
  qps: 1000
  burst: 1000
profiles:
- schedulerName: %s
  plugins:
    multiPoint:
      enabled:
      - name: Corepin
`, c.kubeconfig(), pluginScheduler)
	path := c.write("corepin-scheduler.yaml", []byte(cfg))
	kc := c.kubeconfig()
	begin := time.Now()
	kubetest.StartServing(t, 1, 60*time.Second, func(ports []int) (*kubetest.Proc, string, string) {
		return c.ps.Start("corepin-scheduler", nil, sched, "--config="+path,
			fmt.Sprintf("--secure-port=%d", ports[0]), "--bind-address=127.0.0.1",
			"--authentication-kubeconfig="+kc, "--authorization-kubeconfig="+kc), fmt.Sprintf("https://127.0.0.1:%d/readyz", ports[0]), ""
	})
	c.note("corepin-scheduler ready (its informers and the NodeResourceTopology objects listed) %.1f s after start", time.Since(begin).Seconds())
}

// TestPluginThreeNodes: the three-node single-numa-node scenario through
// corepin's framework plugin (no extender runs): the 6-CPU pod is bound to
// the only node that can align it, the 9-CPU pod is Unschedulable with the
// extender's reason and preemption ruled out; then a burst of 4-CPU pods
// created at once binds only as many as the nodes can align (5), none of
// them one its node would refuse, and leaves the rest Unschedulable.
func TestPluginThreeNodes(t *testing.T) {
	bin, _ := need(t)
	c := startControlPlane(t, bin)
	c.startPluginScheduler(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	nodes := kubetest.Nodes(t)
	for _, n := range nodes {
		if _, err := c.cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating node %s: %v", n.Name, err)
		}
	}
	// bindAndRefuse waits for outcomes the scheduler reaches once its
	// informers have the nodes.
	c.bindAndRefuse(ctx, pluginScheduler)

	const burst = 8
	var pods []*corev1.Pod
	begin := time.Now()
	for i := range burst {
		p := kubetest.CPUPod(fmt.Sprintf("burst-%d", i), "default", "4")
		p.Spec.SchedulerName = pluginScheduler
		c.create(ctx, p)
		pods = append(pods, p)
	}
	var bound []*corev1.Pod
	unschedulable := 0
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		bound, unschedulable = bound[:0], 0
		for _, p := range pods {
			got, err := c.cs.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if got.Spec.NodeName != "" {
				bound = append(bound, got)
				continue
			}
			for _, cond := range got.Status.Conditions {
				if cond.Type == corev1.PodScheduled && cond.Reason == corev1.PodReasonUnschedulable {
					unschedulable++
				}
			}
		}
		return len(bound)+unschedulable == burst, nil
	})
	if err != nil {
		t.Fatalf("burst of %d pods: %d bound, %d Unschedulable: %v", burst, len(bound), unschedulable, err)
	}
	c.note("burst of %d 4-CPU single-numa-node pods through the plugin: %d bound, %d Unschedulable, %d ms", burst, len(bound), unschedulable,
		time.Since(begin).Milliseconds())
	if len(bound) != 5 {
		t.Errorf("%d pods of the burst bound, want 5 (split 2, lopsided 1, aligned 2)", len(bound))
	}
	// Replay each node's bindings through the node's own allocator, on
	// the state it publishes: none may be refused.
	states := map[string]*alloc.State{}
	for _, n := range nodes {
		pub, err := nodestate.DecodeTopology(n.Annotations[nodestate.AnnotationTopology], n.Annotations[nodestate.AnnotationAssigned], nil)
		if err != nil {
			t.Fatal(err)
		}
		j, err := nodestate.JudgeTopology(pub)
		if err != nil {
			t.Fatal(err)
		}
		states[n.Name] = j.State
	}
	for _, p := range bound {
		req, err := podreq.Of(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := states[p.Spec.NodeName].Admit(req); err != nil {
			t.Errorf("pod %s bound to %s, which refuses it: %v", p.Name, p.Spec.NodeName, err)
		}
	}
	var names []string
	for _, p := range bound {
		names = append(names, p.Name+"->"+p.Spec.NodeName)
	}
	c.note("bound: %s", strings.Join(names, ", "))
	c.report(t)
}

// TestPluginWithNRT: three nodes publishing no corepin annotation, only a
// NodeResourceTopology each (free CPUs per NUMA node [5,5], [3,5],
// [8,0]), scheduled by corepin-scheduler's plugin: the 6-CPU
// single-numa-node pod is bound to the only node with 6 free CPUs on one
// NUMA node; a second, created before any object changes, is refused
// there for the first one's reservation; the 9-CPU one is Unschedulable
// with the extender's reason.
func TestPluginWithNRT(t *testing.T) {
	bin, _ := need(t)
	c := startControlPlane(t, bin)
	dyn, err := dynamic.NewForConfig(c.cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// Installed before the scheduler starts: it discovers the version
	// served once, at start.
	c.createNRTNodes(ctx, t, dyn)
	c.startPluginScheduler(t) // ready: its informers and the NRT objects are listed

	pod := kubetest.CPUPod("enc-nrt", "default", "6")
	pod.Spec.SchedulerName = pluginScheduler
	c.create(ctx, pod)
	if got := c.waitBound(ctx, pod).Spec.NodeName; got != "nrt-aligned" {
		t.Fatalf("pod enc-nrt bound to %q, want nrt-aligned (NUMA free [8,0])", got)
	}
	second := kubetest.CPUPod("enc2-nrt", "default", "6")
	second.Spec.SchedulerName = pluginScheduler
	c.create(ctx, second)
	msg := c.waitUnschedulable(ctx, second, "")
	if !strings.Contains(msg, "no NUMA node with 6 free CPUs"+nodestate.ComingSuffix) {
		t.Fatalf("pod enc2-nrt: message %q, want nrt-aligned refusing it for enc-nrt's reservation", msg)
	}
	c.note("pod enc2-nrt (6 CPUs) before any object changed: Unschedulable: %s", msg)
	big := kubetest.CPUPod("big-nrt", "default", "9")
	big.Spec.SchedulerName = pluginScheduler
	c.create(ctx, big)
	want := "0/3 nodes are available: 3 no NUMA node with 9 free CPUs."
	msg = c.waitUnschedulable(ctx, big, want)
	if !strings.HasPrefix(msg, want) {
		t.Fatalf("pod big-nrt: message %q, want it to start %q", msg, want)
	}
	c.note("pod big-nrt (9 CPUs): Unschedulable: %s", msg)
	c.report(t)
}
