package cli

import (
	"github.com/spf13/cobra"

	"github.com/corepin/corepin/schedext"
)

const schedExtUsage = `What corepin does with sched_ext, the kernel's BPF scheduler class (Linux
6.12 and later). "corepin topo" says whether a sched_ext scheduler is
attached and which BE routes it leaves inert.

Examples:
  corepin sched-ext config > layered.json && scx_layered f:layered.json`

const schedExtConfigUsage = `Print the layer config corepin's classes map to, as scx_layered reads it
(scx_layered f:FILE): BE runs and BE pods in an Open layer that never
preempts, corepin's other runs in an Open layer that preempts, everything
else in a last layer. Layers match corepin's fixed parent cgroups only
(corepin-be, kubepods/corepin-be, corepin), so workloads coming and going
never force scx_layered to reload. The output is always JSON.

Examples:
  corepin sched-ext config
  corepin sched-ext config > /etc/corepin/layered.json`

func init() { register(newSchedExtCmd) }

func newSchedExtCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sched-ext",
		Short: "What corepin does with sched_ext (the config it hands scx_layered)",
		Long:  schedExtUsage,
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "config",
		Short: "Print the scx_layered layer config of corepin's classes",
		Long:  schedExtConfigUsage,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			data, err := schedext.MarshalLayered(schedext.LayeredConfig())
			if err != nil {
				return err
			}
			_, err = e.stdout.Write(data)
			return err
		},
	})
	return cmd
}
