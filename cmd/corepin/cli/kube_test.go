package cli

import (
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// corepin runs the CLI in process and returns its exit code and outputs.
func corepin(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb strings.Builder
	code := Main(args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

// writeNode writes a 16-CPU node type (2 NUMA nodes) as a topo document.
func writeNode(t *testing.T) string {
	t.Helper()
	doc := `{"cpus":[`
	for c := range 16 {
		if c > 0 {
			doc += ","
		}
		node := (c % 8) / 4
		doc += `{"cpu":` + itoa(c) + `,"online":true,"allowed":true,"socket":` + itoa(node) + `,"die":0,"numa":` + itoa(node) +
			`,"l3":` + itoa(node) + `,"core":` + itoa(c%8) + `,"kind":""}`
	}
	doc += `],"numa_distances":{"0":[10,21],"1":[21,10]}}`
	p := filepath.Join(t.TempDir(), "node.json")
	if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

func TestKubeJobsWritesJobs(t *testing.T) {
	node := writeNode(t)
	code, out, errs := corepin(t, "", "kube", "jobs", "--sweep", "threads", "--quick", "--repeats", "1", "--topology", node, "--namespace", "bench")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	docs := strings.Split(strings.TrimPrefix(out, "---\n"), "---\n")
	if len(docs) < 2 {
		t.Fatalf("%d documents, want one Job per threads point", len(docs))
	}
	for i, d := range docs {
		var j batchv1.Job
		if err := yaml.UnmarshalStrict([]byte(d), &j); err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
		if j.Namespace != "bench" || !strings.HasPrefix(j.Name, "corepin-threads-") {
			t.Errorf("document %d: %s/%s, want bench/corepin-threads-*", i, j.Namespace, j.Name)
		}
	}
	code, out, _ = corepin(t, "", "kube", "jobs", "--sweep", "threads", "--quick", "--repeats", "1", "--topology", node, "-o", "json")
	var list struct {
		Kind  string        `json:"kind"`
		Items []batchv1.Job `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &list); code != 0 || err != nil || list.Kind != "List" || len(list.Items) != len(docs) {
		t.Errorf("-o json: exit %d, %v, kind %q, %d items; want a List of %d", code, err, list.Kind, len(list.Items), len(docs))
	}
}

func TestKubeJobsRefusesBadInput(t *testing.T) {
	node := writeNode(t)
	spec := filepath.Join(t.TempDir(), "spec.yaml")
	if err := os.WriteFile(spec, []byte("threads:\n  bogus: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"kube", "jobs"},
		{"kube", "jobs", "--sweep", "colocation", "--topology", node},
		{"kube", "jobs", "--sweep", "threads", "--topology", node, "--repeats", "0"},
		{"kube", "jobs", "--sweep", "threads", "--topology", node, "--spec", spec},
		{"kube", "jobs", "--sweep", "threads", "--topology", node, "--spec", "/nonexistent"},
		{"kube", "jobs", "--sweep", "threads", "--topology", node, "--memory", "x"},
		{"kube", "jobs", "--sweep", "threads", "--topology", node, "--namespace", "Not/A/Namespace"},
		{"kube", "jobs", "--sweep", "threads", "--topology", node, "--sysfs-root", "/"},
		{"kube", "collect", "--from", "/nonexistent"},
	} {
		code, out, errs := corepin(t, "", args...)
		if code != 2 || out != "" || strings.Count(errs, "\n") != 1 {
			t.Errorf("%v: exit %d, %d bytes on stdout, stderr %q; want exit 2, nothing on stdout, one line on stderr", args, code, len(out), errs)
		}
	}
}

// TestKubeSimTraceReplays writes a sweep as a trace and replays it with
// corepin simulate on the same node type.
func TestKubeSimTraceReplays(t *testing.T) {
	node := writeNode(t)
	code, trace, errs := corepin(t, "", "kube", "jobs", "--sweep", "concurrency", "--quick", "--repeats", "1", "--topology", node, "--sim-trace")
	if code != 0 {
		t.Fatalf("kube jobs --sim-trace: exit %d: %s", code, errs)
	}
	code, out, errs := corepin(t, trace, "simulate", "--trace", "-", "--topology", node, "--nodes", "1", "--policies", "corepin", "--node-choice", "best-fit", "-o", "json")
	if code != 0 {
		t.Fatalf("simulate: exit %d: %s", code, errs)
	}
	var rep struct {
		Jobs      int `json:"jobs"`
		Scenarios []struct {
			Admitted int `json:"admitted"`
			Rejected int `json:"rejected"`
		} `json:"scenarios"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Scenarios) != 1 {
		t.Fatalf("simulate output %q: %v", out, err)
	}
	// quick concurrency: cpus 1, concurrency 1, 2, 4, four modes: 4 x 7 pods.
	if s := rep.Scenarios[0]; rep.Jobs != 28 || s.Admitted != 28 || s.Rejected != 0 {
		t.Errorf("replayed %d jobs, admitted %d, rejected %d; want 28, 28, 0", rep.Jobs, s.Admitted, s.Rejected)
	}
}

func TestKubeCollectRecordsAndReports(t *testing.T) {
	dir := t.TempDir()
	logs := filepath.Join(dir, "logs")
	if err := os.Mkdir(logs, 0o755); err != nil {
		t.Fatal(err)
	}
	line := func(pod, threads, ops string) string {
		return `corepin-result {"sweep":"threads","index":` + map[string]string{"2": "0", "4": "1"}[threads] + `,"repeat":0,"point":{"cpus":"4","threads":"` + threads +
			`"},"pods":1,"quick":true,"repeats":1,"topology":"16 CPUs","spec":{"job":{"workload":"spin","job_seconds":0.4},"cpus":4,"threads":["0.5","1"]},"pod":"` + pod +
			`","result":{"job":0,"cmd":"corepin workload spin","mode":"unbounded","cpus":4,"wall_s":2,"ops":` + ops + `,"exit_code":0}}` + "\n"
	}
	for name, body := range map[string]string{
		"corepin-threads-000-r0-a": "starting\n" + line("corepin-threads-000-r0-a", "2", "1000"),
		"corepin-threads-001-r0-b": line("corepin-threads-001-r0-b", "4", "1800"),
		"garbage":                  "no result here\n",
		// Forged results (issue 17 §5): refused, counted, not recorded.
		"evil-wall": strings.Replace(line("corepin-threads-001-r0-e", "4", "1800"), `"wall_s":2`, `"wall_s":1e308`, 1),
		"evil-date": strings.Replace(line("corepin-threads-001-r0-f", "4", "1800"), `"exit_code":0`, `"exit_code":0,"started_at":"0001-01-01T00:00:01Z"`, 1),
	} {
		if err := os.WriteFile(filepath.Join(logs, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	db := filepath.Join(dir, "results.db")
	code, out, errs := corepin(t, "", "kube", "collect", "--from", logs, "--db", db, "-o", "json")
	if code != 0 {
		t.Fatalf("kube collect: exit %d: %s", code, errs)
	}
	var got struct {
		RunIDs      []int64 `json:"run_ids"`
		Results     int     `json:"results"`
		Implausible int     `json:"implausible"`
		Skipped     []struct {
			Log string `json:"log"`
		} `json:"skipped"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got.RunIDs) != 1 || got.Results != 2 || len(got.Skipped) != 3 || got.Implausible != 2 {
		t.Fatalf("collect output %s (%v): want one run, 2 results, garbage and the 2 implausible results skipped", out, err)
	}
	code, out, errs = corepin(t, "", "report", "--db", db, "--report-dir", filepath.Join(dir, "report"))
	if code != 0 || !strings.Contains(out, "threads") {
		t.Fatalf("report: exit %d, stdout %q, stderr %q; want the threads table", code, out, errs)
	}
	// rates 1000/2 and 1800/2 ops/s appear in the rebuilt table.
	if !strings.Contains(out, "500.0") || !strings.Contains(out, "900.0") {
		t.Errorf("report lacks the collected rates 500.0 and 900.0:\n%s", out)
	}
	if strings.Contains(out, "NaN") || strings.Contains(out, "Inf") {
		t.Errorf("report holds NaN or Inf:\n%s", out)
	}
	// Nothing usable: exit 2, nothing recorded.
	code, _, _ = corepin(t, "no marker\n", "kube", "collect", "--from", "-", "--db", filepath.Join(dir, "other.db"))
	if code != 2 {
		t.Errorf("collect of a log without results: exit %d, want 2", code)
	}
	if _, err := os.Stat(filepath.Join(dir, "other.db")); err == nil {
		t.Errorf("collect without results created a database")
	}
}

// TestKubeResultFromGeneratedJob runs the `corepin kube result` command a
// generated Job's script calls, with the script's own arguments (read by
// running its line under sh with corepin standing for a printer), and
// checks the log line and the termination message it writes.
func TestKubeResultFromGeneratedJob(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skipf("no sh: %v", err)
	}
	node := writeNode(t)
	code, out, errs := corepin(t, "", "kube", "jobs", "--sweep", "threads", "--quick", "--repeats", "1", "--topology", node, "-o", "json")
	if code != 0 {
		t.Fatalf("kube jobs: exit %d: %s", code, errs)
	}
	var list struct {
		Items []batchv1.Job `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil || len(list.Items) == 0 {
		t.Fatalf("kube jobs -o json: %v", err)
	}
	c := list.Items[0].Spec.Template.Spec.Containers[0]
	if c.TerminationMessagePath != "/dev/termination-log" || c.TerminationMessagePolicy != "File" {
		t.Errorf("container termination message %q (%s), want /dev/termination-log (File)", c.TerminationMessagePath, c.TerminationMessagePolicy)
	}
	var line string
	for _, l := range strings.Split(c.Command[2], "\n") {
		if strings.HasPrefix(l, "corepin kube result ") {
			line = l
		}
	}
	if line == "" {
		t.Fatalf("script has no corepin kube result line:\n%s", c.Command[2])
	}
	// Split the line as the pod's shell does.
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "corepin"), []byte("#!"+sh+"\nprintf '%s\\0' \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(sh, "-c", line)
	cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin", "COREPIN_POD_NAME=corepin-threads-000-r0-x1"}
	raw, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Split(strings.TrimSuffix(string(raw), "\x00"), "\x00")
	dir := t.TempDir()
	run, term := filepath.Join(dir, "run.json"), filepath.Join(dir, "termination-log")
	if err := os.WriteFile(run, []byte(`{"job":0,"cmd":"corepin workload spin","mode":"unbounded","cpus":4,"wall_s":2,"ops":1000,"exit_code":0}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := range args {
		switch {
		case i > 0 && args[i-1] == "--run":
			args[i] = run
		case i > 0 && args[i-1] == "--termination-log":
			args[i] = term
		}
	}
	code, out, errs = corepin(t, "", args...)
	if code != 0 {
		t.Fatalf("corepin %q: exit %d: %s", args, code, errs)
	}
	if !strings.HasPrefix(out, "corepin-result {") || !strings.Contains(out, `"pod":"corepin-threads-000-r0-x1"`) {
		t.Errorf("log %q, want one corepin-result line naming the pod", out)
	}
	msg, err := os.ReadFile(term)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		V      int    `json:"v"`
		Sweep  string `json:"sweep"`
		Pod    string `json:"pod"`
		Result struct {
			Ops int `json:"ops"`
		} `json:"result"`
	}
	if err := json.Unmarshal(msg, &doc); err != nil || doc.V != 1 || doc.Sweep != "threads" || doc.Pod != "corepin-threads-000-r0-x1" || doc.Result.Ops != 1000 {
		t.Errorf("termination message %q (%v), want v 1 of the threads sweep with the pod's 1000 ops", msg, err)
	}
	if code, _, _ := corepin(t, "", "kube", "result", "--run", run, "--pod", "p", "--context", "{"); code != 2 {
		t.Errorf("kube result with a bad --context: exit %d, want 2", code)
	}
}

// fakeAPIServer serves the pod list and logs of namespace bench and the
// node list, as a Kubernetes API server does, to clients with the bearer
// token "sweep-token"; it records the paths asked for.
func fakeAPIServer(t *testing.T, pods []corev1.Pod, nodes ...corev1.Node) (*httptest.Server, *[]string) {
	t.Helper()
	var seen []string
	var mu sync.Mutex
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.URL.Path+"?"+r.URL.RawQuery)
		mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer sweep-token" {
			http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Unauthorized","code":401}`, http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/api/v1/namespaces/bench/pods" && r.URL.Query().Get("labelSelector") == "corepin.io/sweep=threads":
			json.NewEncoder(w).Encode(corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}, Items: pods})
		case r.URL.Path == "/api/v1/nodes":
			json.NewEncoder(w).Encode(corev1.NodeList{TypeMeta: metav1.TypeMeta{Kind: "NodeList", APIVersion: "v1"}, Items: nodes})
		case strings.HasPrefix(r.URL.Path, "/api/v1/namespaces/bench/pods/") && strings.HasSuffix(r.URL.Path, "/log"):
			w.Header().Set("Content-Type", "text/plain")
			io.WriteString(w, "starting\n")
		default:
			http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`, http.StatusNotFound)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &seen
}

// writeKubeconfig writes a kubeconfig whose context "sweep" reaches srv
// with a bearer token, trusting srv's certificate, in namespace bench.
func writeKubeconfig(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: sweeper
  user:
    token: sweep-token
contexts:
- name: other
  context: {cluster: test, user: nobody, namespace: elsewhere}
- name: sweep
  context: {cluster: test, user: sweeper, namespace: bench}
current-context: other
`, srv.URL, base64.StdEncoding.EncodeToString(ca))
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestKubeCollectFromAPIServer runs corepin kube collect against a fake
// API server reached through a kubeconfig (context, token, CA), records
// the pods' termination messages and reads the run back with report and
// results.
func TestKubeCollectFromAPIServer(t *testing.T) {
	doc := func(pod, threads, index, ops string) string {
		return `{"v":1,"sweep":"threads","index":` + index + `,"repeat":0,"point":{"cpus":"4","threads":"` + threads +
			`"},"pods":1,"quick":true,"repeats":1,"topology":"16 CPUs","spec":{"job":{"workload":"spin","job_seconds":0.4},"cpus":4,"threads":["0.5","1"]},"pod":"` + pod +
			`","result":{"job":0,"mode":"unbounded","cpus":4,"wall_s":2,"ops":` + ops + `,"exit_code":0}}`
	}
	pod := func(name string, phase corev1.PodPhase, msg string) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "bench", Labels: map[string]string{"corepin.io/sweep": "threads"}},
			Status: corev1.PodStatus{Phase: phase}}
		st := corev1.ContainerStatus{Name: "job"}
		if phase == corev1.PodSucceeded {
			st.State.Terminated = &corev1.ContainerStateTerminated{Reason: "Completed", Message: msg}
		}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{st}
		return p
	}
	srv, seen := fakeAPIServer(t, []corev1.Pod{
		pod("corepin-threads-000-r0-a", corev1.PodSucceeded, doc("corepin-threads-000-r0-a", "2", "0", "1000")),
		pod("corepin-threads-001-r0-b", corev1.PodSucceeded, doc("corepin-threads-001-r0-b", "4", "1", "1800")),
		pod("corepin-threads-002-r0-c", corev1.PodSucceeded, ""),
		pod("corepin-threads-003-r0-d", corev1.PodRunning, ""),
	})
	kc := writeKubeconfig(t, srv)
	dir := t.TempDir()
	db := filepath.Join(dir, "results.db")
	code, out, errs := corepin(t, "", "kube", "collect", "--kubeconfig", kc, "--context", "sweep", "--selector", "corepin.io/sweep=threads", "--db", db, "-o", "json")
	if code != 0 {
		t.Fatalf("kube collect: exit %d: %s (requests %q)", code, errs, *seen)
	}
	var got struct {
		RunIDs     []int64  `json:"run_ids"`
		Results    int      `json:"results"`
		Pods       int      `json:"pods"`
		Finished   int      `json:"finished"`
		Unfinished []string `json:"unfinished"`
		Skipped    []struct {
			Log, Reason string
		} `json:"skipped"`
		Warnings []string `json:"warnings"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("collect output %s: %v", out, err)
	}
	if len(got.RunIDs) != 1 || got.Results != 2 || got.Pods != 4 || got.Finished != 3 || len(got.Unfinished) != 1 {
		t.Errorf("collect output %s: want one run, 2 results of 4 pods, 3 finished, 1 unfinished", out)
	}
	if len(got.Skipped) != 1 || got.Skipped[0].Log != "corepin-threads-002-r0-c" || !strings.Contains(got.Skipped[0].Reason, "no result document; log: no corepin-result line") {
		t.Errorf("skipped %+v, want pod c: no result document, and its log (read through the API) none either", got.Skipped)
	}
	if len(got.Warnings) == 0 || !strings.Contains(got.Warnings[0], "1 pods not finished: corepin-threads-003-r0-d") {
		t.Errorf("warnings %q, want pod d named as not finished", got.Warnings)
	}
	wantPaths := []string{"/api/v1/namespaces/bench/pods?labelSelector=corepin.io%2Fsweep%3Dthreads&limit=500",
		"/api/v1/namespaces/bench/pods/corepin-threads-002-r0-c/log?container=job&limitBytes=4194304&tailLines=20&timeout=30s"}
	if diff := cmp.Diff(wantPaths, *seen); diff != "" {
		t.Errorf("requests to the API server (-want +got):\n%s", diff)
	}
	code, out, errs = corepin(t, "", "report", "--db", db, "--report-dir", filepath.Join(dir, "report"))
	if code != 0 || !strings.Contains(out, "500.0") || !strings.Contains(out, "900.0") {
		t.Errorf("report: exit %d, stderr %q; want the collected rates 500.0 and 900.0 in:\n%s", code, errs, out)
	}
	code, out, _ = corepin(t, "", "results", "--db", db, "-o", "json")
	if code != 0 || !strings.Contains(out, `"hostname": "kubernetes"`) {
		t.Errorf("results: exit %d, want the kubernetes run in:\n%s", code, out)
	}
	// The kubeconfig's current context has no token: the server refuses,
	// a failure of the system (exit 1), nothing recorded.
	code, _, errs = corepin(t, "", "kube", "collect", "--kubeconfig", kc, "--selector", "corepin.io/sweep=threads", "--db", filepath.Join(dir, "other.db"))
	if code != 1 || !strings.Contains(errs, "provide credentials") || !strings.Contains(errs, "namespace elsewhere") {
		t.Errorf("collect with the wrong context: exit %d, stderr %q; want exit 1 saying credentials are needed in namespace elsewhere", code, errs)
	}
	if _, err := os.Stat(filepath.Join(dir, "other.db")); err == nil {
		t.Errorf("a refused collect created a database")
	}
}

// TestKubeCollectRefusesBadClusterInput: no kubeconfig, an unknown
// context, --from with cluster flags and a bad selector exit 2 with one
// line, before any request.
func TestKubeCollectRefusesBadClusterInput(t *testing.T) {
	srv, seen := fakeAPIServer(t, nil)
	kc := writeKubeconfig(t, srv)
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "absent"))
	t.Setenv("HOME", t.TempDir())
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	for _, args := range [][]string{
		{"kube", "collect"},
		{"kube", "collect", "--kubeconfig", filepath.Join(t.TempDir(), "absent")},
		{"kube", "collect", "--kubeconfig", kc, "--context", "nope"},
		{"kube", "collect", "--kubeconfig", kc, "--context", "sweep", "--selector", "a in ("},
		{"kube", "collect", "--kubeconfig", kc, "--from", "-"},
		{"kube", "collect", "--wait", "--from", t.TempDir()},
		{"kube", "collect", "--kubeconfig", kc, "--context", "sweep", "--timeout", "5m"},
		{"kube", "collect", "--kubeconfig", kc, "--context", "sweep", "--wait", "--timeout", "0s"},
	} {
		code, out, errs := corepin(t, "", args...)
		if code != 2 || out != "" || strings.Count(errs, "\n") != 1 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2, nothing on stdout, one line on stderr", args, code, out, errs)
		}
	}
	if len(*seen) != 0 {
		t.Errorf("requests %q, want none for bad input", *seen)
	}
}
