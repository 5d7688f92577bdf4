package agent

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/nodecore"
	"github.com/corepin/corepin/qos"
)

// Metrics are the agent's Prometheus metrics, the Node's observer
// (nodecore.Observer). A nil *Metrics records nothing.
type Metrics struct {
	reg        *prometheus.Registry
	admission  prometheus.Histogram
	rejections *prometheus.CounterVec
	reconciles *prometheus.CounterVec
	pools      *prometheus.GaugeVec
	qos        *prometheus.GaugeVec
	qosActions *prometheus.CounterVec
	offline    *prometheus.GaugeVec
	schedExt   schedExtMetrics
}

// NewMetrics returns the agent's metrics in a registry of their own, with
// the Go and process collectors.
func NewMetrics() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		admission: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "corepin_agent_admission_seconds",
			Help: "Time from an admission request to the workload running in its group (or the refusal).",
			// 100us .. ~3.3s
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}),
		rejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "corepin_agent_rejections_total",
			Help: "Admissions refused, by reason: invalid, exists, rejected, error.",
		}, []string{"reason"}),
		reconciles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "corepin_agent_reconcile_actions_total",
			Help: "Releases and reconcile actions, by action.",
		}, []string{"action"}),
		pools: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "corepin_agent_pool_cpus",
			Help: "CPUs in each pool.",
		}, []string{"pool"}),
		qos: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "corepin_qos",
			Help: "The QoS controller's latest tick: be_pool_cpus, be_cpus, be_level_cpus, be_quota_seconds, suppression, ls_usage_cpus, psi_some, runq_wait_ratio, throttled_ratio.",
		}, []string{"value"}),
		qosActions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "corepin_qos_actions_total",
			Help: "The QoS controller's actions, by kind: shrink, grow, hold, backoff, fallback, burst.",
		}, []string{"kind"}),
		offline: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "corepin_workload_offline_cpus",
			Help: "The workload's exclusive CPUs that are offline now (they stay its own until they are back).",
		}, []string{"workload", "qos"}),
		schedExt: newSchedExtMetrics(),
	}
	m.reg.MustRegister(m.admission, m.rejections, m.reconciles, m.pools, m.qos, m.qosActions, m.offline,
		m.schedExt.state, m.schedExt.transitions, m.schedExt.restarts,
		prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	return m
}

// Registry returns the registry to serve (and to register more on).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Admitted counts an admission that took d and ended with err.
func (m *Metrics) Admitted(d time.Duration, err error) {
	if m == nil {
		return
	}
	m.admission.Observe(d.Seconds())
	if err != nil {
		m.rejections.WithLabelValues(reasonOf(err)).Inc()
	}
}

// reasonOf names the class of an admission error.
func reasonOf(err error) string {
	switch {
	case errors.Is(err, ErrInvalid):
		return "invalid"
	case errors.Is(err, ErrExists):
		return "exists"
	case errors.Is(err, ErrRejected):
		return "rejected"
	}
	return "error"
}

// Reconciled counts a release or reconcile action.
func (m *Metrics) Reconciled(action string) {
	if m == nil {
		return
	}
	m.reconciles.WithLabelValues(action).Inc()
}

// Pools sets the pool sizes.
func (m *Metrics) Pools(p alloc.Pools) {
	if m == nil {
		return
	}
	for name, s := range map[string]int{"reserved": p.Reserved.Size(), "lse": p.LSE.Size(), "lsr": p.LSR.Size(), "ls": p.LS.Size(), "be": p.BE.Size()} {
		m.pools.WithLabelValues(name).Set(float64(s))
	}
}

// Offline sets every workload's count of offline CPUs (CheckOnline),
// dropping the series of workloads no longer admitted.
func (m *Metrics) Offline(off map[string]nodecore.OfflineCount) {
	if m == nil {
		return
	}
	m.offline.Reset()
	for name, c := range off {
		m.offline.WithLabelValues(name, c.QoS).Set(float64(c.CPUs))
	}
}

// workloadCollector reads each workload's group accounting at scrape
// time, so an idle agent polls nothing.
type workloadCollector struct {
	n                *Node
	usage, thr, nthr *prometheus.Desc
}

func newWorkloadCollector(n *Node) *workloadCollector {
	l := []string{"workload", "qos"}
	return &workloadCollector{n: n,
		usage: prometheus.NewDesc("corepin_workload_cpu_seconds_total", "CPU time used by the workload's group.", l, nil),
		thr:   prometheus.NewDesc("corepin_workload_throttled_seconds_total", "Time the workload's runnable tasks waited on its quota.", l, nil),
		nthr:  prometheus.NewDesc("corepin_workload_throttled_periods_total", "Periods in which the workload ran out of quota.", l, nil),
	}
}

func (c *workloadCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.usage
	ch <- c.thr
	ch <- c.nthr
}

func (c *workloadCollector) Collect(ch chan<- prometheus.Metric) {
	for _, u := range c.n.Usages() {
		if !u.StatsReadable {
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.usage, prometheus.CounterValue, u.UsageS, u.Name, u.QoS)
		ch <- prometheus.MustNewConstMetric(c.thr, prometheus.CounterValue, u.ThrottledS, u.Name, u.QoS)
		ch <- prometheus.MustNewConstMetric(c.nthr, prometheus.CounterValue, float64(u.NrThrottled), u.Name, u.QoS)
	}
}

// QoSTick records the QoS controller's tick.
func (m *Metrics) QoSTick(r qos.Report) {
	if m == nil {
		return
	}
	for k, v := range map[string]float64{"be_pool_cpus": float64(r.Plan.Pool.Size()), "be_cpus": float64(r.Plan.CPUs.Size()),
		"be_level_cpus": r.State.Level, "be_quota_seconds": r.Plan.Quota.Seconds(), "suppression": r.Plan.Suppression,
		"ls_usage_cpus": r.Signals.LSUsage, "psi_some": r.Signals.PSI, "runq_wait_ratio": r.Signals.RunqWait.Seconds(),
		"throttled_ratio": r.Signals.Throttled} {
		m.qos.WithLabelValues(k).Set(v)
	}
	for _, a := range r.Plan.Actions {
		m.qosActions.WithLabelValues(a).Inc()
	}
	if r.Bursts > 0 {
		m.qosActions.WithLabelValues("burst").Add(float64(r.Bursts))
	}
}

var _ nodecore.Observer = (*Metrics)(nil)
