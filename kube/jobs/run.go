package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/corepin/corepin/kube/kubeclient"
)

// RunAPI is what Runner needs of the cluster: the reads of collect and
// the Job writes. kubeclient.Client implements it; tests give client-go's
// fake clientset through kubeclienttest.
type RunAPI interface {
	kubeclient.Reader
	kubeclient.Writer
}

// Statuses of a Job in a run (Outcome.Status).
const (
	StatusComplete = "complete"
	StatusFailed   = "failed"
	// StatusSkipped is a Job found complete from an earlier run: not
	// created again, its results collected with the others.
	StatusSkipped = "skipped"
	// StatusTimeout is a Job not finished within the Job timeout; it is
	// left running.
	StatusTimeout = "timeout"
)

// Bounds and defaults of a run.
const (
	// RunInterval is how often a run reads the Job it waits for.
	RunInterval = 2 * time.Second
	// DefaultJobTimeout and MaxJobTimeout bound the wait for one Job.
	DefaultJobTimeout = 30 * time.Minute
	MaxJobTimeout     = 24 * time.Hour
	// maxPollErrors is how many reads of a Job may fail in a row (a
	// restarting API server) before the run gives up.
	maxPollErrors = 5
	// maxReasons is how many pods a failure's reason describes.
	maxReasons = 3
	// maxMessage bounds a message quoted from a pod's status.
	maxMessage = 300
)

// RunProgress is one read of the Job a run waits for.
type RunProgress struct {
	// N is the Job's place in the sweep (1-based) of Total.
	N, Total int
	Job      string
	// Point is the point's label ("cpus=2 mode=pinned concurrency=4").
	Point string
	// State is "starting" (no pod ready or done yet) or "running".
	State string
	// Done is the pods finished (succeeded or failed) of Pods.
	Done, Pods int
	Elapsed    time.Duration
}

// Outcome is how one Job of a run ended.
type Outcome struct {
	// N is the Job's place in the sweep (1-based) of Total.
	N     int    `json:"-"`
	Total int    `json:"-"`
	Job   string `json:"job"`
	// Point is the point, as the Job's corepin.io/point annotation has it.
	Point json.RawMessage `json:"point"`
	// PointLabel is the point as text, for people.
	PointLabel string `json:"-"`
	Status     string `json:"status"`
	// Pods is the Job's pods (completions); Succeeded and Failed those
	// that ended so.
	Pods      int `json:"pods"`
	Succeeded int `json:"succeeded"`
	Failed    int `json:"failed"`
	// WallS is how long the Job ran, as the run saw it (for a skipped
	// Job, from its start and completion times).
	WallS float64 `json:"wall_s"`
	// Reason says, for a failed or timed-out Job, what a person can act
	// on: the Job's failure condition and its pods' states.
	Reason string `json:"reason,omitempty"`
}

// Ended reports whether the Job finished (complete, failed or skipped),
// so that its pods' results can be recorded.
func (o Outcome) Ended() bool { return o.Status != StatusTimeout }

// RunSummary is what a run did.
type RunSummary struct {
	// Outcomes are the Jobs that ended or timed out, in order.
	Outcomes []Outcome
	// Stopped is the Job whose failure or timeout stopped the run.
	Stopped string
	// Left is the Job left running when the context ended.
	Left string
}

// Failures returns the outcomes that failed or timed out.
func (s RunSummary) Failures() []Outcome {
	var out []Outcome
	for _, o := range s.Outcomes {
		if o.Status == StatusFailed || o.Status == StatusTimeout {
			out = append(out, o)
		}
	}
	return out
}

// Ended returns the names of the Jobs that ended (Outcome.Ended).
func (s RunSummary) Ended() []string {
	var out []string
	for _, o := range s.Outcomes {
		if o.Ended() {
			out = append(out, o.Job)
		}
	}
	return out
}

// Runner runs a sweep's Jobs on a cluster one at a time, in order, so
// that points do not disturb each other.
type Runner struct {
	Client    RunAPI
	Namespace string
	// Interval is how often the Job is read; 0 means RunInterval.
	Interval time.Duration
	// JobTimeout bounds the wait for each Job; 0 means DefaultJobTimeout.
	JobTimeout time.Duration
	// CreateBackoff paces the tries of a Job's creation that failed
	// without an answer (transient); zero means CreateBackoff.
	CreateBackoff wait.Backoff
	// KeepGoing goes on to the next Job after one fails or times out.
	KeepGoing bool
	// Progress, when not nil, gets every read of the Job waited for.
	Progress func(RunProgress)
	// Done, when not nil, gets every Job's outcome as it ends.
	Done func(Outcome)
}

// ErrJobMismatch is wrapped when a Job of the sweep's name already exists
// with another point: it belongs to another sweep.
var ErrJobMismatch = errors.New("Job of another sweep")

// Run creates each of objs (the Objects of s, in order) with strict field
// validation and waits until it is complete or failed, at most JobTimeout,
// before the next. A Job that exists already is not created again: a
// complete one is skipped (a run resumes a sweep), a failed one counts as
// failed, a running one is waited for. A failed or timed-out Job stops the
// run unless KeepGoing. When ctx ends, the Job being waited for is left
// running (RunSummary.Left) and the error wraps ctx.Err(). Errors are for
// the cluster refusing or failing requests; failed Jobs are Outcomes.
func (r Runner) Run(ctx context.Context, s *Sweep, objs []batchv1.Job) (RunSummary, error) {
	var sum RunSummary
	if len(objs) != len(s.Jobs) {
		return sum, fmt.Errorf("%w: %d Job objects for a sweep of %d Jobs", ErrInvalid, len(objs), len(s.Jobs))
	}
	for i := range objs {
		if err := ctx.Err(); err != nil {
			return sum, fmt.Errorf("stopped before Job %s: %w", objs[i].Name, err)
		}
		o, err := r.one(ctx, i+1, len(objs), s.Jobs[i].Point.Label(), &objs[i])
		if err != nil {
			if ctx.Err() != nil {
				sum.Left = objs[i].Name
				return sum, fmt.Errorf("stopped waiting for Job %s (left running): %w", objs[i].Name, ctx.Err())
			}
			return sum, err
		}
		sum.Outcomes = append(sum.Outcomes, o)
		if r.Done != nil {
			r.Done(o)
		}
		if (o.Status == StatusFailed || o.Status == StatusTimeout) && !r.KeepGoing {
			sum.Stopped = o.Job
			return sum, nil
		}
	}
	return sum, nil
}

// one creates (or finds) the Job and waits for it.
func (r Runner) one(ctx context.Context, n, total int, label string, obj *batchv1.Job) (Outcome, error) {
	o := Outcome{N: n, Total: total, Job: obj.Name, Point: json.RawMessage(obj.Annotations[AnnotationPoint]), PointLabel: label}
	if obj.Spec.Completions != nil {
		o.Pods = int(*obj.Spec.Completions)
	}
	ns := r.Namespace
	start := time.Now()
	err := r.create(ctx, obj)
	switch {
	case apierrors.IsAlreadyExists(err):
		have, gerr := r.Client.GetJob(ctx, ns, obj.Name)
		if gerr != nil {
			return o, fmt.Errorf("reading Job %s, which exists already: %w", obj.Name, gerr)
		}
		if got, want := have.Annotations[AnnotationPoint], obj.Annotations[AnnotationPoint]; got != want {
			return o, fmt.Errorf("%w: Job %s exists in namespace %s with point %s, not %s: delete it or run the sweep in another namespace",
				ErrJobMismatch, obj.Name, ns, orNone(got), want)
		}
		if st := jobState(have); st != "" {
			counts(&o, have)
			if have.Status.StartTime != nil && have.Status.CompletionTime != nil {
				o.WallS = have.Status.CompletionTime.Sub(have.Status.StartTime.Time).Seconds()
			}
			if st == batchv1.JobComplete {
				o.Status = StatusSkipped
				return o, nil
			}
			o.Status = StatusFailed
			o.Reason = "failed in an earlier run, not created again (delete it to run it again): " + r.why(ctx, have)
			return o, nil
		}
	case err != nil:
		return o, fmt.Errorf("creating Job %s in namespace %s: %w", obj.Name, ns, err)
	}
	interval := r.Interval
	if interval <= 0 {
		interval = RunInterval
	}
	timeout := r.JobTimeout
	if timeout <= 0 {
		timeout = DefaultJobTimeout
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last *batchv1.Job
	var lastErr error
	errs := 0
	err = wait.PollUntilContextCancel(wctx, interval, true, func(pctx context.Context) (bool, error) {
		j, err := r.Client.GetJob(pctx, ns, obj.Name)
		switch {
		case apierrors.IsNotFound(err):
			return false, fmt.Errorf("Job %s in namespace %s was deleted while the run waited for it: %w", obj.Name, ns, err)
		case err != nil:
			errs++
			lastErr = err
			if errs >= maxPollErrors {
				return false, fmt.Errorf("reading Job %s in namespace %s (%d times in a row): %w", obj.Name, ns, errs, err)
			}
			return false, nil
		}
		errs = 0
		last = j
		if r.Progress != nil {
			p := RunProgress{N: n, Total: total, Job: obj.Name, Point: label, State: "starting", Pods: o.Pods,
				Done: int(j.Status.Succeeded + j.Status.Failed), Elapsed: time.Since(start)}
			if p.Done > 0 || (j.Status.Ready != nil && *j.Status.Ready > 0) {
				p.State = "running"
			}
			r.Progress(p)
		}
		return jobState(j) != "", nil
	})
	o.WallS = time.Since(start).Seconds()
	if last != nil {
		counts(&o, last)
	}
	switch {
	case ctx.Err() != nil:
		return o, ctx.Err()
	case err != nil && wctx.Err() != nil:
		o.Status = StatusTimeout
		why := r.why(ctx, last)
		if lastErr != nil && errs > 0 {
			why += fmt.Sprintf("; the last read of the Job failed: %v", lastErr)
		}
		o.Reason = fmt.Sprintf("not finished after %s (left running): %s", timeout, why)
		return o, nil
	case err != nil:
		return o, err
	}
	if jobState(last) == batchv1.JobComplete {
		o.Status = StatusComplete
		return o, nil
	}
	o.Status = StatusFailed
	o.Reason = r.why(ctx, last)
	return o, nil
}

// create creates obj, again after a failure that says nothing of the
// request itself (a timeout, a server busy or restarting, a dropped
// connection), at most createTries times with growing pauses: the Job may
// have been created by a try whose answer was lost, which the caller's
// AlreadyExists branch then finds and waits for.
func (r Runner) create(ctx context.Context, obj *batchv1.Job) error {
	b := r.CreateBackoff
	if b.Steps == 0 {
		b = CreateBackoff
	}
	var err error
	for {
		_, err = r.Client.CreateJob(ctx, r.Namespace, obj, metav1.CreateOptions{FieldValidation: "Strict"})
		if err == nil || !transient(err) || ctx.Err() != nil {
			return err
		}
		if b.Steps <= 1 {
			return fmt.Errorf("after %d tries: %w", createTries(r.CreateBackoff), err)
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(b.Step()):
		}
	}
}

// CreateBackoff is how Runner retries a Job's creation by default: 5
// tries, 1 s apart at first, then doubling (about 15 s in all).
var CreateBackoff = wait.Backoff{Duration: time.Second, Factor: 2, Steps: 5}

func createTries(b wait.Backoff) int {
	if b.Steps == 0 {
		return CreateBackoff.Steps
	}
	return b.Steps
}

// transient reports whether err says the API server did not answer the
// request (it timed out, is busy or unavailable, the connection dropped),
// not that it refused it.
func transient(err error) bool {
	return apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsServiceUnavailable(err) || errors.Is(err, context.DeadlineExceeded) ||
		utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err)
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// counts copies the Job's pod counts into o.
func counts(o *Outcome, j *batchv1.Job) {
	o.Succeeded, o.Failed = int(j.Status.Succeeded), int(j.Status.Failed)
	if j.Spec.Completions != nil {
		o.Pods = int(*j.Spec.Completions)
	}
}

// jobState is the Job's Complete or Failed condition type, "" while it
// runs.
func jobState(j *batchv1.Job) batchv1.JobConditionType {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return c.Type
		}
	}
	return ""
}

// why says why the Job failed or has not finished, for a person: its
// Failed condition and the states of its pods that did not succeed (at
// most maxReasons described). A failure to list the pods is said, not
// returned.
func (r Runner) why(ctx context.Context, j *batchv1.Job) string {
	var parts []string
	if j == nil {
		return "the Job could not be read"
	}
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
			parts = append(parts, strings.TrimSuffix("Job "+c.Reason+": "+cut(c.Message, maxMessage), ": "))
		}
	}
	sel := labels.SelectorFromSet(labels.Set{LabelSweep: j.Labels[LabelSweep], LabelIndex: j.Labels[LabelIndex], LabelRepeat: j.Labels[LabelRepeat]}).String()
	list, err := r.Client.ListPods(ctx, j.Namespace, metav1.ListOptions{LabelSelector: sel, Limit: PageSize})
	if err != nil {
		parts = append(parts, fmt.Sprintf("listing its pods: %v", err))
		return strings.Join(parts, "; ")
	}
	seen := map[string]bool{}
	described, more := 0, 0
	for i := range list.Items {
		p := &list.Items[i]
		if p.Status.Phase == corev1.PodSucceeded {
			continue
		}
		d := PodReason(p)
		if seen[d] {
			more++
			continue
		}
		if described == maxReasons {
			more++
			continue
		}
		seen[d] = true
		described++
		parts = append(parts, "pod "+p.Name+": "+d)
	}
	if more > 0 {
		parts = append(parts, fmt.Sprintf("and %d more pods", more))
	}
	if described == 0 && len(list.Items) == 0 {
		parts = append(parts, "no pods (see kubectl describe job "+j.Name+")")
	}
	return strings.Join(parts, "; ")
}

// PodReason describes why a pod has not succeeded, from its status: the
// scheduler's message when it is unschedulable (a scheduler extender's
// refusal among them), each container's waiting reason (ImagePullBackOff,
// CreateContainerConfigError) or termination (OOMKilled, an exit code)
// with its message, the pod's own reason (Evicted), else its phase. A
// termination message that is a corepin result document is not quoted.
func PodReason(p *corev1.Pod) string {
	var parts []string
	phase := string(p.Status.Phase)
	if phase == "" {
		phase = "Pending"
	}
	parts = append(parts, phase)
	if p.Status.Reason != "" || p.Status.Message != "" {
		parts = append(parts, strings.TrimSuffix(p.Status.Reason+": "+cut(p.Status.Message, maxMessage), ": "))
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			parts = append(parts, strings.TrimSuffix("not scheduled ("+c.Reason+"): "+cut(c.Message, maxMessage), ": "))
		}
	}
	statuses := append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...)
	for _, s := range statuses {
		switch {
		case s.State.Waiting != nil && s.State.Waiting.Reason != "":
			parts = append(parts, strings.TrimSuffix(fmt.Sprintf("container %s waiting: %s: %s", s.Name, s.State.Waiting.Reason, cut(s.State.Waiting.Message, maxMessage)), ": "))
		case s.State.Terminated != nil && (s.State.Terminated.ExitCode != 0 || s.State.Terminated.Signal != 0):
			t := s.State.Terminated
			d := fmt.Sprintf("container %s terminated: %s (exit code %d)", s.Name, orNone(t.Reason), t.ExitCode)
			if msg := strings.TrimSpace(t.Message); msg != "" && !strings.HasPrefix(msg, `{"v":`) {
				d += ": " + cut(msg, maxMessage)
			}
			parts = append(parts, d)
		}
	}
	return strings.Join(parts, "; ")
}

// Delete deletes the Jobs names with background propagation (the Job
// controller's garbage collector removes their pods). A Job already gone
// is not an error; the others are joined.
func (r Runner) Delete(ctx context.Context, names []string) error {
	bg := metav1.DeletePropagationBackground
	var errs []error
	for _, n := range names {
		err := r.Client.DeleteJob(ctx, r.Namespace, n, metav1.DeleteOptions{PropagationPolicy: &bg})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting Job %s: %w", n, err))
		}
	}
	return errors.Join(errs...)
}

// CheckFit compares the sweep's Jobs with the cluster's nodes. A Job
// whose pods together request more CPU than any node's allocatable runs
// them in waves, which measures less contention than its point names: it
// gets a note (once per point). A pod that requests more than any node's
// allocatable can never run: that is an error wrapping ErrInvalid, before
// anything is created. When the nodes can not be read, one note says so.
func CheckFit(ctx context.Context, c kubeclient.Reader, s *Sweep) ([]string, error) {
	list, err := c.ListNodes(ctx, metav1.ListOptions{Limit: PageSize})
	if err != nil {
		return []string{fmt.Sprintf("not checked that the Jobs fit a node: listing the nodes: %v", err)}, nil
	}
	var most int64
	for _, n := range list.Items {
		if n.Spec.Unschedulable {
			continue
		}
		if q, ok := n.Status.Allocatable[corev1.ResourceCPU]; ok {
			most = max(most, q.MilliValue())
		}
	}
	if len(list.Items) == 0 || most == 0 {
		return []string{"not checked that the Jobs fit a node: no schedulable node reports allocatable cpu"}, nil
	}
	var notes []string
	seen := map[string]bool{}
	for _, j := range s.Jobs {
		at := int64(max(j.Parallel, 1)) * j.MilliCPU
		if at <= most || seen[j.Point.Label()] {
			continue
		}
		seen[j.Point.Label()] = true
		if j.MilliCPU > most {
			return nil, fmt.Errorf("%w: point %s: each pod requests %s CPUs, the largest schedulable node has %s allocatable, so no node can run it: give the nodes' own topology (--topology, --sysfs-root) or --node-cpus %s",
				ErrInvalid, j.Point.Label(), milliString(j.MilliCPU), milliString(most), milliString(most))
		}
		notes = append(notes, fmt.Sprintf("point %s: its %d pods request %s CPUs at once, the largest node has %s allocatable: they will run in waves, with less contention than the point names (pass --node-cpus %s to fit them)",
			j.Point.Label(), j.Parallel, milliString(at), milliString(most), milliString(most)))
	}
	return notes, nil
}
