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
	"slices"
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
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/enforce"
	"github.com/corepin/corepin/nodecore"
	"github.com/corepin/corepin/runner"
	"github.com/corepin/corepin/wakescan"
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
  corepin run --jobs-file jobs.txt --concurrency 3 --cpus 2
  corepin run --qos LS --sched rr --cpus 1 -- corepin workload service --listen 127.0.0.1:8080
  sudo corepin run --qos BE --wake-scan full --jobs 2 -- corepin workload spin --seconds 60
  sudo corepin run --qos LSE --cpus 2 --irq-isolate -- corepin workload service --listen 127.0.0.1:8080
  sudo corepin run --qos LSE --cpus 2 --no-load-balance --no-cpu-quota -- corepin workload service --listen 127.0.0.1:8080`

func init() { register(newRunCmd) }

// runSysfsRoot is the machine run reads its topology from: this one. Tests
// point it at a dump (replaceRunRoot) to give this machine isolated CPUs.
var runSysfsRoot = "/"

// runSchedRoot is the machine whose scheduler features --wake-scan full
// switches: this one. Tests point it at a directory holding a features
// file.
var runSchedRoot = "/"

// runIRQRoot is the machine whose interrupts --irq-isolate steers: this
// one. Tests point it at a directory holding proc/irq.
var runIRQRoot = "/"

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
	sched       string
	wakeScan    string
	irqIsolate  bool
	noBalance   bool
	noQuota     bool
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
	fl.StringVar(&f.sched, "sched", enforce.RTNormal, "scheduling class of an LS job's threads: normal | rr | fifo (the real-time route, at priority 1: a waking thread finds a CPU running only BE work, which the fair class's scan may miss on a busy machine; bounded to the job's --cpus of the pool where the kernel groups real-time time, else by its real-time throttling; needs root or ulimit -r >= 1)")
	fl.StringVar(&f.wakeScan, "wake-scan", "default", "with --qos BE: default (change nothing) or full (root, debugfs: SIS_UTIL off in /sys/kernel/debug/sched/features while the batch runs, so a waking service thread still finds a CPU running only BE work; the value found is recorded in the shared state first and restored by the last BE user)")
	fl.BoolVar(&f.irqIsolate, "irq-isolate", false, "with --qos LSE or LSR: keep movable device interrupts off each job's CPUs while it runs (root: /proc/irq/N/smp_affinity_list; the affinities found are recorded in the shared state first and given back when the job ends; per-CPU and managed interrupts stay, and are named)")
	fl.BoolVar(&f.noBalance, "no-load-balance", false, "with --qos LSE or LSR: take each job's CPUs out of the scheduler's load balancing while it runs (cgroup v2: its group an isolated partition; v1: cpuset.sched_load_balance 0, where the layout lets it take effect); a job it cannot be given fails with the kernel's or the layout's reason (docs/reference/lowlatency.md)")
	fl.BoolVar(&f.noQuota, "no-cpu-quota", false, "with --qos LSE or LSR: no CFS quota on each job's group (cpu.cfs_quota_us -1, cpu.max max); corepin's pinned groups carry none already, so this asserts it and refuses a class that would get one")
	fl.StringVar(&f.driver, "driver", "auto", "enforcement: auto | cgroup-v1 | cgroup-v2 | affinity")
	fl.DurationVar(&f.sample, "sample-interval", 0, "how often to sample the CPUs jobs run on (default 100ms)")
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "say each note in full (what the driver cannot enforce here, where results and shared state go), not in one line")
	return cmd
}

// minSampleInterval bounds --sample-interval from below: each sample reads
// every job's threads from /proc, and a shorter interval would spend a CPU
// on sampling the jobs it measures.
const minSampleInterval = time.Millisecond

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
	file, err := openFlagFile("--jobs-file", name)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	st, err := file.Stat()
	if err != nil {
		return nil, Usagef("reading --jobs-file: %w", err)
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

// checkDriverFlag refuses a --driver that names no driver.
func checkDriverFlag(name string) error {
	if !slices.Contains(nodecore.Drivers, name) {
		return Usagef("unknown --driver %q: use auto, cgroup-v1, cgroup-v2 or affinity", name)
	}
	return nil
}

// checkHostFlags refuses a --driver or --wake-scan that names no choice,
// and returns the --wake-scan mode.
func checkHostFlags(f runFlags) (wakescan.Mode, error) {
	if err := checkDriverFlag(f.driver); err != nil {
		return "", err
	}
	wake, err := wakescan.ParseMode(f.wakeScan)
	if err != nil {
		return "", Usagef("--wake-scan %q: want %s", f.wakeScan, strings.Join(wakescan.Modes, " or "))
	}
	return wake, nil
}

// exclusiveQoS reports whether q is a class with CPUs of its own (LSE,
// LSR), the only ones --irq-isolate, --no-load-balance and --no-cpu-quota
// apply to.
func exclusiveQoS(q runner.QoS) bool { return q == runner.LSE || q == runner.LSR }

// runSpec reads the batch the flags and the command line describe, on
// the CPUs unpinned jobs may share (pool).
func runSpec(f runFlags, args []string, jobsSet bool, pool cpuset.CPUSet) (runner.Spec, error) {
	cmds, err := jobCommands(f, args, jobsSet)
	if err != nil {
		return runner.Spec{}, err
	}
	var mode runner.Mode
	if f.mode != "" {
		if mode, err = runner.ParseMode(f.mode); err != nil {
			return runner.Spec{}, &UsageError{Err: err}
		}
	}
	qos, err := runner.ParseQoS(f.qos)
	if err != nil {
		return runner.Spec{}, &UsageError{Err: err}
	}
	threads, err := runner.ParseThreads(f.threads)
	if err != nil {
		return runner.Spec{}, &UsageError{Err: err}
	}
	rt, err := enforce.ParseRealTime(f.sched)
	if err != nil {
		return runner.Spec{}, Usagef("--sched %q: use normal, rr or fifo", f.sched)
	}
	conc := f.concurrency
	if conc == 0 {
		conc = max(1, int(math.Floor(float64(pool.Size())/f.cpus)))
	}
	spec, err := runner.Spec{Commands: cmds, Concurrency: conc, CPUs: f.cpus, Mode: mode, QoS: qos, Threads: threads,
		MachineCPUs: pool.Size(), RealTime: rt}.Normalize()
	if err != nil {
		return runner.Spec{}, &UsageError{Err: err}
	}
	if err := enforce.CheckRealTime(rt); err != nil {
		return runner.Spec{}, &UsageError{Err: err}
	}
	switch {
	case f.suppress && spec.QoS != runner.BE:
		return runner.Spec{}, Usagef("--suppress applies to --qos BE only")
	case f.wakeScan == string(wakescan.Full) && spec.QoS != runner.BE:
		return runner.Spec{}, Usagef("--wake-scan full applies to --qos BE only: it changes the scheduler while BE work runs")
	case f.irqIsolate && !exclusiveQoS(spec.QoS):
		return runner.Spec{}, Usagef("--irq-isolate applies to --qos LSE or LSR only: it keeps interrupts off CPUs of the job's own; qos %s shares its CPUs", spec.QoS)
	case f.noBalance && !exclusiveQoS(spec.QoS):
		return runner.Spec{}, Usagef("--no-load-balance applies to --qos LSE or LSR only: it takes CPUs of the job's own out of the scheduler's balancing; qos %s shares its CPUs", spec.QoS)
	case f.noQuota && !exclusiveQoS(spec.QoS):
		return runner.Spec{}, Usagef("--no-cpu-quota applies to --qos LSE or LSR only (an exclusive job's group); qos %s is bounded by its quota or weight on the shared pool", spec.QoS)
	case f.noBalance && f.driver == enforce.NameAffinity:
		return runner.Spec{}, Usagef("--no-load-balance needs a cpuset cgroup: use --driver auto, cgroup-v1 or cgroup-v2")
	case f.driver == enforce.NameAffinity && needsCgroup(spec.Mode):
		return runner.Spec{}, Usagef("--driver affinity cannot enforce --mode %s (a CFS quota needs a cpu cgroup): use --mode pinned or unbounded, or a cgroup driver", spec.Mode)
	}
	spec.NoLoadBalance = f.noBalance
	return spec, nil
}

func runBatch(ctx context.Context, e *env, f runFlags, args []string, jobsSet bool) error {
	if f.sample != 0 && (f.sample < minSampleInterval || f.sample > time.Minute) {
		return Usagef("--sample-interval %v: want %v to 1m (or 0 for the default, 100ms)", f.sample, minSampleInterval)
	}
	wake, err := checkHostFlags(f)
	if err != nil {
		return err
	}
	topo, err := openTopology("", runSysfsRoot)
	if err != nil {
		return err
	}
	// Unpinned jobs (quota, burst, unbounded, and so every BE batch) share
	// the CPUs the kernel does not keep apart (nodecore.Host.Pool).
	spec, err := runSpec(f, args, jobsSet, alloc.SharedCPUs(topo))
	if err != nil {
		return err
	}
	// What the run has to say before its jobs is said once, in one line
	// (-v: in full).
	var notes runNotes
	rec, err := openRecorder(f, &notes)
	if err != nil {
		return err
	}
	defer rec.Close()
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	host, err := nodecore.SetUpHost(ctx, topo, nodecore.HostOptions{Driver: f.driver, BE: spec.QoS == runner.BE, Placer: true,
		State: os.Getenv(nodecore.EnvState), SuppressBE: f.suppress && spec.Mode != runner.Pinned, Agent: agentRunning, Log: e.stderr,
		WakeScan: wake, SchedRoot: runSchedRoot, IRQIsolate: f.irqIsolate, IRQRoot: runIRQRoot,
		Check: func(d enforce.Driver) error {
			if d.Name() == enforce.NameAffinity && needsCgroup(spec.Mode) {
				return Usagef("--mode %s needs a cpu cgroup, and none is usable here (%s): use --mode pinned or unbounded",
					spec.Mode, strings.Join(d.Limitations()[:1], ""))
			}
			return nil
		}})
	if badStoreFile(err) || errors.Is(err, nodecore.ErrInvalid) || errors.Is(err, enforce.ErrUnusable) {
		return &UsageError{Err: err}
	}
	if err != nil {
		return err
	}
	defer host.Close()
	for _, n := range host.Notes {
		notes.add(n.Short, n.Detail...)
	}
	notes.print(e.stderr, f.verbose)
	if err := rec.begin(e.stderr, topo, spec, host.Driver.Name()); err != nil {
		return err
	}
	progress := newProgress(e, len(spec.Commands))
	r := &runner.Runner{Driver: host.Driver, Placer: host.Placer, Pool: host.Pool, SampleInterval: f.sample,
		OnEvent: progress.event, OnResult: rec.add, OnGroup: host.OnGroup, Output: progress.output(e)}
	start := time.Now()
	results, runErr := r.Run(ctx, spec)
	elapsed := time.Since(start)
	fmt.Fprint(e.stderr, host.QoSSummary())
	progress.finish()
	rec.finish()
	return reportRun(e, spec, host.Driver.Name(), results, runner.Summarize(results, elapsed), rec.where(), runErr)
}

// reportRun writes a batch's results (a table, or one JSON object per
// job) and returns its outcome: runErr, or how many jobs failed.
func reportRun(e *env, spec runner.Spec, driver string, results []runner.JobResult, sum runner.Summary, where string, runErr error) error {
	if e.JSON() {
		enc := json.NewEncoder(e.stdout)
		for _, res := range results {
			if err := enc.Encode(res); err != nil {
				return err
			}
		}
	} else {
		printRunTable(e.stdout, spec, driver, results, sum, where)
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
		fmt.Fprintf(p.w, "corepin: job %d %s\n", r.Job, runner.LeftoverNote(r.LeftoverCount, r.Leftovers))
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

// output writes a job's output: to stdout, or with -o json to stderr
// (keeping stdout a clean JSON stream), one job at a time and between
// the progress lines, which come from other goroutines.
func (p *progress) output(e *env) func(job int, stdout []byte) {
	return func(job int, stdout []byte) {
		if len(stdout) == 0 {
			return
		}
		w := e.stdout
		if e.JSON() {
			w = e.stderr
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		p.clear()
		w.Write(stdout)
		if stdout[len(stdout)-1] != '\n' {
			io.WriteString(w, "\n")
		}
	}
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
