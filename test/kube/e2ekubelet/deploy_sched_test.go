package e2ekubelet

import (
	"cmp"
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/corepin/corepin/test/kube/kubetest"
)

// The chart's corepin-scheduler (scheduler.enabled, mode plugin: make
// image's corepin-scheduler image) on the node.
const (
	schedName  = "corepin-scheduler" // its Deployment, lease, pods' label and the schedulerName pods give
	schedLabel = "app.kubernetes.io/name=corepin-scheduler"
	// leaderLine is kube-scheduler's log line once it holds its lease.
	leaderLine = "Successfully acquired lease"
	sweepLabel = "corepin.io/sweep=concurrency"
	// heldFor is how long every pod not done must stay Unschedulable on
	// the idle node to count as held by corepin (the node republishes
	// its state at least every 30 s).
	heldFor = 40 * time.Second
)

// schedulerValues are the chart values that run corepin-scheduler here:
// this node has no kube-proxy, so the ClusterIP of the kubernetes Service
// leads nowhere; corepin's pods run on the host's network and reach the
// API server on its loopback address (apiServer.host and .port, which
// the API server's self-signed certificate names).
func (d *deploy) schedulerValues() []string {
	u, err := url.Parse(d.api)
	if err != nil {
		d.t.Fatalf("the API server's address %q: %v", d.api, err)
	}
	return []string{"scheduler.enabled=true", "scheduler.mode=plugin", "hostNetwork=true",
		"apiServer.host=" + u.Hostname(), "apiServer.port=" + u.Port()}
}

// schedImageOf is the corepin-scheduler Deployment's container image in a
// rendering.
func (d *deploy) schedImageOf(objs []*unstructured.Unstructured) string {
	for _, o := range objs {
		if o.GetKind() != "Deployment" || o.GetName() != schedName {
			continue
		}
		ctrs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		if len(ctrs) == 1 {
			if img, _ := ctrs[0].(map[string]any)["image"].(string); img != "" {
				return img
			}
		}
	}
	d.t.Fatalf("the rendered chart has no Deployment %s with one container (mode plugin)", schedName)
	return ""
}

// waitServiceAccount waits for the serviceaccount controller to make the
// default account of ns: with the ServiceAccount admission on, a pod
// created before it is refused.
func (d *deploy) waitServiceAccount(ctx context.Context, ns string) {
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := d.cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		d.t.Fatalf("namespace %s got no default ServiceAccount (serviceaccount-controller): %v", ns, err)
	}
}

// waitScheduler waits for corepin-scheduler's pod running image, other
// than the pod named old, to be Running and Ready and to lead: its log
// says it acquired the lease, and the lease names a holder. With the
// node's network the holder is the host's name, not the pod's; one pod
// runs at a time (the chart rolls a hostNetwork scheduler without surge).
func (d *deploy) waitScheduler(ctx context.Context, image, old string) corev1.Pod {
	t := d.t
	var got corev1.Pod
	var why string
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		l, err := d.cs.CoreV1().Pods(releaseNS).List(ctx, metav1.ListOptions{LabelSelector: schedLabel})
		if err != nil {
			return false, err
		}
		why = fmt.Sprintf("no pod of Deployment %s runs %s yet (%d pods)", schedName, image, len(l.Items))
		for _, p := range l.Items {
			if p.Name == old || p.DeletionTimestamp != nil || p.Spec.Containers[0].Image != image {
				continue
			}
			got = p
			if !podReady(p) {
				why = fmt.Sprintf("pod %s %s, not Ready: %+v", p.Name, p.Status.Phase, p.Status.ContainerStatuses)
				return false, nil
			}
			if log := d.logOf(ctx, releaseNS, p.Name); !strings.Contains(log, leaderLine) {
				why = fmt.Sprintf("pod %s Ready, its log does not say %q:\n%s", p.Name, leaderLine, kubetest.Tail(log, 2048))
				return false, nil
			}
			lease, err := d.cs.CoordinationV1().Leases(releaseNS).Get(ctx, schedName, metav1.GetOptions{})
			if err != nil || lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
				why = fmt.Sprintf("lease %s/%s has no holder (%v)", releaseNS, schedName, err)
				return false, nil
			}
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		d.explainNS(releaseNS)
		t.Fatalf("corepin-scheduler's pod from %s did not run and lead: %v; %s", image, err, why)
	}
	return got
}

func podReady(p corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return p.Status.Phase == corev1.PodRunning
		}
	}
	return false
}

// sweepThroughScheduler creates the quick sweep's Jobs (corepin kube
// jobs --scheduler-name corepin-scheduler) all at once and waits until
// each pod has either completed or is held Unschedulable by the
// scheduler on an idle node (a point the node can not take: the burst
// points' limit of 2 CPUs is the whole 2-CPU shared pool, of which
// corepin's own pods hold 150m). Every pod bound was bound by the in-pod
// corepin-scheduler (its Scheduled event's reporter) and admitted by the
// in-pod plugin: none refused by the node (its refusal fails the
// container's creation for ever, and fails the test at once), no warning
// on a pod but the scheduler's own, pinned pods seen in the node's
// published assignments; each ran where its point says (checkPlacement:
// pinned pods on CPUs of their own, the kernel's view alike).
func (d *deploy) sweepThroughScheduler() {
	t := d.t
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	d.deleteTestPods(ctx) // the node's CPUs are the sweep's
	// Every Job is created at once here, so points share the node
	// whatever their sizes: checkPlacement compares the containers'
	// lifetimes (a pinned container holds its CPUs from its creation to
	// its exit, beyond its run's start and finish).
	js := d.sweepJobs("--scheduler-name", schedName)
	want := 0
	for _, j := range js {
		want += int(*j.Spec.Completions)
	}
	lctx, stop := context.WithCancel(ctx)
	lives := d.rt.watch(lctx, 50*time.Millisecond)
	d.podUIDs = nil
	begin := time.Now()
	for i := range js {
		if _, err := d.cs.BatchV1().Jobs(namespace).Create(ctx, &js[i], metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating job %s: %v", js[i].Name, err)
		}
	}
	created := time.Since(begin)
	defer d.deleteSweep(js)
	var pods []corev1.Pod
	var done, held, refused []string
	var still time.Time // since when every pod is done or held
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		d.sampleAssigned(ctx)
		if refused = d.refusedByNode(ctx); len(refused) > 0 {
			return true, nil
		}
		l, err := d.cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: sweepLabel})
		if err != nil {
			return false, nil
		}
		pods, done, held = l.Items, nil, nil
		for _, p := range pods {
			switch {
			case p.Status.Phase == corev1.PodSucceeded:
				done = append(done, p.Name)
			case p.Spec.NodeName == "" && unschedulable(p) != "" && !strings.Contains(unschedulable(p), "Insufficient"):
				held = append(held, p.Name)
			}
		}
		// Held pods count once no other pod is left to finish, the
		// scheduler's last word is not a resource short (a pod waiting
		// for another to finish), and nothing moved for heldFor: the
		// node republishes its state within seconds of a change (and
		// every 30 s), and the scheduler tries its pods again then. On
		// the idle node what holds them is corepin.
		if len(pods) != want || len(done)+len(held) != want {
			still = time.Time{}
			return false, nil
		}
		if still.IsZero() {
			still = time.Now()
		}
		return len(held) == 0 || time.Since(still) >= heldFor, nil
	})
	took := time.Since(begin)
	stop()
	if len(refused) > 0 {
		// The rest of the sweep would wait behind the refused pod, which
		// holds its CPU request: the test goes on to the uninstall.
		t.Errorf("the node refused %d pod(s) corepin-scheduler bound to it, %s after the Jobs were created:\n%s",
			len(refused), fmtDur(took), strings.Join(refused, "\n"))
		return
	}
	logs := map[string]string{}
	var ran []corev1.Pod
	var why []string
	for _, p := range pods {
		if p.Status.Phase == corev1.PodSucceeded {
			ran = append(ran, p)
			logs[p.Name] = d.logOf(ctx, namespace, p.Name)
		} else if m := unschedulable(p); m != "" {
			why = append(why, fmt.Sprintf("%s (%s): %s", p.Name, p.Annotations["corepin.io/point"], m))
		}
	}
	if err != nil {
		d.explain(ctx, "the sweep", pods, logs)
		d.explainNS(releaseNS)
		t.Fatalf("the sweep's %d Jobs (%d pods), created at once: %d pods complete, %d held by the scheduler after %s: %v",
			len(js), want, len(done), len(held), fmtDur(took), err)
	}
	if len(ran) == 0 {
		t.Fatalf("no pod of the sweep ran; held: %s", strings.Join(why, "; "))
	}
	d.checkBoundByScheduler(ctx, ran)
	d.checkAdmitted(ctx, ran)
	d.checkPlacement(parseResults(t, logs), lives())
	d.note("the sweep's %d Jobs (%d pods) created at once in %s; %s after: %d pods bound by the in-pod %s and complete, "+
		"none refused by the node (0 failed pods, 0 warnings but the scheduler's; %d of the %d pinned pods seen named in the node's assignments, sampled every 200 ms); "+
		"%d held Unschedulable by the scheduler on the idle node: %s",
		len(js), want, fmtDur(created), fmtDur(took), len(ran), schedName, d.pinnedNamed(ran), guaranteed(ran), len(held), strings.Join(why, "; "))
}

// unschedulable is the scheduler's message for a pod it could not place,
// "" for a pod it placed or has not tried.
func unschedulable(p corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return c.Message
		}
	}
	return ""
}

func guaranteed(pods []corev1.Pod) int {
	n := 0
	for _, p := range pods {
		if p.Status.QOSClass == corev1.PodQOSGuaranteed {
			n++
		}
	}
	return n
}

// refusedByNode lists the sweep's pods whose container the node's plugin
// refused (the runtime's CreateContainerError naming corepin), each with
// the plugin's reason: the kubelet retries such a container for ever.
func (d *deploy) refusedByNode(ctx context.Context) []string {
	l, err := d.cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: sweepLabel})
	if err != nil {
		return nil
	}
	var out []string
	for _, p := range l.Items {
		for _, cs := range p.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil && strings.Contains(w.Message, "corepin:") {
				out = append(out, fmt.Sprintf("pod %s (%s, resources %v): %s: %s", p.Name, p.Annotations["corepin.io/point"],
					p.Spec.Containers[0].Resources, w.Reason, w.Message))
			}
		}
	}
	return out
}

// deleteSweep deletes the sweep's Jobs and waits for their pods to go,
// so that what the uninstall checks is the chart's and the test pods'.
func (d *deploy) deleteSweep(js []batchv1.Job) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bg := metav1.DeletePropagationBackground
	for _, j := range js {
		if err := d.cs.BatchV1().Jobs(namespace).Delete(ctx, j.Name, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil && !apierrors.IsNotFound(err) {
			d.t.Errorf("deleting job %s: %v", j.Name, err)
		}
	}
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		l, err := d.cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: sweepLabel})
		return err == nil && len(l.Items) == 0, nil
	})
	if err != nil {
		d.t.Errorf("the sweep's pods not gone 2 minutes after its Jobs were deleted: %v", err)
	}
}

// checkBoundByScheduler: each pod asked for corepin-scheduler, is on the
// node, and its Scheduled event was reported by corepin-scheduler.
func (d *deploy) checkBoundByScheduler(ctx context.Context, pods []corev1.Pod) {
	t := d.t
	ev, err := d.cs.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: "reason=Scheduled"})
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]string{} // pod UID -> reporter
	for _, e := range ev.Items {
		by[string(e.InvolvedObject.UID)] = cmp.Or(e.ReportingController, e.Source.Component)
	}
	for _, p := range pods {
		if p.Spec.SchedulerName != schedName || p.Spec.NodeName != nodeName || by[string(p.UID)] != schedName {
			t.Errorf("pod %s: schedulerName %q, node %q, Scheduled reported by %q; want %s's binding to %s",
				p.Name, p.Spec.SchedulerName, p.Spec.NodeName, by[string(p.UID)], schedName, nodeName)
		}
	}
}

// checkAdmitted: the node refused no pod. A refusal by the plugin fails
// the container's creation (a Warning event on the pod, the Job's pod
// failing); waiting for a node with room is the scheduler's
// FailedScheduling, and a kubelet without cluster DNS warns
// MissingClusterDNS (falling back to the host's resolv.conf, which may
// draw DNSConfigForming): none is the node's refusal. Pinned pods (the
// Guaranteed ones, of whole CPUs) were seen in the node's published
// assignments while they ran (sampled: a short pod may be missed, none
// seen fails).
func (d *deploy) checkAdmitted(ctx context.Context, pods []corev1.Pod) {
	t := d.t
	ev, err := d.cs.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: "type=Warning"})
	if err != nil {
		t.Fatal(err)
	}
	ours := map[string]bool{}
	for _, p := range pods {
		ours[string(p.UID)] = true
		if p.Status.Phase != corev1.PodSucceeded {
			t.Errorf("pod %s ended %s, want Succeeded", p.Name, p.Status.Phase)
		}
	}
	if d.pinnedNamed(pods) == 0 {
		t.Errorf("no pinned pod of the sweep was seen in the node's corepin.io/assigned (%d UIDs seen)", len(d.podUIDs))
	}
	for _, e := range ev.Items {
		if ours[string(e.InvolvedObject.UID)] && !slices.Contains([]string{"FailedScheduling", "MissingClusterDNS", "DNSConfigForming"}, e.Reason) {
			t.Errorf("pod %s: warning %s: %s", e.InvolvedObject.Name, e.Reason, e.Message)
		}
	}
}

// pinnedNamed is how many of the Guaranteed pods the node's published
// assignments were seen naming.
func (d *deploy) pinnedNamed(pods []corev1.Pod) int {
	n := 0
	for _, p := range pods {
		if p.Status.QOSClass == corev1.PodQOSGuaranteed && d.podUIDs[string(p.UID)] > 0 {
			n++
		}
	}
	return n
}

// schedulerGone checks what the uninstall left of corepin-scheduler:
// no Deployment, ReplicaSet or pod, and, once the release's namespace is
// deleted, no lease (the scheduler's lease is its own, not the chart's:
// helm uninstall leaves it until the namespace goes).
func (d *deploy) schedulerGone(ctx context.Context) {
	t := d.t
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := d.cs.CoreV1().Namespaces().Get(ctx, releaseNS, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Errorf("namespace %s not gone after its deletion: %v", releaseNS, err)
	}
	if _, err := d.cs.AppsV1().Deployments(releaseNS).Get(ctx, schedName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Deployment %s/%s after the uninstall: %v", releaseNS, schedName, err)
	}
	if rs, err := d.cs.AppsV1().ReplicaSets(releaseNS).List(ctx, metav1.ListOptions{LabelSelector: schedLabel}); err != nil || len(rs.Items) > 0 {
		t.Errorf("ReplicaSets of %s after the uninstall: %d (%v)", schedName, len(rs.Items), err)
	}
	if _, err := d.cs.CoordinationV1().Leases(releaseNS).Get(ctx, schedName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("lease %s/%s after the uninstall and the namespace's deletion: %v", releaseNS, schedName, err)
	}
}
