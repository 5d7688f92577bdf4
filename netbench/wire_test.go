package netbench

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"testing"
)

// Every rank waiting on a Barrier goes when it is released, and not before.
func TestBarrier(t *testing.T) {
	b, err := NewBarrier(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var waits []<-chan struct{}
	for range 3 {
		ch, err := WaitFIFO(b.Path())
		if err != nil {
			t.Fatal(err)
		}
		waits = append(waits, ch)
	}
	for i, ch := range waits {
		select {
		case <-ch:
			t.Fatalf("rank %d released before Release", i)
		default:
		}
	}
	if err := b.Release(); err != nil {
		t.Fatalf("Release: %v", err)
	}
	for _, ch := range waits {
		<-ch // a rank never released hangs the test
	}
	if _, err := os.Stat(b.Path()); !os.IsNotExist(err) {
		t.Errorf("FIFO %s left after Release (stat: %v)", b.Path(), err)
	}
	if err := b.Release(); err != nil {
		t.Errorf("second Release: %v", err)
	}
	if _, err := WaitFIFO(b.Path()); err == nil {
		t.Errorf("WaitFIFO on a released barrier: no error")
	}
}

// A compute rank with --wait-fifo says it is ready, waits, and runs once
// the barrier is released.
func TestRunRankComputeWaitsOnFIFO(t *testing.T) {
	b, err := NewBarrier(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release()
	outR, outW := io.Pipe()
	errc := make(chan error, 1)
	go func() {
		errc <- RunRank(context.Background(), RankOptions{Role: RoleCompute, Ops: 100, WaitFIFO: b.Path(), JSON: true}, nil, outW)
		outW.Close()
	}()
	r := bufio.NewReader(outR)
	var ready Ready
	line, err := r.ReadBytes('\n')
	if err != nil || json.Unmarshal(line, &ready) != nil || !ready.Ready {
		t.Fatalf("first line %q (%v), want {\"ready\":true}", line, err)
	}
	if err := b.Release(); err != nil {
		t.Fatal(err)
	}
	var res RankResult
	line, err = r.ReadBytes('\n')
	if err != nil || json.Unmarshal(line, &res) != nil || res.Ops != 100 {
		t.Fatalf("result line %q (%v), want 100 ops", line, err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("RunCommand: %v", err)
	}
}
