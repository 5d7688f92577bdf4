package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/corepin/corepin/bench"
	"github.com/corepin/corepin/experiment"
	"github.com/corepin/corepin/kube/jobs"
	"github.com/corepin/corepin/kube/kubeclient"
	"github.com/corepin/corepin/sim"
)

const kubeUsage = `Run corepin's sweeps on a Kubernetes cluster: "kube run" runs a sweep's Jobs
one at a time and records their results; "kube jobs" writes a sweep as
numbered Jobs, "kube collect" brings their results into the results database.`

const kubeJobsUsage = `Writes the numbered Kubernetes Jobs of a bench sweep (concurrency, threads or
throughput) as multi-document YAML on stdout (-o json: one v1 List).

The points are the bench experiment's own for the node type given (--sysfs-root
or --topology, default this machine), with --spec and --quick meaning what they
mean for corepin bench. Each point x repeat is one Job, named
corepin-<sweep>-<index>-r<repeat>: its pods are the point's concurrent jobs;
requests, limits and the koordinator.sh/qosClass label carry the point's mode
(pinned: Guaranteed whole CPUs, LSE; quota: limit = request; burst: limit =
2 x request; unbounded: no limit; all but pinned are LS). A pod runs
"corepin run ... -o json" on the workload (spin unless the spec says
transcode; the image needs corepin and /bin/sh), then "corepin kube result",
which writes the result document ({"v":1,...}) to the container's
termination message (/dev/termination-log, which the API server keeps) and
prints it as one "corepin-result {...}" log line, the fallback when the
document exceeds the 4096 bytes Kubernetes keeps. corepin kube collect reads
both.

Run the Jobs one at a time, in order, so points do not disturb each other:
corepin kube run does that with the same flags (create, wait, record the
results, resume on a re-run). By hand: create one, "kubectl wait
--for=condition=complete job/NAME", then the next, then corepin kube collect.

--sim-trace writes the sweep as a corepin simulate trace instead (JSON lines):
replay it over your nodes' topologies before running anything, with
"corepin simulate --from-cluster" over the cluster's own nodes as they
publish them (corepin.io/topology, corepin.io/assigned).

Examples:
  corepin kube run --sweep concurrency --image registry.example/corepin:1.0 --namespace bench
  corepin kube jobs --sweep concurrency --image registry.example/corepin:1.0 > sweep.yaml
  kubectl create --dry-run=server -f sweep.yaml      # the API server checks every Job
  corepin kube jobs --sweep threads --topology node.json --namespace bench --repeats 5
  corepin kube jobs --sweep throughput --topology node.json --sim-trace > sweep.jsonl
  corepin simulate --trace sweep.jsonl --topology node.json --nodes 3
  corepin simulate --trace sweep.jsonl --from-cluster --context prod
  corepin kube collect --namespace bench --wait --timeout 2h`

const kubeCollectUsage = `Records the results of a corepin kube jobs sweep in the results database, as
one bench run per sweep, so that corepin report and corepin results work on
cluster runs as on one machine.

From the cluster (the default): lists the sweep's pods through the API server
(--selector, default every pod labelled corepin.io/sweep; --namespace, default
the kubeconfig context's, else default) and reads each finished pod's result
document from its termination message
(status.containerStatuses[].state.terminated.message), structured data the
pod wrote, not log text. Only where a pod's message holds no result (a
document over 4096 bytes, an older image) is the end of its log read, through
the API. A Failed pod's result is recorded as a failed job. Pods still
pending or running are named in a warning and not recorded: collect again
later, or give --wait, which first waits (at most --timeout) until every
Job of the sweep is complete or failed, with a progress line on a terminal.
The cluster is chosen as kubectl does: --kubeconfig, else $KUBECONFIG, else
~/.kube/config, else the pod's service account; --context picks a context.
The account needs get/list on pods, pods/log and jobs in the namespace.

From saved logs (offline): --from DIR reads every regular file in DIR (one
pod's log each, as "kubectl logs POD > DIR/POD" writes it); --from - reads
one stream, e.g. "kubectl logs -l corepin.io/sweep=concurrency --prefix
--tail=-1". Only "corepin-result {...}" lines count.

A pod without a usable result is skipped with its reason, never fatal; no
result at all exits 2 and records nothing. The database is --db FILE, else
$COREPIN_DB, else corepin's default.

Examples:
  corepin kube collect                                  # every sweep in the context's namespace
  corepin kube collect --namespace bench --selector corepin.io/sweep=threads --wait --timeout 2h
  corepin kube collect --context prod --kubeconfig ~/.kube/prod.yaml -o json
  kubectl logs -l corepin.io/sweep=threads --tail=-1 | corepin kube collect --from - -o json
  corepin report          # the collected run`

// sweeps are the experiments a cluster sweep can run: bench's, handed to
// kube/jobs here, at the top, so that neither door imports the other.
var sweeps experiment.Catalog = bench.Clusters

func init() { register(newKubeCmd) }

func newKubeCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "kube",
		Short: "Run sweeps on Kubernetes (run, jobs, collect)",
		Long:  kubeUsage,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return Usagef("kube needs a subcommand: corepin kube run, corepin kube jobs or corepin kube collect")
		},
	}
	cmd.AddCommand(newKubeRunCmd(e), newKubeJobsCmd(e), newKubeCollectCmd(e), newKubeResultCmd(e))
	return cmd
}

const kubeResultUsage = `Runs inside a pod of corepin kube jobs, after its corepin run: prints the pod's
result as one "corepin-result {...}" line on stdout (the pod's log) and writes
the compact result document ({"v":1,...}: the point, its place in the sweep
and the job's measured figures) to --termination-log, which Kubernetes keeps
as the container's termination message for corepin kube collect. A document
over the 4096 bytes Kubernetes keeps is not written (a note goes to stderr);
collect then reads the log line. The generated Jobs call it; you need not.

Example (as the Jobs run it):
  corepin kube result --run /tmp/corepin-run.json --termination-log /dev/termination-log \
    --context '{"sweep":"threads","index":0,...}' --pod "$COREPIN_POD_NAME"`

func newKubeResultCmd(e *env) *cobra.Command {
	var p jobs.PodResult
	var head string
	cmd := &cobra.Command{
		Use:   "result --run FILE --context JSON --pod NAME [--termination-log PATH]",
		Short: "Inside a sweep's pod: print and write its result (the generated Jobs run it)",
		Long:  kubeResultUsage,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if head == "" || p.Run == "" || p.Pod == "" {
				return Usagef("--context, --run and --pod are all needed (the generated Jobs give them)")
			}
			p.Head = []byte(head)
			if err := jobs.WriteResult(p, e.stdout, e.stderr); err != nil {
				return &UsageError{Err: err}
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&p.Run, "run", "", "the file corepin run -o json wrote")
	fl.StringVar(&head, "context", "", "the result's sweep fields, as corepin kube jobs wrote them")
	fl.StringVar(&p.Pod, "pod", "", "the pod's name")
	fl.StringVar(&p.TerminationLog, "termination-log", jobs.TerminationLog, "where the result document goes (empty: nowhere)")
	return cmd
}

func newKubeJobsCmd(e *env) *cobra.Command {
	var (
		sf    sweepFlags
		trace bool
	)
	cmd := &cobra.Command{
		Use:   "jobs --sweep concurrency|threads|throughput",
		Short: "Write a bench sweep as numbered Kubernetes Jobs",
		Long:  kubeJobsUsage,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := sf.plan(cmd)
			if err != nil {
				return err
			}
			printNotes(e.stderr, s)
			if trace {
				return sim.WriteTrace(e.stdout, s.Trace())
			}
			objs, err := sf.objects(s)
			if err != nil {
				return err
			}
			if e.JSON() {
				return e.PrintJSON(map[string]any{"apiVersion": "v1", "kind": "List", "items": objs})
			}
			return jobs.WriteYAML(e.stdout, objs)
		},
	}
	fl := cmd.Flags()
	sf.add(fl)
	fl.StringVar(&sf.o.Namespace, "namespace", "default", "namespace of the Jobs")
	fl.BoolVar(&trace, "sim-trace", false, "write the sweep as a corepin simulate trace instead of Jobs")
	return cmd
}

// sweepFlags are the flags that shape a sweep's Jobs, shared by kube jobs
// and kube run so that both build the same Jobs. The namespace is not
// among them: kube jobs writes it (--namespace, default "default"), kube
// run takes the cluster's (kubeFlags).
type sweepFlags struct {
	o                             jobs.Options
	specPath, sysfsRoot, topoPath string
	nodeCPUs                      string
}

func (f *sweepFlags) add(fl *pflag.FlagSet) {
	fl.StringVar(&f.o.Sweep, "sweep", "", "the sweep: "+strings.Join(sweeps.Names(), ", "))
	fl.StringVar(&f.specPath, "spec", "", "bench spec file (YAML; the section named after the sweep counts)")
	fl.BoolVar(&f.o.Quick, "quick", false, "the quick variant of the sweep, as corepin bench --quick")
	fl.IntVar(&f.o.Repeats, "repeats", 3, fmt.Sprintf("runs of each point (1 to %d)", jobs.MaxRepeats))
	fl.StringVar(&f.o.Image, "image", "corepin/corepin:latest", "container image holding corepin and /bin/sh")
	fl.StringVar(&f.o.Binary, "binary", "corepin", "corepin's path inside the image")
	fl.StringVar(&f.o.Memory, "memory", "512Mi", "each pod's memory request and limit")
	fl.StringVar(&f.o.SchedulerName, "scheduler-name", "", "the pods' schedulerName (corepin-scheduler for the Helm chart's; default: the cluster's default scheduler)")
	fl.StringVar(&f.o.NUMAPolicy, "numa-policy", "", "topology policy of the pinned pods (corepin.io/numa-policy): none, best-effort, restricted or single-numa-node (default: the node's)")
	fl.BoolVar(&f.o.HostNetwork, "host-network", false, "run the pods in their node's network namespace (clusters without a network plugin)")
	fl.StringVar(&f.sysfsRoot, "sysfs-root", "", "directory holding sys/ of the node type (default: this machine)")
	fl.StringVar(&f.topoPath, "topology", "", "the node type's corepin topo -o json document (- for stdin)")
	fl.StringVar(&f.nodeCPUs, "node-cpus", "", "CPU a node can give the sweep's pods at once, as a Kubernetes quantity (its allocatable cpu, e.g. 62 or 1900m; default: every CPU of the topology)")
}

// plan checks the flags and plans the sweep; every error is bad input
// except a failure to read this machine's topology.
func (f *sweepFlags) plan(cmd *cobra.Command) (*jobs.Sweep, error) {
	o := &f.o
	o.Experiments = sweeps
	if o.Sweep == "" {
		return nil, Usagef("--sweep: give one of %s", strings.Join(sweeps.Names(), ", "))
	}
	if o.Repeats < 1 || o.Repeats > jobs.MaxRepeats {
		return nil, Usagef("--repeats %d: want 1 to %d", o.Repeats, jobs.MaxRepeats)
	}
	if f.nodeCPUs != "" {
		q, err := resource.ParseQuantity(f.nodeCPUs)
		if err != nil || q.Sign() <= 0 || q.Cmp(*resource.NewMilliQuantity(jobs.MaxNodeMilliCPU, resource.DecimalSI)) > 0 {
			return nil, Usagef("--node-cpus %q: want a CPU quantity above 0 and at most %d, such as 62 or 1900m (the node's allocatable cpu)", f.nodeCPUs, jobs.MaxNodeMilliCPU/1000)
		}
		o.NodeMilliCPU = q.MilliValue()
	}
	if f.specPath != "" {
		data, err := readFlagFile("--spec", f.specPath, maxSpecBytes)
		if err != nil {
			return nil, err
		}
		o.Spec = data
	}
	t, err := simTopology(cmd, f.sysfsRoot, f.topoPath)
	if err != nil {
		return nil, err
	}
	o.Node = t
	s, err := jobs.Plan(*o)
	if errors.Is(err, jobs.ErrInvalid) || errors.Is(err, experiment.ErrUsage) {
		return nil, &UsageError{Err: err}
	}
	return s, err
}

// printNotes prints what planning changed or left out to fit the node.
func printNotes(w io.Writer, s *jobs.Sweep) {
	for _, n := range s.Notes {
		fmt.Fprintf(w, "corepin: note: %s\n", n)
	}
}

// objects builds the sweep's Jobs in f.o.Namespace.
func (f *sweepFlags) objects(s *jobs.Sweep) ([]batchv1.Job, error) {
	objs, err := s.Objects(f.o)
	if err != nil {
		return nil, &UsageError{Err: err}
	}
	return objs, nil
}

// kubeFlags choose the cluster, as kubectl's flags of the same names do.
type kubeFlags struct {
	kubeconfig, context, namespace string
}

func (k *kubeFlags) add(fl *pflag.FlagSet) {
	fl.StringVar(&k.kubeconfig, "kubeconfig", "", "kubeconfig file (default $KUBECONFIG, else ~/.kube/config, else the in-cluster service account)")
	fl.StringVar(&k.context, "context", "", "kubeconfig context (default its current context)")
	fl.StringVar(&k.namespace, "namespace", "", "namespace (default the context's, else default)")
}

// names are the flags add defines, for mutual exclusion messages.
func (k *kubeFlags) names() []string { return []string{"kubeconfig", "context", "namespace"} }

// client connects to the cluster; a missing or broken kubeconfig is bad
// input (exit 2), made before any request.
func (k *kubeFlags) client() (*kubeclient.Client, error) {
	c, err := kubeclient.Load(kubeclient.Options{Kubeconfig: k.kubeconfig, Context: k.context, Namespace: k.namespace, UserAgent: "corepin/" + Version})
	if err != nil {
		return nil, &UsageError{Err: err}
	}
	return c, nil
}

// changed returns the first of names set on the command line.
func changed(cmd *cobra.Command, names ...string) string {
	for _, n := range names {
		if cmd.Flags().Changed(n) {
			return n
		}
	}
	return ""
}

// maxCollectWait bounds --timeout.
const maxCollectWait = 7 * 24 * time.Hour

// collectFlags are kube collect's flags.
type collectFlags struct {
	from, db, selector string
	kf                 kubeFlags
	wait               bool
	timeout            time.Duration
}

func newKubeCollectCmd(e *env) *cobra.Command {
	var f collectFlags
	cmd := &cobra.Command{
		Use:   "collect [--namespace NS] [--selector SEL] [--wait [--timeout D]] | --from DIR|-",
		Short: "Record the results of a kube jobs sweep from its pods (API server) or saved logs",
		Long:  kubeCollectUsage,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := jobs.Collection{Experiments: sweeps}
			source, sum, err := f.collect(cmd, e, &c)
			if err != nil {
				return err
			}
			if c.Results() == 0 {
				printSkipped(e.stderr, &c)
				if sum != nil {
					return Usagef("no corepin result in %s (%d pods, %d finished, %d skipped)", source, sum.Pods, sum.Finished, len(c.Skipped))
				}
				return Usagef("no corepin-result in %s (%d logs skipped)", source, len(c.Skipped))
			}
			path, err := resultsPath(f.db)
			if err != nil {
				return err
			}
			ids, err := c.RecordIn(path, Version)
			if err != nil {
				return err
			}
			if e.JSON() {
				out := collectionJSON(&c, ids, path)
				if sum != nil {
					out["pods"], out["finished"], out["from_logs"], out["unfinished"] = sum.Pods, sum.Finished, sum.FromLogs, append([]string{}, sum.Unfinished...)
				}
				return e.PrintJSON(out)
			}
			printCollected(e.stdout, &c, ids, path)
			if sum != nil {
				fmt.Fprintf(e.stdout, "%d pods, %d finished: %d results (%d from logs), %d skipped\n", sum.Pods, sum.Finished, c.Results(), sum.FromLogs, len(c.Skipped))
				return nil
			}
			fmt.Fprintf(e.stdout, "%d results, %d skipped\n", c.Results(), len(c.Skipped))
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.from, "from", "", "read saved pod logs instead: a directory of them, or - for one stream on stdin")
	fl.StringVar(&f.db, "db", "", "results database (default $COREPIN_DB, else corepin's default)")
	f.kf.add(fl)
	fl.StringVar(&f.selector, "selector", "", "label selector of the sweep's pods and Jobs (default "+jobs.LabelSweep+": every sweep)")
	fl.BoolVar(&f.wait, "wait", false, "first wait until every Job of the sweep is complete or failed")
	fl.DurationVar(&f.timeout, "timeout", time.Hour, "longest --wait (e.g. 30m, 2h)")
	return cmd
}

// collect adds to c the results of the source the flags name: the
// cluster's pods (after waiting for its Jobs with --wait), a directory of
// saved logs, or stdin. It returns the source, for messages, and what was
// seen of the cluster (nil for saved logs).
func (f *collectFlags) collect(cmd *cobra.Command, e *env, c *jobs.Collection) (string, *jobs.ClusterSummary, error) {
	if f.from != "" {
		if n := changed(cmd, append(f.kf.names(), "selector", "wait", "timeout")...); n != "" {
			return "", nil, Usagef("--%s reads from the cluster; --from reads saved logs: give one or the other", n)
		}
		if f.from == "-" {
			c.Add("stdin", cmd.InOrStdin())
		} else if err := c.AddDir(f.from); err != nil {
			return "", nil, Usagef("--from: %v", err)
		}
		return f.from, nil, nil
	}
	if f.wait && (f.timeout <= 0 || f.timeout > maxCollectWait) {
		return "", nil, Usagef("--timeout %s: want above 0 and at most %s", f.timeout, maxCollectWait)
	}
	if !f.wait && cmd.Flags().Changed("timeout") {
		return "", nil, Usagef("--timeout bounds --wait; give --wait too")
	}
	kc, err := f.kf.client()
	if err != nil {
		return "", nil, err
	}
	k := jobs.Cluster{Client: kc, Namespace: kc.Namespace, Selector: f.selector}
	sel := cmp.Or(f.selector, jobs.LabelSweep)
	source := fmt.Sprintf("pods %s in namespace %s of %s", sel, kc.Namespace, kc.Host)
	ctx := contextOf(cmd)
	if f.wait {
		if err := waitForSweep(ctx, e, k, f.timeout); err != nil {
			return source, nil, err
		}
	}
	sum, err := c.AddCluster(ctx, k)
	if errors.Is(err, jobs.ErrInvalid) {
		return source, nil, &UsageError{Err: err}
	}
	if err != nil {
		return source, nil, fmt.Errorf("collecting from %s: %w", source, err)
	}
	return source, &sum, nil
}

// collectionJSON is the -o json object of a collection recorded as ids in
// the database at path (kube collect's and kube run's).
func collectionJSON(c *jobs.Collection, ids []int64, path string) map[string]any {
	return map[string]any{"run_ids": ids, "results": c.Results(), "db": path, "implausible": c.Implausible(),
		"skipped": append([]jobs.Skipped{}, c.Skipped...), "warnings": append([]string{}, c.Warnings...)}
}

// printSkipped prints what was skipped or warned of while collecting c.
func printSkipped(w io.Writer, c *jobs.Collection) {
	for _, s := range c.Skipped {
		fmt.Fprintf(w, "skipped %s: %s\n", s.Log, s.Reason)
	}
	for _, warn := range c.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warn)
	}
}

// printCollected prints, as text, what was skipped or warned of while
// collecting c and the runs ids recorded in path.
func printCollected(w io.Writer, c *jobs.Collection, ids []int64, path string) {
	printSkipped(w, c)
	if n := c.Implausible(); n > 0 {
		fmt.Fprintf(w, "refused %d implausible results (values no corepin kube jobs pod writes; not recorded)\n", n)
	}
	for _, id := range ids {
		fmt.Fprintf(w, "recorded run %d in %s (corepin report --run %d)\n", id, path, id)
	}
}

// waitForSweep waits for the sweep's Jobs, with a progress line on stderr
// when it is a terminal.
func waitForSweep(ctx context.Context, e *env, k jobs.Cluster, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var progress func(jobs.WaitProgress)
	tty := false
	if f, ok := e.stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		tty = true
		progress = func(p jobs.WaitProgress) {
			fmt.Fprintf(e.stderr, "\rwaiting for the sweep's Jobs: %d of %d finished", p.Finished, p.Total)
		}
	}
	err := jobs.WaitJobs(ctx, k, waitInterval, progress)
	if tty {
		fmt.Fprintln(e.stderr)
	}
	if errors.Is(err, jobs.ErrInvalid) {
		return &UsageError{Err: err}
	}
	if err != nil {
		return fmt.Errorf("waiting (--timeout %s; nothing recorded, collect again without --wait for what finished): %w", timeout, err)
	}
	return nil
}

// waitInterval is how often --wait lists the sweep's Jobs.
const waitInterval = 5 * time.Second
