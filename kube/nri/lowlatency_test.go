package nri

import (
	"strings"
	"testing"

	"github.com/corepin/corepin/alloc"
)

// An LSE pod annotated corepin.io/cpu-quota "false" gets quota -1 in its
// adjustment (the kubelet gave it 200000); one without keeps the
// runtime's; corepin.io/load-balance "false" and a shared pod's "false"
// are refused, naming the annotation, and hold nothing.
func TestLowLatencyAnnotationsOfPods(t *testing.T) {
	f, p := connected(t, alloc.NodeSettings{})
	_, rsp, err := f.create(podSpec{name: "lse-noquota", shares: 2048, quota: 200000, annotations: map[string]string{AnnotationCPUQuota: "false"}})
	if err != nil {
		t.Fatal(err)
	}
	if q := rsp.GetAdjust().GetLinux().GetResources().GetCpu().GetQuota(); q == nil || q.GetValue() != -1 {
		t.Errorf("LSE pod with cpu-quota false: adjustment's quota %v, want -1", q)
	}
	_, rsp, err = f.create(podSpec{name: "lse", shares: 2048, quota: 200000})
	if err != nil {
		t.Fatal(err)
	}
	if q := rsp.GetAdjust().GetLinux().GetResources().GetCpu().GetQuota(); q != nil {
		t.Errorf("LSE pod without the annotation: adjustment's quota %v, want none (the runtime's stays)", q)
	}
	held := func() int {
		t.Helper()
		l, err := p.Containers().List()
		if err != nil {
			t.Fatal(err)
		}
		return len(l)
	}
	before := held()
	for _, tc := range []struct {
		spec podSpec
		want string
	}{
		{podSpec{name: "lse-nolb", shares: 2048, quota: 200000, annotations: map[string]string{AnnotationLoadBalance: "false"}},
			"annotation corepin.io/load-balance false: corepin's NRI plugin cannot take a container's CPUs out of load balancing yet"},
		{podSpec{name: "ls-noquota", shares: 512, quota: 50000, annotations: map[string]string{AnnotationCPUQuota: "false"}},
			"annotation corepin.io/cpu-quota false lifts the quota on CPUs of the pod's own; this pod is LS"},
		{podSpec{name: "lse-disable", shares: 2048, quota: 200000, annotations: map[string]string{AnnotationCPUQuota: "disable"}},
			`annotation corepin.io/cpu-quota "disable": use "false"`},
	} {
		if _, _, err := f.create(tc.spec); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want refused saying %q", tc.spec.name, err, tc.want)
		}
	}
	if after := held(); after != before {
		t.Errorf("the refused pods are held: %d containers, was %d", after, before)
	}
}
