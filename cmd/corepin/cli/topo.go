package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/corepin/corepin/agent"
	"github.com/corepin/corepin/topology"
)

const topoUsage = `Show the machine's CPU topology: packages, NUMA nodes, L3 caches, physical
cores and their logical CPUs, offline CPUs and CPUs outside corepin's own
cpuset cgroup. On this machine (no --sysfs-root) it adds what decides where a
waking task lands: the kernel, whether the scheduler's features file
(/sys/kernel/debug/sched/features, root and debugfs only) is readable and
writable and whether SIS_UTIL is on, an attached sched_ext scheduler, and the
BE routes such a scheduler leaves inert ("scheduler" in -o json, null where
unknown). A dump of another machine has no running scheduler and no section.

--sysfs-root reads a saved dump of another machine (its sys/ and proc/)
exactly like this one: only regular files, each at most 1 MiB, and nothing
outside DIR (links that lead out of it are refused). Where the dump leaves
something unknown (an empty online file, no package files, an all-zero
cache map), corepin guesses as hwloc does and says so once on stderr.

Examples:
  corepin topo
  corepin topo -o json
  corepin topo --socket /run/corepin/corepin.sock   # with a running agent's assignments
  corepin topo --sysfs-root ./dumps/epyc-7402   # a saved dump of another machine`

func init() { register(newTopoCmd) }

func newTopoCmd(e *env) *cobra.Command {
	var root, socket string
	cmd := &cobra.Command{
		Use:   "topo",
		Short: "Show the CPU topology (like lstopo)",
		Long:  topoUsage,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			t, err := openTopology("--sysfs-root", root)
			if err != nil {
				return err
			}
			printWarnings(e.stderr, t)
			var v *agent.TopologyView
			var sched *topology.Scheduler
			if root == "/" {
				v = agentView(socket)
				s, err := topology.OpenScheduler(root)
				if err != nil {
					return fmt.Errorf("reading this machine's scheduler: %w", err)
				}
				for _, n := range s.Notes {
					fmt.Fprintf(e.stderr, "corepin: warning: %s\n", n)
				}
				sched = &s
			}
			if e.JSON() {
				out := topoWithAgent{Doc: t.Doc(), Scheduler: sched}
				if v != nil {
					out.Pools, out.Workloads = &v.Pools, v.Workloads
				}
				return e.PrintJSON(out)
			}
			o := topology.RenderOptions{OmitWarnings: true}
			if v != nil {
				o.Mark = markHolders(v)
			}
			if err := t.Render(e.stdout, o); err != nil || sched == nil {
				return err
			}
			return topology.RenderScheduler(e.stdout, *sched, t)
		},
	}
	cmd.Flags().StringVar(&root, "sysfs-root", "/", "directory holding sys/ (and proc/) of the machine to read")
	cmd.Flags().StringVar(&socket, "socket", agentSocket(), "agent socket: when an agent answers there, its assignments are drawn on the live machine")
	return cmd
}

// openTopology reads the topology of the machine whose "/" is root ("/" or
// "" for this machine) with topology.Open, the one way corepin loads a
// machine. For a dump of another machine every error is the user's input
// (exit 2) and is prefixed with what named the root (a flag, a JSON key);
// reading this machine can only fail on the system (exit 1).
func openTopology(what, root string) (*topology.Topology, error) {
	t, err := topology.Open(root)
	if err == nil {
		return t, nil
	}
	if root == "" || root == "/" {
		return nil, fmt.Errorf("reading this machine's topology: %w", err)
	}
	return nil, Usagef("%s: %w", what, err)
}

// printWarnings writes, once each, what discovery had to guess, so that a
// person reading a dump knows where corepin's view is an assumption.
func printWarnings(w io.Writer, t *topology.Topology) {
	for _, s := range t.Warnings {
		fmt.Fprintf(w, "corepin: warning: %s\n", s)
	}
}
