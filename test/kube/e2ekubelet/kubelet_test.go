package e2ekubelet

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/kube/extender"
	"github.com/corepin/corepin/kube/nodestate"
	"github.com/corepin/corepin/plan"
	"github.com/corepin/corepin/test/kube/kubetest"
	"github.com/corepin/corepin/topology"
)

// env names what make e2e-kubelet hands the test.
const (
	envKubeBin    = "COREPIN_KUBE_BIN" // etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet
	envContainerd = "COREPIN_E2E_BIN"  // containerd, ctr, containerd-shim-runc-v2
	envCorepin    = "COREPIN_BIN"      // the static corepin binary
	envReport     = "COREPIN_E2E_REPORT"
)

const (
	nodeName  = "corepin-e2e-node"
	namespace = "corepin-kubelet"
	// markerPrefix starts the line that a pod of corepin kube jobs prints
	// its result on (the public format corepin kube collect reads; this
	// test parses it on its own rather than import kube/jobs, whose
	// SQLite dependencies would move this module's x/net and x/crypto).
	markerPrefix = "corepin-result "
	maxLogBytes  = 64 << 20
)

// marker is the part of a pod's result line the test checks.
type marker struct {
	Index  int             `json:"index"`
	Point  json.RawMessage `json:"point"`
	Pod    string          `json:"pod"`
	Result json.RawMessage `json:"result"`
}

// skipped is a log corepin kube collect could not use.
type skipped struct {
	Log    string `json:"log"`
	Reason string `json:"reason"`
}

// run is one test's machine: the control plane, the node and the notes.
type cluster struct {
	t          *testing.T
	dir        string // short: unix socket paths stay under 108 bytes
	kubeBin    string
	ctdBin     string
	corepin    string
	token      string
	api        string
	kubeconfig string
	extPort    int
	// podUIDs are the pod UIDs the node's corepin.io/assigned entries
	// named while the Jobs ran (sampleAssigned), with how often.
	podUIDs    map[string]int
	cgroupRoot string
	// serviceAccounts: pods mount their service account's token
	// (kubetest.WithServiceAccounts; the controllers must include
	// serviceaccount-controller and root-ca-certificate-publisher-controller).
	serviceAccounts bool
	ps              *kubetest.Procs
	ctd             *kubetest.Proc // containerd
	cs              kubernetes.Interface
	notes           []string
	// metrics is where corepin nri serves its metrics (--metrics-addr).
	metrics string
	// kubeletHealthz is the kubelet's healthz URL (launchKubelet).
	kubeletHealthz string
}

func (c *cluster) note(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	c.t.Log(line)
	c.notes = append(c.notes, line)
}

func (c *cluster) path(name string) string { return filepath.Join(c.dir, name) }

func need(t *testing.T) *cluster {
	kubeBin, ctdBin, corepin := os.Getenv(envKubeBin), os.Getenv(envContainerd), os.Getenv(envCorepin)
	if kubeBin == "" || ctdBin == "" || corepin == "" {
		missing(t, "run through make e2e-kubelet (%s, %s and %s unset)", envKubeBin, envContainerd, envCorepin)
	}
	if os.Geteuid() != 0 {
		missing(t, "the kubelet and containerd need root")
	}
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet"} {
		if _, err := os.Stat(filepath.Join(kubeBin, b)); err != nil {
			t.Fatalf("%v (make e2e-kubelet builds it)", err)
		}
	}
	for _, b := range []string{filepath.Join(ctdBin, "containerd"), filepath.Join(ctdBin, "ctr"), filepath.Join(ctdBin, "containerd-shim-runc-v2"), corepin} {
		if _, err := os.Stat(b); err != nil {
			t.Fatalf("%v (make e2e-kubelet builds it)", err)
		}
	}
	for _, tool := range []string{"/usr/sbin/runc", "/bin/busybox", "umoci", "skopeo"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing(t, "%s missing (apt-get install runc busybox-static umoci skopeo)", tool)
		}
	}
	return &cluster{t: t, kubeBin: kubeBin, ctdBin: ctdBin, corepin: corepin}
}

// startControlPlane starts etcd, kube-apiserver (bearer-token admin,
// AlwaysAllow, no ServiceAccount admission: the pods mount no token;
// kubelets reached at their InternalIP),
// kube-controller-manager with only the job and pod GC controllers, and
// kube-scheduler with a default configuration.
func (c *cluster) startControlPlane() { c.startControlPlaneWith("job,podgc") }

// startControlPlaneWith is startControlPlane with the controllers of
// kube-controller-manager's --controllers.
func (c *cluster) startControlPlaneWith(controllers string) {
	t := c.t
	// Pod logs: reach the kubelet at its node IP; the node's name
	// (--hostname-override) resolves nowhere.
	flags := []string{"--kubelet-preferred-address-types=InternalIP"}
	if c.serviceAccounts {
		flags = append(flags, kubetest.WithServiceAccounts)
	}
	cp := kubetest.StartControlPlane(t, c.ps, c.kubeBin, c.dir, flags...)
	var kcmFlags []string
	if c.serviceAccounts {
		kcmFlags = append(kcmFlags, "--root-ca-file="+cp.RootCA)
	}
	c.note("kube-apiserver ready %s after etcd started", fmtDur(cp.Ready))
	c.api, c.token, c.cs, c.kubeconfig = cp.API, cp.Token, cp.Client, cp.Kubeconfig

	// kube-controller-manager: the Job controller creates the pods and
	// tracks completions; pod GC removes pods of a deleted node. No
	// service-account or token controllers unless serviceAccounts (the
	// caller names them): the pods mount no token.
	begin := time.Now()
	kubetest.StartServing(t, 1, 90*time.Second, func(ports []int) (*kubetest.Proc, string, string) {
		args := append([]string{"--kubeconfig=" + c.kubeconfig, "--authentication-kubeconfig=" + c.kubeconfig, "--authorization-kubeconfig=" + c.kubeconfig,
			"--controllers=" + controllers, "--leader-elect=false", "--use-service-account-credentials=false",
			fmt.Sprintf("--secure-port=%d", ports[0]), "--bind-address=127.0.0.1"}, kcmFlags...)
		return c.ps.Start("kube-controller-manager", nil, filepath.Join(c.kubeBin, "kube-controller-manager"), args...),
			fmt.Sprintf("https://127.0.0.1:%d/healthz", ports[0]), ""
	})
	c.note("kube-controller-manager healthy %s after start", fmtDur(time.Since(begin)))

	// The real corepin extender under the shipped scheduler configuration:
	// the node's annotations (corepin nri --annotate-node) are what it
	// judges, with the pods bound and not yet admitted there (as the
	// chart runs it, --track-pods).
	_, ports := kubetest.StartServing(t, 1, time.Minute, func(ports []int) (*kubetest.Proc, string, string) {
		return c.ps.Start("corepin extender", nil, c.corepin, "extender", "--listen", fmt.Sprintf("127.0.0.1:%d", ports[0]),
			"--track-pods", "--kubeconfig", c.kubeconfig, "--nrt-sync-timeout", "1m"), fmt.Sprintf("http://127.0.0.1:%d/healthz", ports[0]), ""
	})
	c.extPort = ports[0]
	schedCfg := writeFile(t, c.path("scheduler.yaml"), kubetest.ShippedSchedulerConfig(t, c.kubeconfig, c.extPort))
	begin = time.Now()
	kubetest.StartServing(t, 1, 60*time.Second, func(ports []int) (*kubetest.Proc, string, string) {
		// As the chart runs it in extender mode: a pod the extender
		// refused is retried every 30 s (a node's republished annotations
		// requeue no pod of the stock profile; a burst point's pods,
		// refused while another held the pool, then waited out the
		// scheduler's 5 minutes, past the Job's 4-minute budget).
		return c.ps.Start("kube-scheduler", nil, filepath.Join(c.kubeBin, "kube-scheduler"), "--config="+schedCfg,
			"--pod-max-in-unschedulable-pods-duration=30s",
			fmt.Sprintf("--secure-port=%d", ports[0]), "--bind-address=127.0.0.1",
			"--authentication-kubeconfig="+c.kubeconfig, "--authorization-kubeconfig="+c.kubeconfig), fmt.Sprintf("https://127.0.0.1:%d/healthz", ports[0]), ""
	})
	c.note("kube-scheduler healthy %s after start", fmtDur(time.Since(begin)))
}

// startRuntime starts the private containerd with the network
// configuration cni, imports the pause and busybox + corepin images and
// returns the CRI client.
func (c *cluster) startRuntime(cni string) *cri {
	t := c.t
	begin := time.Now()
	pause, image := buildImages(t, c.dir, c.corepin)
	c.note("images built (pause, busybox + corepin) in %s", fmtDur(time.Since(begin)))
	writeFile(t, c.path("containerd.toml"), []byte(containerdConfig(c.dir)))
	if err := os.MkdirAll(c.path("cni/net.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, c.path("cni/net.d/10-e2e.conflist"), []byte(cni))
	c.ctd = c.ps.Start("containerd", c.ctdEnv(), filepath.Join(c.ctdBin, "containerd"), "--config", c.path("containerd.toml"))
	rt := dialCRI(t, c.path("run/containerd.sock"))
	c.note("containerd CRI up in %s", fmtDur(rt.waitUp(t, c.ctd, 30*time.Second)))
	for _, img := range []string{pause, image} {
		c.ctr("images", "import", img)
	}
	return rt
}

func (c *cluster) ctdEnv() []string {
	return append(os.Environ(), "PATH="+c.ctdBin+":"+os.Getenv("PATH"))
}

// ctr runs ctr on the private containerd's k8s.io namespace (the CRI's).
func (c *cluster) ctr(args ...string) string {
	return run(c.t, c.ctdEnv(), filepath.Join(c.ctdBin, "ctr"), append([]string{"--address", c.path("run/containerd.sock"), "-n", "k8s.io"}, args...)...)
}

// startNode starts the private containerd, imports the images, attaches
// `corepin nri` and returns the CRI client.
func (c *cluster) startNode() *cri {
	t := c.t
	rt := c.startRuntime(cniConfig)
	// No reserved CPU: the 2-CPU machine must fit two pinned pods at once.
	writeFile(t, c.path("corepin.yaml"), []byte("reserved_cpus: \"\"\npolicy: corepin\n"))
	c.metrics = fmt.Sprintf("127.0.0.1:%d", kubetest.FreePort(t))
	c.startPlugin()
	return rt
}

// startPlugin starts (or restarts) `corepin nri` on the node's runtime
// and waits for its first Synchronize.
func (c *cluster) startPlugin() {
	t := c.t
	plugin := c.ps.Start("corepin nri", nil, c.corepin, "nri", "--nri-socket", c.path("run/nri.sock"),
		"--config", c.path("corepin.yaml"), "--state", c.path("state.db"),
		"--annotate-node", "--node-name", nodeName, "--kubeconfig", c.kubeconfig, "--metrics-addr", c.metrics,
		"--be-idle-parent", "/sys/fs/cgroup")
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(plugin.Log.String(), "msg=synchronized") {
		select {
		case <-plugin.Done:
			t.Fatalf("corepin nri exited:\n%s", plugin.Log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("corepin nri did not synchronise with containerd in 30 s:\n%s", plugin.Log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kubeletConfig is the node's KubeletConfiguration; every field set here
// differs from the default for a reason given beside it.
func (c *cluster) kubeletConfig(ip string, port, healthz int) string {
	sock := "unix://" + c.path("run/containerd.sock")
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# 1.36 refuses cgroup v1 unless told; this machine has only v1.
failCgroupV1: false
# containerd runs runc with SystemdCgroup = false.
cgroupDriver: cgroupfs
# The pods' cgroups under a root of the test's own, removed at teardown.
cgroupRoot: %[1]q
containerRuntimeEndpoint: %[2]q
imageServiceEndpoint: %[2]q
# corepin nri places the CPUs; the static CPU manager would overwrite them.
cpuManagerPolicy: none
failSwapOn: false
# The API server reaches the kubelet for pod logs without a client cert.
authentication: {anonymous: {enabled: true}, webhook: {enabled: false}, x509: {}}
authorization: {mode: AlwaysAllow}
address: %[3]q
port: %[4]d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %[5]d
# Defaults are /var/log/pods and /usr/libexec/kubernetes/...: keep them in the run's directory.
podLogsDir: %[6]q
volumePluginDir: %[7]q
# Default true: KUBE-IPTABLES-HINT and KUBE-FIREWALL chains in the host's iptables.
makeIPTablesUtilChains: false
# Default -999: lowering it needs CAP_SYS_RESOURCE, which this machine lacks.
oomScoreAdj: 0
# Faster Ready and pod status on a test node.
nodeStatusUpdateFrequency: 2s
syncFrequency: 10s
# Two image tarballs, never garbage-collected during the run.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 50Mi}
`, c.cgroupRoot, sock, ip, port, healthz, c.path("pod-logs"), c.path("volume-plugins"))
}

// startKubelet starts the kubelet and waits for its Node to be Ready.
func (c *cluster) startKubelet() {
	makeCgroupRoot(c.t, c.cgroupRoot)
	c.launchKubelet()
}

// launchKubelet starts the kubelet on the cgroup root made already (a
// first start, or a restart) and waits for its Node to be Ready.
func (c *cluster) launchKubelet() {
	t := c.t
	ip := nodeIP(t)
	port, healthz := kubetest.FreePort(t), kubetest.FreePort(t)
	cfg := writeFile(t, c.path("kubelet.yaml"), []byte(c.kubeletConfig(ip, port, healthz)))
	begin := time.Now()
	kl := c.ps.Start("kubelet", nil, filepath.Join(c.kubeBin, "kubelet"), "--config="+cfg,
		"--kubeconfig="+c.kubeconfig, "--hostname-override="+nodeName, "--node-ip="+ip,
		"--root-dir="+c.path("kubelet"), "--cert-dir="+c.path("kubelet/pki"))
	c.kubeletHealthz = fmt.Sprintf("http://127.0.0.1:%d/healthz", healthz)
	kubetest.WaitOK(t, kl, c.kubeletHealthz, "", 90*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var node *corev1.Node
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		select {
		case <-kl.Done:
			return false, fmt.Errorf("the kubelet exited")
		default:
		}
		n, err := c.cs.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		node = n
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		var conds []string
		if node != nil {
			for _, cond := range node.Status.Conditions {
				conds = append(conds, fmt.Sprintf("%s=%s (%s: %s)", cond.Type, cond.Status, cond.Reason, cond.Message))
			}
		}
		t.Fatalf("node %s not Ready: %v; conditions %v\n%s", nodeName, err, conds, kubetest.Tail(kl.Log.String(), 8<<10))
	}
	c.note("node %s Ready %s after the kubelet started (capacity cpu %s, memory %s)", nodeName, fmtDur(time.Since(begin)),
		node.Status.Capacity.Cpu(), node.Status.Capacity.Memory())
}

// sweepJobs runs `corepin kube jobs` for this machine with
// --host-network (the node has no network plugin) and extra flags.
func (c *cluster) sweepJobs(extra ...string) []batchv1.Job {
	t := c.t
	args := append(append(append([]string{"kube", "jobs"}, sweepFlags...), extra...), "--namespace", namespace, "-o", "json")
	out := runStdout(t, c.corepin, args...)
	var list struct {
		Kind  string            `json:"kind"`
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil || list.Kind != "List" {
		t.Fatalf("corepin %s: want a v1 List (%v):\n%s", strings.Join(args, " "), err, kubetest.Tail(out, 2048))
	}
	var js []batchv1.Job
	for _, raw := range list.Items {
		var j batchv1.Job
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&j); err != nil {
			t.Fatalf("decoding a Job of corepin kube jobs: %v", err)
		}
		if j.Kind != "Job" {
			t.Fatalf("corepin kube jobs wrote a %s, want Jobs only", j.Kind)
		}
		if !j.Spec.Template.Spec.HostNetwork {
			t.Fatalf("job %s: --host-network did not set the pods' hostNetwork", j.Name)
		}
		js = append(js, j)
	}
	if len(js) == 0 {
		t.Fatal("corepin kube jobs wrote no Job")
	}
	c.note("corepin %s: %d Jobs", strings.Join(args, " "), len(js))
	return js
}

// sweepFlags shape the sweep's Jobs, for kube jobs and kube run alike.
var sweepFlags = []string{"--sweep", "concurrency", "--quick", "--repeats", "1", "--image", corepinImage,
	"--binary", "/bin/corepin", "--sysfs-root", "/", "--host-network", "--numa-policy", "single-numa-node"}

// runJobs runs the sweep with corepin kube run (the same flags as
// sweepJobs' corepin kube jobs, the Jobs js): one Job at a time, in
// order, each after the previous completed, its results recorded in
// run.db. It checks what kube run reports of each Job against js, writes
// each pod's log to logs/POD and returns the pods' logs by name.
func (c *cluster) runJobs(js []batchv1.Job, logs string) map[string]string {
	t := c.t
	// Each Job has its own budget (kube run's --job-timeout), and kube run
	// all of theirs: a slow Job early in the sweep takes nothing from a
	// later one. On this 2-CPU node a Job takes 10-40 s; a stalled one
	// ends the run at its own timeout.
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(len(js))*sweepJobTimeout+time.Minute)
	defer cancel()
	if _, err := c.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The namespace's default ServiceAccount is made by a controller this
	// cluster does not run, and the ServiceAccount admission that would
	// need it is off.
	if err := os.MkdirAll(logs, 0o755); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"kube", "run"}, sweepFlags...)
	args = append(args, "--kubeconfig", c.kubeconfig, "--namespace", namespace, "--db", c.path("run.db"), "--job-timeout", sweepJobTimeout.String(), "-o", "json")
	cmd := exec.CommandContext(ctx, c.corepin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	begin := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var runErr error
	for sampling := true; sampling; {
		select {
		case runErr = <-done:
			sampling = false
		case <-time.After(200 * time.Millisecond):
			c.sampleAssigned(ctx)
		}
	}
	took := time.Since(begin)
	// One line per Job as it ended, then the recorded runs.
	type line struct {
		Job     string   `json:"job"`
		Status  string   `json:"status"`
		Pods    int      `json:"pods"`
		RunIDs  *[]int64 `json:"run_ids"`
		Results int      `json:"results"`
	}
	var ended []line
	var final line
	for dec := json.NewDecoder(bytes.NewReader(stdout.Bytes())); ; {
		var l line
		if dec.Decode(&l) != nil {
			break
		}
		if l.RunIDs != nil {
			final = l
			continue
		}
		ended = append(ended, l)
	}
	// What went wrong comes first: kube run's own error and output, then
	// the Job it stopped at (its conditions and events), then every
	// Job's pods. The reads have their own context: the run's may be
	// spent.
	rctx, rcancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer rcancel()
	if runErr != nil {
		t.Errorf("corepin %s: %v (after %s)\nstderr:\n%s\nstdout:\n%s", strings.Join(args, " "), runErr, fmtDur(took),
			kubetest.Tail(stderr.String(), 4096), kubetest.Tail(stdout.String(), 2048))
		if len(ended) < len(js) {
			c.explainJob(rctx, js[len(ended)].Name)
		}
	}
	out := map[string]string{}
	for _, j := range js {
		pods, err := c.cs.CoreV1().Pods(namespace).List(rctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + j.Name})
		if err != nil {
			t.Fatalf("listing the pods of job %s: %v", j.Name, err)
		}
		for _, p := range pods.Items {
			log := c.podLog(rctx, p.Name)
			out[p.Name] = log
			writeFile(t, filepath.Join(logs, p.Name), []byte(log))
		}
		if runErr != nil {
			c.explain(rctx, j.Name, pods.Items, out)
		}
		if n := len(pods.Items); runErr == nil && int32(n) != *j.Spec.Completions {
			c.explainJob(rctx, j.Name)
			t.Fatalf("job %s: %d pods, want %d", j.Name, n, *j.Spec.Completions)
		}
		c.t.Logf("job %s (%s): %d pods; %s", j.Name, j.Annotations["corepin.io/point"], len(pods.Items), podTimes(begin, pods.Items))
	}
	if runErr != nil {
		t.FailNow()
	}
	if len(ended) != len(js) {
		t.Fatalf("corepin kube run reported %d Jobs, want the %d of kube jobs:\n%s", len(ended), len(js), stdout.String())
	}
	for i, e := range ended {
		if e.Job != js[i].Name || e.Status != "complete" || int32(e.Pods) != *js[i].Spec.Completions {
			t.Errorf("corepin kube run, Job %d: %+v, want %s complete with %d pods, in order", i, e, js[i].Name, *js[i].Spec.Completions)
		}
	}
	if final.RunIDs == nil || len(*final.RunIDs) != 1 || final.Results != len(out) {
		t.Fatalf("corepin kube run recorded %d results in runs %v, want the %d pods' in one run", final.Results, final.RunIDs, len(out))
	}
	c.note("corepin kube run: %d Jobs (%d pods) complete one at a time, %d results recorded (run %v), in %s", len(ended), len(out), final.Results, *final.RunIDs, fmtDur(took))
	return out
}

// sampleAssigned notes the pod UIDs the node's published assignments name
// now (corepin nri --annotate-node names each container's pod).
func (c *cluster) sampleAssigned(ctx context.Context) {
	n, err := c.cs.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		return
	}
	var list []plan.Assigned
	if json.Unmarshal([]byte(n.Annotations[extender.AnnotationAssigned]), &list) != nil {
		return
	}
	if c.podUIDs == nil {
		c.podUIDs = map[string]int{}
	}
	for _, a := range list {
		if a.PodUID != "" {
			c.podUIDs[a.PodUID]++
		}
	}
}

// podTimes says when, after start, each pod was created, scheduled,
// started and finished (the API's times have whole seconds).
func podTimes(start time.Time, pods []corev1.Pod) string {
	at := func(t metav1.Time) string {
		if t.IsZero() {
			return "-"
		}
		return fmt.Sprintf("%.0f", t.Sub(start.Truncate(time.Second)).Seconds())
	}
	var out []string
	for _, p := range pods {
		var sched, started, finished metav1.Time
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue {
				sched = c.LastTransitionTime
			}
		}
		for _, cs := range p.Status.ContainerStatuses {
			if term := cs.State.Terminated; term != nil {
				started, finished = term.StartedAt, term.FinishedAt
			}
		}
		out = append(out, fmt.Sprintf("%s created %s scheduled %s started %s finished %s s", p.Name[len(p.Name)-5:],
			at(p.CreationTimestamp), at(sched), at(started), at(finished)))
	}
	return strings.Join(out, ", ")
}

func (c *cluster) podLog(ctx context.Context, pod string) string {
	rc, err := c.cs.CoreV1().Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{}).Stream(ctx)
	if err != nil {
		c.t.Fatalf("logs of pod %s through the API server: %v", pod, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, maxLogBytes))
	if err != nil {
		c.t.Fatalf("reading logs of pod %s: %v", pod, err)
	}
	return string(b)
}

// sweepJobTimeout is each sweep Job's budget (kube run --job-timeout).
const sweepJobTimeout = 4 * time.Minute

// explainJob logs what the API server holds of Job name: its status and
// conditions, and the events of the Job and of its pods.
func (c *cluster) explainJob(ctx context.Context, name string) {
	t := c.t
	j, err := c.cs.BatchV1().Jobs(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Logf("job %s: reading it: %v", name, err)
		return
	}
	st := j.Status
	t.Logf("job %s: created %s, active %d, ready %v, succeeded %d, failed %d, start %v, completion %v",
		name, j.CreationTimestamp.UTC().Format(time.RFC3339), st.Active, ptrOr(st.Ready), st.Succeeded, st.Failed, st.StartTime, st.CompletionTime)
	for _, cond := range st.Conditions {
		t.Logf("job %s: condition %s=%s %s: %s (at %s)", name, cond.Type, cond.Status, cond.Reason, cond.Message, cond.LastTransitionTime.UTC().Format(time.RFC3339))
	}
	ev, err := c.cs.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Logf("job %s: listing the events: %v", name, err)
		return
	}
	for _, e := range ev.Items {
		if o := e.InvolvedObject; (o.Kind == "Job" && o.Name == name) || (o.Kind == "Pod" && strings.HasPrefix(o.Name, name+"-")) {
			t.Logf("job %s: event %s/%s: %s %s (x%d, last %s)", name, o.Kind, o.Name, e.Reason, e.Message, e.Count, e.LastTimestamp.UTC().Format(time.RFC3339))
		}
	}
}

func ptrOr[T any](p *T) any {
	if p == nil {
		return "-"
	}
	return *p
}

// explain logs the pods' phases, logs and the namespace's events.
func (c *cluster) explain(ctx context.Context, job string, pods []corev1.Pod, logs map[string]string) {
	for _, p := range pods {
		c.t.Logf("pod %s of %s: phase %s node %q statuses %+v\nlog:\n%s", p.Name, job, p.Status.Phase, p.Spec.NodeName, p.Status.ContainerStatuses, logs[p.Name])
	}
	ev, err := c.cs.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{})
	if err == nil {
		for _, e := range ev.Items {
			c.t.Logf("event %s/%s: %s %s", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
		}
	}
}

// podResult is what one pod's corepin-result line says.
type podResult struct {
	pod   string
	point struct {
		CPUs        string `json:"cpus"`
		Mode        string `json:"mode"`
		Concurrency string `json:"concurrency"`
	}
	index int
	run   struct {
		CPUSet     string    `json:"cpuset"`
		CPUsUsed   string    `json:"cpus_used"`
		ExitCode   int       `json:"exit_code"`
		StartedAt  time.Time `json:"started_at"`
		FinishedAt time.Time `json:"finished_at"`
	}
}

func parseResults(t *testing.T, logs map[string]string) []podResult {
	t.Helper()
	var out []podResult
	for pod, log := range logs {
		var found bool
		for _, line := range strings.Split(log, "\n") {
			_, body, ok := strings.Cut(line, markerPrefix)
			if !ok {
				continue
			}
			var m marker
			if err := json.Unmarshal([]byte(body), &m); err != nil {
				t.Fatalf("pod %s: result line: %v\n%s", pod, err, line)
			}
			r := podResult{pod: pod, index: m.Index}
			if err := json.Unmarshal(m.Point, &r.point); err != nil {
				t.Fatalf("pod %s: point: %v", pod, err)
			}
			if err := json.Unmarshal(m.Result, &r.run); err != nil {
				t.Fatalf("pod %s: corepin run result: %v\n%s", pod, err, m.Result)
			}
			if m.Pod != pod {
				t.Errorf("pod %s reports itself as %q", pod, m.Pod)
			}
			out = append(out, r)
			found = true
		}
		if !found {
			t.Errorf("pod %s printed no %s line:\n%s", pod, markerPrefix, log)
		}
	}
	return out
}

// checkPlacement asserts that every pod of a pinned point ran on whole
// CPUs of its own, as many as the point asks for, and that pinned pods
// running at the same time never shared a CPU; the pods of the other
// modes ran on the shared pool, every CPU the machine allows less at most
// those of the pinned pods alive beside them (sharedPool). The kubelet's
// CPU manager is off (policy none), so a pinned cpuset can only have come
// from corepin nri. Where the test saw a pod's container running, the
// kernel's view (affinity and cpuset cgroup) must match what the pod
// reported (a pinned pod), or be a shared pool of its time as what it
// reported must (the pool changes while a shared pod runs), and at least
// one pinned pod must have been seen.
func (c *cluster) checkPlacement(rs []podResult, w watched) {
	lives := w.lives
	t := c.t
	topo, err := topology.Open("/")
	if err != nil {
		t.Fatal(err)
	}
	all := topo.Allowed()
	pinned, bad := 0, 0
	fail := func(format string, args ...any) {
		bad++
		t.Errorf(format, args...)
	}
	for _, r := range rs {
		got, err := cpuset.Parse(r.run.CPUSet)
		if err != nil {
			fail("pod %s: cpuset %q: %v", r.pod, r.run.CPUSet, err)
			continue
		}
		used, err := cpuset.Parse(r.run.CPUsUsed)
		if err != nil {
			fail("pod %s: cpus_used %q: %v", r.pod, r.run.CPUsUsed, err)
			continue
		}
		if r.run.ExitCode != 0 {
			fail("pod %s: the workload exited %d", r.pod, r.run.ExitCode)
		}
		if !used.IsSubsetOf(got) {
			fail("pod %s (%s): used CPUs %s outside its cpuset %s", r.pod, r.point.Mode, used, got)
		}
		if r.point.Mode == "pinned" {
			pinned++
			if want := r.point.CPUs; fmt.Sprint(got.Size()) != want {
				fail("pod %s (pinned, %s CPUs): ran on %s", r.pod, want, got)
			}
		} else if pool := sharedPool(all, r, rs, w.spans); !pool.IsSubsetOf(got) || !got.IsSubsetOf(all) {
			fail("pod %s (%s): ran on %s, want the shared pool: %s, less at most the CPUs of the pinned pods whose containers lived at the same time (so at least %s)",
				r.pod, r.point.Mode, got, all, pool)
		}
	}
	if pinned == 0 {
		fail("no pinned pod ran")
	}
	seen, seenPinned := 0, 0
	for _, r := range rs {
		v, ok := lives[r.pod]
		if !ok {
			continue
		}
		seen++
		if r.point.Mode == "pinned" {
			seenPinned++
		}
		if why := viewMismatch(r, v, all, sharedPool(all, r, rs, w.spans)); why != "" {
			fail("%s", why)
		}
	}
	if seenPinned == 0 {
		fail("no pinned pod's container was seen running through the CRI (%d pods seen): the kernel's view is unchecked", seen)
	}
	overlaps := 0
	for i, a := range rs {
		for _, b := range rs[i+1:] {
			if a.point.Mode != "pinned" || b.point.Mode != "pinned" || a.index != b.index {
				continue
			}
			if a.run.StartedAt.Before(b.run.FinishedAt) && b.run.StartedAt.Before(a.run.FinishedAt) {
				overlaps++
				x, _ := cpuset.Parse(a.run.CPUSet)
				y, _ := cpuset.Parse(b.run.CPUSet)
				if !x.Intersection(y).IsEmpty() {
					fail("pinned pods %s (%s) and %s (%s) ran at the same time on shared CPUs", a.pod, x, b.pod, y)
				}
			}
		}
	}
	if bad > 0 {
		c.note("placement: %d of %d pods (%d pinned) not where their point says", bad, len(rs), pinned)
		return
	}
	c.note("placement: %d pods, %d pinned on CPUs of their own (%d pairs of pinned pods ran at once, on disjoint CPUs); the rest on %s; "+
		"the kernel's affinity and cpuset cgroup agreed for the %d pods (%d pinned) seen running (pinned: what they reported; shared: a pool of their time)", len(rs), pinned, overlaps, all, seen, seenPinned)
}

// viewMismatch says how the kernel's view v of pod r's running container
// (seen once by the watcher) disagrees with where r's point says it ran
// ("" when it agrees): a pinned container's CPUs are its own from creation
// to exit, so the view is what the pod reported; a shared-pool
// container's CPUs follow the pool, which a pinned pod created or ended
// between the watcher's look and the workload's own changes (seen: the
// kernel showed 0-1, then a pinned pod took 1 and the workload reported
// 0), so the view must be a pool of that time, as what the pod reported
// must: all allowed CPUs less at most those of the pinned pods alive
// beside it (at least pool).
func viewMismatch(r podResult, v live, all, pool cpuset.CPUSet) string {
	aff, err1 := cpuset.Parse(v.Affinity)
	cg, err2 := cpuset.Parse(v.CPUs)
	if err1 != nil || err2 != nil {
		return fmt.Sprintf("pod %s (%s): the kernel showed affinity %q and cpuset.cpus %q while it ran: %v", r.pod, r.point.Mode, v.Affinity, v.CPUs, errors.Join(err1, err2))
	}
	if r.point.Mode == "pinned" {
		if want, _ := cpuset.Parse(r.run.CPUSet); !aff.Equals(want) || !cg.Equals(want) {
			return fmt.Sprintf("pod %s (pinned): the kernel showed affinity %q and cpuset.cpus %q while it ran, it reported %s", r.pod, v.Affinity, v.CPUs, want)
		}
		return ""
	}
	for _, x := range []cpuset.CPUSet{aff, cg} {
		if !pool.IsSubsetOf(x) || !x.IsSubsetOf(all) {
			return fmt.Sprintf("pod %s (%s): the kernel showed affinity %q and cpuset.cpus %q while it ran, want the shared pool: %s, less at most the CPUs of the pinned pods whose containers lived at the same time (so at least %s)",
				r.pod, r.point.Mode, v.Affinity, v.CPUs, all, pool)
		}
	}
	return ""
}

// releaseSlack is how long after a pinned container's exit its CPUs may
// still be missing from a shared pod's pool: the runtime tells corepin nri
// of the exit (StopContainer) after the fact, and the grown pool reaches
// running containers by an update sent after that.
const releaseSlack = 5 * time.Second

// sharedPool is the least a pod of the shared pool must have run on:
// every CPU but those of the pinned pods whose containers were alive
// while r's was (a point's pods share the node with other Jobs' when the
// Jobs run at once). A pinned container holds its CPUs from its creation
// to its exit (plus releaseSlack), beyond its workload's own start and
// finish; where the watcher saw a container, its lifetime is the one
// compared, else the run's times are.
func sharedPool(all cpuset.CPUSet, r podResult, rs []podResult, spans map[string]span) cpuset.CPUSet {
	life := func(p podResult) (time.Time, time.Time) {
		from, to := p.run.StartedAt, p.run.FinishedAt
		if s, ok := spans[p.pod]; ok {
			from, to = s.Created, s.Finished
		}
		if p.point.Mode == "pinned" {
			to = to.Add(releaseSlack)
		}
		return from, to
	}
	rFrom, rTo := life(r)
	pool := all
	for _, p := range rs {
		if p.point.Mode != "pinned" {
			continue
		}
		if pFrom, pTo := life(p); !pFrom.Before(rTo) || !rFrom.Before(pTo) {
			continue
		}
		if set, err := cpuset.Parse(p.run.CPUSet); err == nil {
			pool = pool.Difference(set)
		}
	}
	return pool
}

// collectOut is corepin kube collect -o json.
type collectOut struct {
	RunIDs   []int64   `json:"run_ids"`
	Results  int       `json:"results"`
	Skipped  []skipped `json:"skipped"`
	Warnings []string  `json:"warnings"`
}

// collectInto runs corepin kube collect with args into db and checks that
// it recorded every pod of the sweep as one run, skipping none.
func (c *cluster) collectInto(db string, pods int, args ...string) (collectOut, time.Duration) {
	t := c.t
	args = append([]string{"kube", "collect", "--db", db, "-o", "json"}, args...)
	begin := time.Now()
	out := run(t, nil, c.corepin, args...)
	took := time.Since(begin)
	var col collectOut
	if err := json.Unmarshal([]byte(out), &col); err != nil {
		t.Fatalf("corepin %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	if col.Results != pods || len(col.Skipped) != 0 || len(col.RunIDs) != 1 {
		t.Fatalf("corepin %s: %d results in runs %v, skipped %+v, warnings %q; want %d results in one run, none skipped",
			strings.Join(args, " "), col.Results, col.RunIDs, col.Skipped, col.Warnings, pods)
	}
	return col, took
}

// collect runs corepin kube collect on the cluster (termination messages
// through the API server) and on the pods' saved logs, each into a fresh
// results database, then corepin results and corepin report on the first.
func (c *cluster) collect(logs string, pods int) {
	t := c.t
	db := c.path("results.db")
	col, took := c.collectInto(db, pods, "--kubeconfig", c.kubeconfig, "--namespace", namespace, "--selector", "corepin.io/sweep=concurrency")
	c.note("corepin kube collect (API server, termination messages): %d results, run %d, in %s", col.Results, col.RunIDs[0], fmtDur(took))
	fromLogs, took := c.collectInto(c.path("results-logs.db"), pods, "--from", logs)
	c.note("corepin kube collect --from (the same pods' logs, fetched through the API server): %d results in %s", fromLogs.Results, fmtDur(took))

	out := run(t, nil, c.corepin, "results", "--db", db, "--run", fmt.Sprint(col.RunIDs[0]), "-o", "json")
	var res struct {
		Jobs []struct {
			Mode     string `json:"mode"`
			ExitCode int    `json:"exit_code"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("corepin results -o json: %v\n%s", err, kubetest.Tail(out, 2048))
	}
	if len(res.Jobs) != pods {
		t.Fatalf("corepin results --run %d: %d jobs, want %d", col.RunIDs[0], len(res.Jobs), pods)
	}
	for i, j := range res.Jobs {
		if j.ExitCode != 0 {
			t.Errorf("corepin results: job %d (%s) exit code %d", i, j.Mode, j.ExitCode)
		}
	}
	dir := c.path("report")
	run(t, nil, c.corepin, "report", "--db", db, "--run", fmt.Sprint(col.RunIDs[0]), "--report-dir", dir)
	html, err := os.ReadFile(filepath.Join(dir, "index.html"))
	if err != nil {
		t.Fatalf("corepin report wrote no index.html: %v", err)
	}
	if !bytes.Contains(html, []byte("pinned")) {
		t.Errorf("the report names no pinned mode (%d bytes)", len(html))
	}
	c.note("corepin results: %d jobs; corepin report: index.html %d bytes", len(res.Jobs), len(html))
}

// startCluster starts the control plane, the node (containerd and
// corepin nri) and the kubelet in a new directory named after prefix,
// and tears all of it down when the test ends.
func startCluster(t *testing.T, prefix string) (*cluster, *cri) {
	c := need(t)
	before := takeSnapshot(t)
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	c.dir = dir
	c.cgroupRoot = "/" + filepath.Base(dir)
	c.ps = &kubetest.Procs{T: t}
	var rt *cri
	t.Cleanup(func() { c.teardown(before, rt) })

	c.startControlPlane()
	rt = c.startNode()
	c.startKubelet()
	return c, rt
}

func TestKubeletRunsSweepPinned(t *testing.T) {
	c, rt := startCluster(t, "kl-")
	js := c.sweepJobs()
	logs := c.path("logs")
	ctx, stop := context.WithCancel(context.Background())
	lives := rt.watch(ctx, 50*time.Millisecond)
	byPod := c.runJobs(js, logs)
	stop()
	c.checkPlacement(parseResults(t, byPod), lives())
	c.checkExtender(len(byPod))
	c.collect(logs, len(byPod))
	c.checkPinnedTogether(rt)
	c.checkBEIdle(rt)
}

// checkExtender checks the loop the cluster side closes: the node
// published its state (corepin nri --annotate-node, from the host through
// the kubeconfig) as the extender reads it, and the scheduler asked the
// extender about every pod, which kept the node each time.
func (c *cluster) checkExtender(pods int) {
	t := c.t
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	var n *corev1.Node
	// The plugin annotates after each change and every 30 s.
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 40*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := c.cs.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		n = got
		_, ok := got.Annotations[extender.AnnotationTopology]
		return ok, nil
	})
	if err != nil {
		t.Fatalf("node %s never carried %s: %v", nodeName, extender.AnnotationTopology, err)
	}
	topo, held, ok, err := nodestate.NodeTopology(n)
	if !ok || err != nil {
		t.Fatalf("node %s: the extender cannot read its annotations: %v", nodeName, err)
	}
	if got, want := topo.Online().Size(), runtime.NumCPU(); got != want {
		t.Errorf("node %s publishes %d CPUs, the machine has %d", nodeName, got, want)
	}
	// The settings it runs under (corepin.yaml: policy corepin, no
	// topology policy), which the extender judges the node by.
	if a, err := nodestate.ParseAllocator(n.Annotations[extender.AnnotationAllocator]); err != nil || a.Policy != "corepin" || len(a.Options) != 0 || a.TopologyPolicy != "" {
		t.Errorf("node %s: %s %q (%v), want the plugin's settings {\"policy\":\"corepin\"}", nodeName, extender.AnnotationAllocator,
			n.Annotations[extender.AnnotationAllocator], err)
	}
	// The plugin names each container's pod by the UID the API server
	// gave it: the extender tells admitted pods from coming ones by it.
	if !strings.Contains(n.Annotations[extender.AnnotationAllocator], `"pod_uids":true`) {
		t.Errorf("node %s: %s %q does not say its entries name their pods", nodeName, extender.AnnotationAllocator, n.Annotations[extender.AnnotationAllocator])
	}
	all, err := c.cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ours := map[string]bool{}
	for _, p := range all.Items {
		ours[string(p.UID)] = true
	}
	named := 0
	for uid := range c.podUIDs {
		if !ours[uid] {
			t.Errorf("node %s named pod UID %q in %s, which is no pod of the sweep", nodeName, uid, extender.AnnotationAssigned)
			continue
		}
		named++
	}
	if named == 0 {
		t.Errorf("node %s never named a sweep pod's UID in %s while the Jobs ran", nodeName, extender.AnnotationAssigned)
	}
	m := kubetest.Scrape(t, fmt.Sprintf("http://127.0.0.1:%d/metrics", c.extPort))
	calls, kept := m[`corepin_extender_request_duration_seconds_count{verb="filter"}`], m[`corepin_extender_filtered_nodes_total{result="kept"}`]
	// A pod may be refused while the annotations still show CPUs that a
	// finished pod held; the scheduler retries when the node changes.
	if calls < float64(pods) || kept < float64(pods) {
		t.Errorf("extender: %v filter calls kept the node %v times, want at least one keeping call per pod (%d)", calls, kept, pods)
	}
	c.note("node %s annotated by corepin nri from the host (%d CPUs, %d held now; %d of the %d sweep pods seen named by UID in its assignments); under the shipped scheduler configuration corepin extender --track-pods was asked %v times and kept the node %v times",
		nodeName, topo.Online().Size(), len(held), named, len(all.Items), calls, kept)
}

// teardown stops the kubelet first (so it recreates nothing), removes
// every pod sandbox through the CRI (containers, shims), stops the rest,
// then removes what the run left on the machine and checks the machine
// against the snapshot.
func (c *cluster) teardown(before snapshot, rt *cri) {
	t := c.t
	begin := time.Now()
	c.ps.StopNamed("kubelet")
	if rt != nil {
		n := rt.removeAll(t)
		rt.conn.Close()
		t.Logf("teardown: %d pod sandboxes removed", n)
	}
	c.ps.Stop()
	cg := removeCgroupRoot(t, c.cgroupRoot)
	ms := unmountUnder(t, c.dir)
	cleanContainerLogsDir(t, c.dir, before.dirs[containerLogsDir])
	cleanDevicePluginDir(t, before)
	before.restoreSysctls(t)
	if t.Failed() {
		t.Logf("keeping %s for inspection", c.dir)
	} else if err := os.RemoveAll(c.dir); err != nil {
		t.Errorf("removing %s: %v", c.dir, err)
	}
	if diffs := before.compare(t, c.dir, c.cgroupRoot); len(diffs) > 0 {
		t.Errorf("the machine differs after teardown:\n%s", strings.Join(diffs, "\n"))
	} else {
		c.note("teardown in %s: %d cgroups removed, %d mounts unmounted %v; processes, cgroups, mounts, iptables, sysctls and the kubelet's default directories as before",
			fmtDur(time.Since(begin)), cg, len(ms), ms)
	}
	c.report()
}

// report appends the test's figures to $COREPIN_E2E_REPORT.
func (c *cluster) report() {
	path := os.Getenv(envReport)
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		c.t.Logf("report: %v", err)
		return
	}
	defer f.Close()
	b, _ := json.Marshal(map[string]any{"test": c.t.Name(), "at": time.Now().UTC().Format(time.RFC3339),
		"passed": !c.t.Failed(), "notes": c.notes})
	fmt.Fprintf(f, "%s\n", b)
}
