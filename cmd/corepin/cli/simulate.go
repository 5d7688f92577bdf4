package cli

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/kube/nodestate"
	"github.com/corepin/corepin/kube/nodestate/fromcluster"
	"github.com/corepin/corepin/sim"
	"github.com/corepin/corepin/topology"
)

const simulateUsage = `Replays a workload trace over N identical nodes, once per cluster policy,
and compares them side by side: jobs admitted and rejected (and how many
rejections were avoidable because another node could have taken the job),
alignment of the exclusive placements (NUMA nodes, L3 groups and sockets
spanned, cores shared: mean and p99), fragmentation over time (free whole
cores, L3 groups and NUMA nodes) and decisions per second. Nothing on any
machine is changed: every node decision is corepin plan's.

Trace (JSON lines, in time order; t in seconds):
  {"t": 12.5, "op": "arrive", "id": "job-17", "request": {"cpus": 4, "qos": "LSE", "bind": "FullPCPUs"}}
  {"t": 40.0, "op": "depart", "id": "job-17"}
  A request has the keys of a corepin plan request: cpus (fractions for LS and
  BE), qos (LSE, LSR, LS, BE), bind, exclusive, numa, topology_policy. An
  unknown key or op, a depart before its arrive, a second arrive of a present
  id or a time going backwards is an error naming the line (exit 2).

Scenarios (--policies, default all):
  kubelet-packed        kubelet static policy, no options
  kubelet-distributed   kubelet static policy, distribute-cpus-across-numa
  koord-most            Koordinator NUMA strategy MostAllocated, bind FullPCPUs
  koord-least           Koordinator NUMA strategy LeastAllocated, bind FullPCPUs
  corepin               corepin's engine, requests as written
  kubelet:OPT+OPT, corepin:OPT+OPT   an engine with kubelet option names
  as-deployed           (--from-cluster only) each node under the settings it
                        publishes: engine, options, default topology policy,
                        Koordinator's bind label; a node publishing none under
                        corepin's engine and --topology-policy. In "all" when
                        some node publishes settings.
  kubelet scenarios drop a request's bind, exclusive and numa (kubelet has none).

Node choice (--node-choice, default both):
  first-fit   the first node whose uncommitted CPUs cover the request, as
              kube-scheduler's resource fit; the node may then refuse it
              (kubelet's TopologyAffinityError) and it is not retried
  best-fit    nodes ranked by free aligned capacity (fits one L3 group, then
              one NUMA node, tightest first), tried in that order: a central
              scheduler that sees each node's topology

--topology-policy is the nodes' Topology Manager policy for requests that name
none. Its default here is single-numa-node, where topology decides admission;
kubelet's own default is none. With --from-cluster and no --topology-policy,
nodes that all publish the same default (corepin.io/allocator) are replayed
under theirs.

Generators (--gen farm|mixed, or "corepin simulate gen" to write a trace):
  farm    transcode farm: LSE jobs of 2, 4, 6 or 8 CPUs
  mixed   LS/BE fleet: long-lived LSE and LSR services, LS with fractional
          quotas, BE filler
  Poisson arrivals and exponential durations; without --arrival-rate the rate
  keeps --utilization (default 0.8) of the cluster's CPUs busy.

--from-cluster replays over the nodes of a Kubernetes cluster instead of N
copies of one machine: each Node publishing corepin's corepin.io/topology
annotation (the corepin agent or NRI plugin writes it) is one node, with the
CPUs its corepin.io/assigned annotation lists already held; nodes without it
are listed as skipped. The cluster is chosen as kubectl does (--kubeconfig,
else $KUBECONFIG, else ~/.kube/config, else the in-cluster service account;
--context); it excludes --nodes, --sysfs-root and --topology. With a trace of
"corepin kube jobs --sim-trace" this replays a sweep over the cluster's real
node topologies before it runs. A node's corepin.io/allocator annotation
(engine, kubelet options, default topology policy) is what scenario
as-deployed replays it under; a node whose annotation does not read, or names
settings its machine can not run, is skipped with the reason. Each node's
settings are listed in node_sources (-o json), the groups of them after the
table.

--nrt (with --from-cluster) also lists the cluster's NodeResourceTopology
objects (topology.node.k8s.io, v1alpha2 when served, else v1alpha1; exit 1
when the CRD is not installed) and replays over the nodes without corepin's
annotations as "corepin extender --nrt" judges them: a Koordinator object
(koordlet's node.koordinator.sh/cpu-topology annotation) is the whole machine,
its reserved and held CPUs held; any other object (NFD's topology-updater,
corepin nri --publish-nrt) is a stand-in machine of its zones' free CPUs per
NUMA node, one single-thread core each. A node's default topology policy then
also comes from the object's topologyManagerPolicy attribute or
topologyPolicies, or Koordinator's node.koordinator.sh/numa-topology-policy
label. Under as-deployed, a Koordinator node runs its kubelet's engine and
options, and its node.koordinator.sh/cpu-bind-policy label as koord-scheduler
applies it (FullPCPUsOnly: option full-pcpus-only and, on corepin's engine,
bind FullPCPUs forced on every LSE/LSR job; SpreadByPCPUs likewise with
distribute-cpus-across-cores); a zones node the settings of its attributes.
corepin's annotations win where a node has both; a node whose object or
labels do not read is skipped with the reason. Each node's source is listed
(node_sources in -o json: corepin, nrt-koordinator or nrt-zones).

Examples:
  # Compare every policy on a generated transcode farm, 100 nodes of a saved machine
  corepin simulate --gen farm --jobs 20000 --nodes 100 --sysfs-root ./dumps/128arm

  # Replay your own trace with two policies, best fit only, as JSON
  corepin simulate --trace jobs.jsonl --topology topo.json --policies corepin,kubelet-packed --node-choice best-fit -o json

  # Replay a kube jobs sweep over the cluster's own nodes before running it
  corepin kube jobs --sweep concurrency --sim-trace > sweep.jsonl
  corepin simulate --trace sweep.jsonl --from-cluster --context prod

  # The same over a Koordinator or NFD cluster's NodeResourceTopology objects
  corepin simulate --gen farm --jobs 5000 --from-cluster --nrt --policies corepin,koord-most -o json

  # Each node as deployed (its published settings) against one policy for all
  corepin simulate --gen farm --jobs 5000 --from-cluster --nrt --policies as-deployed,corepin,kubelet:full-pcpus-only

  # Write a trace to edit or keep
  corepin simulate gen mixed --jobs 5000 --seed 7 --capacity 12800 > fleet.jsonl`

const simulateGenUsage = `Writes a generated trace (JSON lines, see corepin simulate --help) to stdout.

  farm    transcode farm: LSE jobs of 2, 4, 6 or 8 CPUs
  mixed   LS/BE fleet: LSE services (2-8 CPUs, 15%, 10x the mean duration),
          LSR services (2-4 CPUs, 10%, 10x), LS (0.5-4 CPUs, 35%, 1x),
          BE filler (1-4 CPUs, 40%, 0.5x; not counted in the load)

Inter-arrival times and durations are exponential, drawn from --seed. Without
--arrival-rate, the rate keeps --utilization of --capacity CPUs busy.

Examples:
  corepin simulate gen farm --jobs 20000 --seed 1 --capacity 12800 > farm.jsonl
  corepin simulate gen mixed --jobs 5000 --arrival-rate 10 --mean-duration 120 > fleet.jsonl`

func init() { register(newSimulateCmd) }

type genFlags struct {
	jobs         int
	seed         uint64
	arrivalRate  float64
	meanDuration float64
	utilization  float64
}

func (g *genFlags) add(cmd *cobra.Command) {
	cmd.Flags().IntVar(&g.jobs, "jobs", 2000, fmt.Sprintf("jobs to generate (at most %d)", sim.MaxJobs))
	cmd.Flags().Uint64Var(&g.seed, "seed", 1, "random seed (the same seed gives the same trace)")
	cmd.Flags().Float64Var(&g.arrivalRate, "arrival-rate", 0, "jobs per second (0: derived from --utilization)")
	cmd.Flags().Float64Var(&g.meanDuration, "mean-duration", 60, "mean job duration in seconds")
	cmd.Flags().Float64Var(&g.utilization, "utilization", 0.8, "share of the cluster's CPUs the offered load keeps busy")
}

// maxMeanDuration bounds --mean-duration, in seconds: the services of
// --gen mixed last 10 times it, and exponential durations run to many
// times the mean, all of which must fit in a time.Duration (292 years).
const maxMeanDuration = 365 * 24 * 3600

func (g *genFlags) generate(kind string, capacity int) ([]sim.Event, error) {
	cfg := sim.GenConfig{Jobs: g.jobs, Seed: g.seed, ArrivalRate: g.arrivalRate, MeanDuration: g.meanDuration,
		Capacity: capacity, Utilization: g.utilization}
	if g.jobs < 1 || g.jobs > sim.MaxJobs {
		return nil, Usagef("--jobs %d: want 1 to %d", g.jobs, sim.MaxJobs)
	}
	if g.meanDuration <= 0 || g.utilization <= 0 || g.arrivalRate < 0 {
		return nil, Usagef("--mean-duration and --utilization must be above 0, --arrival-rate not below 0")
	}
	if g.meanDuration > maxMeanDuration {
		return nil, Usagef("--mean-duration %g: at most %d seconds (a year): the trace's times must fit in a time.Duration", g.meanDuration, maxMeanDuration)
	}
	var evs []sim.Event
	var err error
	switch kind {
	case "farm":
		evs, err = sim.Farm(cfg)
	case "mixed":
		evs, err = sim.Mixed(cfg)
	default:
		return nil, Usagef("unknown generator %q: want farm or mixed", kind)
	}
	if err != nil {
		return nil, &UsageError{Err: err}
	}
	return evs, nil
}

func newSimulateCmd(e *env) *cobra.Command {
	var (
		tracePath, gen, sysfsRoot, topoPath string
		policies, nodeChoice, topoPolicy    string
		reserved                            string
		nodes, sampleEvery, parallel        int
		g                                   genFlags
		fromCluster, useNRT                 bool
		kf                                  kubeFlags
	)
	cmd := &cobra.Command{
		Use:   "simulate (--trace FILE|- | --gen farm|mixed) [--nodes N] [--sysfs-root DIR | --topology FILE | --from-cluster]",
		Short: "Compare cluster placement policies by replaying a workload trace over N nodes",
		Long:  simulateUsage,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkSimulateFlags(cmd, tracePath, topoPath, gen, nodes, parallel, sampleEvery); err != nil {
				return err
			}
			var (
				topo *topology.Topology
				view fromcluster.View
			)
			if useNRT && !fromCluster {
				return Usagef("--nrt reads the nodes of --from-cluster; give --from-cluster too")
			}
			if fromCluster {
				var err error
				if view, err = readCluster(cmd, e, &kf, useNRT, &topoPolicy); err != nil {
					return err
				}
			} else {
				if n := changed(cmd, kf.names()...); n != "" {
					return Usagef("--%s chooses the cluster of --from-cluster; give --from-cluster too", n)
				}
				var err error
				if topo, err = simTopology(cmd, sysfsRoot, topoPath); err != nil {
					return err
				}
			}
			res, err := cpuset.Parse(strings.TrimSpace(reserved))
			if err != nil {
				return Usagef("--reserved-cpus: %w", err)
			}
			runs, err := simRuns(policies, nodeChoice, fromCluster, view.Published > 0)
			if err != nil {
				return err
			}
			if fromCluster && view.Published == 0 && slices.ContainsFunc(runs, func(r sim.Run) bool { return r.Scenario.PerNode }) {
				fmt.Fprintf(e.stderr, "%s: no simulated node publishes allocator settings; every node runs corepin's defaults (the corepin scenario)\n", sim.AsDeployed)
			}
			tp, err := alloc.ParseTopologyPolicy(topoPolicy)
			if err != nil {
				return Usagef("--topology-policy: %w", err)
			}
			cfg := sim.Config{Topology: topo, Nodes: nodes, Reserved: res, TopologyPolicy: tp, SampleEvery: sampleEvery, Parallel: parallel}
			if fromCluster {
				cfg.Topology, cfg.Nodes, cfg.Cluster = nil, 0, view.Nodes
			}
			var evs []sim.Event
			if gen != "" {
				if evs, err = g.generate(gen, cfg.Capacity()); err != nil {
					return err
				}
			} else if evs, err = readTraceArg(e, tracePath); err != nil {
				return err
			}
			rep, err := sim.Replay(evs, cfg, runs)
			if errors.Is(err, sim.ErrBadTrace) || errors.Is(err, sim.ErrBadConfig) || errors.Is(err, alloc.ErrInvalid) {
				return &UsageError{Err: err}
			}
			if err != nil {
				return err
			}
			return printSimulation(e, rep, view, fromCluster)
		},
	}
	f := cmd.Flags()
	f.StringVar(&tracePath, "trace", "", "trace file in JSON lines, - for stdin")
	f.StringVar(&gen, "gen", "", "generate the trace instead: farm or mixed")
	f.IntVar(&nodes, "nodes", 100, fmt.Sprintf("nodes in the cluster, each a copy of the topology (at most %d)", sim.MaxNodes))
	f.StringVar(&sysfsRoot, "sysfs-root", "", "directory holding sys/ of the node machine (default: this machine)")
	f.StringVar(&topoPath, "topology", "", "node machine as corepin topo -o json output (a file, - for stdin)")
	f.StringVar(&policies, "policies", "all", "comma-separated scenarios, or all")
	f.StringVar(&nodeChoice, "node-choice", "both", "first-fit, best-fit or both")
	f.StringVar(&topoPolicy, "topology-policy", string(alloc.TopologySingleNUMANode), "the nodes' Topology Manager policy for requests that name none")
	f.StringVar(&reserved, "reserved-cpus", "", "CPUs each node keeps for the system (Linux list)")
	f.IntVar(&sampleEvery, "sample-every", 0, "fragmentation sample every K events (0: about 200 samples)")
	f.IntVar(&parallel, "parallel", runtime.GOMAXPROCS(0), "scenarios replayed at once (timings are per scenario)")
	f.BoolVar(&fromCluster, "from-cluster", false, "replay over the Kubernetes cluster's nodes (their corepin.io/topology and corepin.io/assigned annotations)")
	f.BoolVar(&useNRT, "nrt", false, "with --from-cluster: also replay over nodes without corepin's annotations by their NodeResourceTopology objects (Koordinator's v1alpha1, v1alpha2 zones), as corepin extender --nrt judges them")
	f.StringVar(&kf.kubeconfig, "kubeconfig", "", "kubeconfig file of --from-cluster (default $KUBECONFIG, else ~/.kube/config, else the in-cluster service account)")
	f.StringVar(&kf.context, "context", "", "kubeconfig context of --from-cluster (default its current context)")
	g.add(cmd)
	cmd.AddCommand(newSimulateGenCmd(e))
	return cmd
}

func newSimulateGenCmd(e *env) *cobra.Command {
	var (
		g        genFlags
		capacity int
	)
	cmd := &cobra.Command{
		Use:       "gen farm|mixed [--jobs N] [--seed S] [--arrival-rate R] [--mean-duration D] [--capacity CPUS]",
		Short:     "Write a generated workload trace (transcode farm or LS/BE fleet) to stdout",
		Long:      simulateGenUsage,
		Args:      cobra.ExactArgs(1),
		ValidArgs: []string{"farm", "mixed"},
		RunE: func(cmd *cobra.Command, args []string) error {
			if capacity < 1 && g.arrivalRate == 0 {
				return Usagef("--capacity %d: want the cluster's CPUs (1 or more), or give --arrival-rate", capacity)
			}
			evs, err := g.generate(args[0], capacity)
			if err != nil {
				return err
			}
			return sim.WriteTrace(e.stdout, evs)
		},
	}
	g.add(cmd)
	cmd.Flags().IntVar(&capacity, "capacity", 6400, "the cluster's CPUs, to derive the arrival rate (default: 100 nodes of 64)")
	return cmd
}

// maxSimParallel bounds --parallel: more replays at once than there are
// scenarios x node choices only adds goroutines.
const maxSimParallel = 64

// simTopology loads the node machine from a sysfs dump, a topo JSON file or
// this machine.
func simTopology(cmd *cobra.Command, sysfsRoot, topoPath string) (*topology.Topology, error) {
	if sysfsRoot != "" && topoPath != "" {
		return nil, Usagef("give either --sysfs-root or --topology, not both")
	}
	if topoPath == "" {
		t, err := openTopology("--sysfs-root", sysfsRoot)
		if err != nil {
			return nil, err
		}
		printWarnings(cmd.ErrOrStderr(), t)
		return t, nil
	}
	var r io.Reader = cmd.InOrStdin()
	if topoPath != "-" {
		f, err := openFlagFile("--topology", topoPath)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	t, err := topology.ReadDoc(r)
	if err != nil {
		return nil, Usagef("--topology %s: %w", topoPath, err)
	}
	return t, nil
}

// simRuns reads --policies and --node-choice. "all" is the named
// scenarios, and as-deployed too when fromCluster and some node publishes
// its settings (published); as-deployed asked for without fromCluster is
// bad input: only a cluster's nodes carry settings.
func simRuns(policies, nodeChoice string, fromCluster, published bool) ([]sim.Run, error) {
	choices, err := sim.ParseNodeChoice(nodeChoice)
	if err != nil {
		return nil, &UsageError{Err: err}
	}
	var scen []sim.Scenario
	if policies == "all" || policies == "" {
		scen = sim.Scenarios()
		if fromCluster && published {
			s, err := sim.ParseScenario(sim.AsDeployed)
			if err != nil {
				return nil, err
			}
			scen = append(scen, s)
		}
	} else {
		for _, name := range strings.Split(policies, ",") {
			s, err := sim.ParseScenario(strings.TrimSpace(name))
			if err != nil {
				return nil, &UsageError{Err: err}
			}
			if s.PerNode && !fromCluster {
				return nil, Usagef("scenario %s replays each node under the allocator settings it publishes: it needs --from-cluster (this machine and --nodes copies publish none)", sim.AsDeployed)
			}
			scen = append(scen, s)
		}
	}
	return sim.Runs(scen, choices), nil
}

func readTraceArg(e *env, path string) ([]sim.Event, error) {
	var r io.Reader = e.stdin
	if path != "-" {
		f, err := openFlagFile("--trace", path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	evs, err := sim.ReadTrace(r)
	if errors.Is(err, sim.ErrBadTrace) {
		return nil, &UsageError{Err: err}
	}
	if err != nil {
		return nil, err
	}
	return evs, nil
}

// renderSimulation prints one row per run, hyperfine-like: the counts, the
// alignment of exclusive placements as mean/p99, the mean free whole units
// per node, and the decision rate.
func renderSimulation(w io.Writer, rep sim.Report) error {
	var sb strings.Builder
	if rep.NodeCPUs > 0 {
		fmt.Fprintf(&sb, "%d jobs (%d events, %.0f s of trace) over %d nodes of %s, %d schedulable CPUs each", rep.Jobs, rep.Events, rep.SpanSeconds, rep.Nodes, rep.Topology, rep.NodeCPUs)
	} else {
		fmt.Fprintf(&sb, "%d jobs (%d events, %.0f s of trace) over %d nodes (%s), %d schedulable CPUs in all", rep.Jobs, rep.Events, rep.SpanSeconds, rep.Nodes, rep.Topology, rep.CPUs)
	}
	if rep.HeldCPUs > 0 {
		fmt.Fprintf(&sb, ", %d held before the trace", rep.HeldCPUs)
	}
	fmt.Fprintf(&sb, "; topology policy %s\n\n", rep.TopologyPolicy)
	tw := tabwriter.NewWriter(&sb, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tNODE CHOICE\tADMITTED\tREJECTED\tAVOIDABLE\tNUMA\tL3\tSOCKETS\tSHARED CORES\tFREE CORES\tFREE L3\tFREE NUMA\tBUSY\tDECISIONS/S\t")
	n := float64(rep.Nodes)
	for _, r := range rep.Results {
		m := r.Fragmentation.Mean
		busy := 0.0
		if rep.CPUs > 0 {
			busy = 100 * (m.ExclusiveCPUs + m.LSCPUs) / float64(rep.CPUs)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%.1f\t%.2f\t%.2f\t%.0f%%\t%.0f\t\n",
			r.Scenario, r.NodeChoice, r.Admitted, r.Rejected, r.Avoidable,
			meanP99(r.Alignment.NUMANodes), meanP99(r.Alignment.L3Groups), meanP99(r.Alignment.Sockets), meanP99(r.Alignment.SharedCores),
			m.FreeCores/n, m.FreeL3Groups/n, m.FreeNUMANodes/n, busy, r.Timing.DecisionsPerSecond)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rep.Results {
		if r.NodeSettings == nil {
			continue
		}
		var parts []string
		for _, ns := range r.NodeSettings {
			parts = append(parts, describeSettings(ns))
		}
		fmt.Fprintf(&sb, "\n%s: each node under its own settings: %s\n", r.Scenario, strings.Join(parts, "; "))
		break // the same nodes in every as-deployed row
	}
	sb.WriteString(`
NUMA, L3, SOCKETS, SHARED CORES: units each exclusive placement spans (mean/p99).
FREE CORES, FREE L3, FREE NUMA: whole free units per node, mean over the trace.
BUSY: mean share of CPUs held exclusively or committed to LS quota.
`)
	for _, r := range rep.Results {
		if r.Rejected == 0 {
			continue
		}
		var parts []string
		for _, k := range sortedKeys(r.RejectedBy) {
			parts = append(parts, fmt.Sprintf("%s %d", k, r.RejectedBy[k]))
		}
		fmt.Fprintf(&sb, "rejected by (%s/%s): %s\n", r.Scenario, r.NodeChoice, strings.Join(parts, ", "))
	}
	fmt.Fprintf(&sb, "wall time %.2f s\n", rep.WallSeconds)
	_, err := io.WriteString(w, sb.String())
	return err
}

// describeSettings is one group of an as-deployed run's nodes, e.g.
// "2 nodes kubelet full-pcpus-only, topology policy single-numa-node".
func describeSettings(ns sim.NodeSettingsCount) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d node", ns.Nodes)
	if ns.Nodes != 1 {
		b.WriteString("s")
	}
	if !ns.Published {
		b.WriteString(" publishing none (corepin's defaults):")
	}
	fmt.Fprintf(&b, " %s", ns.Policy)
	if len(ns.Options) > 0 {
		fmt.Fprintf(&b, " %s", strings.Join(ns.Options, "+"))
	}
	fmt.Fprintf(&b, ", topology policy %s", ns.TopologyPolicy)
	if ns.Bind != "" {
		fmt.Fprintf(&b, ", bind %s forced", ns.Bind)
	}
	if ns.NUMA != "" {
		fmt.Fprintf(&b, ", NUMA strategy %s", ns.NUMA)
	}
	return b.String()
}

func meanP99(s sim.Stat) string { return fmt.Sprintf("%.2f/%d", s.Mean, s.P99) }

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// readCluster reads the nodes of the cluster of kf (simulate
// --from-cluster; with useNRT their NodeResourceTopology objects too) and,
// when every node publishes the same default topology policy and
// --topology-policy is not given, makes it topoPolicy. A cluster with no
// node to replay over is a usage error saying what to run on them.
func readCluster(cmd *cobra.Command, e *env, kf *kubeFlags, useNRT bool, topoPolicy *string) (fromcluster.View, error) {
	if n := changed(cmd, "nodes", "sysfs-root", "topology"); n != "" {
		return fromcluster.View{}, Usagef("--from-cluster takes the nodes from the cluster; drop --%s", n)
	}
	kc, err := kf.client()
	if err != nil {
		return fromcluster.View{}, err
	}
	ctx := contextOf(cmd)
	var nrtRes schema.GroupVersionResource
	if useNRT {
		if nrtRes, err = nrtResource(ctx, kf); err != nil {
			return fromcluster.View{}, fmt.Errorf("discovering NodeResourceTopology at %s (--nrt reads the CRD noderesourcetopologies.topology.node.k8s.io; without it drop --nrt): %w", kc.Host, err)
		}
	}
	view, err := fromcluster.Read(ctx, kc, nrtRes)
	if errors.Is(err, fromcluster.ErrTooMany) {
		return fromcluster.View{}, Usagef("%v", err)
	}
	if err != nil {
		return fromcluster.View{}, err
	}
	// The nodes' own default topology policy, when they all
	// publish the same one and none was asked for.
	if tp, ok := view.NodesTopologyPolicy(); ok && !cmd.Flags().Changed("topology-policy") {
		*topoPolicy = string(tp)
		from := nodestate.AnnotationAllocator
		if useNRT {
			from += ", or its NodeResourceTopology"
		}
		fmt.Fprintf(e.stderr, "topology policy %s: the default every node publishes (%s); --topology-policy overrides it\n", tp, from)
	}
	if len(view.Nodes) == 0 {
		if useNRT {
			return fromcluster.View{}, Usagef("no node of the cluster at %s publishes %s or has a readable NodeResourceTopology (%s; %d nodes skipped): run the corepin agent or NRI plugin, koordlet or NFD's topology-updater on them, or give --topology", kc.Host, nodestate.AnnotationTopology, view.NRTResource, len(view.Skipped))
		}
		return fromcluster.View{}, Usagef("no node of the cluster at %s publishes %s (%d nodes skipped): run the corepin agent or NRI plugin on them, or give --topology (or --nrt to read NodeResourceTopology objects)", kc.Host, nodestate.AnnotationTopology, len(view.Skipped))
	}
	return view, nil
}

// checkSimulateFlags refuses flags of simulate that contradict each other
// or are out of range.
func checkSimulateFlags(cmd *cobra.Command, tracePath, topoPath, gen string, nodes, parallel, sampleEvery int) error {
	if (tracePath == "") == (gen == "") {
		return Usagef("give either --trace FILE (or - for stdin) or --gen farm|mixed")
	}
	if tracePath == "-" && topoPath == "-" {
		return Usagef("--trace - and --topology - can not both read stdin")
	}
	if nodes < 1 || nodes > sim.MaxNodes {
		return Usagef("--nodes %d: want 1 to %d", nodes, sim.MaxNodes)
	}
	if parallel < 1 || parallel > maxSimParallel {
		return Usagef("--parallel %d: want 1 to %d scenarios at once", parallel, maxSimParallel)
	}
	if sampleEvery < 0 || sampleEvery > sim.MaxEvents {
		return Usagef("--sample-every %d: want 0 (about 200 samples) to %d events", sampleEvery, sim.MaxEvents)
	}
	if tracePath != "" {
		for _, f := range []string{"jobs", "seed", "arrival-rate", "mean-duration", "utilization"} {
			if cmd.Flags().Changed(f) {
				return Usagef("--%s applies to --gen, not --trace", f)
			}
		}
	}
	return nil
}

// printSimulation prints rep: JSON (with, from a cluster, the nodes
// skipped and where each came from) or the table, the nodes skipped and
// the NodeResourceTopology counts on stderr.
func printSimulation(e *env, rep sim.Report, view fromcluster.View, fromCluster bool) error {
	if e.JSON() {
		if fromCluster {
			return e.PrintJSON(struct {
				sim.Report
				SkippedNodes []fromcluster.Skipped `json:"skipped_nodes"`
				NodeSources  []fromcluster.Source  `json:"node_sources"`
				NRTResource  string                `json:"nrt_resource,omitempty"`
			}{rep, append([]fromcluster.Skipped{}, view.Skipped...), append([]fromcluster.Source{}, view.Sources...), view.NRTResource})
		}
		return e.PrintJSON(rep)
	}
	for _, s := range view.Skipped {
		fmt.Fprintf(e.stderr, "skipped node %s: %s\n", s.Node, s.Reason)
	}
	if koord, zones := view.NRTCounts(); koord+zones > 0 {
		fmt.Fprintf(e.stderr, "%d nodes from NodeResourceTopology %s: %d Koordinator (whole machine), %d zones (stand-in machine of their free CPUs)\n", koord+zones, view.NRTResource, koord, zones)
	}
	return renderSimulation(e.stdout, rep)
}
