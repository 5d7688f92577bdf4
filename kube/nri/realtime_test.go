package nri

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"

	"github.com/corepin/corepin/topology"
)

// An LS pod annotated corepin.io/sched gets its class in the adjustment
// (SCHED_RR or SCHED_FIFO, priority 1); an LS pod without it gets none;
// an LSE pod with it is refused, naming the annotation, and holds nothing.
func TestRealTimeRouteOfPods(t *testing.T) {
	f := newRuntime(t, socketDir(t))
	t.Cleanup(f.r.Stop)
	p, err := New(Options{State: filepath.Join(t.TempDir(), "state.db"), Topology: topology.MustSynthetic(twoNodes)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	f.connect(p)
	for _, c := range []struct {
		spec podSpec
		want api.LinuxSchedulerPolicy
	}{
		{podSpec{name: "svc-rr", shares: 512, quota: 50000, annotations: map[string]string{AnnotationSched: "rr"}}, api.LinuxSchedulerPolicy_SCHED_RR},
		{podSpec{name: "svc-fifo", shares: 512, quota: 50000, annotations: map[string]string{AnnotationSched: "fifo"}}, api.LinuxSchedulerPolicy_SCHED_FIFO},
	} {
		_, rsp, err := f.create(c.spec)
		if err != nil {
			t.Fatal(err)
		}
		s := rsp.GetAdjust().GetLinux().GetScheduler()
		if s.GetPolicy() != c.want || s.GetPriority() != 1 {
			t.Errorf("%s: adjustment's scheduler %v, want %v at priority 1", c.spec.name, s, c.want)
		}
	}
	if _, rsp, err := f.create(ls1500); err != nil || rsp.GetAdjust().GetLinux().GetScheduler() != nil {
		t.Errorf("LS pod without the annotation: scheduler %v (%v), want none", rsp.GetAdjust().GetLinux().GetScheduler(), err)
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
	_, _, err = f.create(podSpec{name: "lse-rr", shares: 2048, quota: 200000, annotations: map[string]string{AnnotationSched: "rr"}})
	if err == nil || !strings.Contains(err.Error(), "corepin.io/sched rr is the real-time route of LS pods") {
		t.Errorf("LSE pod with sched rr: %v, want refused naming the annotation", err)
	}
	if after := held(); after != before {
		t.Errorf("the refused pod is held: %d containers, was %d", after, before)
	}
}
