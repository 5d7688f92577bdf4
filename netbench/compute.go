package netbench

import (
	"context"
	"fmt"

	"github.com/corepin/corepin/workload"
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

// Compute runs opts.Ops operations of corepin's spin kernel on one thread
// (the compute-only counterpart of a ping-pong rank; see workload.Spin)
// once Start is closed, and reports how long they took. If ctx ends first
// it stops and returns ctx's error.
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
	r, err := workload.Spin(ctx, workload.SpinOptions{Ops: opts.Ops, Threads: 1})
	if err != nil {
		return ComputeResult{}, fmt.Errorf("computing: %w", err)
	}
	res := ComputeResult{Ops: r.Ops, WallS: r.Wall.Seconds(), OpsPerS: r.OpsPerSec}
	return res, nil
}
