package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/corepin/corepin/bench"
	"github.com/corepin/corepin/bench/render"
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

Points run in a randomised, interleaved order after a warm-up, at least 5
repeats each; results go to the results database and report/index.html.

Examples:
  corepin bench --quick
  corepin bench concurrency threads
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
			return runBench(cmd.Context(), e, f, args, os.Args)
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&f.quick, "quick", false, "small variants of every experiment (minutes, not hours)")
	fl.IntVar(&f.repeats, "repeats", 5, "repeats per point (at least 5 for medians worth reading)")
	fl.StringVar(&f.spec, "spec", "", "YAML file overriding experiments' parameters (top-level key: experiment name)")
	fl.StringVar(&f.db, "db", "", "results database (default $COREPIN_DB or ~/.local/share/corepin/results.db)")
	fl.StringVar(&f.reportDir, "report-dir", "report", "where to write index.html")
	fl.Uint64Var(&f.seed, "seed", 0, "seed of the randomised order (default: from the clock)")
	fl.StringVar(&f.driver, "driver", "auto", "enforcement: auto | cgroup-v1 | cgroup-v2 | affinity")
	return cmd
}

func runBench(ctx context.Context, e *env, f benchFlags, names []string, argv []string) error {
	if f.repeats < 1 {
		return Usagef("--repeats %d: must be at least 1", f.repeats)
	}
	exps, err := bench.Select(names)
	if err != nil {
		return &UsageError{Err: err}
	}
	var specData []byte
	if f.spec != "" {
		if specData, err = os.ReadFile(f.spec); err != nil {
			return Usagef("reading --spec: %v", err)
		}
	}
	if err := bench.Configure(exps, specData, f.quick); err != nil {
		return &UsageError{Err: err}
	}
	topo, err := openTopology("", "/")
	if err != nil {
		return err
	}
	if err := checkDriverFlag(f.driver); err != nil {
		return err
	}
	host, err := nodecore.SetUpHost(ctx, topo, nodecore.HostOptions{Driver: f.driver, Log: e.stderr})
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
	var topoText bytes.Buffer
	_ = topo.Render(&topoText, topology.RenderOptions{})
	env := &bench.Env{Topo: topo, Driver: driver, Exe: exe, Dir: dir, Quick: f.quick, Log: e.stderr}
	if f.seed == 0 {
		f.seed = uint64(time.Now().UnixNano())
	}
	argv = append([]string{"corepin"}, argv[1:]...)
	params, err := bench.ResolveParams(bench.Params{Quick: f.quick, Repeats: f.repeats, Seed: f.seed, Driver: driver.Name(),
		Argv: argv, Commands: []string{runner.ShellJoin(argv)}, SpecFile: f.spec}, exps, env)
	if err != nil {
		return err
	}
	run, err := store.NewRun("bench", params, Version, topo.Summary(), topo.Doc())
	if err != nil {
		return err
	}
	report := bench.Report{
		GeneratedAt: run.StartedAt, CorepinVersion: Version, Kernel: run.Kernel, Hostname: run.Hostname,
		Quick: f.quick, Driver: driver.Name(), Topology: topo.Doc(), TopologySummary: topo.Summary(),
		TopologyText: topoText.String(), Commands: params.Commands, Params: params,
	}
	db, runID, err := openBenchDB(e, f, run)
	if err != nil {
		return err
	}
	defer db.Close()
	report.RunID = runID

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	bar := newBenchProgress(e)
	var storeErr error
	opts := bench.Options{
		Repeats: f.repeats, Warmup: true, Seed: f.seed,
		OnPlan: bar.plan,
		OnMeasure: func(exp string, p bench.Point, repeat int, m bench.Metrics, err error) {
			bar.step(exp, p, err)
			if err != nil || m == nil {
				return
			}
			rows, merr := bench.Measurements(exp, p, repeat, m)
			if merr == nil {
				merr = db.AddMeasurement(runID, rows...)
			}
			if merr != nil && storeErr == nil {
				storeErr = merr
			}
		},
	}
	var failed []string
	for _, x := range exps {
		rep, err := bench.RunExperiment(ctx, env, x, opts)
		if err != nil {
			rep.Error = err.Error()
			failed = append(failed, x.Name())
		}
		rows, merr := bench.ExperimentMeasurements(rep)
		if merr == nil {
			merr = db.AddMeasurement(runID, rows...)
		}
		if merr != nil && storeErr == nil {
			storeErr = merr
		}
		report.Experiments = append(report.Experiments, rep)
		if ctx.Err() != nil {
			break
		}
	}
	bar.finish()
	_ = db.FinishRun(runID, time.Now())
	path, herr := render.WriteHTML(f.reportDir, report)
	if e.JSON() {
		if err := e.PrintJSON(report); err != nil {
			return err
		}
	} else {
		if err := render.WriteText(e.stdout, report); err != nil {
			return err
		}
		if herr == nil {
			fmt.Fprintf(e.stdout, "\nReport: %s   (regenerate: corepin report --run %d)\n", path, runID)
		}
		fmt.Fprintf(e.stdout, "Results: %s (run %d)\n", db.Path(), runID)
	}
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("bench stopped: %w", ctx.Err())
	case herr != nil:
		return herr
	case storeErr != nil:
		return fmt.Errorf("recording measurements: %w", storeErr)
	case len(failed) > 0:
		return fmt.Errorf("experiments failed: %s", strings.Join(failed, ", "))
	}
	return nil
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

func (p *benchProgress) step(exp string, pt bench.Point, err error) {
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
			file, err := render.WriteHTML(dir, r)
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
