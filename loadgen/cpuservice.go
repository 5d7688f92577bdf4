package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultCost is the CPU time a CPUService request burns unless told
// otherwise: a few milliseconds, like the mock service of the colocation
// studies.
const DefaultCost = 3 * time.Millisecond

// HealthPath answers 200 without burning CPU, for readiness checks.
const HealthPath = "/healthz"

// ServiceAddress is the first line `corepin serve cpu -o json` prints once
// it listens, declared once for the command and for whoever starts it.
type ServiceAddress struct {
	Listen string  `json:"listen"`
	CostMs float64 `json:"cost_ms"`
}

// CPUService is an HTTP handler whose every request burns a fixed amount of
// CPU time (not wall time) and returns a small body. Under contention a
// request takes longer on the wall clock but costs the same CPU, which is
// what makes it a fair stand-in for a latency-sensitive service.
//
// Burning spins on the request's own OS thread (runtime.LockOSThread) until
// that thread's CPU clock (CLOCK_THREAD_CPUTIME_ID, see clock_gettime(2))
// has advanced by the cost. It does not sleep, do I/O or allocate while it
// spins.
type CPUService struct {
	cost   time.Duration
	sem    chan struct{} // nil: no limit on concurrent burns
	served atomic.Int64
	body   []byte
}

// ServiceOption configures a CPUService.
type ServiceOption func(*CPUService)

// WithCost sets the CPU time each request burns (default DefaultCost).
func WithCost(d time.Duration) ServiceOption { return func(s *CPUService) { s.cost = d } }

// WithWorkers limits how many requests burn CPU at once, like a service
// with a fixed pool of worker threads; further requests wait (and that
// wait shows in their latency). 0, the default, sets no limit beyond
// GOMAXPROCS.
func WithWorkers(n int) ServiceOption {
	return func(s *CPUService) {
		if n > 0 {
			s.sem = make(chan struct{}, n)
		} else {
			s.sem = nil
		}
	}
}

// NewCPUService returns a CPUService burning DefaultCost per request unless
// an option says otherwise.
func NewCPUService(opts ...ServiceOption) (*CPUService, error) {
	s := &CPUService{cost: DefaultCost, body: []byte("ok\n")}
	for _, o := range opts {
		o(s)
	}
	if s.cost < 0 {
		return nil, fmt.Errorf("creating cpu service: negative cost %s", s.cost)
	}
	return s, nil
}

// Cost returns the CPU time each request burns.
func (s *CPUService) Cost() time.Duration { return s.cost }

// Served returns how many requests have burned their cost so far.
func (s *CPUService) Served() int64 { return s.served.Load() }

// ServeHTTP burns the cost on the calling thread and answers "ok".
// HealthPath answers without burning.
func (s *CPUService) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	if r.URL.Path != HealthPath {
		if s.sem != nil {
			select {
			case s.sem <- struct{}{}:
			case <-r.Context().Done():
				return
			}
		}
		BurnCPU(s.cost)
		if s.sem != nil {
			<-s.sem
		}
		s.served.Add(1)
	}
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(s.body)))
	_, _ = w.Write(s.body)
}

// Serve answers HTTP on ln until ctx is done, then shuts down gracefully
// (waiting up to 5 s for requests in flight) and returns nil.
func (s *CPUService) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serving http: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutting down http server: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serving http: %w", err)
	}
	return nil
}

// BurnCPU spins until the calling OS thread has used d of CPU time, as
// measured by its own CPU clock, so that time spent descheduled (waiting
// for a CPU, preempted by another process) does not count. It locks the
// goroutine to its thread for the duration. If the thread clock cannot be
// read it falls back to spinning for d of wall time.
func BurnCPU(d time.Duration) {
	if d <= 0 {
		return
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start, ok := threadCPU()
	if !ok {
		for t0 := time.Now(); time.Since(t0) < d; {
			spin()
		}
		return
	}
	for {
		spin()
		now, _ := threadCPU()
		if now-start >= d {
			return
		}
	}
}

func threadCPU() (time.Duration, bool) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}

// spinSink keeps the compiler from discarding spin's work.
var spinSink atomic.Uint64

// spin does a few microseconds of integer work between clock reads, so
// that most of the burned time is user time rather than clock_gettime
// system calls.
func spin() {
	x := spinSink.Load() | 1
	for range 2048 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	spinSink.Store(x)
}
