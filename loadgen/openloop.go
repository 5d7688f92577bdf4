package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"golang.org/x/sys/unix"
)

// Load describes an open-loop run. It is plain data so that a bench can
// record it beside the Result it produced.
type Load struct {
	// URL is requested with GET.
	URL string
	// Rate is the constant target rate in requests per second.
	Rate float64
	// Duration is the measured period, after Warmup.
	Duration time.Duration
	// Warmup runs at the same rate before the measured period; its
	// requests are sent but not counted.
	Warmup time.Duration
	// Connections caps the keep-alive connections (default 8). When all
	// are busy, due requests wait for one, and the wait counts in their
	// latency.
	Connections int
	// Timeout bounds each request, queueing included (default 10 s).
	Timeout time.Duration
}

func (l Load) withDefaults() Load {
	if l.Connections == 0 {
		l.Connections = 8
	}
	if l.Timeout == 0 {
		l.Timeout = 10 * time.Second
	}
	return l
}

// Validate reports what is wrong with l, if anything.
func (l Load) Validate() error {
	u, err := url.Parse(l.URL)
	switch {
	case err != nil:
		return fmt.Errorf("parsing url: %w", err)
	case u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
		return fmt.Errorf("url %q: want http://host[:port]/path", l.URL)
	case !(l.Rate > 0) || l.Rate > maxRate:
		return fmt.Errorf("rate %v: want more than 0 and at most %g requests per second", l.Rate, maxRate)
	case l.Duration <= 0:
		return fmt.Errorf("duration %s: want more than 0", l.Duration)
	case l.Warmup < 0:
		return fmt.Errorf("warmup %s: want 0 or more", l.Warmup)
	case l.Connections < 0 || l.Connections > MaxConnections:
		return fmt.Errorf("connections %d: want 1 to %d", l.Connections, MaxConnections)
	case l.Timeout < 0:
		return fmt.Errorf("timeout %s: want more than 0", l.Timeout)
	}
	return nil
}

// MaxConnections bounds Load.Connections: each is a worker and a socket,
// and far fewer saturate any one service.
const MaxConnections = 10_000

// maxRate is far above what one generator process can send; it keeps the
// request count of absurd inputs finite.
const maxRate = 1e6

// ErrInvalidLoad wraps the errors of Load.Validate returned by OpenLoop.
var ErrInvalidLoad = errors.New("invalid load")

// OpenLoop sends GET requests to l.URL at a constant rate, request i at
// its intended time t0 + i/Rate whatever happened to the requests before
// it, and measures each latency from that intended time to the end of the
// response body (see the package documentation on coordinated omission).
//
// A timer-driven scheduler sleeps until the next request is due (see
// sleeper) and hands it to an idle worker, or to a fresh goroutine when all workers are busy,
// so the generator does not spin a CPU itself. When it falls behind
// (sends leave more than LateThreshold after their intended time),
// Result.LateSends says so.
//
// OpenLoop returns early with ctx's error if ctx is done.
func OpenLoop(ctx context.Context, l Load) (*Result, error) {
	l = l.withDefaults()
	if err := l.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidLoad, err)
	}
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: l.Timeout, KeepAlive: 30 * time.Second}).DialContext,
		MaxConnsPerHost:     l.Connections,
		MaxIdleConns:        l.Connections,
		MaxIdleConnsPerHost: l.Connections,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: l.Timeout}
	return openLoop(ctx, l, client)
}

// shot is one scheduled request.
type shot struct {
	intended time.Time
	measured bool
}

type recorder struct {
	mu        sync.Mutex
	hist      *hdrhistogram.Histogram
	requests  int64
	errors    int64
	timeouts  int64
	badStatus int64
	late      int64
	maxDelay  time.Duration
	lastSent  time.Time
	firstErr  error
}

func openLoop(ctx context.Context, l Load, client *http.Client) (*Result, error) {
	rec := &recorder{hist: newHistogram()}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	fire := func(s shot) {
		sent := time.Now()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, l.URL, nil)
		var resp *http.Response
		if err == nil {
			resp, err = client.Do(req)
		}
		status := 0
		if err == nil {
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			status = resp.StatusCode
		}
		done := time.Now()
		if !s.measured || ctx.Err() != nil {
			return
		}
		rec.mu.Lock()
		defer rec.mu.Unlock()
		rec.requests++
		delay := sent.Sub(s.intended)
		if delay > LateThreshold {
			rec.late++
		}
		rec.maxDelay = max(rec.maxDelay, delay)
		if sent.After(rec.lastSent) {
			rec.lastSent = sent
		}
		if status != 0 {
			recordLatency(rec.hist, done.Sub(s.intended))
		}
		if err != nil && rec.firstErr == nil {
			rec.firstErr = err
		}
		switch {
		case isTimeout(err):
			rec.errors++
			rec.timeouts++
		case err != nil:
			rec.errors++
		case status >= 400:
			rec.errors++
			rec.badStatus++
		}
	}

	// Workers take due requests; one per connection is enough when the
	// service keeps up, fresh goroutines absorb the rest.
	work := make(chan shot)
	var wg sync.WaitGroup
	for range l.Connections {
		wg.Go(func() {
			for s := range work {
				fire(s)
			}
		})
	}

	interval := float64(time.Second) / l.Rate
	total := l.Warmup + l.Duration
	n := int64(float64(total) / interval)
	if float64(n)*interval < float64(total) {
		n++ // request i is due at i*interval < total
	}
	t0 := time.Now()
	measureStart := t0.Add(l.Warmup)
	sl := newSleeper()
	defer sl.stop()
loop:
	for i := int64(0); i < n; i++ {
		offset := time.Duration(float64(i) * interval)
		intended := t0.Add(offset)
		if !sl.until(ctx, intended) {
			break loop
		}
		s := shot{intended: intended, measured: offset >= l.Warmup}
		select {
		case work <- s:
		default:
			wg.Go(func() { fire(s) })
		}
	}
	close(work)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("generating load: %w", err)
	}

	rec.mu.Lock()
	defer rec.mu.Unlock()
	r := &Result{
		Tool: ToolOpenLoop, URL: l.URL, TargetRPS: l.Rate,
		Duration: l.Duration, Warmup: l.Warmup, Connections: l.Connections,
		Requests: rec.requests, Errors: rec.errors, Timeouts: rec.timeouts, BadStatus: rec.badStatus,
		LateSends: rec.late, MaxSendDelay: rec.maxDelay,
	}
	// The sends of the measured period span Duration when they left on
	// time, and more when the generator fell behind.
	span := max(rec.lastSent.Sub(measureStart)+time.Duration(interval), l.Duration)
	r.AchievedRPS = float64(r.Requests) / span.Seconds()
	r.fillLatency(rec.hist)
	if r.Requests > 0 && r.Errors-r.BadStatus == r.Requests {
		// No response at all: the URL or the service is broken. The
		// Result still says what happened.
		return r, fmt.Errorf("every request failed: %w", rec.firstErr)
	}
	return r, nil
}

func isTimeout(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// sleeper waits until a point in time without spinning a CPU and without
// the up to 1 ms overshoot of Go's timers on Linux, whose idle wait is an
// epoll_wait with a timeout in whole milliseconds (runtime/netpoll_epoll.go).
// It sleeps on a Go timer until about a millisecond before the deadline,
// then finishes in clock_nanosleep(2) on CLOCK_MONOTONIC (the clock Go's
// monotonic readings come from), which the kernel ends with a
// high-resolution timer.
type sleeper struct{ t *time.Timer }

// preciseWindow is how much of a wait clock_nanosleep covers.
const preciseWindow = 1500 * time.Microsecond

func newSleeper() *sleeper {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &sleeper{t: t}
}

func (s *sleeper) stop() { s.t.Stop() }

// until returns true at target, or false as soon as ctx is done.
func (s *sleeper) until(ctx context.Context, target time.Time) bool {
	if ctx.Err() != nil {
		return false
	}
	d := time.Until(target)
	if d <= 0 {
		return true
	}
	if d > preciseWindow {
		s.t.Reset(d - preciseWindow + 500*time.Microsecond)
		select {
		case <-s.t.C:
		case <-ctx.Done():
			return false
		}
		if d = time.Until(target); d <= 0 {
			return true
		}
	}
	// Let the request just handed to a worker run before this goroutine
	// blocks its thread in the kernel.
	runtime.Gosched()
	if d = time.Until(target); d > 0 {
		nanosleep(d)
	}
	return ctx.Err() == nil
}

// nanosleep blocks the calling thread for d (at most preciseWindow plus a
// little) on CLOCK_MONOTONIC, resuming after signals.
func nanosleep(d time.Duration) {
	var now unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &now); err != nil {
		time.Sleep(d)
		return
	}
	abs := unix.NsecToTimespec(now.Nano() + int64(d))
	for {
		err := unix.ClockNanosleep(unix.CLOCK_MONOTONIC, unix.TIMER_ABSTIME, &abs, nil)
		if err != unix.EINTR {
			return
		}
	}
}
