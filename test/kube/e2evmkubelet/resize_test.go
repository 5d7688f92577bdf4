package e2evmkubelet

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/test/kube/kubetest"
)

// Limits under emulation on a shared 2-CPU host: bounds for a hung
// machine, not measures.
const (
	bootLimit  = 6 * time.Minute // qemu start to corepin nri synchronised
	readyLimit = 6 * time.Minute // kubelet start to Node Ready
	podLimit   = 8 * time.Minute // pod created to its first line
	stepLimit  = 4 * time.Minute // one resize to its outcome
)

// namespace of the pods; each pod's container prints its state every
// second.
const namespace = "default"

// podScript is the container's loop: its own Cpus_allowed_list (PID 1 of
// its PID namespace is the container's process), what its environment
// said at creation and what the files say now.
const podScript = `i=0; while :; do i=$((i+1))
echo "seq=$i allowed=$(awk '/^Cpus_allowed_list/{print $2}' /proc/1/status) env_cpuset=$COREPIN_CPUSET env_threads=$COREPIN_THREADS file_cpuset=$(cat /run/corepin/cpuset 2>/dev/null) file_threads=$(cat /run/corepin/threads 2>/dev/null)"
sleep 1; done`

// TestVMKubeletResize is issue 21's resize on a real kubelet node: a
// Guaranteed pod of 2 CPUs pinned by corepin nri is resized through the
// API server's resize subresource to 4 (its cpuset grows around the 2 it
// had, on one NUMA node, in whole cores), back to 2 (the original CPUs
// stay) and to 6, more than the node has free (refused with corepin's
// reason on the pod, nothing changed), beside a second pinned pod whose
// CPUs never move (see the package doc). The containers show
// COREPIN_CPUSET, COREPIN_THREADS and /run/corepin's files at each step.
func TestVMKubeletResize(t *testing.T) {
	h := prerequisites(t)
	r := &report{t: t}
	defer r.write()
	begin := time.Now()
	ps := &kubetest.Procs{T: t}
	defer ps.Stop()
	cp, m, topo := startNode(t, h, ps, r)

	// The first pod takes NUMA node 0's free core (corepin fills the
	// fuller node first); the second, the one resized, lands on node 1,
	// where it has room to grow without leaving its NUMA node.
	step := time.Now()
	other := &pod{t: t, cs: cp.Client, m: m, name: "other"}
	other.create()
	o := other.line(podLimit, func(s state) bool { return s.allowed.Size() > 0 })
	r.phase("pod other running, first line of its container", time.Since(step))
	r.state("other, created with 2 CPUs", o)
	checkPinned(t, "other", topo, o, 2, o.allowed)

	step = time.Now()
	p := &pod{t: t, cs: cp.Client, m: m, name: "pin"}
	p.create()
	first := p.line(podLimit, func(s state) bool { return s.allowed.Size() > 0 })
	r.phase("pod pin running, first line of its container", time.Since(step))
	r.state("pin, created with 2 CPUs", first)
	orig := first.allowed
	checkPinned(t, "pin created", topo, first, 2, orig)
	if !first.envCPUSet.Equals(orig) || first.envThreads != 2 {
		t.Errorf("pin created: COREPIN_CPUSET=%s COREPIN_THREADS=%d, want %s and 2", first.envCPUSet, first.envThreads, orig)
	}
	if orig.Intersects(o.allowed) {
		t.Errorf("two pinned pods share CPUs: pin %s, other %s", orig, o.allowed)
	}

	step = time.Now()
	up := p.resize("4", stepLimit)
	r.phase("resize pin 2 -> 4 applied and seen by the container", time.Since(step))
	r.state("pin, resized to 4", up)
	checkPinned(t, "pin resized to 4", topo, up, 4, orig)
	checkEnv(t, "pin resized to 4", up, orig)

	step = time.Now()
	down := p.resize("2", stepLimit)
	r.phase("resize pin 4 -> 2 applied and seen by the container", time.Since(step))
	r.state("pin, resized back to 2", down)
	checkPinned(t, "pin resized back to 2", topo, down, 2, orig)

	// 6 CPUs: the kubelet's allocatable (8, it knows no reserved CPUs)
	// holds 2 + 6, so the kubelet sends the update; corepin has 6 CPUs
	// outside the reserved core and other holds 2 of them.
	step = time.Now()
	refused, shown := p.refusedResize("6", stepLimit)
	r.phase("resize pin 2 -> 6 refused", time.Since(step))
	r.linef("refusal as the pod shows it (kubectl get pod pin -o yaml: status.conditions; kubectl describe pod pin: Events):\n%s", shown)
	r.state("pin, after the refused resize", refused)
	checkPinned(t, "pin after the refused resize", topo, refused, 2, orig)

	step = time.Now()
	back := p.resize("2", stepLimit)
	r.phase("resize pin back to 2 after the refusal, condition cleared", time.Since(step))
	checkPinned(t, "pin asked for 2 again", topo, back, 2, orig)
	o2 := other.line(time.Minute, func(state) bool { return true })
	r.state("other, at the end", o2)
	if !o2.allowed.Equals(o.allowed) {
		t.Errorf("pod other's CPUs moved from %s to %s while pin was resized", o.allowed, o2.allowed)
	}
	for _, pd := range []*pod{other, p} {
		if n := pd.restarts(); n != 0 {
			t.Errorf("pod %s's container restarted %d times; the resizes must be in place", pd.name, n)
		}
	}
	r.phase("whole test", time.Since(begin))
}

// startNode starts the control plane on the host and the machine with its
// node, and waits for the Node to be Ready; r gets each phase's wall time
// (the machine's phases counted from qemu's start).
func startNode(t *testing.T, h host, ps *kubetest.Procs, r *report) (*kubetest.ControlPlane, *machine, topology) {
	t.Helper()
	dir := t.TempDir()
	step := time.Now()
	cp := kubetest.StartControlPlane(t, ps, h.kubeBin, dir)
	r.phase("control plane (etcd, kube-apiserver) ready on the host", time.Since(step))
	kc, err := kubeconfig(cp.Kubeconfig, cp.API)
	if err != nil {
		t.Fatal(err)
	}

	step = time.Now()
	initrd, err := nodeInitrd(h, dir, kc)
	if err != nil {
		t.Fatalf("building the initramfs: %v", err)
	}
	if st, err := os.Stat(initrd); err == nil {
		r.phase(fmt.Sprintf("initramfs built (%d MiB, images written by the test)", st.Size()>>20), time.Since(step))
	}

	m := boot(t, h, initrd, dir)
	r.phase("qemu start -> kernel "+h.kernelPkg+" at init", m.mark(t, "booted", bootLimit))
	topoLine, _ := m.waitLine(t, "@@TOPO", 0, bootLimit, func(l string) bool { return strings.HasPrefix(l, "@@TOPO ") })
	topo, err := parseTopo(topoLine)
	if err != nil {
		t.Fatal(err)
	}
	r.linef("machine: NUMA node 0 = %s, node 1 = %s, cores %v, reserved %s", topo.nodes[0], topo.nodes[1], topo.cores, reserved)
	r.phase("qemu start -> containerd up", m.mark(t, "containerd", bootLimit))
	r.phase("qemu start -> images imported", m.mark(t, "images", bootLimit))
	r.phase("qemu start -> corepin nri synchronised", m.mark(t, "nri", bootLimit))
	m.mark(t, "kubelet", bootLimit)
	step = time.Now()
	waitNodeReady(t, cp.Client, m)
	r.phase("kubelet started -> its Node Ready", time.Since(step))
	return cp, m, topo
}

// nodeInitrd writes the two images and packs the machine's initramfs:
// the binaries, the network modules, /init and the node's configuration
// (kc: the kubelet's kubeconfig).
func nodeInitrd(h host, dir, kc string) (string, error) {
	for _, img := range []struct {
		file, ref string
		cmd       []string
	}{{"pause.tar", pauseImage, []string{"/bin/sleep", "infinity"}}, {"busybox.tar", busyboxImage, []string{"/bin/sh"}}} {
		if err := imageArchive(filepath.Join(dir, img.file), h.busybox, img.ref, img.cmd); err != nil {
			return "", err
		}
	}
	bins := map[string]string{
		"/usr/local/bin/kubelet":                 filepath.Join(h.kubeBin, "kubelet"),
		"/usr/local/bin/containerd":              filepath.Join(h.ctdBin, "containerd"),
		"/usr/local/bin/containerd-shim-runc-v2": filepath.Join(h.ctdBin, "containerd-shim-runc-v2"),
		"/usr/local/bin/ctr":                     filepath.Join(h.ctdBin, "ctr"),
		"/usr/local/bin/corepin":                 h.corepin,
		"/usr/sbin/runc":                         h.runc,
		"/images/pause.tar":                      filepath.Join(dir, "pause.tar"),
		"/images/busybox.tar":                    filepath.Join(dir, "busybox.tar"),
	}
	for _, mod := range netModules {
		bins["/lib/modules/"+mod+".ko"] = filepath.Join(h.modules, mod+".ko")
	}
	return buildInitrd(dir, h.busybox, bins, map[string]string{
		"init":                         initScript,
		"etc/containerd.toml":          containerdConfig,
		"etc/cni/net.d/10-lo.conflist": cniConfig,
		"etc/kubelet.yaml":             kubeletConfig,
		"etc/kubeconfig":               kc,
		"etc/corepin.yaml":             corepinConfig,
		"etc/hosts":                    "127.0.0.1 localhost\n" + nodeIP + " " + nodeName + "\n",
		"etc/hostname":                 nodeName + "\n",
		"etc/passwd":                   "root:x:0:0:root:/root:/bin/sh\n",
		"etc/group":                    "root:x:0:\n",
		"etc/nsswitch.conf":            "hosts: files dns\n",
		"etc/machine-id":               "0123456789abcdef0123456789abcdef\n",
	})
}

// checkEnv asserts that the environment still says what the container
// was created with (an environment can not change; the files do).
func checkEnv(t *testing.T, what string, s state, orig cpuset.CPUSet) {
	t.Helper()
	if !s.envCPUSet.Equals(orig) || s.envThreads != orig.Size() {
		t.Errorf("%s: COREPIN_CPUSET=%s COREPIN_THREADS=%d, want what it was created with, %s and %d", what, s.envCPUSet, s.envThreads, orig, orig.Size())
	}
}

// topology is the machine's NUMA nodes and cores as its sysfs says.
type topology struct {
	nodes [2]cpuset.CPUSet
	cores []cpuset.CPUSet
}

// parseTopo reads "@@TOPO NODE0 NODE1 SIBLINGS..." (the machine's
// sysfs: each NUMA node's cpulist, each core's thread_siblings_list) and
// refuses any other shape than the one boot asks qemu for.
func parseTopo(line string) (topology, error) {
	f := strings.Fields(line)
	if len(f) < 3 || f[0] != "@@TOPO" {
		return topology{}, fmt.Errorf("bad topology line %q", line)
	}
	var topo topology
	for i, s := range f[1:] {
		c, err := cpuset.Parse(s)
		if err != nil {
			return topology{}, fmt.Errorf("topology line %q: %w", line, err)
		}
		if i < 2 {
			topo.nodes[i] = c
		} else {
			topo.cores = append(topo.cores, c)
		}
	}
	if topo.nodes[0].String() != "0-3" || topo.nodes[1].String() != "4-7" || len(topo.cores) != 4 {
		return topology{}, fmt.Errorf("the machine is not 2 NUMA nodes (0-3, 4-7) of 2 two-thread cores each: %q", line)
	}
	for i, c := range topo.cores {
		if c.Size() != 2 || (!c.IsSubsetOf(topo.nodes[0]) && !c.IsSubsetOf(topo.nodes[1])) || (i > 0 && c.Intersects(topo.cores[i-1])) {
			return topology{}, fmt.Errorf("the machine's core %s is not 2 threads of one NUMA node: %q", c, line)
		}
	}
	return topo, nil
}

// checkPinned asserts what the issue asks of a pinned container of n
// CPUs: its own affinity has n CPUs, includes the CPUs it was created on,
// lies on one NUMA node, in whole cores, outside the reserved CPUs; the
// files under /run/corepin say the same.
func checkPinned(t *testing.T, what string, topo topology, s state, n int, orig cpuset.CPUSet) {
	t.Helper()
	a := s.allowed
	if a.Size() != n {
		t.Errorf("%s: Cpus_allowed_list %s has %d CPUs, want %d", what, a, a.Size(), n)
	}
	if !orig.IsSubsetOf(a) {
		t.Errorf("%s: Cpus_allowed_list %s lost CPUs it was created on (%s)", what, a, orig)
	}
	if !a.IsSubsetOf(topo.nodes[0]) && !a.IsSubsetOf(topo.nodes[1]) {
		t.Errorf("%s: Cpus_allowed_list %s spans both NUMA nodes (%s, %s)", what, a, topo.nodes[0], topo.nodes[1])
	}
	for _, c := range topo.cores {
		if c.Intersects(a) && !c.IsSubsetOf(a) {
			t.Errorf("%s: Cpus_allowed_list %s holds part of core %s", what, a, c)
		}
	}
	if a.Intersects(cpuset.MustParse(reserved)) {
		t.Errorf("%s: Cpus_allowed_list %s includes reserved CPUs %s", what, a, reserved)
	}
	if !s.fileCPUSet.Equals(a) || s.fileThreads != n {
		t.Errorf("%s: /run/corepin says cpuset %s threads %d, want %s and %d", what, s.fileCPUSet, s.fileThreads, a, n)
	}
}

// waitNodeReady waits for the kubelet's Node to be Ready.
func waitNodeReady(t *testing.T, cs kubernetes.Interface, m *machine) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), readyLimit)
	defer cancel()
	var last *corev1.Node
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		select {
		case <-m.done:
			return false, fmt.Errorf("the machine stopped")
		default:
		}
		n, err := cs.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = n
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		var conds []string
		if last != nil {
			for _, c := range last.Status.Conditions {
				conds = append(conds, fmt.Sprintf("%s=%s (%s: %s)", c.Type, c.Status, c.Reason, c.Message))
			}
		}
		t.Fatalf("node %s not Ready within %v: %v; conditions: %v", nodeName, readyLimit, err, conds)
	}
}

// state is one line of the container's output.
type state struct {
	seq                            int
	at                             time.Time // the log line's time
	allowed, envCPUSet, fileCPUSet cpuset.CPUSet
	envThreads, fileThreads        int
	raw                            string
}

// parseState reads "@@LOG PATH TIME STREAM TAG seq=N allowed=... ..." of
// podName's container; ok is false for other lines.
func parseState(podName, line string) (state, bool) {
	rest, ok := strings.CutPrefix(line, "@@LOG ")
	if !ok {
		return state{}, false
	}
	path, rest, _ := strings.Cut(rest, " ")
	if !strings.Contains(path, "/"+namespace+"_"+podName+"_") {
		return state{}, false
	}
	var s state
	at, rest, _ := strings.Cut(rest, " ")
	var err error
	if s.at, err = time.Parse(time.RFC3339Nano, at); err != nil {
		return state{}, false
	}
	s.raw = rest
	if i := strings.Index(rest, "seq="); i >= 0 {
		s.raw = rest[i:]
	}
	sets := map[string]*cpuset.CPUSet{"allowed": &s.allowed, "env_cpuset": &s.envCPUSet, "file_cpuset": &s.fileCPUSet}
	ints := map[string]*int{"seq": &s.seq, "env_threads": &s.envThreads, "file_threads": &s.fileThreads}
	for _, f := range strings.Fields(s.raw) {
		k, v, _ := strings.Cut(f, "=")
		var err error
		if v == "" {
			continue // a file or variable missing: left empty, for the checks to name
		}
		if p, ok := sets[k]; ok {
			*p, err = cpuset.Parse(v)
		} else if p, ok := ints[k]; ok {
			*p, err = strconv.Atoi(v)
		}
		if err != nil {
			return state{}, false
		}
	}
	return s, s.seq > 0
}

// pod is a pinned pod on the machine's node.
type pod struct {
	name string
	t    *testing.T
	cs   kubernetes.Interface
	m    *machine
}

func (p *pod) create() {
	cpu := resource.MustParse("2")
	rl := corev1.ResourceList{corev1.ResourceCPU: cpu, corev1.ResourceMemory: resource.MustParse("32Mi")}
	_, err := p.cs.CoreV1().Pods(namespace).Create(context.Background(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: namespace},
		Spec: corev1.PodSpec{
			NodeName: nodeName, HostNetwork: true, RestartPolicy: corev1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: new(int64),
			Containers: []corev1.Container{{
				Name: p.name, Image: busyboxImage, ImagePullPolicy: corev1.PullNever,
				Command:   []string{"/bin/sh", "-c", podScript},
				Resources: corev1.ResourceRequirements{Requests: rl, Limits: rl},
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		p.t.Fatalf("creating pod %s: %v", p.name, err)
	}
}

// line waits for a line the container printed after this call that
// satisfies ok: logged (the kubelet's log time, the machine's clock being
// qemu's copy of the host's) after the call, and 2 beyond the newest line
// the port shows now (the machine copies each log's last line every
// second, so what the port shows may lag what the container printed).
func (p *pod) line(limit time.Duration, ok func(state) bool) state {
	p.t.Helper()
	since := time.Now()
	ls := p.m.lines()
	newest := 0
	for _, l := range ls {
		if s, isPod := parseState(p.name, l); isPod {
			newest = max(newest, s.seq)
		}
	}
	var got state
	p.m.waitLine(p.t, "a line of pod "+p.name+"'s container", max(0, len(ls)-1), limit, func(l string) bool {
		s, isPod := parseState(p.name, l)
		if isPod && s.seq > newest+1 && s.at.After(since) && ok(s) {
			got = s
			return true
		}
		return false
	})
	return got
}

// patchCPU asks the resize subresource for cpus CPUs (requests = limits),
// as `kubectl patch pod --subresource resize` does.
func (p *pod) patchCPU(cpus string) {
	p.t.Helper()
	patch := fmt.Sprintf(`{"spec":{"containers":[{"name":%q,"resources":{"requests":{"cpu":%q},"limits":{"cpu":%q}}}]}}`, p.name, cpus, cpus)
	if _, err := p.cs.CoreV1().Pods(namespace).Patch(context.Background(), p.name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "resize"); err != nil {
		p.t.Fatalf("resizing pod %s to %s CPUs: %v", p.name, cpus, err)
	}
}

// resize resizes the pod to cpus and waits for the kubelet to report it
// done (the container's status resources at the new size, no resize
// condition) and for a line printed after that.
func (p *pod) resize(cpus string, limit time.Duration) state {
	p.t.Helper()
	p.patchCPU(cpus)
	want := resource.MustParse(cpus)
	p.waitPod(fmt.Sprintf("resize to %s CPUs done", cpus), limit, func(pd *corev1.Pod) bool {
		if len(pd.Status.ContainerStatuses) != 1 || pd.Status.ContainerStatuses[0].Resources == nil {
			return false
		}
		got := pd.Status.ContainerStatuses[0].Resources.Limits[corev1.ResourceCPU]
		return got.Cmp(want) == 0 && resizeConditions(pd) == ""
	})
	return p.line(time.Minute, func(state) bool { return true })
}

// refusedResize asks for cpus and waits for the kubelet to show the
// resize as failed or infeasible on the pod; it returns a line printed
// after that and the refusal as the pod and its events show it.
func (p *pod) refusedResize(cpus string, limit time.Duration) (state, string) {
	p.t.Helper()
	p.patchCPU(cpus)
	last := p.waitPod(fmt.Sprintf("resize to %s CPUs refused", cpus), limit, func(pd *corev1.Pod) bool {
		for _, c := range pd.Status.Conditions {
			if (c.Type == corev1.PodResizeInProgress && c.Reason == corev1.PodReasonError) ||
				(c.Type == corev1.PodResizePending && c.Reason == corev1.PodReasonInfeasible) {
				return true
			}
		}
		return false
	})
	shown := describe(last) + "\n" + p.events()
	if !strings.Contains(shown, "corepin") {
		p.t.Errorf("the refusal does not name corepin's reason:\n%s", shown)
	}
	return p.line(time.Minute, func(state) bool { return true }), shown
}

// waitPod polls the pod every second until done says so and returns it;
// it fails the test after limit with the pod's resize state.
func (p *pod) waitPod(what string, limit time.Duration, done func(*corev1.Pod) bool) *corev1.Pod {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	var last *corev1.Pod
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		pd, err := p.cs.CoreV1().Pods(namespace).Get(ctx, p.name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = pd
		return done(pd), nil
	})
	if err != nil {
		p.t.Fatalf("pod %s: no %s within %v: %v; %s", p.name, what, limit, err, describe(last))
	}
	return last
}

// resizeConditions is the pod's PodResizePending and PodResizeInProgress
// conditions as kubectl get -o yaml shows them, "" for none.
func resizeConditions(pd *corev1.Pod) string {
	var b strings.Builder
	for _, c := range pd.Status.Conditions {
		if c.Type == corev1.PodResizePending || c.Type == corev1.PodResizeInProgress {
			fmt.Fprintf(&b, "- type: %s\n  status: %q\n  reason: %s\n  message: %q\n", c.Type, c.Status, c.Reason, c.Message)
		}
	}
	return b.String()
}

// describe is the pod's resize state: its conditions, the container's
// desired and actual CPU.
func describe(pd *corev1.Pod) string {
	if pd == nil {
		return "pod not read"
	}
	s := "conditions:\n" + resizeConditions(pd)
	for _, c := range pd.Spec.Containers {
		s += fmt.Sprintf("spec %s cpu %s\n", c.Name, c.Resources.Limits.Cpu())
	}
	for _, cs := range pd.Status.ContainerStatuses {
		if cs.Resources != nil {
			s += fmt.Sprintf("status %s cpu %s (allocated %s), restarts %d\n", cs.Name, cs.Resources.Limits.Cpu(), cs.AllocatedResources.Cpu(), cs.RestartCount)
		}
	}
	return s
}

// events lists the pod's events as kubectl describe's Events table.
func (p *pod) events() string {
	l, err := p.cs.CoreV1().Events(namespace).List(context.Background(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.name", p.name).String()})
	if err != nil {
		return "events: " + err.Error()
	}
	slices.SortStableFunc(l.Items, func(a, b corev1.Event) int { return a.LastTimestamp.Compare(b.LastTimestamp.Time) })
	s := "events (Type Reason From Message):\n"
	for _, e := range l.Items {
		s += fmt.Sprintf("  %s %s %s %s\n", e.Type, e.Reason, e.Source.Component, e.Message)
	}
	return s
}

func (p *pod) restarts() int32 {
	pd, err := p.cs.CoreV1().Pods(namespace).Get(context.Background(), p.name, metav1.GetOptions{})
	if err != nil || len(pd.Status.ContainerStatuses) != 1 {
		p.t.Errorf("reading pod %s: %v", p.name, err)
		return -1
	}
	return pd.Status.ContainerStatuses[0].RestartCount
}

// report is the run's record: each phase's wall time and the container's
// state at each step, logged and written to $COREPIN_E2E_REPORT.
type report struct {
	t     *testing.T
	lines []string
}

func (r *report) linef(format string, args ...any) {
	l := fmt.Sprintf(format, args...)
	r.t.Log(l)
	r.lines = append(r.lines, l)
}

func (r *report) phase(what string, d time.Duration) {
	r.linef("phase %-55s %6.1fs", what, d.Seconds())
}

func (r *report) state(what string, s state) {
	r.linef("%-30s Cpus_allowed_list=%s COREPIN_CPUSET=%s COREPIN_THREADS=%d /run/corepin/cpuset=%s /run/corepin/threads=%d",
		what+":", s.allowed, s.envCPUSet, s.envThreads, s.fileCPUSet, s.fileThreads)
}

func (r *report) write() {
	p := os.Getenv(envReport)
	if p == "" {
		return
	}
	status := "PASS"
	if r.t.Failed() {
		status = "FAIL"
	}
	body := fmt.Sprintf("e2e-vm-kubelet %s %s\n%s\n", status, time.Now().UTC().Format(time.RFC3339), strings.Join(r.lines, "\n"))
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		r.t.Errorf("writing the report: %v", err)
	}
}
