package cli

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/corepin/corepin/agent"
	"github.com/corepin/corepin/topology"
)

const topoUsage = `Show the machine's CPU topology: packages, NUMA nodes, L3 caches, physical
cores and their logical CPUs, offline CPUs and CPUs outside corepin's own
cpuset cgroup.

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
			t, err := loadTopology(root)
			if err != nil {
				return err
			}
			var v *agent.TopologyView
			if root == "/" {
				v = agentView(socket)
			}
			if e.JSON() {
				if v != nil {
					return e.PrintJSON(topoWithAgent{Doc: t.Doc(), Pools: &v.Pools, Workloads: v.Workloads})
				}
				return e.PrintJSON(t.Doc())
			}
			var o topology.RenderOptions
			if v != nil {
				o.Mark = markHolders(v)
			}
			return t.Render(e.stdout, o)
		},
	}
	cmd.Flags().StringVar(&root, "sysfs-root", "/", "directory holding sys/ (and proc/) of the machine to read")
	cmd.Flags().StringVar(&socket, "socket", agentSocket(), "agent socket: when an agent answers there, its assignments are drawn on the live machine")
	return cmd
}

// loadTopology discovers the topology under root; a root that does not
// exist or holds no sysfs is bad input (exit 2), anything else a failure.
func loadTopology(root string) (*topology.Topology, error) {
	st, err := os.Stat(root)
	if err != nil {
		return nil, Usagef("--sysfs-root %s: %v", root, err)
	}
	if !st.IsDir() {
		return nil, Usagef("--sysfs-root %s is not a directory", root)
	}
	if _, err := os.Stat(root + "/sys/devices/system/cpu"); err != nil {
		return nil, Usagef("--sysfs-root %s has no sys/devices/system/cpu: give the directory that holds the dump's sys/", root)
	}
	t, err := discoverAt(root)
	if err != nil {
		if root != "/" {
			return nil, &UsageError{Err: err}
		}
		return nil, err
	}
	return t, nil
}

// discoverAt reads the topology of the machine whose "/" is root. Only the
// live machine ("/") has corepin's own cpuset cgroup to read; a dump of
// another machine counts every online CPU as allowed.
func discoverAt(root string) (*topology.Topology, error) {
	var opts []topology.Option
	if root != "/" {
		opts = append(opts, topology.WithoutCgroup())
	}
	return topology.Discover(os.DirFS(root), opts...)
}
