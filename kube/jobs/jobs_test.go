package jobs

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/corepin/corepin/bench"
	"github.com/corepin/corepin/experiment"
	"github.com/corepin/corepin/topology"
)

var update = flag.Bool("update", false, "rewrite golden files")

// node16 is a 16-CPU node: 2 sockets, one NUMA node each, 4 cores of 2
// threads per node.
func node16() *topology.Topology {
	return topology.MustSynthetic(topology.Shape{Sockets: 2, NodesPerSocket: 1, L3PerNode: 1, CoresPerL3: 4, ThreadsPerCore: 2})
}

func plan(t *testing.T, o Options) (*Sweep, []batchv1.Job) {
	t.Helper()
	s, err := Plan(o)
	if err != nil {
		t.Fatalf("Plan(%s) error = %v", o.Sweep, err)
	}
	objs, err := s.Objects(o)
	if err != nil {
		t.Fatalf("Objects() error = %v", err)
	}
	return s, objs
}

// splitYAML splits a multi-document stream on its "---" lines.
func splitYAML(b []byte) [][]byte {
	var docs [][]byte
	for _, d := range bytes.Split(b, []byte("---\n")) {
		if len(bytes.TrimSpace(d)) > 0 {
			docs = append(docs, d)
		}
	}
	return docs
}

func TestJobsGolden(t *testing.T) {
	for _, sweep := range catalog.Names() {
		t.Run(sweep, func(t *testing.T) {
			o := Options{Experiments: catalog, Sweep: sweep, Quick: true, Node: node16(), Repeats: 2, Image: "registry.example/corepin:test", Namespace: "bench"}
			s, objs := plan(t, o)
			var buf bytes.Buffer
			if err := WriteYAML(&buf, objs); err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", t.Name()+".golden.yaml")
			if *update {
				if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if diff := cmp.Diff(string(want), buf.String()); diff != "" {
				t.Errorf("YAML differs from %s (-want +got):\n%s", golden, diff)
			}
			// Every document is a batch/v1 Job, strictly, numbered in order.
			docs := splitYAML(buf.Bytes())
			if len(docs) != len(s.Jobs) {
				t.Fatalf("%d documents, want %d", len(docs), len(s.Jobs))
			}
			for i, d := range docs {
				var j batchv1.Job
				if err := yaml.UnmarshalStrict(d, &j); err != nil {
					t.Fatalf("document %d is not a batch/v1 Job: %v", i, err)
				}
				want := fmt.Sprintf("corepin-%s-%03d-r%d", sweep, s.Jobs[i].Index, s.Jobs[i].Repeat)
				if j.APIVersion != "batch/v1" || j.Kind != "Job" || j.Name != want || j.Namespace != "bench" {
					t.Errorf("document %d: %s %s %s/%s, want batch/v1 Job bench/%s", i, j.APIVersion, j.Kind, j.Namespace, j.Name, want)
				}
				c := j.Spec.Template.Spec.Containers[0]
				if *j.Spec.Completions != int32(s.Jobs[i].Pods) || c.Resources.Requests.Cpu().MilliValue() != s.Jobs[i].MilliCPU {
					t.Errorf("document %d: completions %d cpu %s, want %d and %dm", i, *j.Spec.Completions, c.Resources.Requests.Cpu(), s.Jobs[i].Pods, s.Jobs[i].MilliCPU)
				}
			}
		})
	}
}

// TestJobsResourcesPerMode checks the concurrency sweep's mapping of an
// enforcement mode onto a pod's requests, limits and QoS class.
func TestJobsResourcesPerMode(t *testing.T) {
	spec := []byte("concurrency:\n  cpus: [2]\n  concurrency: [3]\n  modes: [pinned, quota, burst, unbounded]\n")
	_, objs := plan(t, Options{Experiments: catalog, Sweep: "concurrency", Spec: spec, Quick: true, Node: node16(), Repeats: 1, Image: "i"})
	type res struct {
		Mode, QoS, Request, Limit, MemLimit string
		Parallel                            int32
	}
	var got []res
	for _, j := range objs {
		c := j.Spec.Template.Spec.Containers[0]
		lim := ""
		if q, ok := c.Resources.Limits["cpu"]; ok {
			lim = q.String()
		}
		mem := ""
		if q, ok := c.Resources.Limits["memory"]; ok {
			mem = q.String()
		}
		p, err := experiment.ParsePoint([]byte(j.Annotations[AnnotationPoint]))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, res{p.Get("mode"), j.Spec.Template.Labels["koordinator.sh/qosClass"], c.Resources.Requests.Cpu().String(), lim, mem, *j.Spec.Parallelism})
	}
	want := []res{
		{Mode: "pinned", QoS: "LSE", Request: "2", Limit: "2", MemLimit: "512Mi", Parallel: 3},
		{Mode: "quota", QoS: "LS", Request: "2", Limit: "2", Parallel: 3},
		{Mode: "burst", QoS: "LS", Request: "2", Limit: "4", Parallel: 3},
		{Mode: "unbounded", QoS: "LS", Request: "2", Parallel: 3},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("per-mode resources (-want +got):\n%s", diff)
	}
}

func TestPlanRefusesBadInput(t *testing.T) {
	tests := []struct {
		name string
		o    Options
		msg  string
	}{
		{name: "unknown sweep", o: Options{Experiments: catalog, Sweep: "colocation", Node: node16()}, msg: "choose from concurrency, threads, throughput"},
		{name: "no node", o: Options{Experiments: catalog, Sweep: "threads"}, msg: "no node topology"},
		{name: "too many repeats", o: Options{Experiments: catalog, Sweep: "threads", Node: node16(), Repeats: 101}, msg: "want 1 to 100"},
		{name: "spec unknown field", o: Options{Experiments: catalog, Sweep: "threads", Node: node16(), Spec: []byte("threads:\n  cpu: 2\n")}, msg: "field cpu not found"},
		{name: "nothing fits", o: Options{Experiments: catalog, Sweep: "concurrency", Node: node16(), Spec: []byte("concurrency:\n  cpus: [64]\n")}, msg: "no point that fits"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Plan(tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("Plan() error = %v, want one containing %q", err, tc.msg)
			}
			if err != nil && !errors.Is(err, ErrInvalid) && !errors.Is(err, experiment.ErrUsage) {
				t.Errorf("Plan() error = %v, want it to match ErrInvalid or experiment.ErrUsage", err)
			}
		})
	}
	s, err := Plan(Options{Experiments: catalog, Sweep: "threads", Node: node16(), Quick: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Objects(Options{Experiments: catalog}); !errors.Is(err, ErrInvalid) {
		t.Errorf("Objects() without an image: error = %v, want ErrInvalid", err)
	}
	if _, err := s.Objects(Options{Experiments: catalog, Image: "i", Namespace: "Bench_NS"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("Objects() with namespace Bench_NS: error = %v, want ErrInvalid", err)
	}
	if _, err := s.Objects(Options{Experiments: catalog, Image: "i", Memory: "lots"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("Objects() with memory lots: error = %v, want ErrInvalid", err)
	}
	if _, err := s.Objects(Options{Experiments: catalog, Image: "i", NUMAPolicy: "single"}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "single-numa-node") {
		t.Errorf("Objects() with numa policy single: error = %v, want ErrInvalid naming the allowed values", err)
	}
	if _, err := s.Objects(Options{Experiments: catalog, Image: "i", SchedulerName: "Corepin Scheduler"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("Objects() with scheduler name %q: error = %v, want ErrInvalid", "Corepin Scheduler", err)
	}
}

// TestJobsForTheClusterScheduler: --scheduler-name, --numa-policy and
// --host-network reach every pod template; the topology policy only the
// pinned (LSE) pods, whose CPUs the extender and the node align; the Job
// objects themselves carry no pod metadata.
func TestJobsForTheClusterScheduler(t *testing.T) {
	spec := []byte("concurrency:\n  cpus: [2]\n  concurrency: [3]\n  modes: [pinned, quota]\n")
	_, objs := plan(t, Options{Experiments: catalog, Sweep: "concurrency", Spec: spec, Quick: true, Node: node16(), Repeats: 1, Image: "i",
		SchedulerName: "corepin-scheduler", NUMAPolicy: "single-numa-node", HostNetwork: true})
	if len(objs) != 2 {
		t.Fatalf("%d Jobs, want 2", len(objs))
	}
	for _, j := range objs {
		pod := j.Spec.Template
		if pod.Spec.SchedulerName != "corepin-scheduler" || !pod.Spec.HostNetwork {
			t.Errorf("Job %s: schedulerName %q hostNetwork %v", j.Name, pod.Spec.SchedulerName, pod.Spec.HostNetwork)
		}
		got, has := pod.Annotations["corepin.io/numa-policy"]
		if lse := pod.Labels["koordinator.sh/qosClass"] == "LSE"; has != lse || (lse && got != "single-numa-node") {
			t.Errorf("Job %s (class %s): numa-policy %q (set %v)", j.Name, pod.Labels["koordinator.sh/qosClass"], got, has)
		}
		if _, ok := j.Annotations["corepin.io/numa-policy"]; ok {
			t.Errorf("Job %s: the Job object carries the pod's numa-policy", j.Name)
		}
		// Under hostNetwork $HOSTNAME is the node's, the same in every pod
		// of a point: the result names the pod by the downward API.
		c := pod.Spec.Containers[0]
		i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == PodNameEnv })
		if i < 0 || c.Env[i].ValueFrom == nil || c.Env[i].ValueFrom.FieldRef == nil || c.Env[i].ValueFrom.FieldRef.FieldPath != "metadata.name" {
			t.Errorf("Job %s: no %s from metadata.name in %+v", j.Name, PodNameEnv, c.Env)
		}
		if script := c.Command[2]; !strings.Contains(script, `--pod "$`+PodNameEnv+`"`) || strings.Contains(script, "HOSTNAME") {
			t.Errorf("Job %s: the result does not name the pod by $%s:\n%s", j.Name, PodNameEnv, script)
		}
	}
}

// TestMain lets the test binary stand in for `corepin kube result` in
// the scripts runScript runs (the fake corepin execs it with
// helperEnv set), with the termination log redirected to a test file.
func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "1" {
		os.Exit(resultHelper(os.Args[1:]))
	}
	os.Exit(m.Run())
}

const helperEnv = "COREPIN_JOBS_TEST_HELPER"

// resultHelper is `corepin kube result` on its flags (the CLI's own test
// runs the real command on a generated script).
func resultHelper(args []string) int {
	if len(args) < 2 || args[0] != "kube" || args[1] != "result" {
		fmt.Fprintf(os.Stderr, "helper: unexpected arguments %q\n", args)
		return 2
	}
	fs := flag.NewFlagSet("result", flag.ContinueOnError)
	var p PodResult
	var head string
	fs.StringVar(&p.Run, "run", "", "")
	fs.StringVar(&head, "context", "", "")
	fs.StringVar(&p.Pod, "pod", "", "")
	fs.StringVar(&p.TerminationLog, "termination-log", "", "")
	if err := fs.Parse(args[2:]); err != nil {
		return 2
	}
	if p.TerminationLog != TerminationLog {
		fmt.Fprintf(os.Stderr, "helper: --termination-log %q, want %q\n", p.TerminationLog, TerminationLog)
		return 2
	}
	p.TerminationLog, p.Head = os.Getenv("COREPIN_TEST_TERMINATION_LOG"), []byte(head)
	if err := WriteResult(p, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	return 0
}

// runScript runs a generated container script under /bin/sh with a fake
// corepin first on PATH whose `run` prints out as `corepin run -o json`
// would and whose `kube result` is this test binary (resultHelper). It
// returns the pod's log and its termination message.
func runScript(t *testing.T, script, pod, out string, code int) (log, message []byte) {
	t.Helper()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skipf("no sh: %v", err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	fake := fmt.Sprintf("#!%s\nif [ \"$1\" = kube ]; then exec %s \"$@\"; fi\necho 'workload noise {\"job\":9}'\nprintf '%%s\\n' '%s'\nexit %d\n",
		sh, shellQuote(self), out, code)
	if err := os.WriteFile(filepath.Join(bin, "corepin"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	term := filepath.Join(t.TempDir(), "termination-log")
	if err := os.WriteFile(term, nil, 0o644); err != nil { // the kubelet creates it empty
		t.Fatal(err)
	}
	cmd := exec.Command(sh, "-c", script)
	cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin", "COREPIN_POD_NAME=" + pod, helperEnv + "=1", "COREPIN_TEST_TERMINATION_LOG=" + term}
	cmd.Dir = t.TempDir()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	got, err := cmd.Output()
	var ee *exec.ExitError
	if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == code) {
		t.Fatalf("script: %v: %s", err, stderr.String())
	}
	if code != 0 && err == nil {
		t.Fatalf("script exited 0, want %d (the run's status)", code)
	}
	msg, err := os.ReadFile(term)
	if err != nil {
		t.Fatal(err)
	}
	return got, msg
}

// catalog is bench's experiments, as the CLI gives them to Plan and
// Collection.
var catalog experiment.Catalog = bench.Clusters
