package podreq

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/kube/podmeta"
)

// pod is a pod of one container requesting and limiting cpu (and 1Gi of
// memory, so that equal cpu request and limit make it Guaranteed).
func pod(cpuReq, cpuLim string, annotations map[string]string) *corev1.Pod {
	mem := resource.MustParse("1Gi")
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", Annotations: annotations},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpuReq), corev1.ResourceMemory: mem},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpuLim), corev1.ResourceMemory: mem}}}}}}
}

// TestOfIsolatedCPUs: a pod's corepin.io/isolated-cpus reaches the request
// the scheduler judges as it reaches the node's (podmeta.Read): taken by a
// Guaranteed pod of whole CPUs, ignored as prefer and refused as require
// for a shared pod, refused when misspelt.
func TestOfIsolatedCPUs(t *testing.T) {
	ann := func(v string) map[string]string { return map[string]string{podmeta.AnnotationIsolatedCPUs: v} }
	for _, tc := range []struct {
		name    string
		pod     *corev1.Pod
		want    alloc.Request
		wantErr string
	}{
		{name: "guaranteed requires", pod: pod("2", "2", ann("require")),
			want: alloc.Request{ID: "ns/p", CPUs: 2, QoS: alloc.LSE, Isolated: alloc.IsolatedRequire}},
		{name: "guaranteed prefers", pod: pod("4", "4", ann("prefer")),
			want: alloc.Request{ID: "ns/p", CPUs: 4, QoS: alloc.LSE, Isolated: alloc.IsolatedPrefer}},
		{name: "guaranteed without", pod: pod("2", "2", nil), want: alloc.Request{ID: "ns/p", CPUs: 2, QoS: alloc.LSE}},
		{name: "burstable prefer ignored", pod: pod("1", "2", ann("prefer")), want: alloc.Request{ID: "ns/p", MilliCPUs: 2000, QoS: alloc.LS}},
		{name: "burstable require refused", pod: pod("1", "2", ann("require")), wantErr: "pod ns/p: invalid pod metadata: annotation corepin.io/isolated-cpus require is for LSE and LSR pods"},
		{name: "misspelt", pod: pod("2", "2", ann("required")), wantErr: `annotation corepin.io/isolated-cpus "required" is not one of prefer, require`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Of(tc.pod)
			if tc.wantErr != "" {
				if !errors.Is(err, podmeta.ErrInvalid) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Of error = %v, want ErrInvalid containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Of: %v", err)
			}
			if got.ID != tc.want.ID || got.CPUs != tc.want.CPUs || got.MilliCPUs != tc.want.MilliCPUs || got.QoS != tc.want.QoS || got.Isolated != tc.want.Isolated {
				t.Errorf("Of = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestOfSizesSharedPodsByLimit: a shared-pool pod is judged at the size
// its node's plugin admits it (nri.SpecOf: each container's CPU limit,
// else its request), not at its request: the scheduler counting requests
// bound a burst of request-1 limit-2 pods that the node then refused
// ("LS pool: 2000 millicpus requested", e2e-deploy).
func TestOfSizesSharedPodsByLimit(t *testing.T) {
	ctr := func(req, lim string) corev1.Container {
		c := corev1.Container{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{}, Limits: corev1.ResourceList{}}}
		if req != "" {
			c.Resources.Requests[corev1.ResourceCPU] = resource.MustParse(req)
		}
		if lim != "" {
			c.Resources.Limits[corev1.ResourceCPU] = resource.MustParse(lim)
		}
		return c
	}
	for _, tc := range []struct {
		name       string
		ctrs, init []corev1.Container
		want       int
	}{
		{name: "request and limit", ctrs: []corev1.Container{ctr("1", "2")}, want: 2000},
		{name: "request only", ctrs: []corev1.Container{ctr("1500m", "")}, want: 1500},
		{name: "limit only", ctrs: []corev1.Container{ctr("", "750m")}, want: 750},
		{name: "summed", ctrs: []corev1.Container{ctr("1", "2"), ctr("500m", "")}, want: 2500},
		{name: "init larger", ctrs: []corev1.Container{ctr("1", "2")}, init: []corev1.Container{ctr("1", "3")}, want: 3000},
	} {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}, Spec: corev1.PodSpec{Containers: tc.ctrs, InitContainers: tc.init}}
		got, err := Of(p)
		if err != nil || got.MilliCPUs != tc.want || got.QoS != alloc.LS {
			t.Errorf("%s: Of = %+v, %v; want LS of %d millicpus", tc.name, got, err, tc.want)
		}
	}
}

// TestOfExclusiveNeedsALimit (issue 27 §3.3): a pod labelled LSE or LSR
// whose containers have no CPU limit is refused for the scheduler as its
// node's plugin refuses it, never placed on exclusive CPUs by its request.
func TestOfExclusiveNeedsALimit(t *testing.T) {
	labelled := func(class string, p *corev1.Pod) *corev1.Pod {
		p.Labels = map[string]string{podmeta.LabelQoSClass: class}
		return p
	}
	noLimit := pod("2", "2", nil)
	delete(noLimit.Spec.Containers[0].Resources.Limits, corev1.ResourceCPU)
	sidecar := pod("2", "2", nil)
	sidecar.Spec.Containers = append(sidecar.Spec.Containers, corev1.Container{Name: "log", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}})
	for _, tc := range []struct {
		name    string
		pod     *corev1.Pod
		wantErr string
	}{
		{name: "LSE without a limit", pod: labelled("LSE", noLimit), wantErr: "pod ns/p: invalid pod metadata: class LSE (label koordinator.sh/qosClass) needs exclusive whole CPUs sized by a CPU limit"},
		{name: "LSR with a sidecar without a limit", pod: labelled("LSR", sidecar), wantErr: "class LSR (label koordinator.sh/qosClass) needs exclusive whole CPUs sized by a CPU limit"},
		{name: "LSE with limits", pod: labelled("LSE", pod("2", "2", nil))},
		{name: "LS without a limit", pod: labelled("LS", pod("2", "2", nil))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Of(tc.pod)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Of: %v", err)
				}
				return
			}
			if !errors.Is(err, podmeta.ErrInvalid) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Of error = %v, want ErrInvalid containing %q", err, tc.wantErr)
			}
		})
	}
}
