package e2ekubelet

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

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

// checkBEIdle is issue 21 §1 on the real kubelet: a BestEffort pod running
// a CPU-saturating batch runs under the plugin's idle parent
// (kubepods/corepin-be, cpu.idle 1: corepin nri --be-idle-parent), the
// plugin's metric counts it on that route, and it is still there, the
// parent still idle, after one of the kubelet's QoS reconciles and after a
// kubelet restart (whose start rewrites the QoS cgroups at once); the
// kubelet's own besteffort group keeps its cpu.shares. Deleting the pod
// leaves no group of it under the idle parent.
func (c *cluster) checkBEIdle(rt *cri) {
	t := c.t
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	const name = "be-batch"
	zero := int64(0)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, HostNetwork: true, TerminationGracePeriodSeconds: &zero,
			Containers: []corev1.Container{{Name: "main", Image: corepinImage, Command: []string{"/bin/sh", "-c", batchCmd}}}},
	}
	created, err := c.cs.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating pod %s: %v", name, err)
	}
	deleted := false
	defer func() {
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

	begin := time.Now()
	time.Sleep(qosReconcile)
	if why := underIdleParent(pid); why != "" {
		t.Errorf("BE pod %s after one QoS reconcile period (%s): %s", name, fmtDur(time.Since(begin)), why)
	}
	shares := readTrim(filepath.Join("/sys/fs/cgroup/cpu", c.cgroupRoot, "kubepods/besteffort/cpu.shares"))
	if shares != "2" {
		t.Errorf("the kubelet's besteffort cpu.shares = %q, want its own 2 (corepin must leave its QoS cgroups alone)", shares)
	}

	c.ps.StopNamed("kubelet")
	c.launchKubelet()
	if now := rt.waitPod(ctx, t, name); now != pid {
		t.Errorf("BE pod %s runs as pid %d after the kubelet restart, was %d: the test looked at another container", name, now, pid)
	}
	time.Sleep(5 * time.Second) // the kubelet's start-up QoS update and pod sync
	if why := underIdleParent(pid); why != "" {
		t.Errorf("BE pod %s after a kubelet restart: %s", name, why)
	}
	c.note("BE pod %s: still under the idle parent after %s (one kubelet QoS reconcile, besteffort cpu.shares %s as the kubelet writes it) and after a kubelet restart",
		name, fmtDur(time.Since(begin)), shares)

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
