package netbench

import (
	"context"
	"fmt"
	"math/bits"
	"sync/atomic"
	"time"
)

// ComputeOptions configures [Compute].
type ComputeOptions struct {
	// Ops is the number of fixed-size operations (> 0): the fixed work.
	Ops int64
	// Start, if not nil, is waited on before the first op.
	Start <-chan struct{}
}

// ComputeResult is what one [Compute] run did. Its JSON form is the output
// of `corepin pingpong compute -o json`.
type ComputeResult struct {
	Ops     int64   `json:"ops"`
	WallS   float64 `json:"wall_s"`
	OpsPerS float64 `json:"ops_per_s"`
}

// computeRounds is the work of one op: dependent xorshift64 and
// multiply-rotate rounds on registers only, about 1-2 µs on a 2020s x86
// core. It is fixed so an op is the same work in every run of a binary.
const computeRounds = 1024

var computeSink atomic.Uint64

func computeOp(x uint64) uint64 {
	acc := x
	for range computeRounds {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		acc = bits.RotateLeft64(acc+x*0x9e3779b97f4a7c15, 29)
	}
	return acc | 1
}

// Compute runs opts.Ops operations of a CPU-bound integer kernel on the
// calling goroutine (one thread: the compute-only counterpart of a
// ping-pong rank) and reports how long they took. It touches no memory
// beyond registers. If ctx ends first it stops and returns ctx's error.
func Compute(ctx context.Context, opts ComputeOptions) (ComputeResult, error) {
	if opts.Ops < 1 {
		return ComputeResult{}, fmt.Errorf("%w: ops %d: want >= 1", ErrInvalid, opts.Ops)
	}
	if opts.Start != nil {
		select {
		case <-opts.Start:
		case <-ctx.Done():
			return ComputeResult{}, fmt.Errorf("waiting to start: %w", context.Cause(ctx))
		}
	}
	x := uint64(0x853c49e6748fea9b)
	start := time.Now()
	for i := range opts.Ops {
		if i&1023 == 0 && ctx.Err() != nil {
			return ComputeResult{}, fmt.Errorf("computing: %w", context.Cause(ctx))
		}
		x = computeOp(x)
	}
	wall := time.Since(start)
	computeSink.Add(x)
	res := ComputeResult{Ops: opts.Ops, WallS: wall.Seconds()}
	if wall > 0 {
		res.OpsPerS = float64(opts.Ops) / wall.Seconds()
	}
	return res, nil
}
