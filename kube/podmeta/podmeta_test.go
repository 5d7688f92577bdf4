package podmeta

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corepin/corepin/alloc"
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
		{name: "required and preferred agree", in: `{"requiredCPUBindPolicy":"FullPCPUs","preferredCPUBindPolicy":"FullPCPUs"}`,
			want: ResourceSpec{RequiredCPUBindPolicy: "FullPCPUs", PreferredCPUBindPolicy: "FullPCPUs"}},
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
		{name: "constrained burst", in: `{"preferredCPUBindPolicy":"ConstrainedBurst"}`, wantErr: "ConstrainedBurst is not supported by corepin"},
		{name: "disagreeing binds", in: `{"requiredCPUBindPolicy":"FullPCPUs","preferredCPUBindPolicy":"SpreadByPCPUs"}`, wantErr: "disagree"},
		{name: "unknown exclusive", in: `{"preferredCPUExclusivePolicy":"Socket"}`, wantErr: "not one of None, PCPULevel, NUMANodeLevel"},
		{name: "too large", in: `{"preferredCPUBindPolicy":"` + strings.Repeat("x", MaxResourceSpec) + `"}`, wantErr: "at most 4096"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseResourceSpec(tc.in)
			if tc.wantErr != "" {
				if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), AnnotationResourceSpec) {
					t.Fatalf("ParseResourceSpec(%.60q) error = %v, want ErrInvalid naming %s and containing %q", tc.in, err, AnnotationResourceSpec, tc.wantErr)
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

func TestRead(t *testing.T) {
	lse := map[string]string{LabelQoSClass: "LSE"}
	tests := []struct {
		name    string
		pod     Pod
		want    Wish
		wantErr string
	}{
		{name: "guaranteed whole cpus is LSE", pod: Pod{Kubelet: Guaranteed, MilliCPUs: 2000},
			want: Wish{QoS: alloc.LSE, MilliCPUs: 2000, Why: "kubelet Guaranteed, whole CPUs"}},
		{name: "guaranteed fraction is LS", pod: Pod{Kubelet: Guaranteed, MilliCPUs: 1500},
			want: Wish{QoS: alloc.LS, MilliCPUs: 1500, Why: "kubelet Burstable or fractional Guaranteed"}},
		{name: "burstable is LS", pod: Pod{Kubelet: Burstable, MilliCPUs: 4000},
			want: Wish{QoS: alloc.LS, MilliCPUs: 4000, Why: "kubelet Burstable or fractional Guaranteed"}},
		{name: "best effort is BE", pod: Pod{Kubelet: BestEffort}, want: Wish{QoS: alloc.BE, Why: "kubelet BestEffort"}},
		{name: "no kubelet class is BE", pod: Pod{MilliCPUs: 3000}, want: Wish{QoS: alloc.BE, MilliCPUs: 3000, Why: "kubelet BestEffort"}},
		{name: "negative size reads as none", pod: Pod{Kubelet: Burstable, MilliCPUs: -5},
			want: Wish{QoS: alloc.BE, Why: "kubelet Burstable or fractional Guaranteed, no CPUs to hold in the shared pool"}},
		{name: "label beats kubelet", pod: Pod{Labels: map[string]string{LabelQoSClass: "BE"}, Kubelet: Guaranteed, MilliCPUs: 2000},
			want: Wish{QoS: alloc.BE, MilliCPUs: 2000, Why: "label koordinator.sh/qosClass"}},
		{name: "all three annotations", pod: Pod{Labels: map[string]string{LabelQoSClass: "LSR"}, MilliCPUs: 4000, Annotations: map[string]string{
			AnnotationResourceSpec: `{"requiredCPUBindPolicy":"SpreadByPCPUs","preferredCPUExclusivePolicy":"NUMANodeLevel"}`, AnnotationNUMAPolicy: "single-numa-node"}},
			want: Wish{QoS: alloc.LSR, MilliCPUs: 4000, Bind: "SpreadByPCPUs", Exclusive: "NUMANodeLevel", TopologyPolicy: "single-numa-node",
				Why: "label koordinator.sh/qosClass, annotation scheduling.koordinator.sh/resource-spec, annotation corepin.io/numa-policy"}},
		{name: "default bind is the allocator's default", pod: Pod{Labels: lse, MilliCPUs: 1000, Annotations: map[string]string{AnnotationResourceSpec: `{"preferredCPUBindPolicy":"Default"}`}},
			want: Wish{QoS: alloc.LSE, MilliCPUs: 1000, Why: "label koordinator.sh/qosClass, annotation scheduling.koordinator.sh/resource-spec"}},
		{name: "LS label without cpus is BE", pod: Pod{Labels: map[string]string{LabelQoSClass: "LS"}},
			want: Wish{QoS: alloc.BE, Why: "label koordinator.sh/qosClass, no CPUs to hold in the shared pool"}},
		{name: "real-time route of an LS pod", pod: Pod{Kubelet: Burstable, MilliCPUs: 500, Annotations: map[string]string{AnnotationSched: "rr"}},
			want: Wish{QoS: alloc.LS, MilliCPUs: 500, Sched: "rr", Why: "kubelet Burstable or fractional Guaranteed, annotation corepin.io/sched"}},
		{name: "sched normal is the fair class", pod: Pod{Kubelet: Guaranteed, MilliCPUs: 2000, Annotations: map[string]string{AnnotationSched: "normal"}},
			want: Wish{QoS: alloc.LSE, MilliCPUs: 2000, Why: "kubelet Guaranteed, whole CPUs"}},
		{name: "sched on an LSE pod", pod: Pod{Kubelet: Guaranteed, MilliCPUs: 2000, Annotations: map[string]string{AnnotationSched: "fifo"}},
			wantErr: "annotation corepin.io/sched fifo is the real-time route of LS pods on the shared pool, beside BE work; this one is LSE"},
		{name: "sched on a BE pod", pod: Pod{Kubelet: BestEffort, Annotations: map[string]string{AnnotationSched: "rr"}},
			wantErr: "this one is BE (kubelet BestEffort)"},
		{name: "sched unknown", pod: Pod{Kubelet: Burstable, MilliCPUs: 500, Annotations: map[string]string{AnnotationSched: "deadline"}},
			wantErr: `annotation corepin.io/sched "deadline": use normal, rr or fifo`},
		{name: "LSE with a fraction", pod: Pod{Labels: lse, MilliCPUs: 1500}, wantErr: "class LSE needs whole CPUs (set limits.cpu = requests.cpu to an integer); it asks for 1.5 CPU"},
		{name: "LSR without cpus", pod: Pod{Labels: map[string]string{LabelQoSClass: "LSR"}}, wantErr: "class LSR needs whole CPUs"},
		{name: "SYSTEM label", pod: Pod{Labels: map[string]string{LabelQoSClass: "SYSTEM"}, MilliCPUs: 1000},
			wantErr: "koordinator.sh/qosClass SYSTEM is the node's reserved CPUs; corepin admits LSE, LSR, LS and BE pods"},
		{name: "unknown label", pod: Pod{Labels: map[string]string{LabelQoSClass: "gold"}}, wantErr: `koordinator.sh/qosClass "gold" is not one of LSE, LSR, LS, BE`},
		{name: "lower-case label", pod: Pod{Labels: map[string]string{LabelQoSClass: "lse"}, MilliCPUs: 1000}, wantErr: "is not one of LSE, LSR, LS, BE"},
		{name: "bad numa policy", pod: Pod{Labels: lse, MilliCPUs: 1000, Annotations: map[string]string{AnnotationNUMAPolicy: "single"}},
			wantErr: `annotation corepin.io/numa-policy "single" is not one of none, best-effort, restricted, single-numa-node`},
		{name: "empty numa policy", pod: Pod{Labels: lse, MilliCPUs: 1000, Annotations: map[string]string{AnnotationNUMAPolicy: ""}},
			wantErr: "corepin.io/numa-policy"},
		{name: "numa policy in another case", pod: Pod{Labels: lse, MilliCPUs: 1000, Annotations: map[string]string{AnnotationNUMAPolicy: "Restricted"}},
			wantErr: "corepin.io/numa-policy"},
		{name: "bad resource spec", pod: Pod{Kubelet: Guaranteed, MilliCPUs: 1000, Annotations: map[string]string{AnnotationResourceSpec: `{`}},
			wantErr: AnnotationResourceSpec},
		{name: "LSE requires isolated CPUs", pod: Pod{Kubelet: Guaranteed, MilliCPUs: 2000, Annotations: map[string]string{AnnotationIsolatedCPUs: "require"}},
			want: Wish{QoS: alloc.LSE, MilliCPUs: 2000, Isolated: "require", Why: "kubelet Guaranteed, whole CPUs, annotation corepin.io/isolated-cpus"}},
		{name: "LSR prefers isolated CPUs", pod: Pod{Labels: map[string]string{LabelQoSClass: "LSR"}, MilliCPUs: 1000, Annotations: map[string]string{AnnotationIsolatedCPUs: "prefer"}},
			want: Wish{QoS: alloc.LSR, MilliCPUs: 1000, Isolated: "prefer", Why: "label koordinator.sh/qosClass, annotation corepin.io/isolated-cpus"}},
		{name: "LS prefer is ignored", pod: Pod{Kubelet: Burstable, MilliCPUs: 500, Annotations: map[string]string{AnnotationIsolatedCPUs: "prefer"}},
			want: Wish{QoS: alloc.LS, MilliCPUs: 500, Why: "kubelet Burstable or fractional Guaranteed, annotation corepin.io/isolated-cpus prefer ignored (the shared pool never holds isolated CPUs)"}},
		{name: "BE prefer is ignored", pod: Pod{Kubelet: BestEffort, Annotations: map[string]string{AnnotationIsolatedCPUs: "prefer"}},
			want: Wish{QoS: alloc.BE, Why: "kubelet BestEffort, annotation corepin.io/isolated-cpus prefer ignored (the shared pool never holds isolated CPUs)"}},
		{name: "LS require is refused", pod: Pod{Kubelet: Guaranteed, MilliCPUs: 1500, Annotations: map[string]string{AnnotationIsolatedCPUs: "require"}},
			wantErr: "annotation corepin.io/isolated-cpus require is for LSE and LSR pods (exclusive, whole CPUs); this one is LS (kubelet Burstable or fractional Guaranteed)"},
		{name: "BE require is refused", pod: Pod{Labels: map[string]string{LabelQoSClass: "BE"}, MilliCPUs: 1000, Annotations: map[string]string{AnnotationIsolatedCPUs: "require"}},
			wantErr: "this one is BE"},
		{name: "isolated in another case", pod: Pod{Labels: lse, MilliCPUs: 1000, Annotations: map[string]string{AnnotationIsolatedCPUs: "Require"}},
			wantErr: `annotation corepin.io/isolated-cpus "Require" is not one of prefer, require`},
		{name: "isolated as a boolean", pod: Pod{Labels: lse, MilliCPUs: 1000, Annotations: map[string]string{AnnotationIsolatedCPUs: "true"}},
			wantErr: `"true" is not one of prefer, require`},
		{name: "empty isolated", pod: Pod{Labels: lse, MilliCPUs: 1000, Annotations: map[string]string{AnnotationIsolatedCPUs: ""}},
			wantErr: "corepin.io/isolated-cpus"},
		{name: "LSE asks for interrupts off its CPUs", pod: Pod{Kubelet: Guaranteed, MilliCPUs: 2000, Annotations: map[string]string{AnnotationIRQIsolate: "true"}},
			want: Wish{QoS: alloc.LSE, MilliCPUs: 2000, IRQIsolate: ptr(true), Why: "kubelet Guaranteed, whole CPUs, annotation corepin.io/irq-isolate"}},
		{name: "LSR opts out", pod: Pod{Labels: map[string]string{LabelQoSClass: "LSR"}, MilliCPUs: 1000, Annotations: map[string]string{AnnotationIRQIsolate: "false"}},
			want: Wish{QoS: alloc.LSR, MilliCPUs: 1000, IRQIsolate: ptr(false), Why: "label koordinator.sh/qosClass, annotation corepin.io/irq-isolate"}},
		{name: "LS saying false is no request", pod: Pod{Kubelet: Burstable, MilliCPUs: 500, Annotations: map[string]string{AnnotationIRQIsolate: "false"}},
			want: Wish{QoS: alloc.LS, MilliCPUs: 500, IRQIsolate: ptr(false), Why: "kubelet Burstable or fractional Guaranteed, annotation corepin.io/irq-isolate"}},
		{name: "LS irq-isolate is refused", pod: Pod{Kubelet: Burstable, MilliCPUs: 500, Annotations: map[string]string{AnnotationIRQIsolate: "true"}},
			wantErr: "annotation corepin.io/irq-isolate true keeps interrupts off CPUs of the pod's own; this one is LS (kubelet Burstable or fractional Guaranteed) and shares its CPUs"},
		{name: "BE irq-isolate is refused", pod: Pod{Labels: map[string]string{LabelQoSClass: "BE"}, MilliCPUs: 1000, Annotations: map[string]string{AnnotationIRQIsolate: "true"}},
			wantErr: "this one is BE (label koordinator.sh/qosClass) and shares its CPUs"},
		{name: "irq-isolate as yes", pod: Pod{Labels: lse, MilliCPUs: 1000, Annotations: map[string]string{AnnotationIRQIsolate: "yes"}},
			wantErr: `annotation corepin.io/irq-isolate "yes": use "true" or "false"`},
		{name: "irq-isolate as CRI-O's disable", pod: Pod{Labels: lse, MilliCPUs: 1000, Annotations: map[string]string{AnnotationIRQIsolate: "disable"}},
			wantErr: `annotation corepin.io/irq-isolate "disable"`},
		{name: "beyond every CPU", pod: Pod{Kubelet: Burstable, MilliCPUs: MaxMilliCPUs + 1}, wantErr: "more than the 65536 CPUs"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Read(tc.pod)
			if tc.wantErr != "" {
				if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Read error = %v, want ErrInvalid containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Read (-want +got):\n%s", diff)
			}
			if _, err := got.RequestSpec().Request("x"); err != nil {
				t.Errorf("the wish %+v is not a request the allocator takes: %v", got, err)
			}
		})
	}
}

func TestParseNUMAPolicy(t *testing.T) {
	for _, s := range []string{"none", "best-effort", "restricted", "single-numa-node"} {
		if got, err := ParseNUMAPolicy(s); err != nil || string(got) != s {
			t.Errorf("ParseNUMAPolicy(%q) = %q, %v; want it back", s, got, err)
		}
	}
}

func TestParseIRQIsolate(t *testing.T) {
	for s, want := range map[string]bool{"true": true, "false": false} {
		if got, err := ParseIRQIsolate(s); err != nil || got != want {
			t.Errorf("ParseIRQIsolate(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	for _, s := range []string{"", "1", "0", "t", "TRUE", "True", " true", "true\n", "yes", "disable", strings.Repeat("true", 100)} {
		if _, err := ParseIRQIsolate(s); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), AnnotationIRQIsolate) {
			t.Errorf("ParseIRQIsolate(%q) error = %v, want ErrInvalid naming %s", s, err, AnnotationIRQIsolate)
		}
	}
}

func ptr[T any](v T) *T { return &v }

func TestParseIsolatedCPUs(t *testing.T) {
	for _, s := range []string{"prefer", "require"} {
		if got, err := ParseIsolatedCPUs(s); err != nil || string(got) != s {
			t.Errorf("ParseIsolatedCPUs(%q) = %q, %v; want it back", s, got, err)
		}
	}
	for _, s := range []string{"", "none", "avoid", " prefer", "prefer\n", "PREFER", "1"} {
		if _, err := ParseIsolatedCPUs(s); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseIsolatedCPUs(%q) error = %v, want ErrInvalid", s, err)
		}
	}
}
