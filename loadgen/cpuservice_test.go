package loadgen

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corepin/corepin/internal/testutil"
)

// startService serves s on a loopback port until the test ends and returns
// its base URL.
func startService(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listening: %v", err)
	}
	srv := &http.Server{Handler: h}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		<-done
	})
	return "http://" + ln.Addr().String() + "/"
}

func newService(t *testing.T, opts ...ServiceOption) *CPUService {
	t.Helper()
	s, err := NewCPUService(opts...)
	if err != nil {
		t.Fatalf("NewCPUService: %v", err)
	}
	return s
}

// processCPU returns the user plus system time of this process so far.
func processCPU(t *testing.T) time.Duration {
	t.Helper()
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		t.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func get(t *testing.T, c *http.Client, url string) string {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading body: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: status %d", url, resp.StatusCode)
	}
	return string(b)
}

func TestCPUServiceBurnsCost(t *testing.T) {
	const (
		cost = 3 * time.Millisecond
		n    = 50
	)
	s := newService(t, WithCost(cost))
	url := startService(t, s)
	c := &http.Client{}
	get(t, c, url) // connect and warm up outside the measurement
	before := processCPU(t)
	for range n {
		if body := get(t, c, url); body != "ok\n" {
			t.Fatalf("body = %q, want %q", body, "ok\n")
		}
	}
	used := processCPU(t) - before
	// Only a lower bound: the client and the runtime add CPU of their own,
	// and a small shared machine adds noise.
	if want := time.Duration(float64(n*cost) * 0.9); used < want {
		t.Errorf("%d requests used %s of process CPU, want at least %s", n, used, want)
	}
	if got := s.Served(); got != n+1 {
		t.Errorf("Served() = %d, want %d", got, n+1)
	}
}

func TestBurnCPUCountsThreadTime(t *testing.T) {
	const d = 20 * time.Millisecond
	before := processCPU(t)
	BurnCPU(d)
	if used := processCPU(t) - before; used < d*9/10 {
		t.Errorf("BurnCPU(%s) used %s of process CPU, want at least %s", d, used, d*9/10)
	}
	BurnCPU(0)
	BurnCPU(-time.Second) // returns at once
}

func TestCPUServiceHealthDoesNotBurn(t *testing.T) {
	s := newService(t, WithCost(10*time.Second))
	url := startService(t, s)
	if body := get(t, &http.Client{}, url+"healthz"); body != "ok\n" {
		t.Fatalf("body = %q, want %q", body, "ok\n")
	}
	if got := s.Served(); got != 0 {
		t.Errorf("Served() = %d after /healthz, want 0", got)
	}
}

func TestCPUServiceWorkersQueue(t *testing.T) {
	const cost = 20 * time.Millisecond
	s := newService(t, WithCost(cost), WithWorkers(1))
	url := startService(t, s)
	start := time.Now()
	errc := make(chan error, 2)
	for range 2 {
		go func() {
			resp, err := http.Get(url)
			if err == nil {
				resp.Body.Close()
			}
			errc <- err
		}()
	}
	for range 2 {
		if err := <-errc; err != nil {
			t.Fatalf("GET: %v", err)
		}
	}
	// One worker: the two burns ran one after the other.
	if el := time.Since(start); el < 2*cost {
		t.Errorf("2 requests with 1 worker took %s, want at least %s", el, 2*cost)
	}
}

func TestNewCPUServiceRejectsNegativeCost(t *testing.T) {
	if _, err := NewCPUService(WithCost(-time.Millisecond)); err == nil {
		t.Fatal("NewCPUService(WithCost(-1ms)) = nil error, want one")
	}
}

func TestCPUServiceServeStopsOnCancel(t *testing.T) {
	s := newService(t, WithCost(time.Millisecond))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listening: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { errc <- s.Serve(ctx, ln) }()
	get(t, &http.Client{}, "http://"+ln.Addr().String()+"/")
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("Serve after cancel = %v, want nil", err)
		}
	case <-time.After(testutil.Patience):
		t.Fatalf("Serve did not return within %v of cancel", testutil.Patience)
	}
	if _, err := http.Get("http://" + ln.Addr().String() + "/"); err == nil || errors.Is(err, context.Canceled) {
		t.Errorf("GET after shutdown = %v, want a connection error", err)
	}
}
