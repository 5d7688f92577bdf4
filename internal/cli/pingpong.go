package cli

import (
	"errors"
	"flag"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/corepin/corepin/netbench"
)

// pingpong is hidden: it is the rank process 'corepin bench
// oversubscription' launches, not a command people need. Its flags are
// parsed by netbench.RunCommand (one definition for the CLI and the tests
// that re-execute themselves as ranks), so cobra passes them through.
func init() { register(newPingPongCmd) }

func newPingPongCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:                "pingpong server|client|compute [flags]",
		Short:              "TCP ping-pong and compute ranks of the oversubscription experiment",
		Long:               netbench.CommandUsage,
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			err := netbench.RunCommand(ctx, subcommandFirst(args), e.stdin, e.stdout)
			switch {
			case errors.Is(err, flag.ErrHelp):
				return nil
			case errors.Is(err, netbench.ErrUsage), errors.Is(err, netbench.ErrInvalid):
				return &UsageError{Err: err}
			}
			return err
		},
	}
}

// subcommandFirst moves flags given before the subcommand (the global
// "-o json" in "corepin -o json pingpong client ...", which cobra passes
// through with DisableFlagParsing) after it, where RunCommand reads them.
func subcommandFirst(args []string) []string {
	var pre []string
	for len(args) > 0 && strings.HasPrefix(args[0], "-") && args[0] != "-h" && args[0] != "--help" {
		a := args[0]
		args = args[1:]
		pre = append(pre, a)
		if (a == "-o" || a == "--output") && len(args) > 0 {
			pre = append(pre, args[0])
			args = args[1:]
		}
	}
	if len(args) == 0 {
		return pre
	}
	return append(append([]string{args[0]}, pre...), args[1:]...)
}
