package cli

import (
	"errors"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/corepin/corepin/agent"
	"github.com/corepin/corepin/store"
)

const agentUsage = `Run the node agent: the one owner of this machine's CPUs. It serves an
HTTP/JSON API on a unix socket (mode 0600): POST/GET /v1/workloads,
GET/DELETE /v1/workloads/NAME, GET /v1/topology, /healthz, /metrics.
Each admission is committed to the state file (SQLite, WAL, mode 0600; on
a disk, not below /sys or /proc) before it is answered; at start the agent adopts its live groups, releases workloads
that are gone and removes empty groups. Workloads keep running when the
agent stops (SIGTERM: graceful shutdown) and are adopted when it restarts.

Examples:
  corepin agent
  corepin agent --socket /run/corepin/corepin.sock --state /var/lib/corepin/agent.db
  corepin agent --config /etc/corepin/agent.yaml   # see deploy/agent.yaml`

func init() { register(newAgentCmd) }

func newAgentCmd(e *env) *cobra.Command {
	var socket, state, config, listen, tokenFile, cgroupRoot string
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run the node agent (HTTP API on a unix socket)",
		Long:  agentUsage,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := loadAgentConfig(config)
			if err != nil {
				return err
			}
			if config != "" {
				// Read again at a clean stop: sched_ext removed stops scx_layered.
				c.Reload = func() (agent.Config, error) { return loadAgentConfig(config) }
			}
			fl := cmd.Flags()
			for _, o := range []struct {
				flag string
				dst  *string
				val  string
			}{{"socket", &c.Socket, socket}, {"state", &c.State, state}, {"listen", &c.Listen, listen},
				{"token-file", &c.TokenFile, tokenFile}, {"cgroup-root", &c.CgroupRoot, cgroupRoot}} {
				if fl.Changed(o.flag) || *o.dst == "" {
					*o.dst = o.val
				}
			}
			var h slog.Handler = slog.NewTextHandler(e.stderr, nil)
			if c.LogFormat == "json" {
				h = slog.NewJSONHandler(e.stderr, nil)
			}
			ctx, cancel := signalContext(cmd)
			defer cancel()
			err = agent.Run(ctx, c, slog.New(h), nil)
			if isAgentUsage(err) {
				return &UsageError{Err: err}
			}
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&socket, "socket", agent.DefaultSocket, "unix socket to serve the API on")
	fl.StringVar(&state, "state", agent.DefaultState, "state file (SQLite)")
	fl.StringVar(&config, "config", "", "YAML config (reserved CPUs, policy options, topology policy)")
	fl.StringVar(&listen, "listen", "", "also serve on this TCP address (needs --token-file)")
	fl.StringVar(&tokenFile, "token-file", "", "file holding the bearer token TCP clients must send")
	fl.StringVar(&cgroupRoot, "cgroup-root", agent.DefaultCgroupRoot, "name of the agent's root cgroup")
	return cmd
}

// isAgentUsage reports whether the agent refused to start because of what
// it was given: a bad config, or a state file it must not touch.
func isAgentUsage(err error) bool {
	for _, s := range []error{agent.ErrInvalid, agent.ErrLocked, store.ErrNotDB, store.ErrCorrupt, store.ErrForeign, store.ErrTooNew} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// loadAgentConfig reads the YAML config at path (none: the zero Config);
// any problem with it is bad input.
func loadAgentConfig(path string) (agent.Config, error) {
	if path == "" {
		return agent.Config{}, nil
	}
	f, err := openFlagFile("--config", path)
	if err != nil {
		return agent.Config{}, err
	}
	defer f.Close()
	c, err := agent.ParseConfig(f)
	if err != nil {
		return agent.Config{}, Usagef("--config %s: %v", path, err)
	}
	return c, nil
}
