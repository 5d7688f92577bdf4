package netbench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
)

// ErrUsage is wrapped by RunCommand's errors about bad arguments.
var ErrUsage = errors.New("invalid pingpong arguments")

// CommandUsage documents RunCommand's arguments (`corepin pingpong`).
const CommandUsage = `Usage: corepin pingpong server|client|compute [flags]

The kernels of 'corepin bench oversubscription', one process per rank: a TCP
echo server, a ping-pong client that exchanges N small messages with it in
lockstep, and a compute-only counterpart that runs N fixed integer ops.

  server  --listen ADDR [--conns N]
          Echo every byte back. Prints {"listen":"HOST:PORT"} once listening
          (port 0 picks one); exits after N connections closed (0: never).
  client  --connect ADDR --messages N [--size BYTES]
          Prints {"round_trips":N,"wall_s":..,"rtt_p50_us":..,"rtt_p99_us":..,
          "ops_per_s":..}; connecting is not timed.
  compute --ops N
          Prints {"ops":N,"wall_s":..,"ops_per_s":..}.

With --wait-stdin, client and compute first print {"ready":true} (the client
once connected) and start the timed work when a line (or end of file) comes
on stdin: a start barrier for many processes.

Examples:
  corepin pingpong server --listen 127.0.0.1:7000 -o json &
  corepin pingpong client --connect 127.0.0.1:7000 --messages 100000 -o json
  corepin pingpong compute --ops 1000000 -o json`

// RunCommand runs `corepin pingpong ARGS...`: args[0] is server, client or
// compute, the rest its flags; -o json selects one JSON object per line on
// stdout (text otherwise). Argument errors wrap ErrUsage; -h returns
// flag.ErrHelp after printing CommandUsage to stdout.
func RunCommand(ctx context.Context, args []string, stdin io.Reader, stdout io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: give a subcommand: server, client or compute", ErrUsage)
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(stdout, CommandUsage)
		return flag.ErrHelp
	}
	fs := flag.NewFlagSet("pingpong "+args[0], flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	output := fs.String("o", "text", "output format: text or json")
	fs.StringVar(output, "output", "text", "output format: text or json")
	waitStdin := fs.Bool("wait-stdin", false, "print {\"ready\":true} and wait for a line on stdin before the timed work")
	waitFIFO := fs.String("wait-fifo", "", "print {\"ready\":true} and wait for the start barrier at this FIFO (see Barrier) before the timed work")
	var (
		listen, connect string
		conns, size     int
		messages        int
		ops             int64
	)
	switch args[0] {
	case "server":
		fs.StringVar(&listen, "listen", "", "address to listen on (host:port; port 0 picks one)")
		fs.IntVar(&conns, "conns", 0, "exit after this many connections (0: never)")
	case "client":
		fs.StringVar(&connect, "connect", "", "echo server address (host:port)")
		fs.IntVar(&messages, "messages", 0, "round trips (fixed work)")
		fs.IntVar(&size, "size", DefaultSize, "bytes per message")
	case "compute":
		fs.Int64Var(&ops, "ops", 0, "fixed integer ops (fixed work)")
	default:
		return fmt.Errorf("%w: unknown subcommand %q: use server, client or compute", ErrUsage, args[0])
	}
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stdout, CommandUsage)
			return err
		}
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", ErrUsage, fs.Arg(0))
	}
	if *output != "text" && *output != "json" {
		return fmt.Errorf("%w: unknown output format %q: use -o text or -o json", ErrUsage, *output)
	}
	asJSON := *output == "json"
	if *waitStdin && *waitFIFO != "" {
		return fmt.Errorf("%w: --wait-stdin and --wait-fifo: give one of them", ErrUsage)
	}
	// start returns the start barrier: closed once stdin gives a line, or
	// once the FIFO's writer closes it.
	start := func() <-chan struct{} {
		if *waitFIFO != "" {
			ch, err := WaitFIFO(*waitFIFO)
			if err != nil {
				// The rank cannot wait: it says so and runs at once.
				fmt.Fprintf(os.Stderr, "corepin pingpong: %v\n", err)
				return nil
			}
			return ch
		}
		if !*waitStdin {
			return nil
		}
		ch := make(chan struct{})
		go func() {
			_, _ = bufio.NewReader(stdin).ReadString('\n')
			close(ch)
		}()
		return ch
	}
	ready := func() error {
		if !*waitStdin && *waitFIFO == "" {
			return nil
		}
		if asJSON {
			return writeJSON(stdout, Ready{Ready: true})
		}
		_, err := fmt.Fprintln(stdout, "ready")
		return err
	}
	switch args[0] {
	case "server":
		if listen == "" {
			return fmt.Errorf("%w: server needs --listen ADDR", ErrUsage)
		}
		if conns < 0 {
			return fmt.Errorf("%w: --conns %d: want >= 0", ErrUsage, conns)
		}
		var lc net.ListenConfig
		ln, err := lc.Listen(ctx, "tcp", listen)
		if err != nil {
			return fmt.Errorf("listening: %w", err)
		}
		if asJSON {
			err = writeJSON(stdout, Listening{Listen: ln.Addr().String()})
		} else {
			_, err = fmt.Fprintf(stdout, "listening on %s\n", ln.Addr())
		}
		if err != nil {
			ln.Close()
			return err
		}
		return Serve(ctx, ln, conns)
	case "client":
		if connect == "" {
			return fmt.Errorf("%w: client needs --connect ADDR", ErrUsage)
		}
		if messages < 1 || size < 1 {
			return fmt.Errorf("%w: --messages %d --size %d: want both >= 1", ErrUsage, messages, size)
		}
		res, err := PingPong(ctx, Options{Addr: connect, Messages: messages, Size: size,
			Connected: ready, Start: start()})
		if err != nil {
			return err
		}
		if asJSON {
			return writeJSON(stdout, res)
		}
		_, err = fmt.Fprintf(stdout, "%d round trips of %d B in %.3f s: %.0f/s, rtt p50 %.1f µs, p99 %.1f µs\n",
			res.RoundTrips, size, res.WallS, res.OpsPerS, res.RTTP50US, res.RTTP99US)
		return err
	case "compute":
		if ops < 1 {
			return fmt.Errorf("%w: --ops %d: want >= 1", ErrUsage, ops)
		}
		st := start()
		if err := ready(); err != nil {
			return err
		}
		res, err := Compute(ctx, ComputeOptions{Ops: ops, Start: st})
		if err != nil {
			return err
		}
		if asJSON {
			return writeJSON(stdout, res)
		}
		_, err = fmt.Fprintf(stdout, "%d ops in %.3f s: %.0f ops/s\n", res.Ops, res.WallS, res.OpsPerS)
		return err
	}
	return nil
}

func writeJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
