package bench

import (
	"context"
	"fmt"
	"math"
	"strconv"

	"github.com/corepin/corepin/runner"
	"github.com/corepin/corepin/workload"
)

func init() { Register(func() Experiment { return &threadsExp{} }) }

// threadsSpec is the encoder study: a fixed CPU allotment, the job's thread
// count swept over multiples of it and "auto".
type threadsSpec struct {
	Job jobSpec `yaml:"job" json:"job"`
	// CPUs is the pinned allotment K (0: the whole machine, capped at 4).
	CPUs int `yaml:"cpus" json:"cpus"`
	// Threads are multiples of K ("0.5" = K/2) or "auto".
	Threads []string `yaml:"threads" json:"threads"`
}

type threadsExp struct {
	spec threadsSpec
	job  *job
	k    int
}

func (e *threadsExp) Name() string  { return "threads" }
func (e *threadsExp) Title() string { return "thread count swept over a fixed, pinned CPU allotment" }

func (e *threadsExp) Spec(quick bool) any {
	e.spec = threadsSpec{
		Job:     jobSpec{Workload: WorkloadAuto, JobSeconds: 2, ClipWidth: 1920, ClipHeight: 1080, ClipSeconds: 2, Preset: "medium"},
		Threads: []string{"1t", "0.5", "1", "2", "4", "auto"},
	}
	if quick {
		e.spec.Job = jobSpec{Workload: WorkloadAuto, JobSeconds: 0.4, ClipWidth: 640, ClipHeight: 360, ClipSeconds: 1, Preset: "veryfast"}
	}
	return &e.spec
}

func (e *threadsExp) Setup(ctx context.Context, env *Env) error {
	if e.spec.Threads == nil {
		e.Spec(env.Quick)
	}
	e.k = e.allotment(env)
	j, err := resolveJob(ctx, env, &e.spec.Job)
	e.job = j
	return err
}

func (e *threadsExp) Teardown(*Env) error { return nil }

func (e *threadsExp) allotment(env *Env) int {
	if e.spec.CPUs > 0 {
		return min(e.spec.CPUs, env.Topo.Allowed().Size())
	}
	return min(4, env.Topo.Allowed().Size())
}

// threadCount turns a spec entry into a count: "1t" is one thread, a
// number is a multiple of K, "auto" leaves it to the workload.
func threadCount(s string, k int) (string, error) {
	switch s {
	case "auto":
		return "auto", nil
	case "1t":
		return "1", nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f <= 0 {
		return "", fmt.Errorf("%w: threads %q: use 1t, a multiple of the allotment such as 0.5 or 2, or auto", ErrUsage, s)
	}
	return strconv.Itoa(max(1, int(math.Round(f*float64(k))))), nil
}

func (e *threadsExp) Points(env *Env) []Point {
	if e.spec.Threads == nil {
		e.Spec(env.Quick)
	}
	k := e.allotment(env)
	var ps []Point
	seen := map[string]bool{}
	for _, s := range e.spec.Threads {
		n, err := threadCount(s, k)
		if err != nil || seen[n] {
			continue
		}
		seen[n] = true
		ps = append(ps, P("cpus", k, "threads", n))
	}
	return ps
}

func (e *threadsExp) Run(ctx context.Context, env *Env, p Point) (Metrics, error) {
	threads := p.Get("threads")
	if threads == "auto" {
		threads = workload.ThreadsNative // the encoder's own auto, not corepin's
	}
	b, err := runBatch(ctx, env, e.job.argv(threads, false), 1, 1, float64(e.k), runner.Pinned, 0)
	if err != nil {
		return nil, err
	}
	j := b.jobs[0]
	return Metrics{"rate": e.job.work(j) / j.WallS, "wall_s": j.WallS, "migrations": float64(j.Migrations)}, nil
}

func (e *threadsExp) Analyze(env *Env, pts []PointResult) Analysis {
	unit := e.spec.Job.unit()
	k := "?"
	if len(pts) > 0 {
		k = pts[0].Point.Get("cpus")
	}
	var auto, bestV float64 = math.NaN(), math.Inf(-1)
	best := ""
	t := Table{Title: fmt.Sprintf("One job pinned to %s CPUs, thread count swept (medians)", k),
		Columns: []string{"threads", unit + "/s", "spread", "vs auto", "wall"}}
	for _, p := range pts {
		if p.Point.Get("threads") == "auto" {
			auto = p.Median("rate")
		}
		if v := p.Median("rate"); v > bestV {
			best, bestV = p.Point.Get("threads"), v
		}
	}
	line := Chart{Kind: ChartBar, Title: fmt.Sprintf("%s/s by thread count on %s pinned CPUs", unit, k),
		XLabel: "threads", YLabel: unit + "/s"}
	s := Series{Name: "median"}
	for _, p := range pts {
		lo, hi := p.Spread("rate")
		t.Rows = append(t.Rows, []string{p.Point.Get("threads"), fmt.Sprintf("%.1f", p.Median("rate")),
			fmt.Sprintf("%.1f-%.1f", lo, hi), pct(p.Median("rate")/auto - 1), fmt.Sprintf("%.2fs", p.Median("wall_s"))})
		line.XLabels = append(line.XLabels, p.Point.Get("threads"))
		s.Y = append(s.Y, p.Median("rate"))
	}
	line.Series = []Series{s}
	a := Analysis{Notice: e.spec.Job.Substitute, Tables: []Table{t}, Charts: []Chart{line}}
	if best != "" {
		gain := bestV/auto - 1
		a.Recommendation = fmt.Sprintf("with %s pinned CPUs, run %s threads: %.1f %s/s, %s vs the workload's auto", k, best, bestV, unit, pct(gain))
		if best == k {
			a.Recommendation += " (threads = CPUs, as corepin run --threads auto sets)"
		}
		if math.IsNaN(auto) {
			a.Recommendation = fmt.Sprintf("with %s pinned CPUs, run %s threads (%.1f %s/s)", k, best, bestV, unit)
		}
	}
	return a
}

// CurrentSpec returns the spec as configured.
func (e *threadsExp) CurrentSpec() any { return &e.spec }

// Resolve settles the job's workload ("auto": transcode or spin).
func (e *threadsExp) Resolve(*Env) { e.spec.Job.resolveWorkload() }
