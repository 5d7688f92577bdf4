package bench

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corepin/corepin/enforce"
	"github.com/corepin/corepin/experiment"
	"github.com/corepin/corepin/qos"
)

func TestQoSSetupFor(t *testing.T) {
	for _, pol := range AllPolicies {
		s, ok := qosSetupFor(pol)
		if ok != slices.Contains(qosPolicies, pol) {
			t.Errorf("qosSetupFor(%s) ok = %v, want %v", pol, ok, !ok)
		}
		if s.loop != nil {
			if err := s.loop.WithDefaults().Validate(); err != nil {
				t.Errorf("qosSetupFor(%s) config invalid: %v", pol, err)
			}
		}
	}
	if s, _ := qosSetupFor(polSuppressQuota); s.loop == nil || s.loop.Mechanism != qos.Quota || !s.loop.UsageOnly {
		t.Errorf("suppress-quota = %+v, want a usage-only quota loop", s.loop)
	}
	if s, _ := qosSetupFor(polBESlice); s.beSlice != enforce.MinSlice || s.slice != 0 || s.loop != nil {
		t.Errorf("be-slice = %+v, want only the kernel's minimum slice on the batch", s)
	}
	if s, _ := qosSetupFor(polQoS); s.loop == nil || s.slice == 0 || s.beSlice == 0 || s.loop.UsageOnly || s.loop.InterferenceOnly {
		t.Errorf("qos = %+v, want the full loop with a slice", s)
	}
}

func TestQoSTable(t *testing.T) {
	pt := func(pol string, ms ...experiment.Metrics) experiment.PointResult {
		return experiment.PointResult{Point: experiment.P("service", "cpu", "policy", pol), Repeats: ms}
	}
	pts := []experiment.PointResult{
		pt(polAlone, experiment.Metrics{"p99_ms": 4}),
		pt(polSuppressCpuset, experiment.Metrics{"qos_be_cpus": 1.5, "qos_shrinks_per_s": 2, "qos_grows_per_s": 1, "qos_backoffs_per_s": 0},
			experiment.Metrics{"qos_be_cpus": 1.7, "qos_shrinks_per_s": 4, "qos_grows_per_s": 1, "qos_backoffs_per_s": 0}),
		pt(polSlice, experiment.Metrics{"qos_slice_applied": 1}),
		pt(polThreadIdle, experiment.Metrics{}),
	}
	tab, ok := qosTable("cpu", pts)
	if !ok {
		t.Fatal("qosTable() found no controller policy")
	}
	want := [][]string{
		{polSuppressCpuset, "1.60", "3.00", "1.00", "0.00", "-"},
		{polSlice, "-", "-", "-", "-", "taken"},
		{polThreadIdle, "-", "-", "-", "-", "-"},
	}
	if diff := cmp.Diff(want, tab.Rows); diff != "" {
		t.Errorf("qosTable() rows (-want +got):\n%s", diff)
	}
	if _, ok := qosTable("cpu", pts[:1]); ok {
		t.Errorf("qosTable() without controller policies reported a table")
	}
}
