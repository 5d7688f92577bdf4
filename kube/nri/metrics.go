package nri

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/corepin/corepin/alloc"
)

// beProtectionDesc is the metric of the BE containers' routes.
var beProtectionDesc = prometheus.NewDesc("corepin_nri_be_protection",
	"BE containers the plugin holds now, by how they are kept out of the other containers' way: "+
		"idle-parent, runtime-sched-idle, plugin-sched-idle, min-weight, or unchecked (started before the plugin connected).",
	[]string{"route"}, nil)

// rtStartsDesc is the metric of the real-time route's container starts.
var rtStartsDesc = prometheus.NewDesc("corepin_nri_realtime_starts_total",
	"Starts of LS containers whose pod asks for the real-time route (corepin.io/sched), by how they got their class: "+
		"runtime (the runtime applied it), plugin (the runtime ignored it, as runc before 1.2 does, and the plugin set it), "+
		"none (left in the fair class; the plugin logs why).",
	[]string{"route"}, nil)

// collector reads the routes from the state file at each scrape.
type collector struct{ p *Plugin }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- beProtectionDesc
	ch <- rtStartsDesc
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	rt := c.p.RTStarts()
	for _, r := range RTRoutes {
		ch <- prometheus.MustNewConstMetric(rtStartsDesc, prometheus.CounterValue, float64(rt[r]), string(r))
	}
	n, err := c.p.BERoutes()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(beProtectionDesc, err)
		return
	}
	for _, r := range append(Routes, RouteUnchecked) {
		ch <- prometheus.MustNewConstMetric(beProtectionDesc, prometheus.GaugeValue, float64(n[r]), string(r))
	}
}

// BERoutes counts the BE containers the plugin holds by route
// (RouteUnchecked: none recorded).
func (p *Plugin) BERoutes() (map[BERoute]int, error) {
	all, err := p.c.List()
	if err != nil {
		return nil, err
	}
	n := map[BERoute]int{}
	for _, ca := range all {
		if ca.QoS != alloc.BE {
			continue
		}
		r := BERoute(ca.BERoute)
		if r == "" {
			r = RouteUnchecked
		}
		n[r]++
	}
	return n, nil
}

// MetricsHandler serves the plugin's metrics (with the Go and process
// collectors) in the Prometheus text format.
func (p *Plugin) MetricsHandler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collector{p}, prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}

// serveMetrics listens on addr and serves GET /metrics there until ctx
// ends; stop waits for the server to be shut down.
func (p *Plugin) serveMetrics(ctx context.Context, addr string) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening for metrics: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", p.MetricsHandler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			p.log.Warn("serving metrics", "err", err)
		}
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	p.log.Info("serving metrics", "addr", ln.Addr().String())
	return func() { <-done }, nil
}
