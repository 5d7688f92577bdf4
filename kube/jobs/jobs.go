package jobs

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/corepin/corepin/experiment"
	"github.com/corepin/corepin/kube/podmeta"
	"github.com/corepin/corepin/topology"
	"github.com/corepin/corepin/workload"
)

// ErrInvalid is wrapped by errors about the options of a sweep.
var ErrInvalid = errors.New("invalid kube jobs input")

// Labels and annotations of the generated objects.
const (
	LabelSweep      = "corepin.io/sweep"
	LabelIndex      = "corepin.io/index"
	LabelRepeat     = "corepin.io/repeat"
	AnnotationPoint = "corepin.io/point"
	// MarkerPrefix starts the one log line a pod's result is in.
	MarkerPrefix = "corepin-result "
)

// Limits on what a sweep may generate.
const (
	MaxRepeats = 100
	MaxJobs    = 10000
	maxPods    = 1024 // completions of one Job
)

// Options describe a sweep to generate.
type Options struct {
	// Experiments are the experiments a sweep can run (bench.Clusters).
	Experiments experiment.Catalog
	// Sweep names one of Experiments: concurrency, threads or throughput.
	Sweep string
	// Spec is a bench spec file (YAML, may be empty): the section named
	// after the sweep overrides the defaults, as for `corepin bench --spec`.
	Spec  []byte
	Quick bool
	// Node is the topology of the nodes the Jobs will run on: the sweep
	// skips points that do not fit it, as bench does on one machine.
	Node *topology.Topology
	// Repeats is how many times each point runs (default 3).
	Repeats int
	// Image holds corepin at Binary (default "corepin") and /bin/sh.
	Image, Binary, Namespace string
	// Memory is each pod's memory request and limit (default 512Mi).
	Memory string
	// SchedulerName is the pods' spec.schedulerName: "" for the cluster's
	// default scheduler, corepin-scheduler for the Helm chart's.
	SchedulerName string
	// NUMAPolicy is the topology policy (annotation corepin.io/numa-policy)
	// of the pinned (LSE) pods, which the scheduler extender and the node
	// honour alike; "" leaves it to the node's default.
	NUMAPolicy string
	// HostNetwork runs the pods in their node's network namespace, for
	// clusters without a network plugin.
	HostNetwork bool
	// NodeMilliCPU is the CPU a node can give the sweep's pods at once
	// (its allocatable CPU, in millicores); 0 means every allowed CPU of
	// Node. No Job asks for more at once: see Plan.
	NodeMilliCPU int64
}

// MaxNodeMilliCPU bounds Options.NodeMilliCPU (a million CPUs).
const MaxNodeMilliCPU = 1_000_000_000

// Job is one point x repeat of a sweep, before it is a Kubernetes object.
type Job struct {
	Index, Repeat int
	Point         experiment.Point
	// PodSpec is the point's pods and their resources, as the experiment
	// maps them.
	experiment.PodSpec
	// Argv is the container's `corepin run` command (the workload after --).
	Argv []string
	// JobMilli is the CPU each pod's job is sized for (its threads) when
	// Plan lowered the pods' requests to fit the node; 0 means MilliCPU.
	JobMilli int64
}

// Sweep is a planned sweep: what the Jobs run and what collect needs to
// record it like a bench run.
type Sweep struct {
	Name string `json:"sweep"`
	// Spec is the experiment's resolved spec, as bench records it.
	Spec            json.RawMessage `json:"spec"`
	Quick           bool            `json:"quick"`
	Repeats         int             `json:"repeats"`
	TopologySummary string          `json:"topology"`
	// JobSeconds is how long one pod's job is meant to run (the spec's
	// job_seconds), for a simulated replay.
	JobSeconds float64 `json:"-"`
	Jobs       []Job   `json:"-"`
	// Notes say, for people, what Plan changed or left out to fit the
	// node: points skipped, requests lowered.
	Notes []string `json:"-"`
}

// Plan resolves o into the Jobs of its sweep: the experiment's own
// points for the node type, each mapped onto pods by the experiment.
func Plan(o Options) (*Sweep, error) {
	exp, err := o.Experiments.Lookup(o.Sweep)
	if err != nil {
		return nil, err
	}
	if o.Node == nil {
		return nil, fmt.Errorf("%w: no node topology", ErrInvalid)
	}
	if o.Repeats == 0 {
		o.Repeats = 3
	}
	if o.Repeats < 1 || o.Repeats > MaxRepeats {
		return nil, fmt.Errorf("%w: repeats %d: want 1 to %d", ErrInvalid, o.Repeats, MaxRepeats)
	}
	if o.Binary == "" {
		o.Binary = "corepin"
	}
	if err := experiment.Configure([]experiment.Cluster{exp}, o.Spec, o.Quick); err != nil {
		return nil, err
	}
	spec, err := json.Marshal(exp.CurrentSpec())
	if err != nil {
		return nil, fmt.Errorf("recording the %s spec: %w", o.Sweep, err)
	}
	s := &Sweep{Name: o.Sweep, Spec: spec, Quick: o.Quick, Repeats: o.Repeats, TopologySummary: o.Node.Summary(), JobSeconds: exp.JobSeconds()}
	n := o.Node.Allowed().Size()
	node := int64(n) * 1000
	if o.NodeMilliCPU < 0 || o.NodeMilliCPU > MaxNodeMilliCPU {
		return nil, fmt.Errorf("%w: node CPU %dm: want above 0 and at most %dm", ErrInvalid, o.NodeMilliCPU, int64(MaxNodeMilliCPU))
	}
	if o.NodeMilliCPU > 0 {
		node = o.NodeMilliCPU
	}
	i := -1
	for _, p := range exp.ClusterPoints(o.Node, o.Quick) {
		pods, err := exp.Pods(p, n)
		if err != nil {
			return nil, err
		}
		if pods.Pods < 1 || pods.Pods > maxPods {
			return nil, fmt.Errorf("%w: point %s needs %d pods: want 1 to %d", ErrInvalid, p.Label(), pods.Pods, maxPods)
		}
		jobMilli, note, ok := fitNode(&pods, node)
		if note != "" {
			s.Notes = append(s.Notes, fmt.Sprintf("point %s: %s", p.Label(), note))
		}
		if !ok {
			continue
		}
		i++
		base := Job{PodSpec: pods, JobMilli: jobMilli}
		base.Argv = runArgv(o.Binary, exp, p, base)
		for r := range o.Repeats {
			j := base
			j.Index, j.Repeat, j.Point = i, r, p
			s.Jobs = append(s.Jobs, j)
			if len(s.Jobs) > MaxJobs {
				return nil, fmt.Errorf("%w: more than %d Jobs; use fewer points or repeats", ErrInvalid, MaxJobs)
			}
		}
	}
	if len(s.Jobs) == 0 {
		return nil, fmt.Errorf("%w: sweep %s has no point that fits a node of %s (%s CPUs allocatable)", ErrInvalid, o.Sweep, s.TopologySummary, milliString(node))
	}
	return s, nil
}

// fitNode makes a point's pods ask for no more CPU at once than a node of
// node millicores gives, so that its Parallel pods run together, as the
// point means, never in waves that would measure less contention than it
// names. Guaranteed (LSE) pods hold whole CPUs: a point whose pods cannot
// all hold theirs at once is left out (ok false, note says why). Other
// pods keep their limits (the quota, the burst) and share the node's CPU
// in their requests: each asks for node/Parallel, and jobMilli keeps the
// CPU the job's threads are sized for. note is "" when nothing changed.
func fitNode(ps *experiment.PodSpec, node int64) (jobMilli int64, note string, ok bool) {
	par := int64(max(ps.Parallel, 1))
	if par*ps.MilliCPU <= node {
		return 0, "", true
	}
	if ps.QoS == "LSE" {
		return 0, fmt.Sprintf("left out: its %d pinned pods need %s CPUs at once, a node gives %s", par, milliString(par*ps.MilliCPU), milliString(node)), false
	}
	share := node / par
	if share < 1 {
		return 0, fmt.Sprintf("left out: its %d pods cannot share %s CPUs", par, milliString(node)), false
	}
	jobMilli = ps.MilliCPU
	note = fmt.Sprintf("each of its %d pods requests %s CPUs (limit %s), not %s, so that all run at once on a node of %s CPUs",
		par, milliString(share), limitString(ps.LimitMilli), milliString(ps.MilliCPU), milliString(node))
	ps.MilliCPU = share
	return jobMilli, note, true
}

// milliString writes millicores as CPUs ("1.5").
func milliString(m int64) string { return strconv.FormatFloat(float64(m)/1000, 'f', -1, 64) }

func limitString(m int64) string {
	if m == 0 {
		return "none"
	}
	return milliString(m)
}

// runArgv is the container's `corepin run` command: one job on the pod's
// CPUs (the pod's cgroup enforces the mode, so inside it runs unbounded),
// with the experiment's workload sized as the point says.
func runArgv(bin string, exp experiment.Cluster, p experiment.Point, j Job) []string {
	cpus := milliString(cmp.Or(j.JobMilli, j.MilliCPU))
	runThreads, wThreads := "auto", "{threads}"
	switch j.Threads {
	case "":
	case workload.ThreadsNative:
		wThreads = workload.ThreadsNative
	default:
		runThreads = j.Threads
	}
	argv := []string{bin, "run", "--jobs", "1", "--concurrency", "1", "--cpus", cpus, "--mode", "unbounded", "--threads", runThreads, "-o", "json", "--"}
	return append(argv, exp.Workload(bin, p, wThreads)...)
}

// Marker is a pod's result: the line it prints after MarkerPrefix (with
// the full `corepin run` result) and, compacted (Document), its
// termination message.
type Marker struct {
	// V is ResultVersion; 0 (absent) in the lines of older pods.
	V       int             `json:"v,omitempty"`
	Sweep   string          `json:"sweep"`
	Index   int             `json:"index"`
	Repeat  int             `json:"repeat"`
	Point   json.RawMessage `json:"point"`
	Pods    int             `json:"pods"`
	Quick   bool            `json:"quick"`
	Repeats int             `json:"repeats"`
	// Topology is the summary of the node type the sweep was sized for.
	Topology string          `json:"topology"`
	Spec     json.RawMessage `json:"spec"`
	Pod      string          `json:"pod"`
	// Result is the `corepin run -o json` job object.
	Result json.RawMessage `json:"result"`
}

// Name is the Job's name: corepin-<sweep>-<index>-r<repeat>.
func (s *Sweep) name(j Job) string {
	return fmt.Sprintf("corepin-%s-%03d-r%d", s.Name, j.Index, j.Repeat)
}

// Objects returns the sweep's Jobs as Kubernetes objects.
func (s *Sweep) Objects(o Options) ([]batchv1.Job, error) {
	mem := o.Memory
	if mem == "" {
		mem = "512Mi"
	}
	memQ, err := resource.ParseQuantity(mem)
	if err != nil || memQ.Sign() <= 0 {
		return nil, fmt.Errorf("%w: memory %q: want a Kubernetes quantity such as 512Mi", ErrInvalid, mem)
	}
	if o.Image == "" {
		return nil, fmt.Errorf("%w: no image: give the image that holds corepin", ErrInvalid)
	}
	if o.Namespace != "" {
		if errs := validation.IsDNS1123Label(o.Namespace); len(errs) > 0 {
			return nil, fmt.Errorf("%w: namespace %q: %s", ErrInvalid, o.Namespace, errs[0])
		}
	}
	if o.SchedulerName != "" {
		if errs := validation.IsDNS1123Subdomain(o.SchedulerName); len(errs) > 0 {
			return nil, fmt.Errorf("%w: scheduler name %q: %s", ErrInvalid, o.SchedulerName, errs[0])
		}
	}
	if o.NUMAPolicy != "" {
		if _, err := podmeta.ParseNUMAPolicy(o.NUMAPolicy); err != nil {
			return nil, fmt.Errorf("%w: --numa-policy: %w", ErrInvalid, err)
		}
	}
	out := make([]batchv1.Job, 0, len(s.Jobs))
	for _, j := range s.Jobs {
		pj, err := json.Marshal(j.Point)
		if err != nil {
			return nil, err
		}
		labels := map[string]string{LabelSweep: s.Name, LabelIndex: fmt.Sprintf("%03d", j.Index), LabelRepeat: strconv.Itoa(j.Repeat)}
		podLabels := map[string]string{podmeta.LabelQoSClass: j.QoS}
		for k, v := range labels {
			podLabels[k] = v
		}
		ann := map[string]string{AnnotationPoint: string(pj)}
		req := corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(j.MilliCPU, resource.DecimalSI), corev1.ResourceMemory: memQ}
		lim := corev1.ResourceList{}
		if j.LimitMilli > 0 {
			lim[corev1.ResourceCPU] = *resource.NewMilliQuantity(j.LimitMilli, resource.DecimalSI)
		}
		if j.QoS == "LSE" {
			lim[corev1.ResourceMemory] = memQ // Guaranteed: every limit equals its request
		}
		podAnn := maps.Clone(ann)
		if j.QoS == "LSE" && o.NUMAPolicy != "" {
			podAnn[podmeta.AnnotationNUMAPolicy] = o.NUMAPolicy
		}
		script, err := s.script(j, pj)
		if err != nil {
			return nil, err
		}
		pods, par := int32(j.Pods), int32(j.Parallel)
		backoff := int32(0)
		out = append(out, batchv1.Job{
			TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
			ObjectMeta: metav1.ObjectMeta{Name: s.name(j), Namespace: o.Namespace, Labels: labels, Annotations: ann},
			Spec: batchv1.JobSpec{
				Parallelism: &par, Completions: &pods, BackoffLimit: &backoff,
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: podLabels, Annotations: podAnn},
					Spec: corev1.PodSpec{
						RestartPolicy: corev1.RestartPolicyNever,
						SchedulerName: o.SchedulerName,
						HostNetwork:   o.HostNetwork,
						Containers: []corev1.Container{{
							Name: "job", Image: o.Image, Command: []string{"/bin/sh", "-c", script},
							Env: []corev1.EnvVar{{Name: "COREPIN_DB", Value: "/tmp/corepin.db"},
								// The pod's own name, for its result: $HOSTNAME is the
								// node's name under hostNetwork, the same in every pod.
								{Name: PodNameEnv, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
							Resources: corev1.ResourceRequirements{Requests: req, Limits: lim},
							// The result document (Document) travels as the
							// container's termination message.
							TerminationMessagePath:   TerminationLog,
							TerminationMessagePolicy: corev1.TerminationMessageReadFile,
						}},
					},
				},
			},
		})
	}
	return out, nil
}

// PodNameEnv is the environment variable that holds a sweep pod's name
// (the downward API's metadata.name): the name its result is recorded
// under, which tells the pods of one point apart.
const PodNameEnv = "COREPIN_POD_NAME"

// script runs the point's command, then `corepin kube result`, which
// prints the marked result line to the log and writes the result document
// to the termination message; the script keeps the command's exit status.
func (s *Sweep) script(j Job, point []byte) (string, error) {
	bin := j.Argv[0]
	m := Marker{Sweep: s.Name, Index: j.Index, Repeat: j.Repeat, Point: point, Pods: j.Pods, Quick: s.Quick,
		Repeats: s.Repeats, Topology: s.TopologySummary, Spec: s.Spec}
	head, err := json.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("encoding the result context of %s: %w", s.name(j), err)
	}
	// The pod and its result are filled in by the pod.
	ctx, ok := bytes.CutSuffix(head, []byte(`,"pod":"","result":null}`))
	if !ok {
		return "", fmt.Errorf("encoding the result context of %s", s.name(j))
	}
	head = append(ctx, '}')
	const out = "/tmp/corepin-run.json"
	result := []string{bin, "kube", "result", "--run", out, "--termination-log", TerminationLog, "--context", string(head)}
	return fmt.Sprintf("%s > %s\nrc=$?\n%s --pod \"$%s\"\nexit $rc\n", shellJoin(j.Argv), out, shellJoin(result), PodNameEnv), nil
}

func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func shellJoin(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = shellQuote(a)
	}
	return strings.Join(q, " ")
}

// WriteYAML writes jobs as one multi-document YAML stream.
func WriteYAML(w io.Writer, jobs []batchv1.Job) error {
	for i := range jobs {
		b, err := yaml.Marshal(&jobs[i])
		if err != nil {
			return fmt.Errorf("encoding job %s: %w", jobs[i].Name, err)
		}
		if _, err := fmt.Fprintf(w, "---\n%s", b); err != nil {
			return fmt.Errorf("writing jobs: %w", err)
		}
	}
	return nil
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
