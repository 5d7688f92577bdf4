package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"runtime"
	"time"

	"github.com/spf13/cobra"

	"github.com/corepin/corepin/loadgen"
)

const serveUsage = `Serve a test service for latency experiments.`

const serveCPUUsage = `Serve HTTP where every request burns a fixed amount of CPU time (measured on
the thread's own CPU clock, so "3ms" is 3 ms of CPU however long it takes on
the wall clock) and answers "ok". /healthz answers without burning.

The bound address is the first line on stdout (with -o json, a one-line
object {"listen": ..., "cost_ms": ...}), so a parent process can read it and
then send load. Serves until SIGTERM or SIGINT, then drains requests in
flight and exits 0.

Examples:
  corepin serve cpu                                   # 127.0.0.1:0, 3 ms per request
  corepin serve cpu --listen 127.0.0.1:8080 --cost 5ms
  corepin serve cpu --cost 3ms --workers 4 --gomaxprocs 2 -o json`

func init() { register(newServeCmd) }

func newServeCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve a test service (cpu: fixed CPU cost per request)",
		Long:  serveUsage,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return Usagef("serve needs a service: corepin serve cpu")
		},
	}
	cmd.AddCommand(newServeCPUCmd(e))
	return cmd
}

func newServeCPUCmd(e *env) *cobra.Command {
	var (
		listen     string
		cost       time.Duration
		workers    int
		gomaxprocs int
	)
	cmd := &cobra.Command{
		Use:   "cpu",
		Short: "Serve HTTP with a fixed CPU cost per request",
		Long:  serveCPUUsage,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cost < 0 {
				return Usagef("--cost %s: want 0 or more", cost)
			}
			if workers < 0 {
				return Usagef("--workers %d: want 0 (no limit) or more", workers)
			}
			if gomaxprocs < 0 {
				return Usagef("--gomaxprocs %d: want 0 (Go's default) or more", gomaxprocs)
			}
			if gomaxprocs > 0 {
				runtime.GOMAXPROCS(gomaxprocs)
			}
			svc, err := loadgen.NewCPUService(loadgen.WithCost(cost), loadgen.WithWorkers(workers))
			if err != nil {
				return &UsageError{Err: err}
			}
			ctx, stop := signalContext(cmd)
			defer stop()
			ln, err := listenAndAnnounce(ctx, e, listen, func(addr string) any {
				return loadgen.ServiceAddress{Listen: addr, CostMs: float64(cost) / float64(time.Millisecond)}
			})
			if err != nil {
				return err
			}
			return svc.Serve(ctx, ln)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&listen, "listen", "127.0.0.1:0", "address to listen on (port 0: any free port)")
	fl.DurationVar(&cost, "cost", loadgen.DefaultCost, "CPU time each request burns")
	fl.IntVar(&workers, "workers", 0, "requests burning CPU at once (0: no limit beyond GOMAXPROCS)")
	fl.IntVar(&gomaxprocs, "gomaxprocs", 0, "GOMAXPROCS for the service (0: Go's default)")
	return cmd
}

// listenAndAnnounce listens on TCP address listen and prints the bound
// address as the first line of stdout: the object announce returns, as one
// JSON line, with -o json, else the address alone. A parent process reads
// that line, then talks to the service.
func listenAndAnnounce(ctx context.Context, e *env, listen string, announce func(addr string) any) (net.Listener, error) {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("listening: %w", err)
	}
	addr := ln.Addr().String()
	if e.JSON() {
		// One line, not indented: a parent reads the first line.
		err = json.NewEncoder(e.stdout).Encode(announce(addr))
	} else {
		_, err = fmt.Fprintln(e.stdout, addr)
	}
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("printing address: %w", err)
	}
	if f, ok := e.stdout.(interface{ Sync() error }); ok {
		_ = f.Sync()
	}
	return ln, nil
}

// contextOf returns the command's context, or Background when run without one.
func contextOf(cmd *cobra.Command) context.Context {
	if ctx := cmd.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}
