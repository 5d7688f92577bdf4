package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/corepin/corepin/kube/jobs"
	"github.com/corepin/corepin/kube/kubeclient/kubeclienttest"
	"github.com/corepin/corepin/store"
)

// replace sets *p to v for the test.
func replace[T any](t *testing.T, p *T, v T) {
	t.Helper()
	old := *p
	*p = v
	t.Cleanup(func() { *p = old })
}

// threeJobArgs are the kube run arguments of a threads sweep of 3 Jobs
// (threads 1, 2 and 4 x the 4 CPUs), one pod each.
func threeJobArgs(t *testing.T, db string, more ...string) []string {
	t.Helper()
	spec := filepath.Join(t.TempDir(), "spec.yaml")
	if err := os.WriteFile(spec, []byte("threads:\n  threads: [\"1\", \"2\", \"4\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return append([]string{"kube", "run", "--sweep", "threads", "--quick", "--repeats", "1", "--topology", writeNode(t), "--spec", spec, "--db", db}, more...)
}

var threeJobs = []string{"corepin-threads-000-r0", "corepin-threads-001-r0", "corepin-threads-002-r0"}

// contextArg finds the result context a generated Job passes to corepin
// kube result.
var contextArg = regexp.MustCompile(`--context '([^']*)'`)

// podsOf are j's pods as they end when its script succeeds: Succeeded,
// each with the result document corepin kube result writes (ops = 1000 x
// (index + 1)) as its termination message.
func podsOf(t *testing.T, j *batchv1.Job) []*corev1.Pod {
	t.Helper()
	m := contextArg.FindStringSubmatch(j.Spec.Template.Spec.Containers[0].Command[2])
	if m == nil {
		t.Fatalf("Job %s: no --context in its script", j.Name)
	}
	var mk jobs.Marker
	if err := json.Unmarshal([]byte(m[1]), &mk); err != nil {
		t.Fatalf("Job %s: result context %q: %v", j.Name, m[1], err)
	}
	var pods []*corev1.Pod
	for i := range int(*j.Spec.Completions) {
		mk.Pod = fmt.Sprintf("%s-%d", j.Name, i)
		mk.Result = json.RawMessage(fmt.Sprintf(`{"job":0,"mode":"unbounded","cpus":4,"wall_s":2,"ops":%d,"exit_code":0}`, 1000*(mk.Index+1)))
		doc, err := jobs.Document(mk)
		if err != nil {
			t.Fatal(err)
		}
		pods = append(pods, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: mk.Pod, Labels: j.Spec.Template.Labels},
			Status: corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{{Name: "job",
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed", Message: string(doc)}}}}}})
	}
	return pods
}

// fakeRunCluster gives kube run a fake clientset in namespace bench whose
// Job controller ends each Job on its second read: complete with result
// pods, failed (a pod OOMKilled) for the Jobs in fail, never for those in
// hang.
func fakeRunCluster(t *testing.T, fail, hang map[string]bool, objs ...runtime.Object) (*kubeclienttest.JobController, *fake.Clientset) {
	t.Helper()
	// One node that holds any Job of these sweeps at once.
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64")}}}
	cs := fake.NewClientset(append(objs, node)...)
	jc := &kubeclienttest.JobController{After: 2, Finish: func(j *batchv1.Job) (batchv1.JobConditionType, []*corev1.Pod) {
		switch {
		case hang[j.Name]:
			return "", nil
		case fail[j.Name]:
			return batchv1.JobFailed, []*corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: j.Name + "-oom", Labels: j.Spec.Template.Labels},
				Status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{Name: "job",
					State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "OOMKilled", ExitCode: 137}}}}}}}
		}
		return batchv1.JobComplete, podsOf(t, j)
	}}
	jc.Install(cs)
	replace(t, &kubeRunClient, func(*kubeFlags) (jobs.RunAPI, string, string, error) {
		return kubeclienttest.Reader{Interface: cs}, "bench", "https://fake", nil
	})
	replace(t, &kubeRunInterval, time.Millisecond)
	return jc, cs
}

// recordedJobs reads the jobs of run id from db.
func recordedJobs(t *testing.T, db string, id int64) int {
	t.Helper()
	d, err := store.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	js, err := d.Jobs(id)
	if err != nil {
		t.Fatal(err)
	}
	return len(js)
}

func TestKubeRunRecordsSweep(t *testing.T) {
	jc, cs := fakeRunCluster(t, nil, nil)
	dir := t.TempDir()
	db := filepath.Join(dir, "results.db")
	code, out, errs := corepin(t, "", threeJobArgs(t, db)...)
	if code != 0 {
		t.Fatalf("kube run: exit %d: %s", code, errs)
	}
	if diff := cmp.Diff(threeJobs, jc.Created); diff != "" {
		t.Errorf("Jobs created (-want +got):\n%s", diff)
	}
	if len(jc.Overlapped) != 0 {
		t.Errorf("Jobs %q created before the one before them finished, want one at a time", jc.Overlapped)
	}
	for i, o := range jc.CreateOptions {
		if o.FieldValidation != "Strict" {
			t.Errorf("create %d: field validation %q, want Strict", i, o.FieldValidation)
		}
	}
	// Off a terminal: one line per Job as it ends.
	lines := strings.Split(strings.TrimSpace(errs), "\n")
	const second = "[2/3] corepin-threads-001-r0 (cpus=4 threads=8): complete, 1/1 pods succeeded, "
	if len(lines) != 3 || !strings.HasPrefix(lines[1], second) || !strings.HasSuffix(lines[1], " s") {
		t.Errorf("stderr %q, want one line per Job, the second %q and its seconds", errs, second)
	}
	want := "recorded run 1 in " + db + " (corepin report --run 1)\n"
	if !strings.HasPrefix(out, want) || !strings.Contains(out, "3 Jobs ended (0 failed), 3 pods: 3 results") {
		t.Errorf("stdout %q, want it to start %q and count 3 results", out, want)
	}
	if n := recordedJobs(t, db, 1); n != 3 {
		t.Errorf("run 1 holds %d jobs, want the 3 pods' jobs", n)
	}
	code, out, errs = corepin(t, "", "report", "--db", db, "--report-dir", filepath.Join(dir, "report"))
	// rates 1000/2, 2000/2 and 3000/2 ops/s.
	if code != 0 || !strings.Contains(out, "500.0") || !strings.Contains(out, "1500.0") {
		t.Errorf("report: exit %d, stderr %q; want the recorded rates 500.0 and 1500.0 in:\n%s", code, errs, out)
	}
	if list, err := cs.BatchV1().Jobs("bench").List(context.Background(), metav1.ListOptions{}); err != nil || len(list.Items) != 3 || len(jc.Deleted) != 0 {
		t.Errorf("%d Jobs kept (%v), %d deleted; want the 3 kept without --delete", len(list.Items), err, len(jc.Deleted))
	}
}

// TestKubeRunResumesJSON: the first Job is complete from an earlier run:
// it is not created again, its pod's result is recorded with the others,
// and -o json prints a line per Job and a last one with the run.
func TestKubeRunResumesJSON(t *testing.T) {
	db := filepath.Join(t.TempDir(), "results.db")
	// The first Job as kube jobs writes it, complete, with its pod.
	code, out, errs := corepin(t, "", append(append([]string{"kube", "jobs"}, threeJobArgs(t, db)[2:len(threeJobArgs(t, db))-2]...), "--namespace", "bench", "-o", "json")...)
	if code != 0 {
		t.Fatalf("kube jobs: exit %d: %s", code, errs)
	}
	var list struct{ Items []batchv1.Job }
	if err := json.Unmarshal([]byte(out), &list); err != nil || len(list.Items) != 3 {
		t.Fatalf("kube jobs -o json: %d Jobs, %v", len(list.Items), err)
	}
	first := list.Items[0].DeepCopy()
	first.UID = "earlier"
	first.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	pod := podsOf(t, first)[0]
	pod.Namespace = "bench"
	pod.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(first, batchv1.SchemeGroupVersion.WithKind("Job"))}
	jc, _ := fakeRunCluster(t, nil, nil, first, pod)

	code, out, errs = corepin(t, "", threeJobArgs(t, db, "-o", "json")...)
	if code != 0 {
		t.Fatalf("kube run: exit %d: %s", code, errs)
	}
	if diff := cmp.Diff(threeJobs[1:], jc.Created); diff != "" {
		t.Errorf("Jobs created (-want +got):\n%s", diff)
	}
	if errs != "" {
		t.Errorf("stderr %q, want nothing off a terminal with -o json", errs)
	}
	dec := json.NewDecoder(strings.NewReader(out))
	var got []string
	for range 3 {
		var o struct {
			Job    string          `json:"job"`
			Point  json.RawMessage `json:"point"`
			Status string          `json:"status"`
			Pods   int             `json:"pods"`
			WallS  *float64        `json:"wall_s"`
		}
		if err := dec.Decode(&o); err != nil {
			t.Fatalf("Job line: %v in %s", err, out)
		}
		if o.Pods != 1 || o.WallS == nil || !json.Valid(o.Point) || !strings.HasPrefix(string(o.Point), `{"cpus":"4"`) {
			t.Errorf("Job line %+v (point %s), want 1 pod, wall_s and the point object", o, o.Point)
		}
		got = append(got, o.Job+" "+o.Status)
	}
	if diff := cmp.Diff([]string{threeJobs[0] + " skipped", threeJobs[1] + " complete", threeJobs[2] + " complete"}, got); diff != "" {
		t.Errorf("Job lines (-want +got):\n%s", diff)
	}
	var last struct {
		RunIDs  []int64 `json:"run_ids"`
		DB      string  `json:"db"`
		Results int     `json:"results"`
		Failed  int     `json:"failed"`
	}
	if err := dec.Decode(&last); err != nil || len(last.RunIDs) != 1 || last.DB != db || last.Results != 3 || last.Failed != 0 || dec.More() {
		t.Fatalf("last line %+v (%v) of %s, want one run of 3 results in %s", last, err, out, db)
	}
	if n := recordedJobs(t, db, last.RunIDs[0]); n != 3 {
		t.Errorf("run %d holds %d jobs, want 3 (the earlier run's pod among them)", last.RunIDs[0], n)
	}
}

// TestKubeRunNotesAndRefusesUnfit: a Job's pod no node can hold is
// refused before anything is created (exit 2, naming the point and the
// --node-cpus that fits); what kube run could not check is said before
// the run (stderr), or in the last JSON object with -o json.
func TestKubeRunNotesAndRefusesUnfit(t *testing.T) {
	t.Run("refused", func(t *testing.T) {
		jc, cs := fakeRunCluster(t, nil, nil)
		n, err := cs.CoreV1().Nodes().Get(context.Background(), "node-1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse("3500m")
		if _, err := cs.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		code, _, errs := corepin(t, "", threeJobArgs(t, filepath.Join(t.TempDir(), "results.db"))...)
		const want = "each pod requests 4 CPUs, the largest schedulable node has 3.5 allocatable, so no node can run it: give the nodes' own topology (--topology, --sysfs-root) or --node-cpus 3.5"
		if code != 2 || !strings.Contains(errs, want) || len(jc.Created) != 0 {
			t.Errorf("kube run: exit %d, stderr %q, created %q; want exit 2 saying %q and nothing created", code, errs, jc.Created, want)
		}
	})
	const note = "not checked that the Jobs fit a node: no schedulable node reports allocatable cpu"
	for _, asJSON := range []bool{false, true} {
		t.Run(fmt.Sprintf("json=%t", asJSON), func(t *testing.T) {
			_, cs := fakeRunCluster(t, nil, nil)
			if err := cs.CoreV1().Nodes().Delete(context.Background(), "node-1", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			var more []string
			if asJSON {
				more = []string{"-o", "json"}
			}
			code, out, errs := corepin(t, "", threeJobArgs(t, filepath.Join(t.TempDir(), "results.db"), more...)...)
			if code != 0 {
				t.Fatalf("kube run: exit %d: %s", code, errs)
			}
			if !asJSON {
				if !strings.HasPrefix(errs, "corepin: note: "+note+"\n[1/3] ") {
					t.Errorf("stderr %q, want the note first, then the Jobs", errs)
				}
				return
			}
			if errs != "" {
				t.Errorf("stderr %q, want nothing off a terminal with -o json", errs)
			}
			lines := strings.Split(strings.TrimSpace(out), "\n")
			var last struct{ Notes []string }
			if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil || len(last.Notes) != 1 || last.Notes[0] != note {
				t.Errorf("last line %s (%v), want its notes [%q]", lines[len(lines)-1], err, note)
			}
		})
	}
}

func TestKubeRunFailedJob(t *testing.T) {
	fail := map[string]bool{threeJobs[1]: true}
	t.Run("stops", func(t *testing.T) {
		jc, _ := fakeRunCluster(t, fail, nil)
		db := filepath.Join(t.TempDir(), "results.db")
		code, out, errs := corepin(t, "", threeJobArgs(t, db)...)
		if code != 1 {
			t.Fatalf("kube run: exit %d, want 1: %s", code, errs)
		}
		if diff := cmp.Diff(threeJobs[:2], jc.Created); diff != "" {
			t.Errorf("Jobs created (-want +got):\n%s", diff)
		}
		last := errs[strings.LastIndex(strings.TrimSuffix(errs, "\n"), "\n")+1:]
		for _, w := range []string{"corepin: Job corepin-threads-001-r0 failed", "BackoffLimitExceeded", "pod corepin-threads-001-r0-oom: Failed; container job terminated: OOMKilled (exit code 137)"} {
			if !strings.Contains(last, w) {
				t.Errorf("last line of stderr %q, want it to say %q", last, w)
			}
		}
		// What ended is recorded: the first Job's result.
		if !strings.Contains(out, "recorded run 1 in "+db) || recordedJobs(t, db, 1) != 1 {
			t.Errorf("stdout %q, want the first Job's result recorded in run 1", out)
		}
	})
	t.Run("keep going", func(t *testing.T) {
		jc, _ := fakeRunCluster(t, fail, nil)
		db := filepath.Join(t.TempDir(), "results.db")
		code, out, errs := corepin(t, "", threeJobArgs(t, db, "--keep-going")...)
		if code != 1 || !strings.Contains(errs, "corepin: 1 of 3 Jobs did not complete: corepin-threads-001-r0 failed: Job BackoffLimitExceeded") {
			t.Errorf("kube run --keep-going: exit %d, stderr %q; want exit 1 naming the failed Job", code, errs)
		}
		if diff := cmp.Diff(threeJobs, jc.Created); diff != "" {
			t.Errorf("Jobs created (-want +got):\n%s", diff)
		}
		if !strings.Contains(out, "3 Jobs ended (1 failed), 3 pods: 2 results") || recordedJobs(t, db, 1) != 2 {
			t.Errorf("stdout %q, want the 2 complete Jobs' results recorded", out)
		}
	})
}

func TestKubeRunJobTimeout(t *testing.T) {
	jc, cs := fakeRunCluster(t, nil, map[string]bool{threeJobs[0]: true})
	db := filepath.Join(t.TempDir(), "results.db")
	code, out, errs := corepin(t, "", threeJobArgs(t, db, "--job-timeout", "30ms")...)
	if code != 1 || out != "" || !strings.Contains(errs, "nothing recorded: Job corepin-threads-000-r0 timeout: not finished after 30ms (left running)") {
		t.Errorf("kube run --job-timeout 30ms: exit %d, stdout %q, stderr %q; want exit 1, the Job named as not finished, nothing recorded", code, out, errs)
	}
	if len(jc.Created) != 1 || len(jc.Deleted) != 0 {
		t.Errorf("created %q, deleted %q; want the first Job only, left in place", jc.Created, jc.Deleted)
	}
	if _, err := cs.BatchV1().Jobs("bench").Get(context.Background(), threeJobs[0], metav1.GetOptions{}); err != nil {
		t.Errorf("the timed-out Job: %v, want it left running", err)
	}
	if _, err := os.Stat(db); err == nil {
		t.Errorf("a run that recorded nothing created the database")
	}
}

func TestKubeRunDelete(t *testing.T) {
	jc, cs := fakeRunCluster(t, nil, nil)
	db := filepath.Join(t.TempDir(), "results.db")
	code, out, errs := corepin(t, "", threeJobArgs(t, db, "--delete")...)
	if code != 0 || !strings.Contains(out, "; 3 Jobs deleted") {
		t.Fatalf("kube run --delete: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if diff := cmp.Diff(threeJobs, jc.Deleted); diff != "" {
		t.Errorf("Jobs deleted (-want +got):\n%s", diff)
	}
	for i, o := range jc.DeleteOptions {
		if o.PropagationPolicy == nil || *o.PropagationPolicy != metav1.DeletePropagationBackground {
			t.Errorf("delete %d: propagation %v, want Background (the pods go too)", i, o.PropagationPolicy)
		}
	}
	if list, err := cs.BatchV1().Jobs("bench").List(context.Background(), metav1.ListOptions{}); err != nil || len(list.Items) != 0 {
		t.Errorf("%d Jobs left (%v), want none", len(list.Items), err)
	}
	if recordedJobs(t, db, 1) != 3 {
		t.Errorf("want the 3 results recorded before the Jobs went")
	}
}

// TestKubeRunInterrupted sends corepin SIGINT while it waits for the
// second Job: it stops waiting, leaves that Job, records the first and
// says how to resume.
func TestKubeRunInterrupted(t *testing.T) {
	jc, cs := fakeRunCluster(t, nil, map[string]bool{threeJobs[1]: true})
	sent := false
	cs.PrependReactor("get", "jobs", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.(k8stesting.GetActionImpl).Name == threeJobs[1] && !sent {
			sent = true
			if err := syscall.Kill(syscall.Getpid(), syscall.SIGINT); err != nil {
				t.Error(err)
			}
		}
		return false, nil, nil
	})
	db := filepath.Join(t.TempDir(), "results.db")
	code, out, errs := corepin(t, "", threeJobArgs(t, db, "--job-timeout", "1h")...)
	if code != 1 || !strings.Contains(errs, "corepin: interrupted: Job corepin-threads-001-r0 left running; 1 Jobs ended and are recorded; run the same command again to resume") {
		t.Errorf("interrupted kube run: exit %d, stderr %q; want exit 1 saying what was left and how to resume", code, errs)
	}
	if !strings.Contains(out, "recorded run 1 in "+db) || recordedJobs(t, db, 1) != 1 {
		t.Errorf("stdout %q, want the first Job's result recorded", out)
	}
	if diff := cmp.Diff(threeJobs[:2], jc.Created); diff != "" || len(jc.Deleted) != 0 {
		t.Errorf("Jobs created (-want +got):\n%s\ndeleted %q", diff, jc.Deleted)
	}
}

func TestKubeRunRefusesBadInput(t *testing.T) {
	jc, _ := fakeRunCluster(t, nil, nil)
	db := filepath.Join(t.TempDir(), "results.db")
	for _, args := range [][]string{
		{"kube", "run"},
		threeJobArgs(t, db, "--job-timeout", "0s"),
		threeJobArgs(t, db, "--job-timeout", "25h"),
		threeJobArgs(t, db, "--repeats", "0"),
		threeJobArgs(t, db, "--memory", "lots"),
		threeJobArgs(t, db, "--numa-policy", "tight"),
	} {
		code, out, errs := corepin(t, "", args...)
		if code != 2 || out != "" || strings.Count(errs, "\n") != 1 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2, nothing on stdout, one line on stderr", args, code, out, errs)
		}
	}
	if len(jc.Created) != 0 {
		t.Errorf("created %q for bad input, want nothing", jc.Created)
	}
	if _, err := os.Stat(db); err == nil {
		t.Errorf("bad input created the database")
	}
}

// TestKubeRunNeedsKubeconfig: with no cluster configured, kube run is bad
// input (exit 2, one line), found before anything is written.
func TestKubeRunNeedsKubeconfig(t *testing.T) {
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "absent"))
	t.Setenv("HOME", t.TempDir())
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	db := filepath.Join(t.TempDir(), "results.db")
	code, out, errs := corepin(t, "", threeJobArgs(t, db)...)
	if code != 2 || out != "" || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "no Kubernetes configuration") {
		t.Errorf("kube run without a kubeconfig: exit %d, stdout %q, stderr %q; want exit 2 and one line saying so", code, out, errs)
	}
	if _, err := os.Stat(db); err == nil {
		t.Errorf("kube run without a cluster created the database")
	}
}
