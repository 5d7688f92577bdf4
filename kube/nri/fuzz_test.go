package nri

import (
	"errors"
	"testing"

	"github.com/containerd/nri/pkg/api"
)

// FuzzParseResourceSpec checks that any annotation is either refused with
// ErrInvalid or read into the vocabulary, and that reading never panics.
func FuzzParseResourceSpec(f *testing.F) {
	for _, s := range []string{`{}`, `{"preferredCPUBindPolicy":"FullPCPUs","preferredCPUExclusivePolicy":"PCPULevel"}`,
		`{"requiredCPUBindPolicy":"SpreadByPCPUs"}`, `{"a":1}`, `[`, `{"preferredCPUBindPolicy":"FullPCPUs"} x`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		rs, err := ParseResourceSpec(s)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("ParseResourceSpec(%q) = %v, not ErrInvalid", s, err)
			}
			return
		}
		switch rs.bind() {
		case "", "Default", "FullPCPUs", "SpreadByPCPUs":
		default:
			t.Fatalf("ParseResourceSpec(%q) accepted bind %q", s, rs.bind())
		}
		// What it accepted is a request corepin can admit as written.
		pod := &api.PodSandbox{Labels: map[string]string{LabelQoSClass: "LSE"}, Annotations: map[string]string{AnnotationResourceSpec: s}}
		spec, _, err := SpecOf(pod, container(2048, 200000))
		if err != nil {
			t.Fatalf("SpecOf with accepted annotation %q: %v", s, err)
		}
		spec.Name, spec.PID = "fuzz", 2
		if err := spec.Validate(); err != nil {
			t.Fatalf("accepted annotation %q gives an invalid spec: %v", s, err)
		}
	})
}

// FuzzSpecOf checks that any pod metadata and CPU resources either give a
// request the node can validate or are refused with ErrInvalid.
func FuzzSpecOf(f *testing.F) {
	f.Add(uint64(2048), int64(200000), uint64(100000), "", "")
	f.Add(uint64(2), int64(0), uint64(0), "BE", "")
	f.Add(uint64(1536), int64(150000), uint64(100000), "LSE", `{"preferredCPUBindPolicy":"FullPCPUs"}`)
	f.Add(uint64(1<<63), int64(-1), uint64(1<<63), "LSR", `{}`)
	f.Fuzz(func(t *testing.T, shares uint64, quota int64, period uint64, label, annotation string) {
		pod := &api.PodSandbox{Labels: map[string]string{}, Annotations: map[string]string{}}
		if label != "" {
			pod.Labels[LabelQoSClass] = label
		}
		if annotation != "" {
			pod.Annotations[AnnotationResourceSpec] = annotation
		}
		ctr := &api.Container{Id: "c", Linux: &api.LinuxContainer{Resources: &api.LinuxResources{Cpu: &api.LinuxCPU{
			Shares: api.UInt64(shares), Quota: api.Int64(quota), Period: api.UInt64(period)}}}}
		spec, _, err := SpecOf(pod, ctr)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("SpecOf = %v, not ErrInvalid", err)
			}
			return
		}
		spec.Name, spec.PID = "fuzz", 2
		if err := spec.Validate(); err != nil {
			t.Fatalf("SpecOf(shares %d, quota %d, period %d, %q, %q) gives an invalid spec: %v", shares, quota, period, label, annotation, err)
		}
	})
}
