package extender

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
)

// TestGate: calls run while their bodies fit the gate's bytes and its
// count, the others wait first come first served, one more than the queue
// holds is refused at once, a wait whose context ends leaves the queue,
// and a call heavier than the whole gate runs alone.
func TestGate(t *testing.T) {
	ctx := context.Background()
	g := newGate(100, 3, 1)
	r1, err := g.acquire(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := g.acquire(ctx, 40)
	if err != nil {
		t.Fatalf("60 + 40 bytes of 100: %v", err)
	}
	got := make(chan error)
	var r3 func()
	go func() {
		var err error
		r3, err = g.acquire(ctx, 50) // waits: no bytes left
		got <- err
	}()
	for waiting(g) != 1 {
		runtime.Gosched()
		select {
		case err := <-got:
			t.Fatalf("a call of 50 bytes ran beside 100 in flight (%v)", err)
		default:
		}
	}
	if _, err := g.acquire(ctx, 1); !errors.Is(err, errBusy) {
		t.Fatalf("one more than the queue holds: %v, want errBusy", err)
	}
	r1()
	if err := <-got; err != nil {
		t.Fatalf("the waiting call, once 60 bytes were freed: %v", err)
	}
	// 40 + 50 in flight: a canceled wait leaves the queue.
	cctx, cancel := context.WithCancel(ctx)
	go func() {
		_, err := g.acquire(cctx, 20)
		got <- err
	}()
	until(func() bool { return waiting(g) == 1 })
	cancel()
	if err := <-got; !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled wait: %v, want context.Canceled", err)
	}
	if n := waiting(g); n != 0 {
		t.Fatalf("%d calls waiting after the cancel, want 0", n)
	}
	r2()
	r3()
	// Idle: a call heavier than the gate runs, alone.
	big, err := g.acquire(ctx, 1000)
	if err != nil {
		t.Fatalf("a call heavier than the gate: %v", err)
	}
	go func() {
		_, err := g.acquire(ctx, 1)
		got <- err
	}()
	until(func() bool { return waiting(g) == 1 })
	big()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	// The count bounds small calls too.
	g = newGate(100, 1, 0)
	r, err := g.acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.acquire(ctx, 1); !errors.Is(err, errBusy) {
		t.Errorf("a second call with one allowed and no queue: %v, want errBusy", err)
	}
	r()
}

// until yields until cond holds.
func until(cond func() bool) {
	for !cond() {
		runtime.Gosched()
	}
}

func waiting(g *gate) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.queue.Len()
}

// TestHandlerQueuesThenRefusesCalls: while a call is in flight (its body
// still arriving), the next waits for it and one more than the queue holds
// is answered 503 with Retry-After, which kube-scheduler takes as an
// extender error (ignorable: false in the chart: the pod is retried); the
// waiting call is answered once the first ends.
func TestHandlerQueuesThenRefusesCalls(t *testing.T) {
	e := New()
	e.gate = newGate(e.maxBody, 1, 1)
	h := e.Handler()
	body := args(t, guaranteedPod("p", "2", nil, nil), node("a", map[string]string{AnnotationNUMAFree: "[4]"}))
	pr, pw := io.Pipe()
	first := make(chan int)
	go func() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/filter", pr))
		first <- rec.Code
	}()
	second := make(chan int)
	until(func() bool { return running(e.gate) == 1 })
	go func() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/prioritize", strings.NewReader(string(body))))
		second <- rec.Code
	}()
	until(func() bool { return waiting(e.gate) == 1 })
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/filter", strings.NewReader(string(body))))
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
		t.Errorf("a call beyond the queue: %d (Retry-After %q) %s, want 503 with Retry-After", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
	pw.Write(body)
	pw.Close()
	if code := <-first; code != http.StatusOK {
		t.Errorf("the call in flight: %d, want 200", code)
	}
	if code := <-second; code != http.StatusOK {
		t.Errorf("the waiting call: %d, want 200", code)
	}
}

func running(g *gate) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.running
}
