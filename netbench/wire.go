package netbench

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// The rank processes' lines on stdout (`corepin pingpong ... -o json`),
// one JSON object each, declared once for the ranks and for whoever reads
// them (bench's oversubscription experiment). The client's and compute's
// results are Result and ComputeResult.

// Listening is the server's first line: the address it listens on.
type Listening struct {
	Listen string `json:"listen"`
}

// Ready is a rank's line once it waits at the start barrier.
type Ready struct {
	Ready bool `json:"ready"`
}

// RankResult is a client's or a compute rank's final line, read without
// knowing which: RoundTrips is 0 for compute, Ops for a client.
type RankResult struct {
	Result
	Ops int64 `json:"ops"`
}

// Barrier is a start barrier for many processes: a FIFO that every rank
// opens for reading (WaitFIFO, `--wait-fifo PATH`) and blocks on until
// Release closes the only writer, so that all ranks see end of file at
// once. It needs no stdin, so ranks started through package proc can wait
// on it.
type Barrier struct {
	path string
	w    *os.File
}

// NewBarrier makes a barrier's FIFO in dir, which must exist and be
// private to the caller (the FIFO is mode 0600).
func NewBarrier(dir string) (*Barrier, error) {
	path := filepath.Join(dir, fmt.Sprintf("start-%d.fifo", os.Getpid()))
	_ = os.Remove(path)
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		return nil, fmt.Errorf("making the start barrier: %w", &os.PathError{Op: "mkfifo", Path: path, Err: err})
	}
	// O_RDWR on a FIFO never blocks (Linux fifo(7)), and holding a writer
	// keeps the ranks' opens from blocking and their reads from ending.
	w, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("opening the start barrier: %w", err)
	}
	return &Barrier{path: path, w: w}, nil
}

// Path is the FIFO's path, for the ranks' --wait-fifo.
func (b *Barrier) Path() string { return b.path }

// Release lets every rank waiting on the barrier go, and removes the FIFO.
// It may be called more than once.
func (b *Barrier) Release() error {
	if b.w == nil {
		return nil
	}
	err := b.w.Close()
	b.w = nil
	if rerr := os.Remove(b.path); rerr != nil && !errors.Is(rerr, os.ErrNotExist) && err == nil {
		err = rerr
	}
	return err
}

// WaitFIFO opens the barrier at path and returns a channel closed once the
// barrier is released. It returns after the open, so a rank that says it
// is ready after WaitFIFO cannot miss the release.
func WaitFIFO(path string) (<-chan struct{}, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("opening the start barrier: %w", err)
	}
	ch := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, io.LimitReader(f, 1<<10))
		f.Close()
		close(ch)
	}()
	return ch, nil
}
