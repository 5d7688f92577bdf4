package nri

import (
	"errors"
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"
)

// FuzzSpecOf checks that any pod metadata and CPU resources either give a
// request the node can validate or are refused with ErrInvalid. The
// resource-spec parser itself is fuzzed in kube/podmeta.
func FuzzSpecOf(f *testing.F) {
	f.Add(uint64(2048), int64(200000), uint64(100000), "", "")
	f.Add(uint64(2), int64(0), uint64(0), "BE", "")
	f.Add(uint64(1536), int64(150000), uint64(100000), "LSE", `{"preferredCPUBindPolicy":"FullPCPUs"}`)
	f.Add(uint64(1<<63), int64(-1), uint64(1<<63), "LSR", `{}`)
	f.Add(uint64(4096), int64(400000), uint64(100000), "LSE", "single-numa-node")
	f.Fuzz(func(t *testing.T, shares uint64, quota int64, period uint64, label, annotation string) {
		pod := &api.PodSandbox{Labels: map[string]string{}, Annotations: map[string]string{}}
		if label != "" {
			pod.Labels[LabelQoSClass] = label
		}
		// An object is a resource spec; anything else a topology policy.
		switch {
		case strings.HasPrefix(annotation, "{"):
			pod.Annotations[AnnotationResourceSpec] = annotation
		case annotation != "":
			pod.Annotations[AnnotationNUMAPolicy] = annotation
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
