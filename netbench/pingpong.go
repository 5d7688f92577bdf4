package netbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"time"
)

// DefaultSize is the message size of a ping-pong when Options.Size is 0:
// a small message, so latency rather than bandwidth is measured.
const DefaultSize = 64

// MaxSize bounds a ping-pong's message size: each side holds two buffers
// of it, and a latency study needs nothing near it.
const MaxSize = 16 << 20

// ErrInvalid is wrapped by errors about invalid options.
var ErrInvalid = errors.New("invalid netbench options")

// Options configures [PingPong].
type Options struct {
	// Addr is the echo server's host:port.
	Addr string
	// Messages is the number of round trips (> 0): the fixed work.
	Messages int
	// Size is the bytes per message (0: DefaultSize).
	Size int
	// Connected, if not nil, is called once connected, before waiting on
	// Start (to tell a coordinator this client is ready).
	Connected func() error
	// Start, if not nil, is waited on after connecting and before the first
	// message, so several clients can start their timed work together.
	Start <-chan struct{}
}

// Result is what one [PingPong] measured. Its JSON form is the output of
// `corepin pingpong client -o json`.
type Result struct {
	RoundTrips int     `json:"round_trips"`
	WallS      float64 `json:"wall_s"`
	RTTP50US   float64 `json:"rtt_p50_us"`
	RTTP99US   float64 `json:"rtt_p99_us"`
	OpsPerS    float64 `json:"ops_per_s"`
}

// PingPong connects to the echo server at opts.Addr and exchanges
// opts.Messages messages of opts.Size bytes in lockstep: it writes one,
// waits for the echo, writes the next. It reports round trips per second
// and round-trip latency percentiles; the wall time runs from the first
// write to the last echo (connecting is not timed).
//
// If ctx ends first, the connection is closed and ctx's error returned.
func PingPong(ctx context.Context, opts Options) (Result, error) {
	if opts.Messages < 1 {
		return Result{}, fmt.Errorf("%w: messages %d: want >= 1", ErrInvalid, opts.Messages)
	}
	if opts.Size == 0 {
		opts.Size = DefaultSize
	}
	if opts.Size < 1 || opts.Size > MaxSize {
		return Result{}, fmt.Errorf("%w: size %d: want 1 to %d bytes", ErrInvalid, opts.Size, MaxSize)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", opts.Addr)
	if err != nil {
		return Result{}, fmt.Errorf("connecting to echo server: %w", err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	if opts.Connected != nil {
		if err := opts.Connected(); err != nil {
			return Result{}, err
		}
	}
	if opts.Start != nil {
		select {
		case <-opts.Start:
		case <-ctx.Done():
			return Result{}, fmt.Errorf("waiting to start: %w", context.Cause(ctx))
		}
	}
	msg := make([]byte, opts.Size)
	for i := range msg {
		msg[i] = byte(i)
	}
	echo := make([]byte, opts.Size)
	rtts := make([]time.Duration, opts.Messages)
	start := time.Now()
	for i := range rtts {
		t0 := time.Now()
		if _, err := conn.Write(msg); err != nil {
			return Result{}, pingPongErr(ctx, "sending message", i, err)
		}
		if _, err := io.ReadFull(conn, echo); err != nil {
			return Result{}, pingPongErr(ctx, "reading echo", i, err)
		}
		rtts[i] = time.Since(t0)
	}
	wall := time.Since(start)
	slices.Sort(rtts)
	res := Result{
		RoundTrips: opts.Messages,
		WallS:      wall.Seconds(),
		RTTP50US:   micros(nearestRank(rtts, 0.50)),
		RTTP99US:   micros(nearestRank(rtts, 0.99)),
	}
	if wall > 0 {
		res.OpsPerS = float64(opts.Messages) / wall.Seconds()
	}
	return res, nil
}

func pingPongErr(ctx context.Context, what string, i int, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s %d: %w", what, i, context.Cause(ctx))
	}
	return fmt.Errorf("%s %d: %w", what, i, err)
}

// nearestRank returns the q-quantile of sorted xs by the nearest-rank
// method (an observed value, never an interpolation).
func nearestRank(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.999999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// Serve echoes every byte received on each connection accepted from ln
// back to its sender, until ctx ends or, when conns > 0, until conns
// connections have been accepted and closed by their clients. It closes
// ln before returning. It returns nil when it stops because of conns, and
// ctx's error when ctx ended.
func Serve(ctx context.Context, ln net.Listener, conns int) error {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	defer ln.Close()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		open     = map[net.Conn]bool{}
		accepted int
	)
	closeAll := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		for c := range open {
			c.Close()
		}
	})
	defer closeAll()
	for conns <= 0 || accepted < conns {
		c, err := ln.Accept()
		if err != nil {
			wg.Wait()
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			return fmt.Errorf("accepting connection: %w", err)
		}
		accepted++
		mu.Lock()
		if ctx.Err() != nil {
			// Cancelled between Accept and here: closeAll has already run
			// (or will find nothing), so close this one ourselves.
			mu.Unlock()
			c.Close()
			continue
		}
		open[c] = true
		mu.Unlock()
		wg.Go(func() {
			defer func() {
				mu.Lock()
				delete(open, c)
				mu.Unlock()
				c.Close()
			}()
			echo(c)
		})
	}
	wg.Wait()
	return ctx.Err()
}

// echo copies c's input back to c until either side stops.
func echo(c net.Conn) {
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
