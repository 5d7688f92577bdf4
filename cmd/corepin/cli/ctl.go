package cli

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/corepin/corepin/agent"
	"github.com/corepin/corepin/nodecore"
	"github.com/corepin/corepin/schedext"
	"github.com/corepin/corepin/topology"
)

const ctlUsage = `Talk to a running corepin agent (see corepin agent).

Examples:
  corepin ctl create enc-1 --cpus 4 --qos LSE --bind FullPCPUs -- ffmpeg -i in.mp4 out.mp4
  corepin ctl create web --cpus 1.5 --qos LS --pid 4242
  corepin ctl create box --cpus 2 --cgroup /system.slice/docker-abc.scope
  corepin ctl list
  corepin ctl get enc-1 -o json
  corepin ctl resize enc-1 --cpus 8
  corepin ctl resize web --cpus 2.5 -o json
  corepin ctl delete enc-1
  corepin ctl top`

func init() { register(newCtlCmd) }

// ctlFlags are the connection flags every ctl subcommand shares.
type ctlFlags struct {
	socket, tokenFile string
	// state is a state file to read instead of asking an agent (list, get).
	state string
}

// maxTokenFile bounds a --token-file: a bearer token is a line, not a
// file's worth.
const maxTokenFile = 64 << 10

func (f *ctlFlags) client() (*agent.Client, error) {
	addr := f.socket
	var token string
	if f.tokenFile != "" {
		b, err := readFlagFile("--token-file", f.tokenFile, maxTokenFile)
		if err != nil {
			return nil, err
		}
		token = string(trimSpace(b))
	}
	return agent.NewClient(addr, token), nil
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == ' ' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

// agentSocket is the default agent address: $COREPIN_SOCKET, else
// agent.DefaultSocket.
func agentSocket() string {
	if s := os.Getenv("COREPIN_SOCKET"); s != "" {
		return s
	}
	return agent.DefaultSocket
}

// ctlErr makes the agent's refusals (4xx) bad input, exit 2.
func ctlErr(err error) error {
	var ae *agent.APIError
	if errors.As(err, &ae) && ae.Status >= 400 && ae.Status < 500 {
		return &UsageError{Err: err}
	}
	return err
}

func newCtlCmd(e *env) *cobra.Command {
	f := &ctlFlags{}
	cmd := &cobra.Command{
		Use:   "ctl",
		Short: "Client of the node agent: create, list, get, resize, delete, top",
		Long:  ctlUsage,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return Usagef("ctl needs a subcommand: create, list, get, resize, delete or top")
		},
	}
	cmd.PersistentFlags().StringVar(&f.socket, "socket", agentSocket(), "agent socket path, or http://host:port ($COREPIN_SOCKET)")
	cmd.PersistentFlags().StringVar(&f.tokenFile, "token-file", "", "bearer token for a TCP agent")
	cmd.PersistentFlags().StringVar(&f.state, "state", "", "list and get: read this state file instead of asking an agent (read-only; default when no agent's socket is there: $COREPIN_STATE or "+nodecore.DefaultState+", the NRI plugin's on a Kubernetes node)")
	cmd.AddCommand(newCtlCreate(e, f), newCtlList(e, f), newCtlGet(e, f), newCtlResize(e, f), newCtlDelete(e, f), newCtlTop(e, f))
	return cmd
}

func newCtlCreate(e *env, f *ctlFlags) *cobra.Command {
	var s agent.Spec
	var cpus float64
	var noBalance, noQuota bool
	cmd := &cobra.Command{
		Use:   "create NAME --cpus N [--pid PID | --cgroup PATH | -- CMD ARGS...]",
		Short: "Admit a workload",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s.Name = args[0]
			if !cmd.Flags().Changed("cpus") {
				return Usagef("create needs --cpus")
			}
			s.CPUs = &cpus
			if noBalance {
				s.LoadBalance = new(false)
			}
			if noQuota {
				s.CPUQuota = new(false)
			}
			if rest := args[1:]; len(rest) > 0 {
				if cmd.ArgsLenAtDash() != 1 {
					return Usagef("give the command after --: corepin ctl create %s --cpus N -- CMD ARGS", s.Name)
				}
				s.Command, s.Args = rest[0], rest[1:]
			}
			if err := s.Validate(); err != nil {
				return &UsageError{Err: err}
			}
			c, err := f.client()
			if err != nil {
				return err
			}
			w, err := c.Create(s)
			if err != nil {
				return ctlErr(err)
			}
			if e.JSON() {
				return e.PrintJSON(w)
			}
			return printWorkloads(e, []agent.Workload{w})
		},
	}
	fl := cmd.Flags()
	fl.Float64Var(&cpus, "cpus", 0, "CPUs (whole for LSE and LSR; fractions for LS and BE)")
	fl.StringVar(&s.QoS, "qos", "", "LSE, LSR, LS or BE (default LSE, or LS for a fraction)")
	fl.StringVar(&s.Bind, "bind", "", "FullPCPUs, SpreadByPCPUs or Default")
	fl.StringVar(&s.Exclusive, "exclusive", "", "None, PCPULevel or NUMANodeLevel")
	fl.StringVar(&s.NUMA, "numa", "", "MostAllocated, LeastAllocated or DistributeEvenly")
	fl.StringVar(&s.TopologyPolicy, "topology-policy", "", "none, best-effort, restricted or single-numa-node")
	fl.StringVar(&s.Isolated, "isolated", "", "prefer or require the CPUs the kernel isolated (isolcpus, nohz_full; LSE and LSR)")
	fl.IntVar(&s.PID, "pid", 0, "adopt this running process")
	fl.StringVar(&s.Cgroup, "cgroup", "", "adopt this existing cgroup (path below the cgroup mount)")
	fl.StringVar(&s.Sched, "sched", "", "normal, rr or fifo: the real-time route of an LS command or pid (priority 1, bounded to its CPUs' worth of the LS pool)")
	fl.BoolVar(&s.IRQIsolate, "irq-isolate", false, "keep movable device interrupts off an LSE or LSR workload's CPUs while it holds them (the agent, as root, writes /proc/irq; docs/reference/irq.md)")
	fl.BoolVar(&noBalance, "no-load-balance", false, "take an LSE or LSR workload's CPUs out of the scheduler's load balancing while it holds them (load_balance false; docs/reference/lowlatency.md)")
	fl.BoolVar(&noQuota, "no-cpu-quota", false, "no CFS quota on an LSE or LSR workload's group (cpu_quota false; what the agent gives exclusive workloads already)")
	return cmd
}

func newCtlList(e *env, f *ctlFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List workloads",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ws, err := f.workloads(e)
			if err != nil {
				return err
			}
			if e.JSON() {
				return e.PrintJSON(map[string]any{"workloads": ws})
			}
			return printWorkloads(e, ws)
		},
	}
}

func newCtlGet(e *env, f *ctlFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "get NAME",
		Short: "Show one workload",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			w, err := f.workload(e, args[0])
			if err != nil {
				return err
			}
			if e.JSON() {
				return e.PrintJSON(w)
			}
			return printWorkloads(e, []agent.Workload{w})
		},
	}
}

func newCtlResize(e *env, f *ctlFlags) *cobra.Command {
	var cpus float64
	cmd := &cobra.Command{
		Use:   "resize NAME --cpus N",
		Short: "Grow or shrink a workload in place (its first CPUs stay)",
		Long: `Resize a workload in place. An LSE or LSR workload keeps every CPU it has
and grows onto its own cores' siblings, then whole cores of its NUMA node;
it shrinks by giving back the CPUs added last, never those it was created
with. LS and BE workloads get a new quota (fractions allowed).

Examples:
  corepin ctl resize enc-1 --cpus 8
  corepin ctl resize web --cpus 2.5 -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("cpus") {
				return Usagef("resize needs --cpus, the new size")
			}
			c, err := f.client()
			if err != nil {
				return err
			}
			w, err := c.Resize(args[0], cpus)
			if err != nil {
				return ctlErr(err)
			}
			if e.JSON() {
				return e.PrintJSON(w)
			}
			return printWorkloads(e, []agent.Workload{w})
		},
	}
	cmd.Flags().Float64Var(&cpus, "cpus", 0, "the new size: whole CPUs for LSE and LSR; fractions for LS and BE")
	return cmd
}

func newCtlDelete(e *env, f *ctlFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME...",
		Short: "Stop workloads and release their CPUs",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			for _, name := range args {
				if err := c.Delete(name); err != nil {
					return ctlErr(err)
				}
				if !e.JSON() {
					fmt.Fprintf(e.stdout, "workload %q deleted\n", name)
				}
			}
			if e.JSON() {
				return e.PrintJSON(map[string]any{"deleted": args})
			}
			return nil
		},
	}
}

func newCtlTop(e *env, f *ctlFlags) *cobra.Command {
	var interval time.Duration
	cmd := &cobra.Command{
		Use:   "top",
		Short: "CPU use and throttling of each workload over an interval",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if interval <= 0 || interval > time.Minute {
				return Usagef("--interval %v: give a duration in (0, 1m]", interval)
			}
			c, err := f.client()
			if err != nil {
				return err
			}
			rows, q, err := c.Top(interval)
			if err != nil {
				return ctlErr(err)
			}
			// What decides wake placement, as the agent reads it (an older
			// agent says nothing).
			var sched *topology.Scheduler
			var route *schedext.Status
			if v, err := c.Topology(); err == nil {
				sched, route = v.Scheduler, v.SchedExt
			}
			if e.JSON() {
				out := map[string]any{"interval_s": interval.Seconds(), "workloads": rows}
				if q != nil {
					out["qos"] = q
				}
				if sched != nil {
					out["scheduler"] = sched
				}
				if route != nil {
					out["sched_ext_route"] = route
				}
				return e.PrintJSON(out)
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tQOS\tCPUSET\tCPUS USED\tTHROTTLED\tPIDS\tBE ROUTE")
			for _, r := range rows {
				route := r.BERoute
				if route == "" {
					route = "-"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%.2f\t%.3fs\t%d\t%s\n", shown(r.Name), shown(r.QoS), shown(r.Cpuset), r.CPUs, r.ThrottledS, r.Pids, shown(route))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if q != nil {
				fmt.Fprint(e.stdout, qosLines(q))
			}
			if sched != nil {
				if err := topology.RenderScheduler(e.stdout, *sched, nil); err != nil {
					return err
				}
			}
			if route != nil {
				// What the supervisor of the layered route does (node
				// setting sched_ext); the agent's words, bounded.
				for _, l := range route.Lines() {
					fmt.Fprintln(e.stdout, agent.Printable(l, maxRouteLine))
				}
			}
			return nil
		},
	}
	cmd.Flags().DurationVar(&interval, "interval", time.Second, "sampling interval")
	return cmd
}

// maxField bounds a string of the agent's that ctl prints in a table.
const maxField = 256

// maxRouteLine bounds a line of the sched_ext route's status (its last
// transition carries scx_layered's last output).
const maxRouteLine = 1024

// shown is a string of the agent's answer as ctl prints it as text: no
// control characters (a terminal's escapes), at most maxField bytes.
// Whoever answers on the socket, ctl's output stays the agent's data.
func shown(s string) string { return agent.Printable(s, maxField) }

// printWorkloads writes a kubectl-like table; with containers of the NRI
// plugin among ws, a POD and a CONTAINER column say whose they are.
func printWorkloads(e *env, ws []agent.Workload) error {
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	pods := slices.ContainsFunc(ws, func(w agent.Workload) bool { return w.Pod != "" })
	head := "NAME\tQOS\tCPUS\tCPUSET\tNUMA\tSOURCE\tAGE"
	if pods {
		head += "\tPOD\tCONTAINER"
	}
	fmt.Fprintln(tw, head)
	for _, w := range ws {
		numa := w.NUMANodes
		if numa == "" {
			numa = "-"
		}
		set := w.Cpuset
		if w.PromisedCpuset != "" {
			set += " (promised: " + w.PromisedCpuset + ")"
		}
		if w.OfflineCPUs != "" {
			set += " (offline: " + w.OfflineCPUs + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%g\t%s\t%s\t%s\t%s", shown(w.Name), shown(w.QoS), w.CPUs, shown(set), shown(numa),
			shown(w.Source), time.Since(w.CreatedAt).Round(time.Second))
		if pods {
			fmt.Fprintf(tw, "\t%s\t%s", shown(cmp.Or(w.Pod, "-")), shown(cmp.Or(w.Container, "-")))
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// qosLines renders the QoS controller's status under ctl top's table.
func qosLines(q *agent.QoSStatus) string {
	var b strings.Builder
	fmt.Fprintf(&b, "QOS %s via %s: BE on %s of pool %s (level %.2f CPUs, suppression %.0f%%", shown(q.Mechanism), shown(q.Lever), shown(q.BECpuset), shown(q.BEPool), q.Level, 100*q.Suppression)
	if q.BEQuotaMS > 0 {
		fmt.Fprintf(&b, ", quota %.1fms", q.BEQuotaMS)
	}
	fmt.Fprintf(&b, ")\nQOS signals: LS usage %.2f CPUs, psi %.1f%%, run-queue wait %.1fms/s, throttled %.0f%%", q.LSUsage, q.PSI, q.RunqWaitMS, 100*q.Throttled)
	if q.Slice != "" {
		fmt.Fprintf(&b, ", slice %s", shown(q.Slice))
	}
	var acts []string
	for _, k := range slices.Sorted(maps.Keys(q.Actions)) {
		acts = append(acts, fmt.Sprintf("%s=%d", shown(k), q.Actions[k]))
	}
	fmt.Fprintf(&b, "\nQOS actions: %s\n", strings.Join(acts, " "))
	if q.Error != "" {
		fmt.Fprintf(&b, "QOS error: %s\n", shown(q.Error))
	}
	return b.String()
}
