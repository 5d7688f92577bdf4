package loadgen

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Tool names recorded in Result.Tool.
const (
	ToolOpenLoop = "openloop"
	ToolWrk      = "wrk"
)

// Result is the outcome of one load run, from either generator.
//
// Latency percentiles cover every request that got an HTTP response
// (including non-2xx) and whose intended send time fell after the warm-up;
// requests that failed at the transport level or timed out are counted in
// Errors and Timeouts but carry no latency.
type Result struct {
	// Tool is ToolOpenLoop or ToolWrk.
	Tool string
	URL  string
	// ClosedLoop is true for wrk: each connection waits for its response
	// before sending the next request, so a slow response delays the
	// requests behind it and their waiting is not counted (coordinated
	// omission). Percentiles of a closed-loop run understate the tail.
	ClosedLoop bool
	// TargetRPS is the constant rate asked for; 0 for closed-loop runs.
	TargetRPS float64
	// AchievedRPS is the rate the requests were actually sent at (open
	// loop: Requests over the span from the start of the measured period to
	// the last send, at least Duration; below TargetRPS when the generator
	// fell behind) or completed at (wrk: its Requests/sec).
	AchievedRPS float64
	// Duration is the measured period; Warmup ran before it, not counted.
	Duration    time.Duration
	Warmup      time.Duration
	Connections int
	// Requests counts completed requests in the measured period: with a
	// response, with an error, or timed out.
	Requests int64
	// Errors counts failed requests: transport errors, timeouts and
	// responses with a status of 400 or more (wrk: not 2xx or 3xx).
	Errors int64
	// Timeouts is the part of Errors that ran out of time.
	Timeouts int64
	// BadStatus is the part of Errors that got an error status.
	BadStatus int64
	// LateSends counts open-loop sends that left more than LateThreshold
	// after their intended time: the generator itself fell behind. Their
	// latency still counts from the intended time.
	LateSends int64
	// MaxSendDelay is the largest delay between an intended send time and
	// the actual send.
	MaxSendDelay time.Duration

	P50, P90, P99, P999, Max, Mean time.Duration
	// CDF is a compact latency distribution for charting: ascending
	// percentiles, denser towards the tail, ending at 100.
	CDF []Point
}

// Point is one step of a latency distribution: Percentile percent of the
// requests took at most Latency.
type Point struct {
	Percentile float64
	Latency    time.Duration
}

// LateThreshold is how late a send may leave before it counts in
// Result.LateSends.
const LateThreshold = time.Millisecond

// cdfPercentiles are the percentiles of Result.CDF, in the spirit of
// HdrHistogram's percentile output (halving the distance to 100 each step).
var cdfPercentiles = []float64{
	0, 10, 20, 30, 40, 50, 55, 60, 65, 70, 75, 77.5, 80, 82.5, 85, 87.5,
	90, 91.25, 92.5, 93.75, 95, 96.25, 97.5, 98.125, 98.75, 99, 99.375,
	99.5, 99.6875, 99.8, 99.9, 99.95, 99.99, 99.999, 100,
}

// Latencies are recorded in microseconds from 1 µs to histMax.
const (
	histMax     = int64(10 * time.Minute / time.Microsecond)
	histSigFigs = 3
)

func newHistogram() *hdrhistogram.Histogram { return hdrhistogram.New(1, histMax, histSigFigs) }

func recordLatency(h *hdrhistogram.Histogram, d time.Duration) {
	us := max(int64(d/time.Microsecond), 1)
	// Values beyond the range are clamped rather than dropped so that
	// Requests and the histogram count the same responses.
	_ = h.RecordValue(min(us, histMax))
}

func usDur(us int64) time.Duration { return time.Duration(us) * time.Microsecond }

// fillLatency sets the percentiles, maximum, mean and CDF of r from h.
func (r *Result) fillLatency(h *hdrhistogram.Histogram) {
	if h.TotalCount() == 0 {
		return
	}
	r.P50 = usDur(h.ValueAtQuantile(50))
	r.P90 = usDur(h.ValueAtQuantile(90))
	r.P99 = usDur(h.ValueAtQuantile(99))
	r.P999 = usDur(h.ValueAtQuantile(99.9))
	r.Max = usDur(h.Max())
	r.Mean = time.Duration(h.Mean() * float64(time.Microsecond))
	r.CDF = make([]Point, 0, len(cdfPercentiles))
	for _, p := range cdfPercentiles {
		v := h.ValueAtQuantile(p)
		if p == 100 {
			v = h.Max()
		}
		r.CDF = append(r.CDF, Point{Percentile: p, Latency: usDur(v)})
	}
}

// jsonResult is Result on the wire: snake_case keys, durations in
// milliseconds (floats), as corepin's JSON contract asks.
type jsonResult struct {
	Tool           string      `json:"tool"`
	URL            string      `json:"url"`
	ClosedLoop     bool        `json:"closed_loop"`
	TargetRPS      float64     `json:"target_rps"`
	AchievedRPS    float64     `json:"achieved_rps"`
	DurationS      float64     `json:"duration_s"`
	WarmupS        float64     `json:"warmup_s"`
	Connections    int         `json:"connections"`
	Requests       int64       `json:"requests"`
	Errors         int64       `json:"errors"`
	Timeouts       int64       `json:"timeouts"`
	BadStatus      int64       `json:"bad_status"`
	LateSends      int64       `json:"late_sends"`
	MaxSendDelayMs float64     `json:"max_send_delay_ms"`
	P50Ms          float64     `json:"p50_ms"`
	P90Ms          float64     `json:"p90_ms"`
	P99Ms          float64     `json:"p99_ms"`
	P999Ms         float64     `json:"p99_9_ms"`
	MaxMs          float64     `json:"max_ms"`
	MeanMs         float64     `json:"mean_ms"`
	CDF            []jsonPoint `json:"cdf"`
}

type jsonPoint struct {
	Percentile float64 `json:"percentile"`
	LatencyMs  float64 `json:"latency_ms"`
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func fromMs(v float64) time.Duration { return time.Duration(math.Round(v * float64(time.Millisecond))) }

// MarshalJSON writes r with snake_case keys and durations in milliseconds.
func (r Result) MarshalJSON() ([]byte, error) {
	j := jsonResult{
		Tool: r.Tool, URL: r.URL, ClosedLoop: r.ClosedLoop,
		TargetRPS: r.TargetRPS, AchievedRPS: r.AchievedRPS,
		DurationS: r.Duration.Seconds(), WarmupS: r.Warmup.Seconds(), Connections: r.Connections,
		Requests: r.Requests, Errors: r.Errors, Timeouts: r.Timeouts, BadStatus: r.BadStatus,
		LateSends: r.LateSends, MaxSendDelayMs: ms(r.MaxSendDelay),
		P50Ms: ms(r.P50), P90Ms: ms(r.P90), P99Ms: ms(r.P99), P999Ms: ms(r.P999),
		MaxMs: ms(r.Max), MeanMs: ms(r.Mean),
		CDF: make([]jsonPoint, len(r.CDF)),
	}
	for i, p := range r.CDF {
		j.CDF[i] = jsonPoint{Percentile: p.Percentile, LatencyMs: ms(p.Latency)}
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON writes (durations to the nanosecond).
func (r *Result) UnmarshalJSON(b []byte) error {
	var j jsonResult
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*r = Result{
		Tool: j.Tool, URL: j.URL, ClosedLoop: j.ClosedLoop,
		TargetRPS: j.TargetRPS, AchievedRPS: j.AchievedRPS,
		Duration:    time.Duration(math.Round(j.DurationS * float64(time.Second))),
		Warmup:      time.Duration(math.Round(j.WarmupS * float64(time.Second))),
		Connections: j.Connections,
		Requests:    j.Requests, Errors: j.Errors, Timeouts: j.Timeouts, BadStatus: j.BadStatus,
		LateSends: j.LateSends, MaxSendDelay: fromMs(j.MaxSendDelayMs),
		P50: fromMs(j.P50Ms), P90: fromMs(j.P90Ms), P99: fromMs(j.P99Ms), P999: fromMs(j.P999Ms),
		Max: fromMs(j.MaxMs), Mean: fromMs(j.MeanMs),
	}
	if len(j.CDF) > 0 {
		r.CDF = make([]Point, len(j.CDF))
		for i, p := range j.CDF {
			r.CDF[i] = Point{Percentile: p.Percentile, Latency: fromMs(p.LatencyMs)}
		}
	}
	return nil
}

// WriteText writes a short wrk-like summary of r.
func (r *Result) WriteText(w io.Writer) error {
	kind := fmt.Sprintf("open loop, target %.0f req/s", r.TargetRPS)
	if r.ClosedLoop {
		kind = "closed loop (wrk): tail latency understated by coordinated omission"
	}
	var err error
	p := func(format string, args ...any) {
		if err == nil {
			_, err = fmt.Fprintf(w, format, args...)
		}
	}
	warm := ""
	if r.Warmup > 0 {
		warm = fmt.Sprintf(" (after %s warm-up)", r.Warmup.Round(time.Millisecond))
	}
	p("%s for %s%s over %d connections @ %s\n", kind, r.Duration.Round(time.Millisecond), warm, r.Connections, r.URL)
	p("  Latency    p50 %-9s p90 %-9s p99 %-9s p99.9 %-9s max %s\n",
		fmtDur(r.P50), fmtDur(r.P90), fmtDur(r.P99), fmtDur(r.P999), fmtDur(r.Max))
	p("  Mean       %s\n", fmtDur(r.Mean))
	p("  Requests   %d (%.1f req/s achieved", r.Requests, r.AchievedRPS)
	if r.TargetRPS > 0 {
		p(", %.1f%% of target", 100*r.AchievedRPS/r.TargetRPS)
	}
	p(")\n")
	p("  Errors     %d (timeouts %d, bad status %d)\n", r.Errors, r.Timeouts, r.BadStatus)
	if !r.ClosedLoop {
		p("  Late sends %d (> %s behind schedule; max delay %s)\n", r.LateSends, LateThreshold, fmtDur(r.MaxSendDelay))
		if r.Requests > 0 && r.LateSends*100 > r.Requests {
			p("  warning: more than 1%% of sends left late: the generator, not the service, may be the bottleneck\n")
		}
	}
	return err
}

// fmtDur prints d with three significant digits in µs, ms or s.
func fmtDur(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%.0fµs", float64(d)/float64(time.Microsecond))
	case d < time.Second:
		return fmt.Sprintf("%.2fms", ms(d))
	default:
		return fmt.Sprintf("%.3fs", d.Seconds())
	}
}
