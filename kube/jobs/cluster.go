package jobs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/corepin/corepin/kube/kubeclient"
)

// Bounds on what AddCluster and WaitJobs ask of the API server.
const (
	// PageSize is the pods (or Jobs) asked for per list request.
	PageSize = 500
	// LogTailLines and LogLimitBytes bound a pod log read as the fallback:
	// the result line is the last line the pod prints.
	LogTailLines  = 20
	LogLimitBytes = MaxLineBytes
	// maxNamed is how many unfinished pods a warning names.
	maxNamed = 10
)

// ErrCluster is wrapped by errors about what the cluster holds (no Jobs
// match, too many pods), as opposed to failures to reach it.
var ErrCluster = errors.New("kube collect")

// API is what collect reads from the cluster (pods, their logs and
// Jobs): kubeclient.Client, or in tests a fake clientset through
// kubeclienttest.
type API = kubeclient.Reader

// LogReader reads the end of a pod container's log. ClientLogs reads it
// through the API server; tests give their own.
type LogReader interface {
	PodLog(ctx context.Context, namespace, pod, container string) (io.ReadCloser, error)
}

// ClientLogs reads logs through the API server, at most LogTailLines lines
// and LogLimitBytes bytes of each.
type ClientLogs struct{ Client API }

// PodLog implements LogReader.
func (l ClientLogs) PodLog(ctx context.Context, namespace, pod, container string) (io.ReadCloser, error) {
	tail, limit := int64(LogTailLines), int64(LogLimitBytes)
	return l.Client.PodLog(ctx, namespace, pod, &corev1.PodLogOptions{Container: container, TailLines: &tail, LimitBytes: &limit})
}

// Cluster is where a sweep's pods and Jobs are.
type Cluster struct {
	Client API
	// Logs reads a pod's log where its termination message holds no
	// result; nil means ClientLogs{Client}.
	Logs      LogReader
	Namespace string
	// Selector is a label selector; empty means every object carrying
	// LabelSweep (all sweeps).
	Selector string
	// PageSize is the list page size; 0 means PageSize.
	PageSize int64
	// Jobs, when not empty, restricts AddCluster to the pods of these
	// Jobs (by the pod's controller reference, else its job-name label):
	// the other pods the selector matches are not read or counted.
	Jobs []string
}

// podJob is the name of the Job that made pod: its controller reference,
// else the label the Job controller sets; "" when neither says.
func podJob(pod *corev1.Pod) string {
	if ref := metav1.GetControllerOf(pod); ref != nil && ref.Kind == "Job" {
		return ref.Name
	}
	if n := pod.Labels[batchv1.JobNameLabel]; n != "" {
		return n
	}
	return pod.Labels[legacyJobNameLabel]
}

// legacyJobNameLabel is the unprefixed label the Job controller has set
// on its pods since before batchv1.JobNameLabel (Kubernetes 1.27).
const legacyJobNameLabel = "job-name"

func (k Cluster) selector() (string, error) {
	if k.Selector == "" {
		return LabelSweep, nil
	}
	if _, err := labels.Parse(k.Selector); err != nil {
		return "", fmt.Errorf("%w: selector %q: %w", ErrInvalid, k.Selector, err)
	}
	return k.Selector, nil
}

// ClusterSummary is what AddCluster saw.
type ClusterSummary struct {
	// Pods is how many pods matched; Finished how many of them had ended
	// (Succeeded or Failed).
	Pods     int `json:"pods"`
	Finished int `json:"finished"`
	// FromLogs is how many results came from a log, not a termination
	// message.
	FromLogs int `json:"from_logs"`
	// Unfinished names the pods still pending or running.
	Unfinished []string `json:"unfinished"`
}

// AddCluster lists the sweep's pods (k.Selector in k.Namespace, a page of
// k.PageSize at a time, at most MaxResults pods) and adds each finished
// pod's result (of k.Jobs' pods only, when given): its container's termination message (AddDocument), else,
// when that holds no result, the end of its log (Add). A Failed pod's
// result is kept as a failed job. Pods not finished are counted, named in
// a warning and not recorded. Problems with one pod are skipped with a
// reason; the error is for the listing itself.
func (c *Collection) AddCluster(ctx context.Context, k Cluster) (ClusterSummary, error) {
	var sum ClusterSummary
	sel, err := k.selector()
	if err != nil {
		return sum, err
	}
	if k.Logs == nil {
		k.Logs = ClientLogs{Client: k.Client}
	}
	page := k.PageSize
	if page <= 0 {
		page = PageSize
	}
	var only map[string]bool
	if len(k.Jobs) > 0 {
		only = make(map[string]bool, len(k.Jobs))
		for _, j := range k.Jobs {
			only[j] = true
		}
	}
	opts := metav1.ListOptions{LabelSelector: sel, Limit: page}
	for {
		list, err := k.Client.ListPods(ctx, k.Namespace, opts)
		if err != nil {
			return sum, fmt.Errorf("listing pods %s in namespace %s: %w", sel, k.Namespace, err)
		}
		for i := range list.Items {
			if only != nil && !only[podJob(&list.Items[i])] {
				continue
			}
			sum.Pods++
			if sum.Pods > MaxResults {
				return sum, fmt.Errorf("%w: more than %d pods match %s; narrow --selector", ErrCluster, MaxResults, sel)
			}
			c.addPod(ctx, k, &list.Items[i], &sum)
		}
		if list.Continue == "" {
			break
		}
		opts.Continue = list.Continue
	}
	if n := len(sum.Unfinished); n > 0 {
		names := sum.Unfinished[:min(n, maxNamed)]
		more := ""
		if n > maxNamed {
			more = fmt.Sprintf(" and %d more", n-maxNamed)
		}
		c.Warnings = append(c.Warnings, fmt.Sprintf("%d pods not finished: %s%s (not recorded; collect again when they end, or use --wait)", n, strings.Join(names, ", "), more))
	}
	return sum, nil
}

// addPod adds one pod's result.
func (c *Collection) addPod(ctx context.Context, k Cluster, pod *corev1.Pod, sum *ClusterSummary) {
	switch pod.Status.Phase {
	case corev1.PodSucceeded, corev1.PodFailed:
	default:
		sum.Unfinished = append(sum.Unfinished, pod.Name)
		return
	}
	sum.Finished++
	container, term := jobContainer(pod)
	before := len(c.results)
	var msg string
	if term != nil {
		msg = term.Message
	}
	created := pod.CreationTimestamp.Time
	docErr := c.addDocument(pod.Name, []byte(msg), created)
	if docErr != nil {
		if container == "" {
			c.Skipped = append(c.Skipped, Skipped{Log: pod.Name, Reason: "pod has no container status"})
			return
		}
		skipped := len(c.Skipped)
		rc, err := k.Logs.PodLog(ctx, pod.Namespace, pod.Name, container)
		if err != nil {
			c.skip(pod.Name, fmt.Errorf("termination message: %w; reading the log: %v", docErr, err))
			return
		}
		c.add(pod.Name, rc, created)
		rc.Close()
		for i := skipped; i < len(c.Skipped); i++ {
			c.Skipped[i].Reason = fmt.Sprintf("termination message: %v; log: %s", docErr, c.Skipped[i].Reason)
			c.Skipped[i].Implausible = c.Skipped[i].Implausible || errors.Is(docErr, ErrImplausible)
		}
		if len(c.results) > before {
			sum.FromLogs += len(c.results) - before
		}
	}
	if pod.Status.Phase != corev1.PodFailed {
		return
	}
	why := "pod failed"
	if term != nil {
		why = fmt.Sprintf("pod failed: exit code %d", term.ExitCode)
		if term.Reason != "" {
			why += " (" + term.Reason + ")"
		}
	}
	for i := before; i < len(c.results); i++ {
		j := &c.results[i].job
		if j.ExitCode == 0 && j.Error == "" && j.Signal == "" {
			j.Error = why
		}
	}
}

// jobContainer returns the name of the pod's container ("job", else the
// first) and its terminated state, nil when it has none.
func jobContainer(pod *corev1.Pod) (string, *corev1.ContainerStateTerminated) {
	var st *corev1.ContainerStatus
	for i := range pod.Status.ContainerStatuses {
		s := &pod.Status.ContainerStatuses[i]
		if st == nil || s.Name == "job" {
			st = s
		}
	}
	if st == nil {
		return "", nil
	}
	return st.Name, st.State.Terminated
}

// WaitProgress is a poll's count: Jobs finished (complete or failed) of
// those matching.
type WaitProgress struct {
	Finished, Total int
}

// WaitJobs polls the sweep's Jobs (k.Selector in k.Namespace) every
// interval, at once first, until each is complete or failed or ctx ends.
// progress, when not nil, gets every poll's count. No Job matching is an
// error wrapping ErrCluster; so is ctx ending first, with the count.
func WaitJobs(ctx context.Context, k Cluster, interval time.Duration, progress func(WaitProgress)) error {
	sel, err := k.selector()
	if err != nil {
		return err
	}
	page := k.PageSize
	if page <= 0 {
		page = PageSize
	}
	var last WaitProgress
	err = wait.PollUntilContextCancel(ctx, interval, true, func(ctx context.Context) (bool, error) {
		p := WaitProgress{}
		opts := metav1.ListOptions{LabelSelector: sel, Limit: page}
		for {
			list, err := k.Client.ListJobs(ctx, k.Namespace, opts)
			if err != nil {
				return false, fmt.Errorf("listing Jobs %s in namespace %s: %w", sel, k.Namespace, err)
			}
			for i := range list.Items {
				p.Total++
				if p.Total > MaxJobs {
					return false, fmt.Errorf("%w: more than %d Jobs match %s; narrow --selector", ErrCluster, MaxJobs, sel)
				}
				if jobState(&list.Items[i]) != "" {
					p.Finished++
				}
			}
			if list.Continue == "" {
				break
			}
			opts.Continue = list.Continue
		}
		if p.Total == 0 {
			return false, fmt.Errorf("%w: no Jobs match %s in namespace %s", ErrCluster, sel, k.Namespace)
		}
		last = p
		if progress != nil {
			progress(p)
		}
		return p.Finished == p.Total, nil
	})
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("%w: %d of %d Jobs finished when the wait ended: %w", ErrCluster, last.Finished, last.Total, ctx.Err())
	}
	return err
}
