package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/enforce"
	"github.com/corepin/corepin/nodecore"
	"github.com/corepin/corepin/runner"
)

const runUsage = `Run a batch of jobs, each pinned (or limited) to its own CPUs, with its
thread count sized to them, and measured: wall, user and sys time, the CPUs
its threads actually ran on, migrations, context switches and throttling.

Placeholders in the command: {job} (0..N-1), {cpus} (K), {cpuset} (the
job's CPUs, list format), {threads}. OMP_NUM_THREADS, GOMAXPROCS and friends
are set to the thread count.

Modes: pinned (exclusive cpuset of K whole CPUs from the allocator: whole
cores, one L3 where possible), quota (CFS quota of K CPUs over the shared
pool), burst (quota of 2K), unbounded (weight only).

Examples:
  corepin run --jobs 8 --concurrency 4 --cpus 2 -- \
      ffmpeg -threads {threads} -i in.mp4 -f null -
  corepin run --jobs 4 --cpus 1 --mode quota -o json -- sh -c 'grep Cpus_allowed_list /proc/self/status'
  corepin run --qos BE --mode unbounded --cpus 2 --jobs 2 -- corepin workload spin --seconds 30
  corepin run --jobs-file jobs.txt --concurrency 3 --cpus 2`

func init() { register(newRunCmd) }

// runSysfsRoot is the machine run reads its topology from: this one. Tests
// point it at a dump (replaceRunRoot) to give this machine isolated CPUs.
var runSysfsRoot = "/"

// beRoot is the root group of best-effort batches, beside "corepin": the
// name the agent refuses to let a workload adopt a group in.
const beRoot = nodecore.BERunRoot

type runFlags struct {
	jobs        int
	jobsFile    string
	concurrency int
	cpus        float64
	mode        string
	qos         string
	threads     string
	db          string
	noDB        bool
	driver      string
	sample      time.Duration
	suppress    bool
	verbose     bool
}

func newRunCmd(e *env) *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run [flags] -- CMD ARGS...",
		Short: "Run a batch of pinned, thread-sized, measured jobs",
		Long:  runUsage,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("mode") {
				f.mode = "" // the QoS picks the mode (runner.Spec.Normalize)
			}
			return runBatch(cmd.Context(), e, f, args, cmd.Flags().Changed("jobs"))
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&f.jobs, "jobs", 1, "number of jobs (repeats the command)")
	fl.StringVar(&f.jobsFile, "jobs-file", "", "file with one shell command per line (# comments and blank lines skipped)")
	fl.IntVar(&f.concurrency, "concurrency", 0, "jobs at once (default: as many as fit, allowed CPUs / --cpus)")
	fl.Float64Var(&f.cpus, "cpus", 1, "CPUs per job (K); fractional only for quota, burst and unbounded")
	fl.StringVar(&f.mode, "mode", "pinned", "pinned | quota | burst | unbounded (default: unbounded with --qos BE, quota with --qos LS)")
	fl.StringVar(&f.qos, "qos", "", "LSE | LSR | LS | BE (default: LSE when pinned, LS otherwise)")
	fl.StringVar(&f.threads, "threads", "auto", "threads per job: auto (= its CPUs) or a number, at most 16 per CPU")
	fl.StringVar(&f.db, "db", "", "results database (default $COREPIN_DB or ~/.local/share/corepin/results.db)")
	fl.BoolVar(&f.noDB, "no-db", false, "do not record results")
	fl.BoolVar(&f.suppress, "suppress", false, "with --qos BE and no agent: also shrink the batch's CPUs as the rest of the machine's load grows (Koordinator's budget); off by default, since on a 2-CPU machine cpu.idle alone kept the service's p99 as low and the batch 96% of the idle CPU where suppression kept 55% (corepin bench colocation)")
	fl.StringVar(&f.driver, "driver", "auto", "enforcement: auto | cgroup-v1 | cgroup-v2 | affinity")
	fl.DurationVar(&f.sample, "sample-interval", 0, "how often to sample the CPUs jobs run on (default 100ms)")
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "say each note in full (what the driver cannot enforce here, where results and shared state go), not in one line")
	return cmd
}

// maxJobsFile bounds the size of a --jobs-file.
const maxJobsFile = 16 << 20

// jobCommands builds one argv per job from the flags and the command line.
func jobCommands(f runFlags, args []string, jobsSet bool) ([][]string, error) {
	if f.jobsFile != "" {
		if len(args) > 0 {
			return nil, Usagef("give either --jobs-file or a command after --, not both")
		}
		if jobsSet {
			return nil, Usagef("--jobs repeats the command after --; with --jobs-file every line is a job")
		}
		return readJobsFile(f.jobsFile)
	}
	if len(args) == 0 {
		return nil, Usagef("no command: corepin run [flags] -- CMD ARGS... (or --jobs-file FILE)")
	}
	if f.jobs < 1 || f.jobs > runner.MaxJobs {
		return nil, Usagef("--jobs %d: must be between 1 and %d", f.jobs, runner.MaxJobs)
	}
	cmds := make([][]string, f.jobs)
	for i := range cmds {
		cmds[i] = args
	}
	return cmds, nil
}

// readJobsFile reads one shell command per line from a regular text file
// of at most maxJobsFile bytes and runner.MaxJobs commands; # comments and
// blank lines are skipped.
func readJobsFile(name string) ([][]string, error) {
	file, err := os.Open(name)
	if err != nil {
		return nil, Usagef("reading --jobs-file: %w", err)
	}
	defer file.Close()
	st, err := file.Stat()
	if err != nil {
		return nil, Usagef("reading --jobs-file: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, Usagef("--jobs-file %s is not a regular file (%s): give a text file with one command per line", name, st.Mode().Type())
	}
	if st.Size() > maxJobsFile {
		return nil, Usagef("--jobs-file %s has %d bytes, at most %d: split the batch", name, st.Size(), maxJobsFile)
	}
	data, err := io.ReadAll(io.LimitReader(file, maxJobsFile+1))
	if err != nil {
		return nil, Usagef("reading --jobs-file %s: %w", name, err)
	}
	if len(data) > maxJobsFile {
		return nil, Usagef("--jobs-file %s is over %d bytes: split the batch", name, maxJobsFile)
	}
	return parseJobsFile(name, data)
}

// parseJobsFile turns the text of a jobs file into one /bin/sh -c argv per
// command line; errors are usage errors naming the file and line.
func parseJobsFile(name string, data []byte) ([][]string, error) {
	var cmds [][]string
	for n, line := range strings.Split(string(data), "\n") {
		if i := strings.IndexByte(line, 0); i >= 0 || !utf8.ValidString(line) {
			return nil, Usagef("--jobs-file %s line %d is not text (a NUL byte or invalid UTF-8): give one shell command per line", name, n+1)
		}
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if len(cmds) == runner.MaxJobs {
			return nil, Usagef("--jobs-file %s has more than %d commands: split the batch", name, runner.MaxJobs)
		}
		cmds = append(cmds, []string{"/bin/sh", "-c", line})
	}
	if len(cmds) == 0 {
		return nil, Usagef("--jobs-file %s has no commands", name)
	}
	return cmds, nil
}

func detectDriver(name string, opts ...enforce.Option) (enforce.Driver, error) {
	switch name {
	case "auto":
		return enforce.Detect(opts...)
	case enforce.NameAffinity:
		return enforce.NewAffinity(opts...)
	case enforce.NameV1, enforce.NameV2:
		d, err := enforce.Detect(opts...)
		if err != nil {
			return nil, err
		}
		if d.Name() != name {
			return nil, fmt.Errorf("--driver %s is not usable here (detected %s: %s)", name, d.Name(), strings.Join(d.Limitations(), "; "))
		}
		return d, nil
	}
	return nil, Usagef("unknown --driver %q: use auto, cgroup-v1, cgroup-v2 or affinity", name)
}

func runBatch(ctx context.Context, e *env, f runFlags, args []string, jobsSet bool) error {
	cmds, err := jobCommands(f, args, jobsSet)
	if err != nil {
		return err
	}
	var mode runner.Mode
	if f.mode != "" {
		if mode, err = runner.ParseMode(f.mode); err != nil {
			return &UsageError{Err: err}
		}
	}
	qos, err := runner.ParseQoS(f.qos)
	if err != nil {
		return &UsageError{Err: err}
	}
	threads, err := runner.ParseThreads(f.threads)
	if err != nil {
		return &UsageError{Err: err}
	}
	if f.sample < 0 {
		return Usagef("--sample-interval %v: must be positive (or 0 for the default)", f.sample)
	}
	switch f.driver {
	case "auto", enforce.NameAffinity, enforce.NameV1, enforce.NameV2:
	default:
		return Usagef("unknown --driver %q: use auto, cgroup-v1, cgroup-v2 or affinity", f.driver)
	}
	topo, err := openTopology("", runSysfsRoot)
	if err != nil {
		return err
	}
	// Unpinned jobs (quota, burst, unbounded, and so every BE batch) share
	// the CPUs the kernel does not keep apart: never an isolated or
	// nohz_full CPU (issue 18: isolcpus=6,7 nohz_full=6,7 saw a BE batch
	// on 6 and 7). Pinned jobs avoid those CPUs too (alloc.IsolatedCPUs).
	pool := alloc.SharedCPUs(topo)
	conc := f.concurrency
	if conc == 0 {
		conc = max(1, int(math.Floor(float64(pool.Size())/f.cpus)))
	}
	spec, err := runner.Spec{Commands: cmds, Concurrency: conc, CPUs: f.cpus, Mode: mode, QoS: qos, Threads: threads,
		MachineCPUs: pool.Size()}.Normalize()
	if err != nil {
		return &UsageError{Err: err}
	}
	if f.suppress && spec.QoS != runner.BE {
		return Usagef("--suppress applies to --qos BE only")
	}
	if f.driver == enforce.NameAffinity && needsCgroup(spec.Mode) {
		return Usagef("--driver affinity cannot enforce --mode %s (a CFS quota needs a cpu cgroup): use --mode pinned or unbounded, or a cgroup driver", spec.Mode)
	}
	// What the run has to say before its jobs is said once, in one line
	// (-v: in full).
	var notes runNotes
	rec, err := openRecorder(f, &notes)
	if err != nil {
		return err
	}
	defer rec.Close()
	// Best-effort batches live under their own root, idle against
	// everything else on the machine (see enforce.RootPrioritizer).
	var dopts []enforce.Option
	if spec.QoS == runner.BE {
		dopts = append(dopts, enforce.WithRoot(beRoot))
	}
	driver, err := detectDriver(f.driver, dopts...)
	if err != nil {
		return err
	}
	if driver.Name() == enforce.NameAffinity && needsCgroup(spec.Mode) {
		return Usagef("--mode %s needs a cpu cgroup, and none is usable here (%s): use --mode pinned or unbounded",
			spec.Mode, strings.Join(driver.Limitations()[:1], ""))
	}
	if spec.QoS == runner.BE {
		if rp, ok := driver.(enforce.RootPrioritizer); ok {
			if _, err := rp.SetRootIdle(); err != nil {
				return fmt.Errorf("protecting latency-sensitive work from the BE batch: %w", err)
			}
		}
	}
	if removed, err := driver.Cleanup(); err != nil {
		fmt.Fprintf(e.stderr, "corepin: warning: cleaning up groups of earlier runs: %v\n", err)
	} else if len(removed) > 0 {
		fmt.Fprintf(e.stderr, "corepin: removed %d group(s) left by a crashed run\n", len(removed))
	}
	notes.addDriver(driver)
	placer, closePlacer, err := runPlacer(topo, driver, &notes)
	if err != nil {
		return err
	}
	defer closePlacer()
	notes.print(e.stderr, f.verbose)
	if err := rec.begin(e.stderr, topo, spec, driver.Name()); err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	progress := newProgress(e, len(cmds))
	r := &runner.Runner{
		Driver:         driver,
		Placer:         placer,
		Pool:           pool,
		SampleInterval: f.sample,
		OnEvent:        progress.event,
		OnResult:       rec.add,
		Output: func(job int, stdout []byte) {
			if len(stdout) == 0 {
				return
			}
			w := e.stdout
			if e.JSON() {
				w = e.stderr // keep stdout a clean JSON stream
			}
			// Jobs' output and the progress lines come from different
			// goroutines, to stderr alike with -o json: one at a time.
			progress.mu.Lock()
			defer progress.mu.Unlock()
			progress.clear()
			w.Write(stdout)
			if stdout[len(stdout)-1] != '\n' {
				io.WriteString(w, "\n")
			}
		},
	}
	var q *runQoS
	if f.suppress && spec.QoS == runner.BE && spec.Mode != runner.Pinned && driver.Name() != enforce.NameAffinity {
		qctx, qstop := context.WithCancel(ctx)
		defer qstop()
		q = startRunQoS(qctx, r, pool, e.stderr)
	}
	start := time.Now()
	results, runErr := r.Run(ctx, spec)
	elapsed := time.Since(start)
	if q != nil {
		fmt.Fprint(e.stderr, q.summary())
	}
	progress.finish()
	sum := runner.Summarize(results, elapsed)
	rec.finish()
	if e.JSON() {
		enc := json.NewEncoder(e.stdout)
		for _, res := range results {
			if err := enc.Encode(res); err != nil {
				return err
			}
		}
	} else {
		printRunTable(e.stdout, spec, driver.Name(), results, sum, rec.where())
	}
	if runErr != nil {
		if errors.Is(runErr, runner.ErrSpec) {
			return &UsageError{Err: runErr}
		}
		return runErr
	}
	if sum.Failed > 0 {
		return fmt.Errorf("%d of %d jobs failed", sum.Failed, sum.Jobs)
	}
	return nil
}

// needsCgroup reports whether mode needs CFS bandwidth control, which the
// affinity driver cannot give.
func needsCgroup(m runner.Mode) bool { return m == runner.Quota || m == runner.Burst }

func printRunTable(w io.Writer, spec runner.Spec, driver string, results []runner.JobResult, s runner.Summary, where string) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tCPUSET\tCPUS USED\tTHREADS\tWALL\tUSER\tSYS\tEFF\tMIGR\tTHROTTLED\tEXIT")
	for _, r := range results {
		exit := fmt.Sprint(r.ExitCode)
		if r.Signal != "" {
			exit = r.Signal
		}
		if r.Error != "" {
			exit += " (" + r.Error + ")"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%.2fs\t%.2fs\t%.2fs\t%.0f%%\t%d\t%.2fs\t%s\n",
			r.Job, r.Cpuset, r.CPUsUsed, r.Threads, r.WallS, r.UserS, r.SysS, 100*r.Efficiency(), r.Migrations, r.ThrottledS, exit)
	}
	tw.Flush()
	fmt.Fprintf(w, "\n%d jobs (%d failed), %s mode, %v CPUs each, %d at a time, %s\n", s.Jobs, s.Failed, spec.Mode, spec.CPUs, spec.Concurrency, driver)
	fmt.Fprintf(w, "  Wall per job:   p50 %.2f s   p90 %.2f s   max %.2f s\n", s.WallP50S, s.WallP90S, s.WallMaxS)
	fmt.Fprintf(w, "  Throughput:     %.1f jobs/min over %.2f s", s.JobsPerMin, s.ElapsedS)
	if s.FramesPerSec > 0 {
		fmt.Fprintf(w, ", %.1f frames/s", s.FramesPerSec)
	}
	fmt.Fprintf(w, "\n  CPU efficiency: %.0f%% mean   migrations %d   throttled %.2f s\n", 100*s.MeanEfficiency, s.Migrations, s.ThrottledS)
	if where != "" {
		fmt.Fprintf(w, "  Results:        %s\n", where)
	}
}

// progress shows a bar on a terminal and a line per finished job elsewhere.
type progress struct {
	mu  sync.Mutex // held while writing, by event and by the run's Output
	bar *progressbar.ProgressBar
	w   io.Writer
	tty bool
}

func newProgress(e *env, total int) *progress {
	p := &progress{w: e.stderr}
	if f, ok := e.stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.tty = true
		p.bar = progressbar.NewOptions(total,
			progressbar.OptionSetWriter(e.stderr),
			progressbar.OptionSetDescription("jobs"),
			progressbar.OptionShowCount(),
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionClearOnFinish(),
		)
	}
	return p
}

func (p *progress) event(ev runner.Event) {
	if ev.Kind != runner.JobFinished {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if r := ev.Result; len(r.Leftovers) > 0 {
		p.clear()
		names := make([]string, len(r.Leftovers))
		for i, l := range r.Leftovers {
			names[i] = l.String()
		}
		fmt.Fprintf(p.w, "corepin: job %d left %d process(es) running, killed them: %s\n", r.Job, len(r.Leftovers), strings.Join(names, ", "))
	}
	if p.bar != nil {
		p.bar.Describe(fmt.Sprintf("jobs (%d running)", ev.Running))
		_ = p.bar.Add(1)
		return
	}
	r := ev.Result
	status := "ok"
	if r.ExitCode != 0 || r.Error != "" {
		status = fmt.Sprintf("exit %d %s", r.ExitCode, r.Error)
	}
	fmt.Fprintf(p.w, "[%d/%d] job %d on %s: %.2fs %s\n", ev.Done, ev.Total, r.Job, r.Cpuset, r.WallS, status)
}

func (p *progress) clear() {
	if p.bar != nil {
		_ = p.bar.Clear()
	}
}

func (p *progress) finish() {
	if p.bar != nil {
		_ = p.bar.Finish()
	}
}
