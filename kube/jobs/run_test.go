package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/corepin/corepin/kube/kubeclient/kubeclienttest"
)

// runSweep is the first n Jobs of a quick concurrency sweep in namespace
// bench.
func runSweep(t *testing.T, n int) (*Sweep, []batchv1.Job) {
	t.Helper()
	s, objs := plan(t, Options{Experiments: catalog, Sweep: "concurrency", Quick: true, Node: node16(), Repeats: 1, Image: "registry.example/corepin:test", Namespace: "bench"})
	if len(objs) < n {
		t.Fatalf("%d Jobs, want at least %d", len(objs), n)
	}
	s.Jobs, objs = s.Jobs[:n], objs[:n]
	return s, objs
}

// resultPods are the pods of j, each Succeeded with its result document
// (ops = 1000 + pod number) as the termination message, as a generated
// Job's pods end.
func resultPods(t *testing.T, s *Sweep, j *batchv1.Job) []*corev1.Pod {
	t.Helper()
	var pods []*corev1.Pod
	for i := range int(*j.Spec.Completions) {
		name := fmt.Sprintf("%s-%d", j.Name, i)
		var index, repeat int
		fmt.Sscanf(j.Labels[LabelIndex], "%d", &index)
		fmt.Sscanf(j.Labels[LabelRepeat], "%d", &repeat)
		run := fmt.Sprintf(`{"job":0,"mode":"unbounded","cpus":1,"wall_s":2,"ops":%d,"exit_code":0}`, 1000+i)
		doc, err := Document(Marker{Sweep: s.Name, Index: index, Repeat: repeat, Point: json.RawMessage(j.Annotations[AnnotationPoint]),
			Pods: int(*j.Spec.Completions), Quick: s.Quick, Repeats: s.Repeats, Topology: s.TopologySummary, Spec: s.Spec, Pod: name, Result: json.RawMessage(run)})
		if err != nil {
			t.Fatal(err)
		}
		pods = append(pods, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: j.Spec.Template.Labels},
			Status: corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{{Name: "job",
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed", Message: string(doc)}}}}},
		})
	}
	return pods
}

// oomPod is a pod of j killed for memory.
func oomPod(j *batchv1.Job) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: j.Name + "-oom", Labels: j.Spec.Template.Labels},
		Status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{Name: "job",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "OOMKilled", ExitCode: 137}}}}},
	}
}

// cluster is a fake clientset with a Job controller that ends each Job on
// its second read: complete with result pods, except the Jobs in fail.
func cluster(t *testing.T, s *Sweep, fail map[string]bool, objs ...*batchv1.Job) (*kubeclienttest.JobController, *fake.Clientset) {
	t.Helper()
	var ro []runtime.Object
	for _, o := range objs {
		ro = append(ro, o)
	}
	cs := fake.NewClientset(ro...)
	jc := &kubeclienttest.JobController{After: 2, Finish: func(j *batchv1.Job) (batchv1.JobConditionType, []*corev1.Pod) {
		if fail[j.Name] {
			return batchv1.JobFailed, []*corev1.Pod{oomPod(j)}
		}
		return batchv1.JobComplete, resultPods(t, s, j)
	}}
	jc.Install(cs)
	return jc, cs
}

func statuses(os []Outcome) []string {
	var out []string
	for _, o := range os {
		out = append(out, o.Job+" "+o.Status)
	}
	return out
}

func TestRunOneAtATime(t *testing.T) {
	s, objs := runSweep(t, 3)
	jc, cs := cluster(t, s, nil)
	var done []Outcome
	var progress []RunProgress
	r := Runner{Client: kubeclienttest.Reader{Interface: cs}, Namespace: "bench", Interval: time.Millisecond,
		Progress: func(p RunProgress) { progress = append(progress, p) }, Done: func(o Outcome) { done = append(done, o) }}
	sum, err := r.Run(context.Background(), s, objs)
	if err != nil {
		t.Fatalf("Run() error = %v", err)
	}
	names := []string{objs[0].Name, objs[1].Name, objs[2].Name}
	if diff := cmp.Diff(names, jc.Created); diff != "" {
		t.Errorf("created (-want +got):\n%s", diff)
	}
	if len(jc.Overlapped) != 0 {
		t.Errorf("Jobs %q were created while another was unfinished, want one at a time", jc.Overlapped)
	}
	for i, o := range jc.CreateOptions {
		if o.FieldValidation != "Strict" {
			t.Errorf("create %d: field validation %q, want Strict", i, o.FieldValidation)
		}
	}
	want := []string{names[0] + " complete", names[1] + " complete", names[2] + " complete"}
	if diff := cmp.Diff(want, statuses(sum.Outcomes)); diff != "" {
		t.Errorf("outcomes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, statuses(done)); diff != "" {
		t.Errorf("Done calls (-want +got):\n%s", diff)
	}
	if o := sum.Outcomes[2]; o.N != 3 || o.Total != 3 || o.Pods != 4 || o.Succeeded != 4 || o.PointLabel != s.Jobs[2].Point.Label() || o.Reason != "" {
		t.Errorf("third outcome %+v, want 3 of 3, 4 pods succeeded, point %s", o, s.Jobs[2].Point.Label())
	}
	// Two reads per Job: the first sees it running, the second finished.
	if len(progress) != 6 || progress[0].State != "starting" || progress[1].Done != progress[1].Pods || progress[5].N != 3 {
		t.Errorf("progress %+v, want two reads of each of 3 Jobs, the second with every pod done", progress)
	}
	if sum.Stopped != "" || sum.Left != "" || len(sum.Failures()) != 0 {
		t.Errorf("summary %+v, want nothing stopped, left or failed", sum)
	}

	// The results of exactly these Jobs are recorded, not a stray pod of
	// the sweep made by another Job.
	stray := resultPods(t, s, &objs[0])[0]
	stray.Name, stray.Namespace = "stray", "bench"
	stray.OwnerReferences = []metav1.OwnerReference{{Kind: "Job", Name: "corepin-concurrency-099-r0", Controller: ptr(true)}}
	if _, err := cs.CoreV1().Pods("bench").Create(context.Background(), stray, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c := Collection{Experiments: catalog}
	cl, err := c.AddCluster(context.Background(), Cluster{Client: r.Client, Namespace: "bench", Selector: LabelSweep + "=concurrency", Jobs: sum.Ended()})
	if err != nil || cl.Pods != 7 || c.Results() != 7 {
		t.Fatalf("AddCluster() = %+v, %d results, %v; want the 7 pods of the 3 Jobs (concurrency 1, 2, 4), not the stray one", cl, c.Results(), err)
	}
	db, runID := recordOne(t, &c)
	if js, err := db.Jobs(runID); err != nil || len(js) != 7 {
		t.Errorf("recorded jobs %d (%v), want 7", len(js), err)
	}
}

func ptr[T any](v T) *T { return &v }

func TestRunResumes(t *testing.T) {
	s, objs := runSweep(t, 2)
	done := objs[0].DeepCopy()
	done.UID = "earlier"
	done.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	jc, cs := cluster(t, s, nil, done)
	sum, err := Runner{Client: kubeclienttest.Reader{Interface: cs}, Namespace: "bench", Interval: time.Millisecond}.Run(context.Background(), s, objs)
	if err != nil {
		t.Fatalf("Run() error = %v", err)
	}
	if diff := cmp.Diff([]string{objs[0].Name + " skipped", objs[1].Name + " complete"}, statuses(sum.Outcomes)); diff != "" {
		t.Errorf("outcomes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{objs[1].Name}, jc.Created); diff != "" {
		t.Errorf("created (-want +got):\n%s", diff)
	}
	got, err := cs.BatchV1().Jobs("bench").Get(context.Background(), objs[0].Name, metav1.GetOptions{})
	if err != nil || got.UID != "earlier" {
		t.Errorf("first Job = %v, %v; want the earlier run's (uid earlier), untouched", got, err)
	}

	t.Run("another sweep's Job of the same name", func(t *testing.T) {
		other := objs[0].DeepCopy()
		other.Annotations = map[string]string{AnnotationPoint: `{"cpus":"9"}`}
		_, cs := cluster(t, s, nil, other)
		_, err := Runner{Client: kubeclienttest.Reader{Interface: cs}, Namespace: "bench", Interval: time.Millisecond}.Run(context.Background(), s, objs)
		if !errors.Is(err, ErrJobMismatch) || !strings.Contains(err.Error(), objs[0].Name) {
			t.Errorf("Run() error = %v, want ErrJobMismatch naming %s", err, objs[0].Name)
		}
	})
	t.Run("a failed Job of an earlier run", func(t *testing.T) {
		failed := objs[0].DeepCopy()
		failed.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded"}}
		jc, cs := cluster(t, s, nil, failed)
		sum, err := Runner{Client: kubeclienttest.Reader{Interface: cs}, Namespace: "bench", Interval: time.Millisecond}.Run(context.Background(), s, objs)
		if err != nil {
			t.Fatal(err)
		}
		if len(sum.Outcomes) != 1 || sum.Outcomes[0].Status != StatusFailed || sum.Stopped != objs[0].Name || len(jc.Created) != 0 ||
			!strings.Contains(sum.Outcomes[0].Reason, "failed in an earlier run") || !strings.Contains(sum.Outcomes[0].Reason, "BackoffLimitExceeded") {
			t.Errorf("outcomes %+v, created %q; want the first failed (earlier run, BackoffLimitExceeded), the run stopped, nothing created", sum.Outcomes, jc.Created)
		}
	})
}

func TestRunFailure(t *testing.T) {
	s, objs := runSweep(t, 3)
	fail := map[string]bool{objs[1].Name: true}
	t.Run("stops", func(t *testing.T) {
		jc, cs := cluster(t, s, fail)
		sum, err := Runner{Client: kubeclienttest.Reader{Interface: cs}, Namespace: "bench", Interval: time.Millisecond}.Run(context.Background(), s, objs)
		if err != nil {
			t.Fatalf("Run() error = %v", err)
		}
		if diff := cmp.Diff([]string{objs[0].Name, objs[1].Name}, jc.Created); diff != "" {
			t.Errorf("created (-want +got):\n%s", diff)
		}
		if sum.Stopped != objs[1].Name || len(sum.Failures()) != 1 {
			t.Fatalf("summary %+v, want stopped at %s", sum, objs[1].Name)
		}
		why := sum.Failures()[0].Reason
		for _, w := range []string{"Job BackoffLimitExceeded", "pod " + objs[1].Name + "-oom: Failed", "container job terminated: OOMKilled (exit code 137)"} {
			if !strings.Contains(why, w) {
				t.Errorf("reason %q, want it to say %q", why, w)
			}
		}
		if diff := cmp.Diff([]string{objs[0].Name}, sum.Ended()[:1]); diff != "" || len(sum.Ended()) != 2 {
			t.Errorf("ended %q, want both Jobs that ended (the failed one's pods are recorded too)", sum.Ended())
		}
	})
	t.Run("keep going", func(t *testing.T) {
		jc, cs := cluster(t, s, fail)
		sum, err := Runner{Client: kubeclienttest.Reader{Interface: cs}, Namespace: "bench", Interval: time.Millisecond, KeepGoing: true}.Run(context.Background(), s, objs)
		if err != nil {
			t.Fatalf("Run() error = %v", err)
		}
		want := []string{objs[0].Name + " complete", objs[1].Name + " failed", objs[2].Name + " complete"}
		if diff := cmp.Diff(want, statuses(sum.Outcomes)); diff != "" || len(jc.Created) != 3 || sum.Stopped != "" {
			t.Errorf("outcomes (-want +got):\n%s\ncreated %q, stopped %q", diff, jc.Created, sum.Stopped)
		}
	})
}

// TestRunTimeout: a Job whose pod the scheduler cannot place never
// finishes; the run stops at the Job timeout with the scheduler's message
// and leaves the Job in place.
func TestRunTimeout(t *testing.T) {
	s, objs := runSweep(t, 2)
	cs := fake.NewClientset()
	jc := &kubeclienttest.JobController{}
	jc.Install(cs)
	pending := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: objs[0].Name + "-x", Namespace: "bench", Labels: objs[0].Spec.Template.Labels},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: "Unschedulable", Message: "0/3 nodes are available: 3 corepin: no NUMA node has 4 free whole cores."}}}}
	if _, err := cs.CoreV1().Pods("bench").Create(context.Background(), pending, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sum, err := Runner{Client: kubeclienttest.Reader{Interface: cs}, Namespace: "bench", Interval: time.Millisecond, JobTimeout: 20 * time.Millisecond}.Run(context.Background(), s, objs)
	if err != nil {
		t.Fatalf("Run() error = %v", err)
	}
	if len(sum.Outcomes) != 1 || sum.Outcomes[0].Status != StatusTimeout || sum.Stopped != objs[0].Name || len(jc.Created) != 1 {
		t.Fatalf("summary %+v, created %q; want the first Job timed out and the run stopped", sum, jc.Created)
	}
	for _, w := range []string{"not finished after 20ms (left running)", "not scheduled (Unschedulable): 0/3 nodes are available: 3 corepin: no NUMA node"} {
		if !strings.Contains(sum.Outcomes[0].Reason, w) {
			t.Errorf("reason %q, want it to say %q", sum.Outcomes[0].Reason, w)
		}
	}
	if len(sum.Ended()) != 0 || len(jc.Deleted) != 0 {
		t.Errorf("ended %q, deleted %q; want the timed-out Job neither recorded nor deleted", sum.Ended(), jc.Deleted)
	}
}

// TestRunInterrupted: the context ends while a Job runs: the run stops
// waiting, leaves it running and says which.
func TestRunInterrupted(t *testing.T) {
	s, objs := runSweep(t, 3)
	jc, cs := cluster(t, s, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := Runner{Client: kubeclienttest.Reader{Interface: cs}, Namespace: "bench", Interval: time.Millisecond,
		Progress: func(p RunProgress) {
			if p.N == 2 {
				cancel() // SIGINT, as signal.NotifyContext delivers it
			}
		}}
	sum, err := r.Run(ctx, s, objs)
	if !errors.Is(err, context.Canceled) || sum.Left != objs[1].Name || !strings.Contains(err.Error(), objs[1].Name+" (left running)") {
		t.Errorf("Run() = %+v, %v; want context.Canceled with %s left running", sum, err, objs[1].Name)
	}
	if diff := cmp.Diff([]string{objs[0].Name + " complete"}, statuses(sum.Outcomes)); diff != "" || len(jc.Created) != 2 || len(jc.Deleted) != 0 {
		t.Errorf("outcomes (-want +got):\n%s\ncreated %q deleted %q", diff, jc.Created, jc.Deleted)
	}
}

func TestRunnerDelete(t *testing.T) {
	s, objs := runSweep(t, 2)
	jc, cs := cluster(t, s, nil)
	r := Runner{Client: kubeclienttest.Reader{Interface: cs}, Namespace: "bench", Interval: time.Millisecond}
	if _, err := r.Run(context.Background(), s, objs); err != nil {
		t.Fatal(err)
	}
	if err := r.Delete(context.Background(), []string{objs[0].Name, objs[1].Name, "gone-already"}); err != nil {
		t.Fatalf("Delete() error = %v", err)
	}
	list, err := cs.BatchV1().Jobs("bench").List(context.Background(), metav1.ListOptions{})
	if err != nil || len(list.Items) != 0 {
		t.Errorf("Jobs left %d (%v), want none", len(list.Items), err)
	}
	for i, o := range jc.DeleteOptions {
		if o.PropagationPolicy == nil || *o.PropagationPolicy != metav1.DeletePropagationBackground {
			t.Errorf("delete %d (%s): propagation %v, want Background", i, jc.Deleted[i], o.PropagationPolicy)
		}
	}
}

func TestPodReason(t *testing.T) {
	tests := []struct {
		name string
		pod  corev1.PodStatus
		want string
	}{
		{name: "pending, nothing known", want: "Pending"},
		{name: "image pull", pod: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{Name: "job",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: `Back-off pulling image "corepin:nope"`}}}}},
			want: `Pending; container job waiting: ImagePullBackOff: Back-off pulling image "corepin:nope"`},
		{name: "evicted", pod: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: "The node was low on resource: memory."},
			want: "Failed; Evicted: The node was low on resource: memory."},
		{name: "error with a result document", pod: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{Name: "job",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 2, Message: `{"v":1,"sweep":"threads"}`}}}}},
			want: "Failed; container job terminated: Error (exit code 2)"},
		{name: "error with a message", pod: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{Name: "job",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 127, Message: "corepin: not found\n"}}}}},
			want: "Failed; container job terminated: (none) (exit code 127): corepin: not found"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := PodReason(&corev1.Pod{Status: tc.pod}); got != tc.want {
				t.Errorf("PodReason() = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestRunReadErrors: a read of the Job that fails now and then is
// retried; five failures in a row end the run with the API's error.
func TestRunReadErrors(t *testing.T) {
	s, objs := runSweep(t, 1)
	for _, tc := range []struct {
		name    string
		failing func(read int) bool
		wantErr string
	}{
		{name: "every other read fails", failing: func(read int) bool { return read%2 == 1 }},
		{name: "every read fails", failing: func(int) bool { return true }, wantErr: "(5 times in a row): etcdserver: leader changed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, cs := cluster(t, s, nil)
			reads := 0
			cs.PrependReactor("get", "jobs", func(k8stesting.Action) (bool, runtime.Object, error) {
				reads++
				if tc.failing(reads) {
					return true, nil, errors.New("etcdserver: leader changed")
				}
				return false, nil, nil
			})
			sum, err := Runner{Client: kubeclienttest.Reader{Interface: cs}, Namespace: "bench", Interval: time.Millisecond}.Run(context.Background(), s, objs)
			switch {
			case tc.wantErr == "" && (err != nil || len(sum.Outcomes) != 1 || sum.Outcomes[0].Status != StatusComplete):
				t.Errorf("Run() = %+v, %v; want the Job complete despite the failed reads", sum, err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("Run() error = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// TestRunRetriesCreate: a creation that got no answer (a timeout, a busy
// or restarting API server, a dropped connection) is tried again, and a
// Job that the lost try did create is found and waited for; a refusal is
// not tried again, and tries that never get an answer end the run with
// the last error.
func TestRunRetriesCreate(t *testing.T) {
	s, objs := runSweep(t, 1)
	fast := wait.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 4}
	for _, tc := range []struct {
		name string
		// answer is the create's outcome at try n (from 1): created in
		// the store or not, and the error the client sees.
		answer  func(n int) (created bool, err error)
		tries   int
		wantErr string
	}{
		{name: "timeouts, then created", tries: 3, answer: func(n int) (bool, error) {
			if n < 3 {
				return false, apierrors.NewTimeoutError("request did not complete within 34s", 1)
			}
			return true, nil
		}},
		{name: "created but the answer lost", tries: 2, answer: func(n int) (bool, error) {
			if n == 1 {
				return true, apierrors.NewServerTimeout(schema.GroupResource{Group: "batch", Resource: "jobs"}, "create", 1)
			}
			return true, nil
		}},
		{name: "connection refused, then too many requests, then created", tries: 3, answer: func(n int) (bool, error) {
			switch n {
			case 1:
				return false, &url.Error{Op: "Post", URL: "https://127.0.0.1:6443", Err: syscall.ECONNREFUSED}
			case 2:
				return false, apierrors.NewTooManyRequests("slow down", 1)
			}
			return true, nil
		}},
		{name: "refused", tries: 1, wantErr: "is invalid", answer: func(int) (bool, error) {
			return false, apierrors.NewInvalid(schema.GroupKind{Group: "batch", Kind: "Job"}, "x", nil)
		}},
		{name: "never answered", tries: 4, wantErr: "after 4 tries", answer: func(int) (bool, error) {
			return false, apierrors.NewServiceUnavailable("the server is shutting down")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, cs := cluster(t, s, nil)
			tries := 0
			cs.PrependReactor("create", "jobs", func(a k8stesting.Action) (bool, runtime.Object, error) {
				tries++
				created, err := tc.answer(tries)
				if err == nil {
					return false, nil, nil // the JobController's reactor and the store create it
				}
				if created {
					j := a.(k8stesting.CreateActionImpl).Object.(*batchv1.Job)
					if err := cs.Tracker().Create(batchv1.SchemeGroupVersion.WithResource("jobs"), j, a.GetNamespace()); err != nil {
						t.Fatal(err)
					}
				}
				return true, nil, err
			})
			sum, err := Runner{Client: kubeclienttest.Reader{Interface: cs}, Namespace: "bench", Interval: time.Millisecond, CreateBackoff: fast}.Run(context.Background(), s, objs)
			if tries != tc.tries {
				t.Errorf("%d tries to create, want %d", tries, tc.tries)
			}
			switch {
			case tc.wantErr == "" && (err != nil || len(sum.Outcomes) != 1 || sum.Outcomes[0].Status != StatusComplete):
				t.Errorf("Run() = %+v, %v; want the Job created once and complete", sum, err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("Run() error = %v, want %q", err, tc.wantErr)
			}
		})
	}
}
