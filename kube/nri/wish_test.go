package nri

import (
	"errors"
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/google/go-cmp/cmp"

	"github.com/corepin/corepin/agent"
)

func TestParseResourceSpec(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    ResourceSpec
		wantErr string
	}{
		{name: "bind and exclusive", in: `{"preferredCPUBindPolicy":"FullPCPUs","preferredCPUExclusivePolicy":"PCPULevel"}`,
			want: ResourceSpec{PreferredCPUBindPolicy: "FullPCPUs", PreferredCPUExclusivePolicy: "PCPULevel"}},
		{name: "required bind", in: ` {"requiredCPUBindPolicy": "SpreadByPCPUs"} `, want: ResourceSpec{RequiredCPUBindPolicy: "SpreadByPCPUs"}},
		{name: "empty object", in: `{}`},
		{name: "not an object", in: `["FullPCPUs"]`, wantErr: "want one JSON object"},
		{name: "empty", in: ``, wantErr: "want one JSON object"},
		{name: "unknown key", in: `{"preferredCPUBindPolicy":"FullPCPUs","numa":"x"}`, wantErr: `unknown key "numa"`},
		{name: "key in another case", in: `{"PreferredCPUBindPolicy":"FullPCPUs"}`, wantErr: "unknown key"},
		{name: "key twice", in: `{"preferredCPUBindPolicy":"FullPCPUs","preferredCPUBindPolicy":"Default"}`, wantErr: "given twice"},
		{name: "not a string", in: `{"preferredCPUBindPolicy":1}`, wantErr: "must be a string"},
		{name: "null", in: `{"preferredCPUBindPolicy":null}`, wantErr: "must be a string"},
		{name: "trailing data", in: `{} {}`, wantErr: "data after the object"},
		{name: "unknown bind", in: `{"preferredCPUBindPolicy":"Whole"}`, wantErr: "not one of Default, FullPCPUs, SpreadByPCPUs"},
		{name: "constrained burst", in: `{"preferredCPUBindPolicy":"ConstrainedBurst"}`, wantErr: "not supported"},
		{name: "disagreeing binds", in: `{"requiredCPUBindPolicy":"FullPCPUs","preferredCPUBindPolicy":"SpreadByPCPUs"}`, wantErr: "disagree"},
		{name: "unknown exclusive", in: `{"preferredCPUExclusivePolicy":"Socket"}`, wantErr: "not one of None, PCPULevel, NUMANodeLevel"},
		{name: "too large", in: `{"preferredCPUBindPolicy":"` + strings.Repeat("x", MaxResourceSpec) + `"}`, wantErr: "at most 4096"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseResourceSpec(tc.in)
			if tc.wantErr != "" {
				if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseResourceSpec(%.60q) error = %v, want ErrInvalid containing %q", tc.in, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseResourceSpec(%q): %v", tc.in, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseResourceSpec(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

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
		{name: "LSE without cpus", labels: map[string]string{LabelQoSClass: "LSE"}, ctr: container(2, 0), wantErr: "needs whole CPUs"},
		{name: "SYSTEM label", labels: map[string]string{LabelQoSClass: "SYSTEM"}, ctr: container(1024, 100000), wantErr: "reserved CPUs"},
		{name: "unknown label", labels: map[string]string{LabelQoSClass: "gold"}, ctr: container(1024, 100000), wantErr: "not one of LSE, LSR, LS, BE"},
		{name: "bad annotation", annotations: map[string]string{AnnotationResourceSpec: `{`}, ctr: container(1024, 100000), wantErr: AnnotationResourceSpec},
		{name: "huge quota is refused", ctr: container(1<<62, 1<<62), wantErr: "more than the 65536 CPUs"},
		// Found by FuzzSpecOf: a request beyond alloc's bound was passed on.
		{name: "period beyond the kernel's range", ctr: &api.Container{Id: "c", Linux: &api.LinuxContainer{Resources: &api.LinuxResources{
			Cpu: &api.LinuxCPU{Shares: api.UInt64(uint64(1 << 63)), Quota: api.Int64(-8), Period: api.UInt64(uint64(1<<63 + 181))}}}},
			wantErr: "more than the 65536 CPUs"},
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
