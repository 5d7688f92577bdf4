package netbench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
)

// ErrUsage is wrapped by RunRank's errors about options a person gave.
var ErrUsage = errors.New("invalid pingpong arguments")

// Rank roles.
const (
	RoleServer  = "server"  // TCP echo server
	RoleClient  = "client"  // lockstep ping-pong client
	RoleCompute = "compute" // compute-only counterpart
)

// RankOptions is one rank process of the oversubscription experiment
// (`corepin pingpong ROLE`); the command line that fills it lives in
// cmd/corepin/cli, with cobra.
type RankOptions struct {
	// Role is RoleServer, RoleClient or RoleCompute.
	Role string
	// Listen and Conns are the server's address (port 0 picks one) and
	// how many connections it serves before exiting (0: never).
	Listen string
	Conns  int
	// Connect, Messages and Size are the client's server, round trips
	// and bytes per message (0: DefaultSize).
	Connect  string
	Messages int
	Size     int
	// Ops is the compute rank's fixed work.
	Ops int64
	// WaitStdin or WaitFIFO (a Barrier's path) make a client or compute
	// rank print Ready and wait for the start: a line on stdin, or the
	// barrier's release.
	WaitStdin bool
	WaitFIFO  string
	// JSON prints one JSON object per line (Listening, Ready, Result,
	// ComputeResult) instead of text.
	JSON bool
}

// validate checks o; its errors wrap ErrUsage.
func (o RankOptions) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrUsage}, args...)...)
	}
	switch {
	case o.WaitStdin && o.WaitFIFO != "":
		return bad("--wait-stdin and --wait-fifo: give one of them")
	case o.Role == RoleServer && o.Listen == "":
		return bad("server needs --listen ADDR")
	case o.Role == RoleServer && o.Conns < 0:
		return bad("--conns %d: want >= 0", o.Conns)
	case o.Role == RoleClient && o.Connect == "":
		return bad("client needs --connect ADDR")
	case o.Role == RoleClient && (o.Messages < 1 || o.Size < 1 || o.Size > MaxSize):
		return bad("--messages %d --size %d: want messages >= 1 and size 1 to %d bytes", o.Messages, o.Size, MaxSize)
	case o.Role == RoleCompute && o.Ops < 1:
		return bad("--ops %d: want >= 1", o.Ops)
	case o.Role != RoleServer && o.Role != RoleClient && o.Role != RoleCompute:
		return bad("unknown role %q: use server, client or compute", o.Role)
	}
	return nil
}

// RunRank runs one rank: validates o (errors wrap ErrUsage), then serves,
// ping-pongs or computes, printing to stdout; stdin is read only with
// WaitStdin.
func RunRank(ctx context.Context, o RankOptions, stdin io.Reader, stdout io.Writer) error {
	if o.Role == RoleClient && o.Size == 0 {
		o.Size = DefaultSize
	}
	if err := o.validate(); err != nil {
		return err
	}
	// start returns the start barrier: closed once stdin gives a line, or
	// once the barrier's writer closes the FIFO.
	start := func() (<-chan struct{}, error) {
		switch {
		case o.WaitFIFO != "":
			return WaitFIFO(o.WaitFIFO)
		case o.WaitStdin:
			ch := make(chan struct{})
			go func() {
				_, _ = bufio.NewReader(stdin).ReadString('\n')
				close(ch)
			}()
			return ch, nil
		}
		return nil, nil
	}
	ready := func() error {
		if !o.WaitStdin && o.WaitFIFO == "" {
			return nil
		}
		if o.JSON {
			return writeJSON(stdout, Ready{Ready: true})
		}
		_, err := fmt.Fprintln(stdout, "ready")
		return err
	}
	switch o.Role {
	case RoleServer:
		var lc net.ListenConfig
		ln, err := lc.Listen(ctx, "tcp", o.Listen)
		if err != nil {
			return fmt.Errorf("listening: %w", err)
		}
		if o.JSON {
			err = writeJSON(stdout, Listening{Listen: ln.Addr().String()})
		} else {
			_, err = fmt.Fprintf(stdout, "listening on %s\n", ln.Addr())
		}
		if err != nil {
			ln.Close()
			return err
		}
		return Serve(ctx, ln, o.Conns)
	case RoleClient:
		st, err := start()
		if err != nil {
			return err
		}
		res, err := PingPong(ctx, Options{Addr: o.Connect, Messages: o.Messages, Size: o.Size, Connected: ready, Start: st})
		if err != nil {
			return err
		}
		if o.JSON {
			return writeJSON(stdout, res)
		}
		_, err = fmt.Fprintf(stdout, "%d round trips of %d B in %.3f s: %.0f/s, rtt p50 %.1f µs, p99 %.1f µs\n",
			res.RoundTrips, o.Size, res.WallS, res.OpsPerS, res.RTTP50US, res.RTTP99US)
		return err
	default: // RoleCompute
		st, err := start()
		if err != nil {
			return err
		}
		if err := ready(); err != nil {
			return err
		}
		res, err := Compute(ctx, ComputeOptions{Ops: o.Ops, Start: st})
		if err != nil {
			return err
		}
		if o.JSON {
			return writeJSON(stdout, res)
		}
		_, err = fmt.Fprintf(stdout, "%d ops in %.3f s: %.0f ops/s\n", res.Ops, res.WallS, res.OpsPerS)
		return err
	}
}

func writeJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
