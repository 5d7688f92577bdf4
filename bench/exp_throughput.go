package bench

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/corepin/corepin/experiment"
	"github.com/corepin/corepin/runner"
	"github.com/corepin/corepin/workload"
)

func init() { Register(func() Experiment { return &throughputExp{} }) }

// throughputSpec is the encoder study's machine-filling sweep: W workers of
// K pinned CPUs each (W x K = the machine), against the default of running
// every job at once, unpinned, threads auto.
type throughputSpec struct {
	Job jobSpec `yaml:"job" json:"job"`
	// JobsPerCPU sizes the batch: jobs = JobsPerCPU x CPUs.
	JobsPerCPU int `yaml:"jobs_per_cpu" json:"jobs_per_cpu"`
	// CPUsPerWorker are the K values tried (those dividing the machine).
	CPUsPerWorker []int `yaml:"cpus_per_worker" json:"cpus_per_worker"`
	// Write also measures each configuration writing its output (transcode).
	Write bool `yaml:"write" json:"write"`
}

type throughputExp struct {
	spec throughputSpec
	job  *job
}

func (e *throughputExp) Name() string { return "throughput" }
func (e *throughputExp) Title() string {
	return "workers x CPUs per worker filling the machine: aggregate throughput"
}

func (e *throughputExp) Spec(quick bool) any {
	e.spec = throughputSpec{
		Job:           jobSpec{Workload: WorkloadAuto, JobSeconds: 2, ClipWidth: 1920, ClipHeight: 1080, ClipSeconds: 2, Preset: "medium"},
		JobsPerCPU:    2,
		CPUsPerWorker: []int{1, 2, 4, 8},
		Write:         true,
	}
	if quick {
		e.spec.Job = jobSpec{Workload: WorkloadAuto, JobSeconds: 0.4, ClipWidth: 640, ClipHeight: 360, ClipSeconds: 1, Preset: "veryfast"}
		e.spec.JobsPerCPU = 2
		e.spec.Write = false
	}
	return &e.spec
}

func (e *throughputExp) Setup(ctx context.Context, env *Env) error {
	if e.spec.CPUsPerWorker == nil {
		e.Spec(env.Quick)
	}
	j, err := resolveJob(ctx, env, &e.spec.Job)
	e.job = j
	return err
}

func (e *throughputExp) Teardown(*Env) error { return nil }

const defaultConfig = "default"

func (e *throughputExp) Points(env *Env) []experiment.Point {
	if e.spec.CPUsPerWorker == nil {
		e.Spec(env.Quick)
	}
	n := env.Topo.Allowed().Size()
	writes := []string{"no"}
	if e.spec.Write && (e.job == nil || e.job.kind == WorkloadTranscode) && e.spec.Job.Workload != WorkloadSpin {
		writes = append(writes, "yes")
	}
	var ps []experiment.Point
	for _, w := range writes {
		ps = append(ps, experiment.P("config", defaultConfig, "write", w))
		for _, k := range e.spec.CPUsPerWorker {
			if k <= n && n%k == 0 {
				ps = append(ps, experiment.P("config", fmt.Sprintf("%dx%d", n/k, k), "write", w))
			}
		}
	}
	return ps
}

func (e *throughputExp) Run(ctx context.Context, env *Env, p experiment.Point) (experiment.Metrics, error) {
	n := env.Topo.Allowed().Size()
	jobs := max(1, e.spec.JobsPerCPU*n)
	write := p.Get("write") == "yes"
	var b batchResult
	var err error
	if cfg := p.Get("config"); cfg == defaultConfig {
		// Every job at once, unpinned, the workload choosing its threads.
		b, err = runBatch(ctx, env, e.job.argv(workload.ThreadsNative, write), jobs, jobs, float64(n), runner.Unbounded, 0)
	} else {
		w, k, _ := strings.Cut(cfg, "x")
		workers, _ := strconv.Atoi(w)
		kk, _ := strconv.Atoi(k)
		b, err = runBatch(ctx, env, e.job.argv("{threads}", write), jobs, workers, float64(kk), runner.Pinned, 0)
	}
	if err != nil {
		return nil, err
	}
	var total float64
	for _, j := range b.jobs {
		total += work(j)
	}
	return experiment.Metrics{"rate": total / b.elapsed.Seconds(), "elapsed_s": b.elapsed.Seconds(), "job_wall_s": experiment.Median(b.walls())}, nil
}

func (e *throughputExp) Analyze(env *Env, pts []experiment.PointResult) Analysis {
	unit := e.spec.Job.unit()
	def := map[string]float64{}
	for _, p := range pts {
		if p.Point.Get("config") == defaultConfig {
			def[p.Point.Get("write")] = p.Median("rate")
		}
	}
	t := Table{Title: "Aggregate throughput filling the machine (medians)",
		Columns: []string{"workers x CPUs", "write", unit + "/s", "spread", "vs default", "batch time"}}
	bars := map[string]*Series{}
	var order []string
	var labels []string
	for _, p := range pts {
		cfg, w := p.Point.Get("config"), p.Point.Get("write")
		v := p.Median("rate")
		lo, hi := p.Spread("rate")
		label := cfg
		if cfg == defaultConfig {
			label = "default (unpinned, auto threads, all at once)"
		}
		t.Rows = append(t.Rows, []string{label, w, fmt.Sprintf("%.1f", v), fmt.Sprintf("%.1f-%.1f", lo, hi),
			pct(v/def[w] - 1), fmt.Sprintf("%.2fs", p.Median("elapsed_s"))})
		if bars[w] == nil {
			bars[w] = &Series{Name: "write=" + w}
			order = append(order, w)
		}
		if w == "no" {
			labels = append(labels, cfg)
		}
		bars[w].Y = append(bars[w].Y, v)
	}
	chart := Chart{Kind: ChartBar, Title: "Aggregate " + unit + "/s by configuration", XLabel: "workers x CPUs per worker", YLabel: unit + "/s", XLabels: labels}
	for _, w := range order {
		chart.Series = append(chart.Series, *bars[w])
	}
	a := Analysis{Notice: e.spec.Job.Substitute, Tables: []Table{t}, Charts: []Chart{chart}}
	a.Recommendation = recommendThroughput(pts, unit)
	return a
}

// CurrentSpec returns the spec as configured.
func (e *throughputExp) CurrentSpec() any { return &e.spec }

// Resolve settles the job's workload ("auto": transcode or spin).
func (e *throughputExp) Resolve(*Env) { e.spec.Job.resolveWorkload() }

// recommendThroughput names the configuration to fill the machine with.
// The candidate is the pinned configuration with the best median rate
// (without writing output); it is recommended only where a Mann-Whitney
// test over the repeats says it beats the default (unpinned, threads auto,
// all jobs at once) beyond the noise. Otherwise the default is: a
// recommendation is never worse than the default.
func recommendThroughput(pts []experiment.PointResult, unit string) string {
	var def, best *experiment.PointResult
	for i := range pts {
		p := &pts[i]
		if p.Point.Get("write") != "no" || math.IsNaN(p.Median("rate")) {
			continue
		}
		if p.Point.Get("config") == defaultConfig {
			def = p
		} else if best == nil || p.Median("rate") > best.Median("rate") {
			best = p
		}
	}
	const defName = "the default (unpinned, threads auto, all jobs at once)"
	switch {
	case best == nil:
		return ""
	case def == nil:
		w, k, _ := strings.Cut(best.Point.Get("config"), "x")
		return fmt.Sprintf("run %s workers x %s pinned CPUs each with threads = CPUs: %.1f %s/s (the default was not measured to compare with)", w, k, best.Median("rate"), unit)
	}
	c := MannWhitney(best.Values("rate"), def.Values("rate"))
	gain := best.Median("rate")/def.Median("rate") - 1
	if gain <= 0 || !c.Significant() {
		verdict := "not significant"
		if c.Significant() {
			verdict = "significantly slower"
		}
		return fmt.Sprintf("keep %s: %.1f %s/s. No pinned configuration beats it beyond the noise; the best, %s, measured %s (%s, %s).",
			defName, def.Median("rate"), unit, best.Point.Get("config"), pct(gain), c, verdict)
	}
	w, k, _ := strings.Cut(best.Point.Get("config"), "x")
	return fmt.Sprintf("run %s workers x %s pinned CPUs each with threads = CPUs: %.1f %s/s, %s over %s (%s)",
		w, k, best.Median("rate"), unit, pct(gain), defName, c)
}
