package extender

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are the extender's Prometheus series, on a registry of its own
// (served at GET /metrics).
type metrics struct {
	reg      *prometheus.Registry
	duration *prometheus.HistogramVec
	requests *prometheus.CounterVec
	nodes    *prometheus.CounterVec
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "corepin_extender_request_duration_seconds",
			Help:    "Time to answer one scheduler call, from the first byte read to the last written.",
			Buckets: []float64{0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 5},
		}, []string{"verb"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "corepin_extender_requests_total",
			Help: "Scheduler calls answered, by verb and HTTP status code.",
		}, []string{"verb", "code"}),
		nodes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "corepin_extender_filtered_nodes_total",
			Help: "Nodes judged by /filter: kept, failed (preemption may help) or unresolvable.",
		}, []string{"result"}),
	}
	m.reg.MustRegister(m.duration, m.requests, m.nodes,
		prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	return m
}

// filtered counts one /filter answer's nodes.
func (m *metrics) filtered(kept, failed, unresolvable int) {
	m.nodes.WithLabelValues("kept").Add(float64(kept))
	m.nodes.WithLabelValues("failed").Add(float64(failed))
	m.nodes.WithLabelValues("unresolvable").Add(float64(unresolvable))
}

// statusWriter remembers the status code written.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// timed counts and times the calls of verb.
func (m *metrics) timed(verb string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		h(sw, r)
		m.duration.WithLabelValues(verb).Observe(time.Since(start).Seconds())
		m.requests.WithLabelValues(verb, strconv.Itoa(max(sw.code, http.StatusOK))).Inc()
	}
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}
