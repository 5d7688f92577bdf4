package cli

import (
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/corepin/corepin/agent"
	"github.com/corepin/corepin/kube/nri"
)

const irqUsage = `Device interrupts kept off exclusive CPUs (irq_isolate): corepin run
--irq-isolate and the agent's irq_isolate field steer them themselves;
for pods, corepin nri records which containers asked and corepin irq sync
steers. See docs/reference/irq.md.

Examples:
  corepin irq sync --state /var/lib/corepin/agent.db`

const irqSyncUsage = `Keep the CPUs of the exclusive containers corepin nri admitted with
irq_isolate (corepin nri --irq-isolate pod|exclusive, the annotation
corepin.io/irq-isolate) clear of movable device interrupts until stopped,
then give the interrupts back. It reads the plugin's state file every
--interval and steers /proc/irq/*/smp_affinity_list under --root when the
CPUs change, and every --resync besides (an interrupt irqbalance moved
back, a new device). The affinities found are recorded in the state file
before the first write; a sync killed is undone by the next one's start,
which keeps the CPUs of containers still running clear.

It needs the host's /proc/irq writable at --root/proc/irq (root; in a pod:
a hostPath mount, without privileges: the files are root's), the host's
PID namespace (holders are named by process, and other holders such as
corepin agent check them), and --root/run/corepin for irqbalance's banned
CPUs. Where /proc/irq cannot be written it exits 1 saying why.

Examples:
  corepin irq sync
  corepin irq sync --state /var/lib/corepin/agent.db --root /host
  corepin irq sync --interval 500ms --resync 30s --log-format json`

func init() { register(newIRQCmd) }

func newIRQCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "irq",
		Short: "Device interrupts kept off exclusive CPUs (the pods' side: irq sync)",
		Long:  irqUsage,
		Args:  cobra.NoArgs,
	}
	var state, root, logFormat string
	var interval, resync time.Duration
	sync := &cobra.Command{
		Use:   "sync",
		Short: "Keep the CPUs of the NRI plugin's irq_isolate containers clear of device interrupts",
		Long:  irqSyncUsage,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case interval < 100*time.Millisecond || interval > time.Minute:
				return Usagef("--interval %v: give 100ms to 1m", interval)
			case resync < interval || resync > time.Hour:
				return Usagef("--resync %v: give --interval (%v) to 1h", resync, interval)
			case logFormat != "text" && logFormat != "json":
				return Usagef("--log-format %q: want text or json", logFormat)
			}
			var h slog.Handler = slog.NewTextHandler(e.stderr, nil)
			if logFormat == "json" {
				h = slog.NewJSONHandler(e.stderr, nil)
			}
			ctx, cancel := signalContext(cmd)
			defer cancel()
			err := nri.RunIRQSync(ctx, nri.IRQSyncOptions{State: state, Root: root, Interval: interval, Resync: resync, Logger: slog.New(h)})
			if isAgentUsage(err) {
				return &UsageError{Err: err}
			}
			return err
		},
	}
	fl := sync.Flags()
	fl.StringVar(&state, "state", agent.DefaultState, "the NRI plugin's state file (SQLite)")
	fl.StringVar(&root, "root", "/", "the host's root as seen here: holds proc/irq (writable) and run/corepin")
	fl.DurationVar(&interval, "interval", nri.DefaultIRQInterval, "how often the state file is read")
	fl.DurationVar(&resync, "resync", nri.DefaultIRQResync, "how often the interrupts are steered again though nothing changed")
	fl.StringVar(&logFormat, "log-format", "text", "text or json")
	cmd.AddCommand(sync)
	return cmd
}
