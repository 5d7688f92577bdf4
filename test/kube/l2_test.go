package kube

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/kubernetes/pkg/scheduler"
	schedulerapi "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/test/integration/framework"
	testutils "k8s.io/kubernetes/test/integration/util"

	"github.com/corepin/corepin/kube/extender"
	"github.com/corepin/corepin/test/kube/kubetest"
)

// TestMain runs an etcd for the in-process API server (etcd from PATH;
// make test-kube puts one built from this module there).
func TestMain(m *testing.M) {
	framework.EtcdMain(m.Run)
}

// L2: an in-process kube-apiserver backed by etcd and the full default
// scheduler configured with corepin's extender, as the shipped scheduler
// configuration does. Nodes are API objects (no kubelet): pods are bound or
// refused, never run.
func TestSchedulerBindsToAlignedNodeOrRefusesWithCorepinReason(t *testing.T) {
	srv := httptest.NewServer(extender.New().Handler())
	defer srv.Close()

	testCtx := testutils.InitTestAPIServer(t, "corepin-ext", nil)
	testCtx = testutils.InitTestSchedulerWithOptions(t, testCtx, 0, scheduler.WithExtenders(schedulerapi.Extender{
		URLPrefix: srv.URL, FilterVerb: "filter", PrioritizeVerb: "prioritize", Weight: 5,
		HTTPTimeout: metav1.Duration{Duration: 10 * time.Second},
	}))
	testutils.SyncSchedulerInformerFactory(testCtx)
	go testCtx.Scheduler.Run(testCtx.Ctx)
	// InitTestAPIServer's cleanup deletes the nodes and the namespace and
	// stops the scheduler and the API server.

	cs, ctx, ns := testCtx.ClientSet, testCtx.Ctx, testCtx.NS.Name
	for _, n := range kubetest.Nodes(t) {
		if _, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating node %s: %v", n.Name, err)
		}
	}

	// Fits single-numa-node only on "aligned".
	created := time.Now()
	pod, err := cs.CoreV1().Pods(ns).Create(ctx, kubetest.CPUPod("enc", ns, "6"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, wait.ForeverTestTimeout, false,
		testutils.PodScheduled(cs, ns, pod.Name)); err != nil {
		t.Fatalf("pod %s not bound: %v", pod.Name, err)
	}
	pod, err = cs.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Spec.NodeName != "aligned" {
		t.Fatalf("pod bound to %q, want aligned (the only node with 6 free CPUs on one NUMA node)", pod.Spec.NodeName)
	}
	t.Logf("pod %s bound to %s %v after creation", pod.Name, pod.Spec.NodeName, time.Since(created).Round(time.Millisecond))

	// Fits nowhere: no NUMA node has 9 CPUs.
	big, err := cs.CoreV1().Pods(ns).Create(ctx, kubetest.CPUPod("big", ns, "9"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := testutils.WaitForPodUnschedulable(ctx, cs, big); err != nil {
		t.Fatalf("pod %s not reported Unschedulable: %v", big.Name, err)
	}
	big, err = cs.CoreV1().Pods(ns).Get(ctx, big.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var msg string
	for _, c := range big.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			if c.Status != corev1.ConditionFalse || c.Reason != corev1.PodReasonUnschedulable {
				t.Errorf("PodScheduled = %s/%s, want False/Unschedulable", c.Status, c.Reason)
			}
			msg = c.Message
		}
	}
	want := "0/3 nodes are available: 3 no NUMA node with 9 free CPUs."
	if !strings.HasPrefix(msg, want) {
		t.Errorf("Unschedulable message %q, want it to start %q", msg, want)
	}
	// No node could take it even empty: the scheduler is told preemption
	// cannot help (FailedAndUnresolvableNodes) and evicts nobody.
	if !strings.Contains(msg, "Preemption is not helpful") {
		t.Errorf("Unschedulable message %q: want preemption ruled out", msg)
	}
	if big.Spec.NodeName != "" {
		t.Errorf("pod %s bound to %s", big.Name, big.Spec.NodeName)
	}
	t.Logf("pod %s: %s", big.Name, msg)
}
