package bench

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/corepin/corepin/enforce"
	"github.com/corepin/corepin/experiment"
	"github.com/corepin/corepin/topology"
)

// Env is what every experiment may use. It is built once per bench run.
type Env struct {
	Topo   *topology.Topology
	Driver enforce.Driver
	// Exe is the corepin binary, for jobs that run corepin workloads.
	Exe string
	// Dir is a scratch directory removed after the run.
	Dir   string
	Quick bool
	// Log receives progress notes (not results).
	Log io.Writer
}

// Logf writes a progress note.
func (e *Env) Logf(format string, args ...any) {
	if e.Log != nil {
		fmt.Fprintf(e.Log, format+"\n", args...)
	}
}

// Experiment is one of the classic CPU-sharing experiments.
type Experiment interface {
	// Name is the experiment's command-line name ("concurrency").
	Name() string
	// Title is a one-line description for the report.
	Title() string
	// Points returns the parameter space to measure.
	Points(env *Env) []experiment.Point
	// Run measures point p once.
	Run(ctx context.Context, env *Env, p experiment.Point) (experiment.Metrics, error)
	// Analyze turns the measured points into tables, charts and a
	// recommendation.
	Analyze(env *Env, points []experiment.PointResult) Analysis
}

// SetupTeardown is the optional ability of an experiment to prepare once
// before its points run (start a service, generate a clip) and to clean up.
type SetupTeardown interface {
	Setup(ctx context.Context, env *Env) error
	Teardown(env *Env) error
}

// Quantile returns the q-quantile (0..1) of xs by linear interpolation.
func Quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	sort.Float64s(s)
	pos := q * float64(len(s)-1)
	lo := int(math.Floor(pos))
	hi := min(lo+1, len(s)-1)
	return s[lo] + (s[hi]-s[lo])*(pos-float64(lo))
}

// Table is a summary table for the terminal and the report.
type Table struct {
	Title   string     `json:"title"`
	Columns []string   `json:"columns"`
	Rows    [][]string `json:"rows"`
	// Note is printed under the table (what limits a figure, say).
	Note string `json:"note,omitempty"`
}

// Chart kinds the report draws.
const (
	ChartBox     = "box"     // Series[i].Values per category
	ChartLine    = "line"    // Series[i].X, Y
	ChartHeatmap = "heatmap" // Grid with XLabels, YLabels
	ChartCDF     = "cdf"     // Series[i].X (latency), Y (percentile)
	ChartBar     = "bar"     // Series[i].Y per XLabels
)

// Series is one named line, box group or bar group of a chart.
type Series struct {
	Name string `json:"name"`
	// Box: one value slice per category (XLabels order).
	Values [][]float64 `json:"values,omitempty"`
	X      []float64   `json:"x,omitempty"`
	Y      []float64   `json:"y,omitempty"`
}

// Chart is the data of one chart; the report renders it.
type Chart struct {
	Kind    string      `json:"kind"`
	Title   string      `json:"title"`
	XLabel  string      `json:"x_label"`
	YLabel  string      `json:"y_label"`
	XLabels []string    `json:"x_labels,omitempty"`
	YLabels []string    `json:"y_labels,omitempty"`
	Series  []Series    `json:"series,omitempty"`
	Grid    [][]float64 `json:"grid,omitempty"` // heatmap: Grid[y][x]
	LogX    bool        `json:"log_x,omitempty"`
}

// Analysis is what an experiment concludes.
type Analysis struct {
	// Notice comes first in the experiment's text and report section: what
	// the run measured differs from what was asked (no ffmpeg: the spin
	// kernel, not transcodes).
	Notice string  `json:"notice,omitempty"`
	Tables []Table `json:"tables"`
	Charts []Chart `json:"charts"`
	// Recommendation says which configuration to use and what it buys.
	Recommendation string `json:"recommendation"`
	// Rows are the results as data, one per measured configuration, for
	// an experiment whose contract names them (wakeup: design.md).
	Rows []Row `json:"rows,omitempty"`
	// Skipped are the configurations this machine could not run, and why.
	Skipped []Skip `json:"skipped,omitempty"`
}

// ExperimentReport is one experiment's results and analysis.
type ExperimentReport struct {
	Name     string                   `json:"name"`
	Title    string                   `json:"title"`
	Points   []experiment.PointResult `json:"points"`
	Analysis Analysis                 `json:"analysis"`
	Elapsed  float64                  `json:"elapsed_s"`
	Error    string                   `json:"error,omitempty"`
}

// MaxRepeats bounds Options.Repeats: a point measured more often than
// this gains nothing a report can show, and the run would not end.
const MaxRepeats = 100

// MaxRuns bounds the runs one experiment plans (its points times
// Options.Repeats).
const MaxRuns = 100_000

// Options tunes a bench run.
type Options struct {
	// Repeats per point (at least 5 unless a test says otherwise).
	Repeats int
	// Warmup runs the first point once, unrecorded, before measuring.
	Warmup bool
	// Seed fixes the randomised order (0: from the clock).
	Seed uint64
	// OnMeasure is called after every measured run (progress, storage).
	OnMeasure func(exp string, p experiment.Point, repeat int, m experiment.Metrics, err error)
	// OnPlan is called once per experiment with the number of runs, and
	// again with the added runs when a second stage starts (Sequential).
	OnPlan func(exp string, runs int)
}

// Sequential is the optional ability of an experiment to ask for more
// repeats while its answer is open: after the planned rounds RunExperiment
// asks Open which points (indexes into pts) a comparison still waits on,
// and measures those Options.Repeats more times each, in interleaved,
// shuffled rounds, before it analyzes. There is one such second stage,
// not a loop until significance: two looks at the data keep the chance
// of a false difference near the level of one.
type Sequential interface {
	Open(env *Env, pts []experiment.PointResult) []int
}

type task struct {
	point  int
	repeat int
}

// RunExperiment measures every point of e Repeats times in a randomised,
// interleaved order (so slow drift of the machine spreads over all points
// instead of biasing one), after an optional warm-up, then analyzes.
func RunExperiment(ctx context.Context, env *Env, e Experiment, o Options) (ExperimentReport, error) {
	start := time.Now()
	rep := ExperimentReport{Name: e.Name(), Title: e.Title()}
	if o.Repeats < 1 {
		o.Repeats = 5
	}
	if o.Repeats > MaxRepeats {
		return rep, fmt.Errorf("%w: %d repeats: at most %d", experiment.ErrUsage, o.Repeats, MaxRepeats)
	}
	if st, ok := e.(SetupTeardown); ok {
		if err := st.Setup(ctx, env); err != nil {
			return rep, fmt.Errorf("setting up %s: %w", e.Name(), err)
		}
		defer func() {
			if err := st.Teardown(env); err != nil {
				env.Logf("tearing down %s: %v", e.Name(), err)
			}
		}()
	}
	points := e.Points(env)
	if len(points) == 0 {
		return rep, fmt.Errorf("%s: no points to measure", e.Name())
	}
	if len(points) > MaxRuns/o.Repeats {
		return rep, fmt.Errorf("%w: %s: %d points x %d repeats: at most %d runs; shorten the spec's lists or --repeats", experiment.ErrUsage, e.Name(), len(points), o.Repeats, MaxRuns)
	}
	rep.Points = make([]experiment.PointResult, len(points))
	for i, p := range points {
		rep.Points[i].Point = p
	}
	if o.Warmup {
		if _, err := e.Run(ctx, env, points[0]); err != nil && ctx.Err() == nil {
			env.Logf("%s: warm-up run failed: %v", e.Name(), err)
		}
	}
	var tasks []task
	for r := range o.Repeats {
		for i := range points {
			tasks = append(tasks, task{i, r})
		}
	}
	seed := o.Seed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	rng := rand.New(rand.NewPCG(seed, 0x636f726570696e))
	// Shuffle within each round of repeats: every point is measured once
	// per round, rounds follow each other (interleaved repeats).
	for r := range o.Repeats {
		round := tasks[r*len(points) : (r+1)*len(points)]
		rng.Shuffle(len(round), func(i, j int) { round[i], round[j] = round[j], round[i] })
	}
	if o.OnPlan != nil {
		o.OnPlan(e.Name(), len(tasks))
	}
	run := func(tasks []task) error {
		for _, t := range tasks {
			if err := ctx.Err(); err != nil {
				rep.Elapsed = time.Since(start).Seconds()
				return err
			}
			m, err := e.Run(ctx, env, points[t.point])
			for k, v := range m {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					delete(m, k) // not measured; JSON and the database have no NaN
				}
			}
			pr := &rep.Points[t.point]
			if err != nil {
				pr.Errors = append(pr.Errors, err.Error())
			} else {
				pr.Repeats = append(pr.Repeats, m)
			}
			if o.OnMeasure != nil {
				o.OnMeasure(e.Name(), points[t.point], t.repeat, m, err)
			}
		}
		return nil
	}
	if err := run(tasks); err != nil {
		return rep, err
	}
	if sq, ok := e.(Sequential); ok {
		var open []int
		for _, i := range sq.Open(env, rep.Points) {
			if i >= 0 && i < len(points) && !slices.Contains(open, i) {
				open = append(open, i)
			}
		}
		if len(open) > 0 {
			var more []task
			for r := range o.Repeats {
				round := make([]task, 0, len(open))
				for _, i := range open {
					round = append(round, task{i, o.Repeats + r})
				}
				rng.Shuffle(len(round), func(i, j int) { round[i], round[j] = round[j], round[i] })
				more = append(more, round...)
			}
			env.Logf("%s: the answer is open after %d repeats: %d more runs of %d points", e.Name(), o.Repeats, len(more), len(open))
			if o.OnPlan != nil {
				o.OnPlan(e.Name()+" (second stage)", len(more))
			}
			if err := run(more); err != nil {
				return rep, err
			}
		}
	}
	rep.Analysis = e.Analyze(env, rep.Points)
	rep.Elapsed = time.Since(start).Seconds()
	var failed []string
	for _, pr := range rep.Points {
		if len(pr.Repeats) == 0 {
			failed = append(failed, fmt.Sprintf("%s: %s", pr.Point.Label(), pr.Errors[0]))
		}
	}
	if len(failed) > 0 {
		return rep, fmt.Errorf("%s: %d points failed every repeat (%s)", e.Name(), len(failed), failed[0])
	}
	return rep, nil
}

// Registry holds the experiments by name, in the order `corepin bench` runs
// them.
var registry []func() Experiment

// Register adds an experiment constructor; experiment files call it from
// init.
func Register(f func() Experiment) { registry = append(registry, f) }

// Experiments returns a fresh instance of every registered experiment,
// ordered as listed in Order.
func Experiments() []Experiment {
	out := make([]Experiment, 0, len(registry))
	for _, f := range registry {
		out = append(out, f())
	}
	slices.SortStableFunc(out, func(a, b Experiment) int {
		return cmp.Compare(orderOf(a.Name()), orderOf(b.Name()))
	})
	return out
}

// Order is the canonical order of the experiments.
var Order = []string{"concurrency", "threads", "throughput", "colocation", "oversubscription", "wakeup"}

func orderOf(name string) int {
	if i := slices.Index(Order, name); i >= 0 {
		return i
	}
	return len(Order)
}

// Select returns the experiments named (all when names is empty), or an
// error naming the unknown one and the known ones.
func Select(names []string) ([]Experiment, error) {
	all := Experiments()
	if len(names) == 0 {
		return all, nil
	}
	var out []Experiment
	for _, n := range names {
		i := slices.IndexFunc(all, func(e Experiment) bool { return e.Name() == n })
		if i < 0 {
			known := make([]string, len(all))
			for j, e := range all {
				known[j] = e.Name()
			}
			return nil, fmt.Errorf("%w: unknown experiment %q: choose from %s", experiment.ErrUsage, n, strings.Join(known, ", "))
		}
		out = append(out, all[i])
	}
	return out, nil
}
