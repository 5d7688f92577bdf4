package bench

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/corepin/corepin/experiment"
	"github.com/corepin/corepin/runner"
)

func init() { Register(func() Experiment { return &concurrencyExp{} }) }

// concurrencySpec is the transcode-study grid: per-job duration vs
// concurrency x CPUs per job x mode.
type concurrencySpec struct {
	Job         jobSpec   `yaml:"job" json:"job"`
	Modes       []string  `yaml:"modes" json:"modes"`
	Concurrency []int     `yaml:"concurrency" json:"concurrency"`
	CPUs        []float64 `yaml:"cpus" json:"cpus"`
}

type concurrencyExp struct {
	spec concurrencySpec
	job  *job
}

func (e *concurrencyExp) Name() string { return "concurrency" }
func (e *concurrencyExp) Title() string {
	return "per-job slowdown vs concurrency x CPUs per job x enforcement mode"
}

func (e *concurrencyExp) Spec(quick bool) any {
	e.spec = concurrencySpec{
		Job:         jobSpec{Workload: WorkloadAuto, JobSeconds: 2, ClipWidth: 1920, ClipHeight: 1080, ClipSeconds: 2, Preset: "medium"},
		Modes:       []string{"pinned", "quota", "burst", "unbounded"},
		Concurrency: []int{1, 2, 3, 4, 6, 8},
		CPUs:        []float64{1, 2, 4},
	}
	if quick {
		e.spec.Job = jobSpec{Workload: WorkloadAuto, JobSeconds: 0.4, ClipWidth: 640, ClipHeight: 360, ClipSeconds: 1, Preset: "veryfast"}
		e.spec.Concurrency = []int{1, 2, 4}
		e.spec.CPUs = []float64{1}
	}
	return &e.spec
}

func (e *concurrencyExp) Setup(ctx context.Context, env *Env) error {
	if e.spec.Modes == nil {
		e.Spec(env.Quick)
	}
	for _, m := range e.spec.Modes {
		if _, err := runner.ParseMode(m); err != nil {
			return fmt.Errorf("%w: %v", experiment.ErrUsage, err)
		}
	}
	j, err := resolveJob(ctx, env, &e.spec.Job)
	e.job = j
	return err
}

func (e *concurrencyExp) Teardown(*Env) error { return nil }

// Points skips what can't run: pinned batches whose jobs don't all fit on
// their own CPUs, and jobs larger than the machine.
func (e *concurrencyExp) Points(env *Env) []experiment.Point {
	if e.spec.Modes == nil {
		e.Spec(env.Quick)
	}
	n := float64(env.Topo.Allowed().Size())
	var ps []experiment.Point
	for _, k := range e.spec.CPUs {
		if k > n {
			continue
		}
		for _, m := range e.spec.Modes {
			for _, c := range e.spec.Concurrency {
				if m == string(runner.Pinned) && (float64(c)*k > n || k != math.Trunc(k)) {
					continue
				}
				ps = append(ps, experiment.P("cpus", ftoa(k), "mode", m, "concurrency", c))
			}
		}
	}
	return ps
}

func (e *concurrencyExp) Run(ctx context.Context, env *Env, p experiment.Point) (experiment.Metrics, error) {
	k, _ := strconv.ParseFloat(p.Get("cpus"), 64)
	c, _ := strconv.Atoi(p.Get("concurrency"))
	b, err := runBatch(ctx, env, e.job.argv("{threads}", false), c, c, k, runner.Mode(p.Get("mode")), 0)
	if err != nil {
		return nil, err
	}
	return e.Metrics(p, b.jobs), nil
}

// Analyze computes the penalty of every point: its median per-job wall
// over the same job alone (concurrency 1) in the same mode and CPUs.
func (e *concurrencyExp) Analyze(env *Env, pts []experiment.PointResult) Analysis {
	type key struct{ cpus, mode string }
	alone := map[key]float64{}
	for _, p := range pts {
		if p.Point.Get("concurrency") == "1" {
			alone[key{p.Point.Get("cpus"), p.Point.Get("mode")}] = p.Median("job_wall_s")
		}
	}
	penalty := func(p experiment.PointResult) float64 {
		a := alone[key{p.Point.Get("cpus"), p.Point.Get("mode")}]
		if a == 0 || math.IsNaN(a) {
			return math.NaN()
		}
		return p.Median("job_wall_s")/a - 1
	}
	t := Table{Title: "Per-job wall time and penalty vs the same job alone (medians)",
		Columns: []string{"CPUs/job", "mode", "concurrency", "job wall", "spread", "penalty", "migrations/job", "throttled/job"}}
	var concs []string
	var modes []string
	for _, p := range pts {
		lo, hi := p.Spread("job_wall_s")
		t.Rows = append(t.Rows, []string{p.Point.Get("cpus"), p.Point.Get("mode"), p.Point.Get("concurrency"),
			fmt.Sprintf("%.2fs", p.Median("job_wall_s")), fmt.Sprintf("%.2f-%.2f", lo, hi), pct(penalty(p)),
			fmt.Sprintf("%.0f", p.Median("migrations_per_job")), fmt.Sprintf("%.2fs", p.Median("throttled_s_per_job"))})
		if c := p.Point.Get("concurrency"); !slices.Contains(concs, c) {
			concs = append(concs, c)
		}
		if m := p.Point.Get("mode"); !slices.Contains(modes, m) {
			modes = append(modes, m)
		}
	}
	a := Analysis{Notice: e.spec.Job.Substitute, Tables: []Table{t}}
	// One heatmap and one box chart per CPUs-per-job value.
	var cpus []string
	for _, p := range pts {
		if c := p.Point.Get("cpus"); !slices.Contains(cpus, c) {
			cpus = append(cpus, c)
		}
	}
	for _, k := range cpus {
		grid := make([][]float64, len(modes))
		box := Chart{Kind: ChartBox, Title: fmt.Sprintf("Per-job wall time, %s CPU(s) per job", k),
			XLabel: "concurrency", YLabel: "seconds", XLabels: concs}
		for i, m := range modes {
			grid[i] = make([]float64, len(concs))
			s := Series{Name: m, Values: make([][]float64, len(concs))}
			for j, c := range concs {
				grid[i][j] = math.NaN()
				for _, p := range pts {
					if p.Point.Get("cpus") == k && p.Point.Get("mode") == m && p.Point.Get("concurrency") == c {
						grid[i][j] = 100 * penalty(p)
						s.Values[j] = p.Values("job_wall_s")
					}
				}
			}
			box.Series = append(box.Series, s)
		}
		a.Charts = append(a.Charts,
			Chart{Kind: ChartHeatmap, Title: fmt.Sprintf("Penalty %% vs alone, %s CPU(s) per job", k),
				XLabel: "concurrency", YLabel: "mode", XLabels: concs, YLabels: modes, Grid: grid},
			box)
	}
	perRepeat := func(p experiment.PointResult) []float64 {
		a := alone[key{p.Point.Get("cpus"), p.Point.Get("mode")}]
		if a == 0 || math.IsNaN(a) {
			return nil
		}
		var out []float64
		for _, v := range p.Values("job_wall_s") {
			out = append(out, v/a-1)
		}
		return out
	}
	a.Recommendation = e.recommend(pts, penalty, perRepeat)
	return a
}

// defaultMode is corepin run's default enforcement mode, the reference a
// recommended mode must beat.
const defaultMode = "pinned"

// recommend compares the modes at the highest concurrency every mode ran
// (above 1), on each repeat's penalty vs the same job alone. The candidate
// is the mode with the lowest median penalty; it is recommended only if it
// beats the reference (corepin run's default mode, else the first mode
// measured) in a Mann-Whitney test over the repeats. Otherwise the
// difference is a tie and the reference stays: a recommendation never
// measured worse than the default beyond the noise.
func (e *concurrencyExp) recommend(pts []experiment.PointResult, penalty func(experiment.PointResult) float64, perRepeat func(experiment.PointResult) []float64) string {
	maxC := 0
	for _, p := range pts {
		c, _ := strconv.Atoi(p.Point.Get("concurrency"))
		if c > 1 {
			maxC = max(maxC, c)
		}
	}
	if maxC == 0 {
		return "measure at least two concurrency levels to compare modes"
	}
	// Compare modes at the largest concurrency every mode ran.
	common := maxC
	for _, m := range e.spec.Modes {
		mc := 0
		for _, p := range pts {
			c, _ := strconv.Atoi(p.Point.Get("concurrency"))
			if p.Point.Get("mode") == m && c > 1 {
				mc = max(mc, c)
			}
		}
		if mc > 0 {
			common = min(common, mc)
		}
	}
	medians := map[string][]float64{} // per point, pooled over CPUs per job
	repeats := map[string][]float64{}
	for _, p := range pts {
		if c, _ := strconv.Atoi(p.Point.Get("concurrency")); c == common {
			m := p.Point.Get("mode")
			if v := penalty(p); !math.IsNaN(v) {
				medians[m] = append(medians[m], v)
				repeats[m] = append(repeats[m], perRepeat(p)...)
			}
		}
	}
	bestMode, bestV, worstMode, worstV := "", math.Inf(1), "", math.Inf(-1)
	var ref string
	for _, m := range e.spec.Modes {
		v, ok := medians[m]
		if !ok {
			continue
		}
		if ref == "" || m == defaultMode {
			ref = m
		}
		mv := experiment.Median(v)
		if mv < bestV {
			bestMode, bestV = m, mv
		}
		if mv > worstV {
			worstMode, worstV = m, mv
		}
	}
	if bestMode == "" {
		return "no mode completed at a concurrency above 1"
	}
	refV := experiment.Median(medians[ref])
	refName := ref + " mode"
	if ref == defaultMode {
		refName += " (corepin run's default)"
	}
	spread := fmt.Sprintf("%s slowed it most (%s)", worstMode, pct(worstV))
	if bestMode == ref {
		return fmt.Sprintf("at %d jobs at once, %s slowed each job least (%s vs alone); %s. Use %s for batches of this size on this machine.",
			common, refName, pct(refV), spread, ref)
	}
	c := MannWhitney(repeats[bestMode], repeats[ref])
	if !c.Significant() {
		return fmt.Sprintf("at %d jobs at once, keep %s: %s measured %s vs alone against its %s, a difference that is not significant (%s); %s.",
			common, refName, bestMode, pct(bestV), pct(refV), c, spread)
	}
	return fmt.Sprintf("at %d jobs at once, %s mode slowed each job least (%s vs alone), beating %s (%s) beyond the noise (%s); %s. Use %s for batches of this size on this machine.",
		common, bestMode, pct(bestV), refName, pct(refV), c, spread, bestMode)
}

// CurrentSpec returns the spec as configured.
func (e *concurrencyExp) CurrentSpec() any { return &e.spec }

// Resolve settles the job's workload ("auto": transcode or spin).
func (e *concurrencyExp) Resolve(*Env) { e.spec.Job.resolveWorkload() }
