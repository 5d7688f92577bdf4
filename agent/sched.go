package agent

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/corepin/corepin/topology"
)

// ReadScheduler reads what decides wake placement on this machine (the
// scheduler section of `corepin topo`); unknown fields stay nil.
func ReadScheduler() topology.Scheduler {
	s, _ := topology.OpenScheduler("/")
	return s
}

// schedCollector exports the scheduler section, read at each scrape: the
// features file and sched_ext's state change while the agent runs.
type schedCollector struct {
	read func() topology.Scheduler
	info *prometheus.Desc
}

// WatchScheduler registers corepin_node_scheduler_info, read through read
// at each scrape.
func (m *Metrics) WatchScheduler(read func() topology.Scheduler) {
	m.reg.MustRegister(&schedCollector{read: read, info: prometheus.NewDesc("corepin_node_scheduler_info",
		"What decides where the kernel wakes a service's threads beside BE work: the kernel, whether the fair class's features file "+
			"reads and is writable, SIS_UTIL (on, off, unknown), sched_ext's state and attached scheduler. Always 1.",
		[]string{"kernel", "features_readable", "features_writable", "sis_util", "sched_ext_state", "sched_ext_ops"}, nil)})
}

func (c *schedCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.info }

func (c *schedCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.read()
	str := func(p *string) string {
		if p == nil {
			return "unknown"
		}
		return *p
	}
	sis := "unknown"
	if s.SISUtil != nil {
		sis = map[bool]string{true: "on", false: "off"}[*s.SISUtil]
	}
	ch <- prometheus.MustNewConstMetric(c.info, prometheus.GaugeValue, 1, str(s.Kernel),
		strconv.FormatBool(s.FeaturesReadable), strconv.FormatBool(s.FeaturesWritable), sis, str(s.SchedExt.State), str(s.SchedExt.Ops))
}
