package e2ekubelet

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
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
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/test/kube/kubetest"
)

// schedIdle is SCHED_IDLE, the policy number /proc/<tid>/sched shows
// (sched(7)).
const schedIdle = 5

// qosReconcile is one period of the kubelet's QoS cgroup update
// (periodicQOSCgroupUpdateInterval in pkg/kubelet/cm
// qos_container_manager_linux.go: 1 minute), with a margin.
const qosReconcile = 70 * time.Second

// batchCmd saturates the node's two CPUs from two child processes of
// the container's shell: what runs in the container besides the process
// the runtime started.
const batchCmd = "yes >/dev/null & yes >/dev/null & wait"

// TestKubeletKeepsBEIdleParent runs checkBEIdle alone (TestKubeletRunsSweepPinned
// runs it after the sweep): a few minutes, for work on the BE routes.
func TestKubeletKeepsBEIdleParent(t *testing.T) {
	c, rt := startCluster(t, "kb-")
	if _, err := c.cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace %s: %v", namespace, err)
	}
	c.checkBEIdle(rt)
}

// checkBEIdle is issue 21 §1 on the real kubelet, and issue 27 §4 (what
// Koordinator's users hit: koordinator #2732, cpu.idle where the kubelet
// writes cpu.shares kept the kubelet from starting; #3129, NRI replies
// that name no container let the kubelet's resync revert cpusets): a
// BestEffort pod running a CPU-saturating batch runs under the plugin's
// idle parent (kubepods/corepin-be, cpu.idle 1: corepin nri
// --be-idle-parent) and the plugin's metric counts it on that route; a
// pinned pod runs beside it. The kubelet is restarted (its start rewrites
// the QoS cgroups and syncs every pod) and watched for a whole period of
// its QoS update and pod resync (1 minute each): it stays healthy, the BE
// pod stays under the idle parent, the pinned pod keeps its CPUs (kernel
// affinity and cpuset cgroup alike), and the kubelet's own besteffort
// group keeps its cpu.shares. Deleting the BE pod leaves no group of it
// under the idle parent.
func (c *cluster) checkBEIdle(rt *cri) {
	t := c.t
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	const name, pinned = "be-batch", "pinned-r"
	zero := int64(0)
	one, mem := resource.MustParse("1"), resource.MustParse("64Mi")
	res := corev1.ResourceList{corev1.ResourceCPU: one, corev1.ResourceMemory: mem}
	pods := []*corev1.Pod{{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, HostNetwork: true, TerminationGracePeriodSeconds: &zero,
			Containers: []corev1.Container{{Name: "main", Image: corepinImage, Command: []string{"/bin/sh", "-c", batchCmd}}}},
	}, {
		ObjectMeta: metav1.ObjectMeta{Name: pinned, Namespace: namespace, Labels: map[string]string{"koordinator.sh/qosClass": "LSE"}},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, HostNetwork: true, TerminationGracePeriodSeconds: &zero,
			Containers: []corev1.Container{{Name: "main", Image: corepinImage, Command: []string{"/bin/sleep", "3600"},
				Resources: corev1.ResourceRequirements{Requests: res, Limits: res}}}},
	}}
	var created *corev1.Pod
	for _, pod := range pods {
		p, err := c.cs.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("creating pod %s: %v", pod.Name, err)
		}
		if pod.Name == name {
			created = p
		}
	}
	deleted := false
	defer func() {
		if err := c.cs.CoreV1().Pods(namespace).Delete(context.Background(), pinned, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			t.Errorf("deleting pod %s: %v", pinned, err)
		}
		if deleted {
			return
		}
		if err := c.cs.CoreV1().Pods(namespace).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			t.Errorf("deleting pod %s: %v", name, err)
		}
	}()
	pid := rt.waitPod(ctx, t, name)
	tasks := waitTasks(ctx, t, pid, 3)
	if why := underIdleParent(pid); why != "" {
		t.Fatalf("BE pod %s right after start: %s", name, why)
	}
	m := kubetest.Scrape(t, "http://"+c.metrics+"/metrics")
	if got := m[`corepin_nri_be_protection{route="idle-parent"}`]; got != 1 {
		t.Errorf("corepin_nri_be_protection: %v BE containers on the idle-parent route, want 1 (%v)", got, routes(m))
	}
	c.note("BE pod %s: all %d tasks (the container's shell and its two busy children) in %s, cpu.idle 1 there; plugin metric %v",
		name, len(tasks), filepath.Dir(filepath.Dir(cgroupDir(pid, "cpu"))), routes(m))
	ppid := rt.waitPod(ctx, t, pinned)
	was, ok := liveOfPid(ppid)
	if set, err := cpuset.Parse(was.CPUs); !ok || err != nil || set.Size() != 1 || was.Affinity != was.CPUs {
		t.Fatalf("pinned pod %s runs with affinity %q and cpuset.cpus %q, want the same one CPU in both", pinned, was.Affinity, was.CPUs)
	}

	c.ps.StopNamed("kubelet")
	restarted := time.Now()
	c.launchKubelet()
	if now := rt.waitPod(ctx, t, name); now != pid {
		t.Errorf("BE pod %s runs as pid %d after the kubelet restart, was %d: the test looked at another container", name, now, pid)
	}
	if now := rt.waitPod(ctx, t, pinned); now != ppid {
		t.Errorf("pinned pod %s runs as pid %d after the kubelet restart, was %d: the test looked at another container", pinned, now, ppid)
	}
	// The observation is the test: a whole period of the kubelet's QoS
	// update and pod resync from its start, sampled every second.
	samples := 0
	for watch := time.Now(); time.Since(watch) < qosReconcile; samples++ {
		if why := underIdleParent(pid); why != "" {
			t.Fatalf("BE pod %s %s after the kubelet restart: %s", name, fmtDur(time.Since(restarted)), why)
		}
		if now, ok := liveOfPid(ppid); !ok || now != was {
			t.Fatalf("pinned pod %s %s after the kubelet restart: affinity %q cpuset.cpus %q, was %q and %q: reverted", pinned,
				fmtDur(time.Since(restarted)), now.Affinity, now.CPUs, was.Affinity, was.CPUs)
		}
		if err := healthy(c.kubeletHealthz); err != nil {
			t.Fatalf("the kubelet %s after its restart: healthz: %v", fmtDur(time.Since(restarted)), err)
		}
		time.Sleep(time.Second)
	}
	shares := readTrim(filepath.Join("/sys/fs/cgroup/cpu", c.cgroupRoot, "kubepods/besteffort/cpu.shares"))
	if shares != "2" {
		t.Errorf("the kubelet's besteffort cpu.shares = %q, want its own 2 (corepin must leave its QoS cgroups alone)", shares)
	}
	c.note("kubelet restarted with BE pod %s and pinned pod %s running, then watched %s (%d samples, one QoS update and pod resync period): healthz ok, the BE pod under the idle parent throughout, the pinned pod on %s (affinity and cpuset) throughout, besteffort cpu.shares %s as the kubelet writes it",
		name, pinned, fmtDur(time.Since(restarted)), samples, was.CPUs, shares)

	group := "pod" + string(created.UID)
	if err := c.cs.CoreV1().Pods(namespace).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatalf("deleting pod %s: %v", name, err)
	}
	deleted = true
	gone := time.Now()
	for {
		left := c.idlePodGroups(group)
		if len(left) == 0 {
			c.note("BE pod %s deleted: its group under the idle parent gone after %s", name, fmtDur(time.Since(gone)))
			return
		}
		if time.Since(gone) > 90*time.Second {
			t.Errorf("BE pod %s deleted %s ago: its groups %v are still under the idle parent", name, fmtDur(time.Since(gone)), left)
			return
		}
		time.Sleep(time.Second)
	}
}

// healthy reads url and says why it did not answer 200 (nil when it did).
func healthy(url string) error {
	cl := http.Client{Timeout: 10 * time.Second}
	rsp, err := cl.Get(url)
	if err != nil {
		return err
	}
	defer rsp.Body.Close()
	if rsp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(rsp.Body, 512))
		return fmt.Errorf("%s: %s", rsp.Status, b)
	}
	return nil
}

// underIdleParent says why process pid is not in a container group under
// the plugin's idle parent with cpu.idle 1 ("" when it is).
func underIdleParent(pid int) string {
	dir := cgroupDir(pid, "cpu")
	if dir == "" {
		return fmt.Sprintf("process %d has no cpu cgroup", pid)
	}
	parent := filepath.Dir(filepath.Dir(dir))
	if filepath.Base(parent) != "corepin-be" || filepath.Base(filepath.Dir(parent)) != "kubepods" {
		return fmt.Sprintf("process %d is in %s, not under kubepods/corepin-be", pid, dir)
	}
	if idle := readTrim(filepath.Join(parent, "cpu.idle")); idle != "1" {
		return fmt.Sprintf("the idle parent %s has cpu.idle %q, want 1", parent, idle)
	}
	return ""
}

// idlePodGroups lists the directories of pod group g (pod<uid>) under
// the idle parent in every cgroup hierarchy.
func (c *cluster) idlePodGroups(g string) []string {
	var out []string
	for _, ctrl := range cgroupControllers(c.t) {
		d := filepath.Join("/sys/fs/cgroup", ctrl, c.cgroupRoot, "kubepods/corepin-be", g)
		if _, err := os.Stat(d); err == nil {
			out = append(out, d)
		}
	}
	return out
}

// routes is the plugin's corepin_nri_be_protection series, for messages.
func routes(m map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		if r, ok := strings.CutPrefix(k, "corepin_nri_be_protection"); ok {
			out[r] = v
		}
	}
	return out
}

// waitPod waits for the running container of pod name and returns its
// process (the runtime's view, through the CRI).
func (c *cri) waitPod(ctx context.Context, t interface{ Fatalf(string, ...any) }, name string) int {
	for {
		l, err := c.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
			State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
			LabelSelector: map[string]string{"io.kubernetes.pod.name": name, "io.kubernetes.pod.namespace": namespace}}})
		if err == nil && len(l.Containers) == 1 {
			st, err := c.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: l.Containers[0].Id, Verbose: true})
			var info struct {
				Pid int `json:"pid"`
			}
			if err == nil && json.Unmarshal([]byte(st.Info["info"]), &info) == nil && info.Pid > 0 {
				return info.Pid
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("pod %s: no running container: %v", name, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// waitNoContainer waits until the runtime lists no container, in any
// state, of pod name (the plugin has seen each one removed).
func (c *cri) waitNoContainer(ctx context.Context, t interface{ Fatalf(string, ...any) }, name string) {
	for {
		l, err := c.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
			LabelSelector: map[string]string{"io.kubernetes.pod.name": name, "io.kubernetes.pod.namespace": namespace}}})
		if err == nil && len(l.Containers) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("pod %s: its containers are still in the runtime: %v", name, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// waitTasks waits until the cpu cgroup of process pid holds at least n
// tasks and returns them.
func waitTasks(ctx context.Context, t interface{ Fatalf(string, ...any) }, pid, n int) []int {
	var tasks []int
	for {
		tasks = cgroupTasks(pid)
		if len(tasks) >= n {
			return tasks
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the cgroup of process %d holds tasks %v, want at least %d", pid, tasks, n)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// cgroupDir is the directory of process pid's cgroup in the v1
// hierarchy of controller ctrl, "" when it has none.
func cgroupDir(pid int, ctrl string) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 && slices.Contains(strings.Split(parts[1], ","), ctrl) {
			return filepath.Join("/sys/fs/cgroup", ctrl, parts[2])
		}
	}
	return ""
}

// cgroupTasks lists the tasks of the cpu cgroup (v1) of process pid.
func cgroupTasks(pid int) []int {
	dir := cgroupDir(pid, "cpu")
	if dir == "" {
		return nil
	}
	raw, err := os.ReadFile(filepath.Join(dir, "tasks"))
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(raw)) {
		if id, err := strconv.Atoi(f); err == nil {
			out = append(out, id)
		}
	}
	return out
}

// notIdle returns the tasks whose policy is not SCHED_IDLE, each with
// the policy it has (tasks that ended meanwhile are left out).
func notIdle(tasks []int) []string {
	var out []string
	for _, tid := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/sched", tid))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			k, v, ok := strings.Cut(line, ":")
			if !ok || strings.TrimSpace(k) != "policy" {
				continue
			}
			if p, err := strconv.Atoi(strings.TrimSpace(v)); err != nil || p != schedIdle {
				out = append(out, fmt.Sprintf("%d (policy %s)", tid, strings.TrimSpace(v)))
			}
		}
	}
	return out
}

// readTrim is a file's content without surrounding space, or the error.
func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return strings.TrimSpace(string(b))
}
