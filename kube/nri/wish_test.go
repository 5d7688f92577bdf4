package nri

import (
	"errors"
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/google/go-cmp/cmp"

	"github.com/corepin/corepin/agent"
)

// container is a container with CPU resources as the kubelet writes them.
func container(shares uint64, quota int64) *api.Container {
	cpu := &api.LinuxCPU{Shares: api.UInt64(shares)}
	if quota != 0 {
		cpu.Quota, cpu.Period = api.Int64(quota), api.UInt64(uint64(100000))
	}
	return &api.Container{Id: "c", Linux: &api.LinuxContainer{Resources: &api.LinuxResources{Cpu: cpu}}}
}

func TestSpecOf(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	tests := []struct {
		name        string
		labels      map[string]string
		annotations map[string]string
		ctr         *api.Container
		want        agent.Spec
		wantErr     string
	}{
		{name: "guaranteed whole cpus is LSE", ctr: container(2048, 200000), want: agent.Spec{QoS: "LSE", CPUs: f(2)}},
		{name: "guaranteed fraction is LS", ctr: container(1536, 150000), want: agent.Spec{QoS: "LS", CPUs: f(1.5)}},
		{name: "burstable with limit is LS at the limit", ctr: container(512, 200000), want: agent.Spec{QoS: "LS", CPUs: f(2)}},
		{name: "burstable without limit is LS at the request", ctr: container(256, 0), want: agent.Spec{QoS: "LS", CPUs: f(0.25)}},
		// Found by FuzzSpecOf once the agent refused LS quotas under 0.01
		// CPU: a 5m sidecar's container must still be admitted.
		{name: "burstable under the shortest quota is LS at the minimum", ctr: container(5, 0), want: agent.Spec{QoS: "LS", CPUs: f(0.01)}},
		{name: "limit under the shortest quota is LS at the minimum", ctr: container(5, 500), want: agent.Spec{QoS: "LS", CPUs: f(0.01)}},
		{name: "best effort is BE", ctr: container(2, 0), want: agent.Spec{QoS: "BE", CPUs: f(0.001)}},
		{name: "no cpu resources is BE", ctr: &api.Container{Id: "c"}, want: agent.Spec{QoS: "BE", CPUs: f(0.001)}},
		{name: "label LSR with resource spec", labels: map[string]string{LabelQoSClass: "LSR"},
			annotations: map[string]string{AnnotationResourceSpec: `{"preferredCPUBindPolicy":"SpreadByPCPUs","preferredCPUExclusivePolicy":"NUMANodeLevel"}`},
			ctr:         container(4096, 400000), want: agent.Spec{QoS: "LSR", CPUs: f(4), Bind: "SpreadByPCPUs", Exclusive: "NUMANodeLevel"}},
		{name: "label BE on a burstable container", labels: map[string]string{LabelQoSClass: "BE"}, ctr: container(512, 0),
			want: agent.Spec{QoS: "BE", CPUs: f(0.5)}},
		{name: "default bind is no bind", labels: map[string]string{LabelQoSClass: "LSE"},
			annotations: map[string]string{AnnotationResourceSpec: `{"preferredCPUBindPolicy":"Default"}`},
			ctr:         container(1024, 100000), want: agent.Spec{QoS: "LSE", CPUs: f(1)}},
		{name: "LSE with a fraction", labels: map[string]string{LabelQoSClass: "LSE"}, ctr: container(1536, 150000), wantErr: "needs whole CPUs"},
		{name: "LSE without cpus", labels: map[string]string{LabelQoSClass: "LSE"}, ctr: container(2, 0), wantErr: "needs exclusive whole CPUs sized by a CPU limit"},
		{name: "SYSTEM label", labels: map[string]string{LabelQoSClass: "SYSTEM"}, ctr: container(1024, 100000), wantErr: "reserved CPUs"},
		{name: "unknown label", labels: map[string]string{LabelQoSClass: "gold"}, ctr: container(1024, 100000), wantErr: "not one of LSE, LSR, LS, BE"},
		{name: "bad annotation", annotations: map[string]string{AnnotationResourceSpec: `{`}, ctr: container(1024, 100000), wantErr: AnnotationResourceSpec},
		{name: "numa policy annotation", labels: map[string]string{LabelQoSClass: "LSE"}, annotations: map[string]string{AnnotationNUMAPolicy: "single-numa-node"},
			ctr: container(2048, 200000), want: agent.Spec{QoS: "LSE", CPUs: f(2), TopologyPolicy: "single-numa-node"}},
		{name: "bad numa policy", annotations: map[string]string{AnnotationNUMAPolicy: "numa"}, ctr: container(2048, 200000),
			wantErr: "annotation corepin.io/numa-policy \"numa\" is not one of none, best-effort, restricted, single-numa-node"},
		{name: "isolated CPUs required", annotations: map[string]string{AnnotationIsolatedCPUs: "require"}, ctr: container(2048, 200000),
			want: agent.Spec{QoS: "LSE", CPUs: f(2), Isolated: "require"}},
		{name: "isolated CPUs preferred by a shared container: ignored", annotations: map[string]string{AnnotationIsolatedCPUs: "prefer"},
			ctr: container(1536, 150000), want: agent.Spec{QoS: "LS", CPUs: f(1.5)}},
		{name: "isolated CPUs required by a shared container", annotations: map[string]string{AnnotationIsolatedCPUs: "require"},
			ctr: container(2, 0), wantErr: "require is for LSE and LSR pods (exclusive, whole CPUs); this one is BE"},
		{name: "huge quota is refused", ctr: container(1<<62, 1<<62), wantErr: "more than the 65536 CPUs"},
		// Found by FuzzSpecOf: a request beyond alloc's bound was passed on.
		// (Its quota was -8, refused on its own since issue 27 §3.4; -1, the
		// kernel's "no limit", keeps the case about the size.)
		{name: "period beyond the kernel's range", ctr: &api.Container{Id: "c", Linux: &api.LinuxContainer{Resources: &api.LinuxResources{
			Cpu: &api.LinuxCPU{Shares: api.UInt64(uint64(1 << 63)), Quota: api.Int64(-1), Period: api.UInt64(uint64(1<<63 + 181))}}}},
			wantErr: "more than the 65536 CPUs"},
		// Issue 27 §3.3: exclusive CPUs were given by the request alone.
		{name: "LSE without a CPU limit", labels: map[string]string{LabelQoSClass: "LSE"}, ctr: container(2048, 0),
			wantErr: "class LSE (label koordinator.sh/qosClass) needs exclusive whole CPUs sized by a CPU limit: set limits.cpu = requests.cpu to an integer, or label the pod LS to share the pool; it asks for 2 CPU with no CPU limit"},
		{name: "LSR without a CPU limit", labels: map[string]string{LabelQoSClass: "LSR"}, ctr: container(4096, -1), wantErr: "class LSR (label koordinator.sh/qosClass) needs exclusive whole CPUs sized by a CPU limit"},
		{name: "LSE with a limit above its request", labels: map[string]string{LabelQoSClass: "LSE"}, ctr: container(1024, 200000), want: agent.Spec{QoS: "LSE", CPUs: f(2)}},
		// Issue 27 §3.4: what the kernel would not take was read as no limit.
		{name: "LSE with quota -5", labels: map[string]string{LabelQoSClass: "LSE"}, ctr: container(2048, -5),
			wantErr: "cfs quota -5: the kernel takes -1 (no limit) or a positive number of microseconds per period"},
		{name: "quota -1 is no limit", ctr: container(1024, -1), want: agent.Spec{QoS: "LS", CPUs: f(1)}},
		{name: "shares 0", ctr: container(0, 0), wantErr: "cpu shares 0: the kernel takes 2 or more (the kubelet writes 2 for a container that asks for no CPU)"},
		{name: "shares 1", labels: map[string]string{LabelQoSClass: "LSE"}, ctr: container(1, 100000), wantErr: "cpu shares 1: the kernel takes 2 or more"},
		{name: "no shares at all is no request", ctr: &api.Container{Id: "c", Linux: &api.LinuxContainer{Resources: &api.LinuxResources{Cpu: &api.LinuxCPU{}}}},
			want: agent.Spec{QoS: "BE", CPUs: f(0.001)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := &api.PodSandbox{Labels: tc.labels, Annotations: tc.annotations}
			got, _, err := SpecOf(pod, tc.ctr)
			if tc.wantErr != "" {
				if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("SpecOf error = %v, want ErrInvalid containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("SpecOf: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("SpecOf (-want +got):\n%s", diff)
			}
		})
	}
}
