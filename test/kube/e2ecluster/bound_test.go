package e2ecluster

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/kube/extender"
	"github.com/corepin/corepin/kube/nodestate"
	"github.com/corepin/corepin/test/kube/kubetest"
	"github.com/corepin/corepin/topology"
)

// burstShape is kubetest's machine: two NUMA nodes of 4 two-thread cores.
var burstShape = topology.Shape{Sockets: 2, NodesPerSocket: 1, L3PerNode: 1, CoresPerL3: 4, ThreadsPerCore: 2}

// TestRealSchedulerCountsBoundPods runs the real kube-scheduler with the
// real `corepin extender --track-pods` and one node whose NRI plugin names
// its admitted pods (corepin.io/allocator "pod_uids":true) but, as after a
// burst, has admitted none of the pods just bound to it. Two 5-CPU
// single-numa-node pods are bound, one NUMA node each; a third fits what
// the node published and kube-scheduler's own CPU count (15 of 16), but
// not beside the two: it is Unschedulable with corepin's reason saying
// that pods bound and not yet admitted take the CPUs. The node then
// publishes the two as its plugin does, naming their pods (not counted
// twice: still refused, by the published state now); once one of them is
// deleted and the node publishes that, the third is bound.
func TestRealSchedulerCountsBoundPods(t *testing.T) {
	bin, corepin := need(t)
	c := startControlPlane(t, bin)
	port := c.startExtender(corepin, "--track-pods", "--kubeconfig", c.kubeconfig(), "--nrt-sync-timeout", "1m")
	c.startScheduler("kube-scheduler", kubetest.ShippedSchedulerConfig(t, c.kubeconfig(), port))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	node := kubetest.Node(t, "burst", "")
	publish := func(st *alloc.State, pods map[string]string) {
		t.Helper()
		ann, coarse, err := nodestate.NodeAnnotations(st, "", pods)
		if err != nil || coarse {
			t.Fatalf("NodeAnnotations: coarse %v, %v", coarse, err)
		}
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.cs.CoreV1().Nodes().Patch(ctx, "burst", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatalf("publishing the node's state: %v", err)
		}
	}
	if _, err := c.cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	empty, err := alloc.NewState(topology.MustSynthetic(burstShape), alloc.NodeSettings{})
	if err != nil {
		t.Fatal(err)
	}
	publish(empty, map[string]string{})

	metrics := fmt.Sprintf("http://127.0.0.1:%d/metrics", port)
	tracked := func(n float64) {
		t.Helper()
		// The extender learns of a binding by watch, a moment after the
		// API server has it: a pod created within that moment would meet
		// the same CPUs (see the README).
		err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			return kubetest.Scrape(t, metrics)["corepin_extender_bound_pods"] == n, nil
		})
		if err != nil {
			t.Fatalf("the extender never kept %v bound pods", n)
		}
	}
	var bound []*corev1.Pod
	for i := range 2 {
		p := kubetest.CPUPod(fmt.Sprintf("burst-%d", i), "default", "5")
		c.create(ctx, p)
		bound = append(bound, c.waitBound(ctx, p))
		tracked(float64(i + 1))
	}
	third := kubetest.CPUPod("burst-third", "default", "5")
	c.create(ctx, third)
	want := "0/1 nodes are available: 1 no NUMA node with 5 free CPUs" + extender.ComingSuffix + "."
	msg := c.waitUnschedulable(ctx, third, want)
	if !strings.HasPrefix(msg, want) {
		t.Fatalf("pod %s: message %q, want it to start %q", third.Name, msg, want)
	}
	c.note("pods burst-0, burst-1 (5 CPUs, single-numa-node) bound to burst before it admitted them; burst-third: Unschedulable: %s", msg)

	// The node's plugin admits the two and publishes them.
	admitted := func(pods []*corev1.Pod) (*alloc.State, map[string]string) {
		st := empty.Clone()
		uids := map[string]string{}
		for _, p := range pods {
			req, err := extender.RequestOf(p)
			if err != nil {
				t.Fatal(err)
			}
			req.ID = "nri-" + p.Name
			if _, err := st.Admit(req); err != nil {
				t.Fatalf("the node admitting %s: %v", p.Name, err)
			}
			uids[req.ID] = string(p.UID)
		}
		return st, uids
	}
	publish(admitted(bound))
	// The scheduler judges the pod again (an extender's refusal is retried
	// on backoff): refused now by the published state, which names the
	// two, so without the suffix; being bound fails the wait.
	c.waitUnschedulable(ctx, third, "0/1 nodes are available: 1 no NUMA node with 5 free CPUs.")

	zero := int64(0)
	if err := c.cs.CoreV1().Pods("default").Delete(ctx, bound[0].Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	tracked(1)
	publish(admitted(bound[1:]))
	if got := c.waitBound(ctx, third).Spec.NodeName; got != "burst" {
		t.Fatalf("pod %s bound to %q, want burst", third.Name, got)
	}
	c.note("after burst-0 went and the node published burst-1 alone, burst-third was bound to burst")
	c.report(t)
}
