package cli

import (
	"errors"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/corepin/corepin/netbench"
)

const pingpongUsage = `The kernels of 'corepin bench oversubscription', one process per rank: a TCP
echo server, a ping-pong client that exchanges N small messages with it in
lockstep, and a compute-only counterpart that runs N fixed integer ops.

  server   Echo every byte back. Prints {"listen":"HOST:PORT"} once listening
           (port 0 picks one); exits after --conns connections closed (0: never).
  client   Prints {"round_trips":N,"wall_s":..,"rtt_p50_us":..,"rtt_p99_us":..,
           "ops_per_s":..}; connecting is not timed.
  compute  Prints {"ops":N,"wall_s":..,"ops_per_s":..}.

With --wait-stdin or --wait-fifo PATH, client and compute first print
{"ready":true} (the client once connected) and start the timed work when a
line (or end of file) comes on stdin, or when the start barrier at PATH is
released: a start barrier for many processes.

Examples:
  corepin pingpong server --listen 127.0.0.1:7000 -o json &
  corepin pingpong client --connect 127.0.0.1:7000 --messages 100000 -o json
  corepin pingpong compute --ops 1000000 -o json`

// pingpong is hidden: it is the rank process 'corepin bench
// oversubscription' launches, not a command people need.
func init() { register(newPingPongCmd) }

func newPingPongCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:    "pingpong server|client|compute [flags]",
		Short:  "TCP ping-pong and compute ranks of the oversubscription experiment",
		Long:   pingpongUsage,
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return Usagef("pingpong needs a role: server, client or compute")
		},
	}
	rank := func(role, short string, flags func(*cobra.Command, *netbench.RankOptions)) *cobra.Command {
		o := netbench.RankOptions{Role: role}
		c := &cobra.Command{
			Use:   role,
			Short: short,
			Long:  pingpongUsage,
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
				defer stop()
				o.JSON = e.JSON()
				err := netbench.RunRank(ctx, o, e.stdin, e.stdout)
				if errors.Is(err, netbench.ErrUsage) || errors.Is(err, netbench.ErrInvalid) {
					return &UsageError{Err: err}
				}
				return err
			},
		}
		flags(c, &o)
		if role != netbench.RoleServer {
			c.Flags().BoolVar(&o.WaitStdin, "wait-stdin", false, `print {"ready":true} and wait for a line on stdin before the timed work`)
			c.Flags().StringVar(&o.WaitFIFO, "wait-fifo", "", `print {"ready":true} and wait for the start barrier at this FIFO before the timed work`)
		}
		return c
	}
	cmd.AddCommand(
		rank(netbench.RoleServer, "Echo server", func(c *cobra.Command, o *netbench.RankOptions) {
			c.Flags().StringVar(&o.Listen, "listen", "", "address to listen on (host:port; port 0 picks one)")
			c.Flags().IntVar(&o.Conns, "conns", 0, "exit after this many connections (0: never)")
		}),
		rank(netbench.RoleClient, "Lockstep ping-pong client", func(c *cobra.Command, o *netbench.RankOptions) {
			c.Flags().StringVar(&o.Connect, "connect", "", "echo server address (host:port)")
			c.Flags().IntVar(&o.Messages, "messages", 0, "round trips (fixed work)")
			c.Flags().IntVar(&o.Size, "size", netbench.DefaultSize, "bytes per message")
		}),
		rank(netbench.RoleCompute, "Compute-only rank", func(c *cobra.Command, o *netbench.RankOptions) {
			c.Flags().Int64Var(&o.Ops, "ops", 0, "fixed integer ops (fixed work)")
		}),
	)
	return cmd
}
