package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/corepin/corepin/kube/kubeclient/kubeclienttest"
)

// threadsMarker is the result of point index of a quick threads sweep,
// run by pod, with the run's ops over 2 s and its exit code.
func threadsMarker(t *testing.T, index int, pod string, ops, exit int) Marker {
	t.Helper()
	threads := []string{"2", "4", "8"}[index%3]
	run := fmt.Sprintf(`{"job":0,"cmd":"corepin workload spin","mode":"unbounded","cpus":4,"wall_s":2,"ops":%d,"exit_code":%d}`, ops, exit)
	return Marker{Sweep: "threads", Index: index, Repeat: 0, Point: json.RawMessage(`{"cpus":"4","threads":"` + threads + `"}`), Pods: 1,
		Quick: true, Repeats: 1, Topology: "16 CPUs", Spec: json.RawMessage(`{"job":{"workload":"spin","job_seconds":0.4},"cpus":4}`),
		Pod: pod, Result: json.RawMessage(run)}
}

func document(t *testing.T, m Marker) string {
	t.Helper()
	doc, err := Document(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(doc)
}

// sweepPod is a pod of the threads sweep in namespace bench, in phase,
// whose container "job" ended with message (no terminated state when
// the phase is Pending or Running).
func sweepPod(name string, phase corev1.PodPhase, exit int32, message string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "bench", Labels: map[string]string{LabelSweep: "threads"}},
		Status:     corev1.PodStatus{Phase: phase},
	}
	st := corev1.ContainerStatus{Name: "job"}
	switch phase {
	case corev1.PodSucceeded, corev1.PodFailed:
		reason := "Completed"
		if exit != 0 {
			reason = "Error"
		}
		st.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: exit, Reason: reason, Message: message}
	case corev1.PodRunning:
		st.State.Running = &corev1.ContainerStateRunning{}
	}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{st}
	return p
}

// mapLogs serves pod logs from a map; a pod not in it has an error.
type mapLogs map[string]string

func (m mapLogs) PodLog(_ context.Context, _, pod, _ string) (io.ReadCloser, error) {
	l, ok := m[pod]
	if !ok {
		return nil, fmt.Errorf("pods %q not found", pod)
	}
	return io.NopCloser(strings.NewReader(l)), nil
}

func TestAddCluster(t *testing.T) {
	ok0, ok1 := threadsMarker(t, 0, "p0", 1000, 0), threadsMarker(t, 1, "p1", 1800, 0)
	logLine := func(m Marker) string {
		m.V = ResultVersion
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return "noise\n" + MarkerPrefix + string(b) + "\n"
	}
	type want struct {
		Summary  ClusterSummary
		Results  int
		Pods     []string // of the results, in order
		Errors   []string // the kept jobs' errors
		Skipped  []string // skipped pods
		Reasons  []string // substrings of the skip reasons
		Warnings []string // substrings of the warnings
	}
	tests := []struct {
		name string
		pods []*corev1.Pod
		logs LogReader // nil: the fake clientset's own ("fake logs")
		want want
	}{
		{
			name: "all succeeded",
			pods: []*corev1.Pod{sweepPod("p0", corev1.PodSucceeded, 0, document(t, ok0)), sweepPod("p1", corev1.PodSucceeded, 0, document(t, ok1))},
			want: want{Summary: ClusterSummary{Pods: 2, Finished: 2}, Results: 2, Pods: []string{"p0", "p1"}, Errors: []string{"", ""}},
		},
		{
			name: "one failed",
			pods: []*corev1.Pod{sweepPod("p0", corev1.PodSucceeded, 0, document(t, ok0)),
				sweepPod("p1", corev1.PodFailed, 137, document(t, ok1))},
			want: want{Summary: ClusterSummary{Pods: 2, Finished: 2}, Results: 2, Pods: []string{"p0", "p1"},
				Errors: []string{"", "pod failed: exit code 137 (Error)"}},
		},
		{
			name: "one running, one pending",
			pods: []*corev1.Pod{sweepPod("p0", corev1.PodSucceeded, 0, document(t, ok0)), sweepPod("p1", corev1.PodRunning, 0, ""),
				sweepPod("p2", corev1.PodPending, 0, "")},
			want: want{Summary: ClusterSummary{Pods: 3, Finished: 1, Unfinished: []string{"p1", "p2"}}, Results: 1, Pods: []string{"p0"},
				Errors: []string{""}, Warnings: []string{"2 pods not finished: p1, p2"}},
		},
		{
			name: "garbage message falls back to the log",
			pods: []*corev1.Pod{sweepPod("p0", corev1.PodSucceeded, 0, "{garbage"), sweepPod("p1", corev1.PodSucceeded, 0, document(t, ok1))},
			logs: mapLogs{"p0": logLine(ok0)},
			want: want{Summary: ClusterSummary{Pods: 2, Finished: 2, FromLogs: 1}, Results: 2, Pods: []string{"p0", "p1"}, Errors: []string{"", ""}},
		},
		{
			name: "garbage message and a log without a result",
			pods: []*corev1.Pod{sweepPod("p0", corev1.PodSucceeded, 0, "{garbage"), sweepPod("p1", corev1.PodSucceeded, 0, document(t, ok1))},
			want: want{Summary: ClusterSummary{Pods: 2, Finished: 2}, Results: 1, Pods: []string{"p1"}, Errors: []string{""},
				Skipped: []string{"p0"}, Reasons: []string{"termination message: parsing the result line"}},
		},
		{
			name: "failed pod without a result, log unreadable",
			pods: []*corev1.Pod{sweepPod("p0", corev1.PodFailed, 1, "")},
			logs: mapLogs{},
			want: want{Summary: ClusterSummary{Pods: 1, Finished: 1}, Skipped: []string{"p0"},
				Reasons: []string{"no result document; reading the log: pods \"p0\" not found"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var objs []runtime.Object
			for _, p := range tc.pods {
				objs = append(objs, p)
			}
			// A pod of another namespace and one of no sweep are not read.
			other := sweepPod("elsewhere", corev1.PodSucceeded, 0, document(t, ok0))
			other.Namespace = "default"
			unlabelled := sweepPod("unlabelled", corev1.PodSucceeded, 0, document(t, ok0))
			unlabelled.Labels = nil
			cs := fake.NewClientset(append(objs, other, unlabelled)...)
			c := Collection{Experiments: catalog}
			sum, err := c.AddCluster(context.Background(), Cluster{Client: kubeclienttest.Reader{Interface: cs}, Logs: tc.logs, Namespace: "bench"})
			if err != nil {
				t.Fatalf("AddCluster() error = %v", err)
			}
			got := want{Summary: sum, Results: c.Results()}
			for _, r := range c.results {
				got.Pods = append(got.Pods, r.m.Pod)
				got.Errors = append(got.Errors, r.job.Error)
			}
			for _, s := range c.Skipped {
				got.Skipped = append(got.Skipped, s.Log)
				for _, r := range tc.want.Reasons {
					if !strings.Contains(s.Reason, r) {
						t.Errorf("skip reason %q, want it to contain %q", s.Reason, r)
					}
				}
			}
			got.Reasons = tc.want.Reasons
			for i, w := range tc.want.Warnings {
				if i >= len(c.Warnings) || !strings.Contains(c.Warnings[i], w) {
					t.Errorf("Warnings = %q, want %q", c.Warnings, tc.want.Warnings)
				}
			}
			got.Warnings = tc.want.Warnings
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("AddCluster (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAddClusterRecordsFailedPod records a sweep with a failed pod: the
// failed job is stored but left out of the point's metrics, with a warning.
func TestAddClusterRecordsFailedPod(t *testing.T) {
	cs := fake.NewClientset(sweepPod("p0", corev1.PodSucceeded, 0, document(t, threadsMarker(t, 0, "p0", 1000, 0))),
		sweepPod("p1", corev1.PodFailed, 2, document(t, threadsMarker(t, 1, "p1", 1800, 2))))
	c := Collection{Experiments: catalog}
	if _, err := c.AddCluster(context.Background(), Cluster{Client: kubeclienttest.Reader{Interface: cs}, Namespace: "bench", Selector: LabelSweep + "=threads"}); err != nil {
		t.Fatal(err)
	}
	db, runID := recordOne(t, &c)
	jobs, err := db.Jobs(runID)
	if err != nil || len(jobs) != 2 || jobs[1].ExitCode != 2 {
		t.Fatalf("Jobs() = %+v, %v; want 2 jobs, the second with exit code 2", jobs, err)
	}
	if len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], "1 failed jobs left out of the metrics") {
		t.Errorf("Warnings = %q, want the failed job left out", c.Warnings)
	}
}

// TestAddClusterPages serves the pods two at a time with continue tokens,
// as an API server does for a list with a limit.
func TestAddClusterPages(t *testing.T) {
	var pods []corev1.Pod
	for i := range 5 {
		name := fmt.Sprintf("p%d", i)
		pods = append(pods, *sweepPod(name, corev1.PodSucceeded, 0, document(t, threadsMarker(t, i, name, 1000+i, 0))))
	}
	cs := fake.NewClientset()
	var limits []int64
	var selectors []string
	cs.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		l := a.(k8stesting.ListActionImpl)
		limits = append(limits, l.ListOptions.Limit)
		selectors = append(selectors, l.ListOptions.LabelSelector)
		start := 0
		if l.ListOptions.Continue != "" {
			if _, err := fmt.Sscanf(l.ListOptions.Continue, "from-%d", &start); err != nil {
				return true, nil, err
			}
		}
		end := min(start+int(l.ListOptions.Limit), len(pods))
		out := &corev1.PodList{Items: pods[start:end]}
		if end < len(pods) {
			out.Continue = fmt.Sprintf("from-%d", end)
		}
		return true, out, nil
	})
	c := Collection{Experiments: catalog}
	sum, err := c.AddCluster(context.Background(), Cluster{Client: kubeclienttest.Reader{Interface: cs}, Namespace: "bench", PageSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Pods != 5 || c.Results() != 5 {
		t.Errorf("pods %d, results %d; want 5 and 5 over three pages", sum.Pods, c.Results())
	}
	if diff := cmp.Diff([]int64{2, 2, 2}, limits); diff != "" {
		t.Errorf("list limits (-want +got):\n%s", diff)
	}
	if selectors[0] != LabelSweep {
		t.Errorf("selector %q, want %q (the label every sweep's pods carry)", selectors[0], LabelSweep)
	}
	if _, err := c.AddCluster(context.Background(), Cluster{Client: kubeclienttest.Reader{Interface: cs}, Selector: "a in (", Namespace: "bench"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("AddCluster(bad selector) error = %v, want ErrInvalid", err)
	}
}

func sweepJob(name string, cond batchv1.JobConditionType) *batchv1.Job {
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "bench", Labels: map[string]string{LabelSweep: "threads"}}}
	if cond != "" {
		j.Status.Conditions = []batchv1.JobCondition{{Type: cond, Status: corev1.ConditionTrue}}
	}
	return j
}

func TestWaitJobs(t *testing.T) {
	t.Run("all finished", func(t *testing.T) {
		cs := fake.NewClientset(sweepJob("a", batchv1.JobComplete), sweepJob("b", batchv1.JobFailed))
		var seen []WaitProgress
		if err := WaitJobs(context.Background(), Cluster{Client: kubeclienttest.Reader{Interface: cs}, Namespace: "bench"}, 1, func(p WaitProgress) { seen = append(seen, p) }); err != nil {
			t.Fatalf("WaitJobs() error = %v", err)
		}
		if diff := cmp.Diff([]WaitProgress{{Finished: 2, Total: 2}}, seen); diff != "" {
			t.Errorf("progress (-want +got):\n%s", diff)
		}
	})
	t.Run("one running when the wait ends", func(t *testing.T) {
		cs := fake.NewClientset(sweepJob("a", batchv1.JobComplete), sweepJob("b", ""))
		ctx, cancel := context.WithCancel(context.Background())
		polls := 0
		err := WaitJobs(ctx, Cluster{Client: kubeclienttest.Reader{Interface: cs}, Namespace: "bench"}, 1, func(p WaitProgress) {
			polls++
			if polls == 2 {
				cancel() // the deadline, as --timeout sets it
			}
		})
		if !errors.Is(err, ErrCluster) || !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "1 of 2 Jobs finished") {
			t.Errorf("WaitJobs() error = %v, want ErrCluster saying 1 of 2 Jobs finished", err)
		}
	})
	t.Run("no Jobs", func(t *testing.T) {
		err := WaitJobs(context.Background(), Cluster{Client: kubeclienttest.Reader{Interface: fake.NewClientset()}, Namespace: "bench"}, 1, nil)
		if !errors.Is(err, ErrCluster) || !strings.Contains(err.Error(), "no Jobs match corepin.io/sweep") {
			t.Errorf("WaitJobs() error = %v, want no Jobs match", err)
		}
	})
}
