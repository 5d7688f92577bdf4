package cli

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/corepin/corepin/loadgen"
)

const loadUsage = `Send HTTP load and report latency: p50, p90, p99, p99.9, max, mean, the
achieved request rate and errors.

By default corepin's own open-loop generator sends GET requests at a constant
rate, each at its intended time whatever happened to the ones before, and
counts latency from that intended time, so a stall is charged to every
request it delayed (no coordinated omission). It reports the achieved rate
against the target and how many sends left more than 1 ms late, which means
the generator itself could not keep up: run it on CPUs apart from the
service and its neighbours.

--wrk drives the wrk binary instead (Debian package wrk): closed loop, each
connection waits for its response before the next request, so --rate does
not apply and the tail is understated (coordinated omission). Useful to
compare with published wrk numbers.

Examples:
  corepin load --url http://127.0.0.1:8080/ --rate 200 --duration 10s
  corepin load --url http://127.0.0.1:8080/ --rate 500 --duration 30s --connections 16 --warmup 5s -o json
  corepin load --wrk --url http://127.0.0.1:8080/ --duration 10s --connections 8`

func init() { register(newLoadCmd) }

func newLoadCmd(e *env) *cobra.Command {
	var (
		l       loadgen.Load
		useWrk  bool
		threads int
	)
	cmd := &cobra.Command{
		Use:   "load --url URL [--rate R] [--duration D]",
		Short: "Send constant-rate HTTP load and report latency percentiles",
		Long:  loadUsage,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if l.URL == "" {
				return Usagef("--url is required")
			}
			if l.Connections < 1 || l.Connections > loadgen.MaxConnections {
				return Usagef("--connections %d: want 1 to %d", l.Connections, loadgen.MaxConnections)
			}
			var (
				r   *loadgen.Result
				err error
			)
			if useWrk {
				if cmd.Flags().Changed("rate") {
					return Usagef("--rate does not apply to --wrk: wrk is closed loop (Debian's wrk has no constant-rate mode)")
				}
				if threads < 1 || threads > l.Connections {
					return Usagef("--threads %d: want 1 to --connections (%d)", threads, l.Connections)
				}
				r, err = loadgen.Wrk(contextOf(cmd), loadgen.WrkLoad{
					URL: l.URL, Duration: l.Duration, Warmup: l.Warmup,
					Connections: l.Connections, Threads: threads, Timeout: l.Timeout,
				})
			} else {
				r, err = loadgen.OpenLoop(contextOf(cmd), l)
			}
			if errors.Is(err, loadgen.ErrInvalidLoad) {
				return &UsageError{Err: err}
			}
			if err != nil && r == nil {
				return err
			}
			var perr error
			if e.JSON() {
				perr = e.PrintJSON(r)
			} else {
				perr = r.WriteText(e.stdout)
			}
			if err != nil {
				return err
			}
			if perr != nil {
				return fmt.Errorf("printing result: %w", perr)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&l.URL, "url", "", "URL to GET (required)")
	fl.Float64Var(&l.Rate, "rate", 100, "target requests per second (open loop)")
	fl.DurationVar(&l.Duration, "duration", 10*time.Second, "measured period")
	fl.DurationVar(&l.Warmup, "warmup", 0, "period before the measured one at the same load, not counted")
	fl.IntVar(&l.Connections, "connections", 8, fmt.Sprintf("keep-alive connections (1 to %d)", loadgen.MaxConnections))
	fl.DurationVar(&l.Timeout, "timeout", 10*time.Second, "per-request timeout")
	fl.BoolVar(&useWrk, "wrk", false, "drive the wrk binary instead (closed loop)")
	fl.IntVar(&threads, "threads", 1, "wrk threads (with --wrk)")
	return cmd
}
