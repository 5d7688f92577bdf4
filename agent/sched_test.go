package agent

import (
	"slices"
	"strings"
	"testing"

	"github.com/corepin/corepin/topology"
)

// corepin_node_scheduler_info says, at each scrape, what the scheduler
// section reads then: unknown fields as "unknown", SIS_UTIL on or off.
func TestSchedulerInfoMetric(t *testing.T) {
	m := NewMetrics()
	kernel, state, ops := "6.12.9", "enabled", "layered"
	on := true
	s := topology.Scheduler{Kernel: &kernel, FeaturesReadable: true, SISUtil: &on}
	m.WatchScheduler(func() topology.Scheduler { return s })
	scrape := func() string {
		t.Helper()
		mfs, err := m.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "corepin_node_scheduler_info" || len(mf.Metric) != 1 {
				continue
			}
			var ls []string
			for _, l := range mf.Metric[0].Label {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			slices.Sort(ls)
			return strings.Join(ls, ",")
		}
		t.Fatal("no corepin_node_scheduler_info")
		return ""
	}
	for _, want := range []string{
		"features_readable=true,features_writable=false,kernel=6.12.9,sched_ext_ops=unknown,sched_ext_state=unknown,sis_util=on",
		"features_readable=true,features_writable=false,kernel=6.12.9,sched_ext_ops=layered,sched_ext_state=enabled,sis_util=off",
	} {
		if got := scrape(); got != want {
			t.Errorf("corepin_node_scheduler_info{%s}, want {%s}", got, want)
		}
		off := false
		s.SISUtil, s.SchedExt = &off, topology.SchedExt{State: &state, Ops: &ops}
	}
}
