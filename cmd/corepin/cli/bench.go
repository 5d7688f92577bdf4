package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/corepin/corepin/bench"
	"github.com/corepin/corepin/bench/render"
	"github.com/corepin/corepin/enforce"
	"github.com/corepin/corepin/experiment"
	"github.com/corepin/corepin/nodecore"
	"github.com/corepin/corepin/runner"
	"github.com/corepin/corepin/store"
	"github.com/corepin/corepin/topology"
)

const benchUsage = `Reproduce the classic CPU-sharing experiments on this machine and say which
configuration to use:

  concurrency       per-job slowdown vs concurrency x CPUs per job x mode
  threads           encoder threads swept over a fixed CPU allotment
  throughput        workers x CPUs per worker filling the machine
  colocation        a latency-sensitive service beside a CPU-hungry batch
  oversubscription  communication-heavy vs compute-only processes, 1-4 per CPU
  wakeup            where the kernel wakes a service's threads beside a BE batch,
                    per BE route (none, sched_idle, cpu_idle, idle_parent,
                    weight), LS class (normal, rr, fifo) and batch size;
                    what it cannot run here (rr/fifo without the right, the
                    cgroup routes without root) it skips and says why; a
                    --spec may ask for route layered: the batch and the
                    service in the groups scx_layered's layers match

Points run in a randomised, interleaved order after a warm-up, at least 5
repeats each; results go to the results database and report/index.html.

Examples:
  corepin bench --quick
  corepin bench concurrency threads
  corepin bench wakeup --quick -o json
  corepin bench --spec my-bench.yaml --repeats 7`

func init() { register(newBenchCmd) }

type benchFlags struct {
	quick     bool
	repeats   int
	spec      string
	db        string
	reportDir string
	seed      uint64
	driver    string
}

func newBenchCmd(e *env) *cobra.Command {
	var f benchFlags
	cmd := &cobra.Command{
		Use:   "bench [EXPERIMENT...]",
		Short: "Run the CPU-sharing experiments and recommend a configuration",
		Long:  benchUsage,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runBench(cmd.Context(), e, f, args, os.Args, reportOptions(cmd))
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&f.quick, "quick", false, "small variants of every experiment (minutes, not hours)")
	fl.IntVar(&f.repeats, "repeats", 5, fmt.Sprintf("repeats per point, 1 to %d (at least 5 for medians worth reading)", bench.MaxRepeats))
	fl.StringVar(&f.spec, "spec", "", "YAML file overriding experiments' parameters (top-level key: experiment name)")
	fl.StringVar(&f.db, "db", "", "results database (default $COREPIN_DB or ~/.local/share/corepin/results.db)")
	fl.StringVar(&f.reportDir, "report-dir", "report", "where to write index.html")
	fl.Uint64Var(&f.seed, "seed", 0, "seed of the randomised order (default: from the clock)")
	fl.StringVar(&f.driver, "driver", "auto", "enforcement: auto | cgroup-v1 | cgroup-v2 | affinity")
	return cmd
}

// benchHost sets up the host for bench's runs with the --driver asked;
// a driver that names none, or that this machine can not use, is bad
// input.
func benchHost(ctx context.Context, e *env, topo *topology.Topology, driver string) (*nodecore.Host, error) {
	if err := checkDriverFlag(driver); err != nil {
		return nil, err
	}
	host, err := nodecore.SetUpHost(ctx, topo, nodecore.HostOptions{Driver: driver, Log: e.stderr})
	if errors.Is(err, enforce.ErrUnusable) {
		return nil, &UsageError{Err: err}
	}
	return host, err
}

func runBench(ctx context.Context, e *env, f benchFlags, names []string, argv []string, ro render.Options) error {
	exps, err := benchExperiments(f, names)
	if err != nil {
		return err
	}
	// SIGINT, SIGTERM: set-up, runs and children stop; what was measured is reported.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	topo, err := openTopology("", "/")
	if err != nil {
		return err
	}
	host, err := benchHost(ctx, e, topo, f.driver)
	if err != nil {
		return err
	}
	defer host.Close()
	driver := host.Driver
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding corepin's own binary: %w", err)
	}
	dir, err := os.MkdirTemp("", "corepin-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	env := &bench.Env{Topo: topo, Driver: driver, Exe: exe, Dir: dir, Quick: f.quick, Log: e.stderr}
	if f.seed == 0 {
		f.seed = uint64(time.Now().UnixNano())
	}
	argv = append([]string{"corepin"}, argv[1:]...)
	params, err := bench.ResolveParams(experiment.Params{Quick: f.quick, Repeats: f.repeats, Seed: f.seed, Driver: driver.Name(),
		Argv: argv, Commands: []string{runner.ShellJoin(argv)}, SpecFile: f.spec}, exps, env)
	if err != nil {
		return err
	}
	run, err := store.NewRun("bench", params, Version, topo.Summary(), topo.Doc())
	if err != nil {
		return err
	}
	db, runID, err := openBenchDB(e, f, run)
	if err != nil {
		return err
	}
	defer db.Close()
	report := bench.NewReport(run, params, topo)
	report.RunID = runID
	bar := newBenchProgress(e)
	opts := bench.Options{Repeats: f.repeats, Warmup: true, Seed: f.seed, OnPlan: bar.plan, OnMeasure: bar.step}
	report.Experiments, err = bench.RunAll(ctx, env, exps, opts, func(rows ...store.Measurement) error { return db.AddMeasurement(runID, rows...) })
	bar.finish()
	_ = db.FinishRun(runID, time.Now())
	path, herr := render.WriteHTML(f.reportDir, report, ro)
	if err := printBenchReport(e, report, path, herr == nil, db.Path()); err != nil {
		return err
	}
	if herr != nil && ctx.Err() == nil {
		return herr
	}
	return err
}

// benchExperiments are the experiments named (all when none), configured
// by --spec and --quick.
func benchExperiments(f benchFlags, names []string) ([]bench.Experiment, error) {
	if f.repeats < 1 || f.repeats > bench.MaxRepeats {
		return nil, Usagef("--repeats %d: want 1 to %d (5 gives medians worth reading)", f.repeats, bench.MaxRepeats)
	}
	exps, err := bench.Select(names)
	if err != nil {
		return nil, &UsageError{Err: err}
	}
	var specData []byte
	if f.spec != "" {
		if specData, err = readFlagFile("--spec", f.spec, maxSpecBytes); err != nil {
			return nil, err
		}
	}
	if err := experiment.Configure(exps, specData, f.quick); err != nil {
		return nil, &UsageError{Err: err}
	}
	return exps, nil
}

// printBenchReport prints the report: as text, with where its HTML
// (when written) and its results are, or as JSON with -o json.
func printBenchReport(e *env, report bench.Report, html string, written bool, dbPath string) error {
	if e.JSON() {
		return e.PrintJSON(report)
	}
	if err := render.WriteText(e.stdout, report); err != nil {
		return err
	}
	if written {
		fmt.Fprintf(e.stdout, "\nReport: %s   (regenerate: corepin report --run %d)\n", html, report.RunID)
	}
	fmt.Fprintf(e.stdout, "Results: %s (run %d)\n", dbPath, report.RunID)
	return nil
}

// reportOptions are what the HTML report needs of the CLI: the flags of
// `corepin bench` that take a value, read from the command's own
// definitions (its flags and those it inherits, such as -o), so the
// report keeps no copy of the flag table.
func reportOptions(cmd *cobra.Command) render.Options {
	var o render.Options
	bench, _, err := cmd.Root().Find([]string{"bench"})
	if err != nil {
		return o
	}
	add := func(f *pflag.Flag) {
		if f.NoOptDefVal != "" {
			return // a flag such as --quick takes no value
		}
		o.ValueFlags = append(o.ValueFlags, "--"+f.Name)
		if f.Shorthand != "" {
			o.ValueFlags = append(o.ValueFlags, "-"+f.Shorthand)
		}
	}
	bench.LocalFlags().VisitAll(add)
	bench.InheritedFlags().VisitAll(add)
	return o
}

// openBenchDB opens the results database and records run in it.
func openBenchDB(e *env, f benchFlags, run store.Run) (*store.DB, int64, error) {
	path, err := resultsPath(f.db)
	if err != nil {
		return nil, 0, err
	}
	db, err := store.Open(path)
	if err != nil {
		return nil, 0, err
	}
	noteInterrupted(e.stderr, db)
	id, err := db.BeginRun(run)
	if err != nil {
		db.Close()
		return nil, 0, err
	}
	return db, id, nil
}

// benchProgress is a progress bar over every planned run on a terminal,
// and a line per finished experiment point elsewhere.
type benchProgress struct {
	e     *env
	bar   *progressbar.ProgressBar
	tty   bool
	total int
	done  int
}

func newBenchProgress(e *env) *benchProgress {
	p := &benchProgress{e: e}
	if f, ok := e.stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.tty = true
	}
	return p
}

func (p *benchProgress) plan(exp string, runs int) {
	p.total, p.done = runs, 0
	if p.tty {
		if p.bar != nil {
			_ = p.bar.Finish()
		}
		p.bar = progressbar.NewOptions(runs, progressbar.OptionSetWriter(p.e.stderr),
			progressbar.OptionSetDescription(exp), progressbar.OptionShowCount(),
			progressbar.OptionSetElapsedTime(true), progressbar.OptionSetPredictTime(true),
			progressbar.OptionClearOnFinish())
		return
	}
	fmt.Fprintf(p.e.stderr, "corepin bench: %s: %d runs\n", exp, runs)
}

func (p *benchProgress) step(exp string, pt experiment.Point, _ int, _ experiment.Metrics, err error) {
	p.done++
	if p.bar != nil {
		_ = p.bar.Add(1)
		return
	}
	status := "ok"
	if err != nil {
		status = "error: " + err.Error()
	}
	fmt.Fprintf(p.e.stderr, "  [%d/%d] %s %s: %s\n", p.done, p.total, exp, pt.Label(), status)
}

func (p *benchProgress) finish() {
	if p.bar != nil {
		_ = p.bar.Finish()
	}
}

const reportUsage = `Regenerate report/index.html from the results database, for the newest
bench run or the one given.

Examples:
  corepin report
  corepin report --run 12 --report-dir /tmp/r`

func init() { register(newReportCmd) }

func newReportCmd(e *env) *cobra.Command {
	var db, dir string
	var runID int64
	cmd := &cobra.Command{
		Use:   "report",
		Short: "Regenerate the bench report from the results database",
		Long:  reportUsage,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := openResultsDB(db)
			if err != nil {
				return err
			}
			defer d.Close()
			path := d.Path()
			runs, err := d.Runs(store.RunFilter{ID: runID, Command: "bench"})
			if err != nil {
				return err
			}
			if len(runs) == 0 {
				if runID != 0 {
					return Usagef("no bench run %d in %s", runID, path)
				}
				return Usagef("no bench run in %s: run corepin bench first", path)
			}
			run := runs[len(runs)-1]
			ms, err := d.Measurements(run.ID, "")
			if err != nil {
				return err
			}
			r, err := bench.Rebuild(run, ms, &bench.Env{})
			if err != nil {
				return err
			}
			file, err := render.WriteHTML(dir, r, reportOptions(cmd))
			if err != nil {
				return err
			}
			if e.JSON() {
				return e.PrintJSON(map[string]any{"run_id": run.ID, "report": file})
			}
			if err := render.WriteText(e.stdout, r); err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "\nReport: %s\n", file)
			return nil
		},
	}
	cmd.Flags().StringVar(&db, "db", "", "results database (default $COREPIN_DB or ~/.local/share/corepin/results.db)")
	cmd.Flags().Int64Var(&runID, "run", 0, "bench run id (default: the newest)")
	cmd.Flags().StringVar(&dir, "report-dir", "report", "where to write index.html")
	return cmd
}
