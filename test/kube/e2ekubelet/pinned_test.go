package e2ekubelet

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/corepin/corepin/cpuset"
)

// checkPinnedTogether requires what the sweep only logs (issue 17 §6):
// two pinned pods running at the same time on CPUs of their own. The
// sweep's pinned pods run 0.4 s each and, on a busy machine, may start
// one after the other; these two sleep until the test deletes them, so
// both run when the test looks, however slow their start. The kernel's
// view of each (affinity and cpuset cgroup, through the CRI) must be one
// whole CPU, the same in both, and the two sets disjoint.
func (c *cluster) checkPinnedTogether(rt *cri) {
	t := c.t
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	names := []string{"pinned-a", "pinned-b"}
	zero := int64(0)
	one, mem := resource.MustParse("1"), resource.MustParse("64Mi")
	res := corev1.ResourceList{corev1.ResourceCPU: one, corev1.ResourceMemory: mem}
	for _, name := range names {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{"koordinator.sh/qosClass": "LSE"}},
			Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, HostNetwork: true, TerminationGracePeriodSeconds: &zero,
				Containers: []corev1.Container{{Name: "main", Image: corepinImage, Command: []string{"/bin/sleep", "3600"},
					Resources: corev1.ResourceRequirements{Requests: res, Limits: res}}}},
		}
		if _, err := c.cs.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating pod %s: %v", name, err)
		}
	}
	defer func() {
		for _, name := range names {
			if err := c.cs.CoreV1().Pods(namespace).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
				t.Errorf("deleting pod %s: %v", name, err)
			}
		}
	}()
	begin := time.Now()
	var lives map[string]live
	for {
		lives = map[string]live{}
		l, err := rt.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
			State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}})
		if err == nil {
			for _, ctr := range l.Containers {
				pod := ctr.Labels["io.kubernetes.pod.name"]
				if pod != names[0] && pod != names[1] || ctr.Labels["io.kubernetes.pod.namespace"] != namespace {
					continue
				}
				if v, ok := rt.liveOf(ctx, ctr.Id); ok {
					lives[pod] = v
				}
			}
		}
		if len(lives) == len(names) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the two pinned pods were not running at the same time within 5 minutes (running: %v)", lives)
		case <-time.After(200 * time.Millisecond):
		}
	}
	var sets []cpuset.CPUSet
	for _, name := range names {
		v := lives[name]
		aff, err1 := cpuset.Parse(v.Affinity)
		cg, err2 := cpuset.Parse(v.CPUs)
		if err1 != nil || err2 != nil || !aff.Equals(cg) || cg.Size() != 1 {
			t.Errorf("pinned pod %s runs with affinity %q and cpuset.cpus %q, want the same one CPU in both", name, v.Affinity, v.CPUs)
		}
		sets = append(sets, cg)
	}
	if sets[0].Intersects(sets[1]) {
		t.Errorf("pinned pods %s (%s) and %s (%s) run at the same time on shared CPUs", names[0], sets[0], names[1], sets[1])
	}
	c.note("two pinned pods running at once (%s after creation): %s on %s, %s on %s, disjoint", fmtDur(time.Since(begin)), names[0], sets[0], names[1], sets[1])
}
