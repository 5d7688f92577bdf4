package extender

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"
)

// errBusy answers a call that finds the gate's queue full.
var errBusy = errors.New("extender busy: too many calls waiting; retry")

// gate bounds the calls in flight: at most calls at once, whose bodies
// (their weights, up to size each) add up to at most size bytes, so that
// what the calls hold stays within the memory the extender is given. A
// call that does not fit waits its turn, first come first served, while
// at most waiting others wait; one more is refused at once (errBusy), as
// is a wait its context ends.
//
// kube-scheduler makes one filter or prioritize call at a time per
// scheduling cycle and waits for it up to its httpTimeout; an error it
// gets fails the pod's cycle (the pod is retried after a backoff) or,
// with ignorable: true, skips the extender for that call.
type gate struct {
	mu      sync.Mutex
	size    int64 // bytes of bodies in flight allowed
	free    int64
	calls   int // calls in flight allowed
	running int
	waiting int
	queue   list.List // of *waiter
}

type waiter struct {
	n     int64
	ready chan struct{}
}

func newGate(size int64, calls, waiting int) *gate {
	return &gate{size: size, free: size, calls: calls, waiting: waiting}
}

// acquire waits until a call of weight n bytes may run and returns the
// function that ends it. A weight above the gate's size is taken as its
// size: such a call runs alone.
func (g *gate) acquire(ctx context.Context, n int64) (release func(), err error) {
	n = max(min(n, g.size), 0)
	release = func() {
		g.mu.Lock()
		g.free += n
		g.running--
		g.wake()
		g.mu.Unlock()
	}
	g.mu.Lock()
	if g.queue.Len() == 0 && g.fits(n) {
		g.take(n)
		g.mu.Unlock()
		return release, nil
	}
	if g.queue.Len() >= g.waiting {
		g.mu.Unlock()
		return nil, errBusy
	}
	w := &waiter{n: n, ready: make(chan struct{})}
	el := g.queue.PushBack(w)
	g.mu.Unlock()
	select {
	case <-w.ready:
		return release, nil
	case <-ctx.Done():
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-w.ready: // its turn came meanwhile: give it back
		g.free += n
		g.running--
		g.wake()
	default:
		g.queue.Remove(el)
		g.wake() // the waiters behind it may fit
	}
	return nil, fmt.Errorf("waiting for the calls in flight: %w", ctx.Err())
}

func (g *gate) fits(n int64) bool { return g.running < g.calls && g.free >= n }

func (g *gate) take(n int64) {
	g.free -= n
	g.running++
}

// wake lets the waiters at the head of the queue run while they fit.
func (g *gate) wake() {
	for el := g.queue.Front(); el != nil; el = g.queue.Front() {
		w := el.Value.(*waiter)
		if !g.fits(w.n) {
			return
		}
		g.take(w.n)
		g.queue.Remove(el)
		close(w.ready)
	}
}
