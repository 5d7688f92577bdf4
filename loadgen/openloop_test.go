package loadgen

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/corepin/corepin/internal/testutil"
)

func TestOpenLoopAgainstCPUService(t *testing.T) {
	const (
		cost = time.Millisecond
		rate = 50.0
		dur  = time.Second
	)
	s := newService(t, WithCost(cost))
	url := startService(t, s)
	r, err := OpenLoop(t.Context(), Load{URL: url, Rate: rate, Duration: dur, Warmup: 200 * time.Millisecond, Connections: 4})
	if err != nil {
		t.Fatalf("OpenLoop: %v", err)
	}
	t.Logf("requests %d, achieved %.1f/s, p50 %s p90 %s p99 %s max %s, late sends %d (max delay %s)",
		r.Requests, r.AchievedRPS, r.P50, r.P90, r.P99, r.Max, r.LateSends, r.MaxSendDelay)
	if want := int64(rate * dur.Seconds()); r.Requests < want-3 || r.Requests > want+3 {
		t.Errorf("Requests = %d, want %d ± 3", r.Requests, want)
	}
	if r.Errors != 0 {
		t.Errorf("Errors = %d, want 0", r.Errors)
	}
	if r.P50 < cost {
		t.Errorf("P50 = %s, want at least the cost %s", r.P50, cost)
	}
	// The rate is only as good as the CPU the generator gets; on a
	// saturated machine it falls behind, and says so in MaxSendDelay.
	if r.MaxSendDelay < dur/20 {
		if math.Abs(r.AchievedRPS-rate)/rate > 0.10 {
			t.Errorf("AchievedRPS = %.1f, want within 10%% of %.0f", r.AchievedRPS, rate)
		}
	} else {
		t.Logf("machine too busy: the generator fell %s behind, so the achieved rate %.1f is not checked", r.MaxSendDelay, r.AchievedRPS)
		if r.LateSends == 0 {
			t.Errorf("MaxSendDelay = %s but LateSends = 0", r.MaxSendDelay)
		}
	}
	if !(r.P50 <= r.P90 && r.P90 <= r.P99 && r.P99 <= r.P999 && r.P999 <= r.Max) {
		t.Errorf("percentiles not ordered: p50 %s p90 %s p99 %s p99.9 %s max %s", r.P50, r.P90, r.P99, r.P999, r.Max)
	}
	if len(r.CDF) == 0 || r.CDF[len(r.CDF)-1].Percentile != 100 || r.CDF[len(r.CDF)-1].Latency != r.Max {
		t.Errorf("CDF does not end at (100, max %s): %v", r.Max, r.CDF)
	}
	if r.Tool != ToolOpenLoop || r.ClosedLoop || r.TargetRPS != rate || r.Connections != 4 {
		t.Errorf("Result header = %q closed %v target %v conns %d, want %q false %v 4", r.Tool, r.ClosedLoop, r.TargetRPS, r.Connections, ToolOpenLoop, rate)
	}
	// The warm-up requests were sent but not counted.
	if served := s.Served(); served <= r.Requests {
		t.Errorf("service served %d, want more than the %d counted (warm-up)", served, r.Requests)
	}
}

// TestOpenLoopNoCoordinatedOmission stalls every 10th request for 50 ms
// behind a single connection. At 100 requests/s the 4 requests due during a
// stall wait for it, and counted from their intended send times they take
// about 40, 30, 20 and 10 ms. A generator with coordinated omission (timing
// from the actual send) would see them as fast, and only 10% of requests
// would be slow: its p75 would be well under a millisecond.
func TestOpenLoopNoCoordinatedOmission(t *testing.T) {
	const stall = 50 * time.Millisecond
	var n atomic.Int64
	url := startService(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1)%10 == 0 {
			time.Sleep(stall)
		}
		_, _ = w.Write([]byte("ok\n"))
	}))
	r, err := OpenLoop(t.Context(), Load{URL: url, Rate: 100, Duration: time.Second, Connections: 1})
	if err != nil {
		t.Fatalf("OpenLoop: %v", err)
	}
	t.Logf("requests %d, p50 %s p90 %s p99 %s max %s, late sends %d, cdf %v", r.Requests, r.P50, r.P90, r.P99, r.Max, r.LateSends, r.CDF)
	if r.P99 < stall {
		t.Errorf("P99 = %s, want at least the stall %s", r.P99, stall)
	}
	p75 := latencyAt(t, r, 75)
	if p75 < 15*time.Millisecond {
		t.Errorf("p75 = %s, want at least 15ms: requests queued behind a stall must count their wait", p75)
	}
	if r.Errors != 0 {
		t.Errorf("Errors = %d, want 0", r.Errors)
	}
}

func latencyAt(t *testing.T, r *Result, p float64) time.Duration {
	t.Helper()
	for _, pt := range r.CDF {
		if pt.Percentile == p {
			return pt.Latency
		}
	}
	t.Fatalf("CDF has no point at %v: %v", p, r.CDF)
	return 0
}

func TestOpenLoopCountsErrors(t *testing.T) {
	url := startService(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "nope", http.StatusServiceUnavailable)
	}))
	r, err := OpenLoop(t.Context(), Load{URL: url, Rate: 40, Duration: 250 * time.Millisecond})
	if err != nil {
		t.Fatalf("OpenLoop: %v", err)
	}
	if r.Requests == 0 || r.Errors != r.Requests || r.BadStatus != r.Requests || r.Timeouts != 0 {
		t.Errorf("requests %d errors %d bad status %d timeouts %d, want all bad status", r.Requests, r.Errors, r.BadStatus, r.Timeouts)
	}
}

func TestOpenLoopCountsTimeouts(t *testing.T) {
	release := make(chan struct{})
	url := startService(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer close(release)
	r, err := OpenLoop(t.Context(), Load{URL: url, Rate: 20, Duration: 200 * time.Millisecond, Timeout: 100 * time.Millisecond})
	if err == nil {
		t.Fatalf("OpenLoop = nil error with every request timing out, want one")
	}
	if r == nil || r.Timeouts == 0 || r.Timeouts != r.Errors {
		t.Fatalf("Result = %+v, want every error a timeout", r)
	}
}

func TestOpenLoopConnectionRefused(t *testing.T) {
	r, err := OpenLoop(t.Context(), Load{URL: "http://127.0.0.1:1/", Rate: 20, Duration: 100 * time.Millisecond})
	if err == nil {
		t.Fatal("OpenLoop against a closed port = nil error, want one")
	}
	if r == nil || r.Errors != r.Requests || r.Requests == 0 {
		t.Errorf("Result = %+v, want every request an error", r)
	}
}

func TestOpenLoopCancel(t *testing.T) {
	url := startService(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := OpenLoop(ctx, Load{URL: url, Rate: 10, Duration: time.Minute})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("OpenLoop after deadline = %v, want context.DeadlineExceeded", err)
	}
	if el := time.Since(start); el > testutil.Patience { // the load lasts a minute
		t.Errorf("OpenLoop returned %s after its deadline", el)
	}
}

func TestLoadValidate(t *testing.T) {
	ok := Load{URL: "http://127.0.0.1:8080/", Rate: 10, Duration: time.Second}
	tests := []struct {
		name string
		edit func(*Load)
	}{
		{name: "no url", edit: func(l *Load) { l.URL = "" }},
		{name: "no scheme", edit: func(l *Load) { l.URL = "127.0.0.1:8080" }},
		{name: "ftp", edit: func(l *Load) { l.URL = "ftp://x/" }},
		{name: "zero rate", edit: func(l *Load) { l.Rate = 0 }},
		{name: "NaN rate", edit: func(l *Load) { l.Rate = math.NaN() }},
		{name: "absurd rate", edit: func(l *Load) { l.Rate = 1e12 }},
		{name: "zero duration", edit: func(l *Load) { l.Duration = 0 }},
		{name: "negative warmup", edit: func(l *Load) { l.Warmup = -time.Second }},
		{name: "negative connections", edit: func(l *Load) { l.Connections = -1 }},
	}
	if err := ok.Validate(); err != nil {
		t.Fatalf("Validate(%+v) = %v, want nil", ok, err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := ok
			tc.edit(&l)
			if _, err := OpenLoop(t.Context(), l); !errors.Is(err, ErrInvalidLoad) {
				t.Errorf("OpenLoop(%+v) = %v, want ErrInvalidLoad", l, err)
			}
		})
	}
}

func TestResultJSONRoundTrip(t *testing.T) {
	want := Result{
		Tool: ToolOpenLoop, URL: "http://x/", TargetRPS: 200, AchievedRPS: 199.5,
		Duration: 10 * time.Second, Warmup: 2 * time.Second, Connections: 8, Requests: 1995, Errors: 3, Timeouts: 1, BadStatus: 2,
		LateSends: 4, MaxSendDelay: 2500 * time.Microsecond,
		P50: 3100 * time.Microsecond, P90: 4 * time.Millisecond, P99: 9 * time.Millisecond,
		P999: 12 * time.Millisecond, Max: 15 * time.Millisecond, Mean: 3300 * time.Microsecond,
		CDF: []Point{{Percentile: 50, Latency: 3100 * time.Microsecond}, {Percentile: 100, Latency: 15 * time.Millisecond}},
	}
	b, err := json.Marshal(want)
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("Unmarshal into map: %v", err)
	}
	if m["p99_ms"] != 9.0 || m["p99_9_ms"] != 12.0 || m["target_rps"] != 200.0 {
		t.Errorf("JSON keys: p99_ms %v p99_9_ms %v target_rps %v, want 9 12 200 (%s)", m["p99_ms"], m["p99_9_ms"], m["target_rps"], b)
	}
	var got Result
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("Unmarshal: %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("JSON round trip (-want +got):\n%s", diff)
	}
}
