package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// WrkLoad describes a run of the wrk binary. wrk is closed-loop: each
// connection sends its next request only when the previous response has
// arrived, so it measures how fast the service answers a fixed number of
// clients, not what a user arriving at a fixed rate sees. Its percentiles
// suffer from coordinated omission (see the package documentation);
// Result.ClosedLoop is true for its results. Debian's wrk 4.1 has no -R
// (constant rate) option; that is wrk2, which is not packaged.
type WrkLoad struct {
	URL string
	// Duration is the measured run; wrk counts whole seconds, so it is
	// rounded up to a second.
	Duration time.Duration
	// Warmup, when set, is a separate wrk run before the measured one whose
	// results are discarded.
	Warmup time.Duration
	// Connections is wrk -c (default 8).
	Connections int
	// Threads is wrk -t (default 1, which drives thousands of requests per
	// second and leaves the other CPUs to the service under test).
	Threads int
	// Timeout is wrk --timeout (default 10 s, whole seconds).
	Timeout time.Duration
	// Binary is the wrk executable (default "wrk" on PATH).
	Binary string
}

// ErrNoWrk means the wrk binary was not found.
var ErrNoWrk = errors.New("wrk not found (Debian package wrk)")

var wrkPath = sync.OnceValues(func() (string, error) { return exec.LookPath("wrk") })

// WrkAvailable reports whether the wrk binary is on PATH. The answer is
// looked up once and cached.
func WrkAvailable() bool {
	_, err := wrkPath()
	return err == nil
}

// wrkMarker starts the JSON line the Lua script prints in done().
const wrkMarker = "corepin-wrk-json: "

// wrkScript makes wrk print its own summary, including p99.9 and a CDF
// that the text report lacks, as one JSON line after the text report.
// Latencies are in microseconds.
func wrkScript() string {
	ps := make([]string, len(cdfPercentiles))
	for i, p := range cdfPercentiles {
		ps[i] = strconv.FormatFloat(p, 'g', -1, 64)
	}
	return `-- Written by corepin: print wrk's summary as one JSON line.
done = function(summary, latency, requests)
  local ps = {` + strings.Join(ps, ", ") + `}
  local cdf = {}
  for i, p in ipairs(ps) do
    local v = latency:percentile(p)
    -- wrk 4.1 answers 0 for the 100th percentile.
    if p >= 100 then v = latency.max end
    cdf[i] = string.format("[%g,%d]", p, v)
  end
  local e = summary.errors
  io.write("` + wrkMarker + `")
  io.write(string.format('{"duration_us":%d,"requests":%d,"bytes":%d,' ..
    '"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d,' ..
    '"min_us":%d,"max_us":%d,"mean_us":%.3f,' ..
    '"p50_us":%d,"p90_us":%d,"p99_us":%d,"p999_us":%d,"cdf":[%s]}\n',
    summary.duration, summary.requests, summary.bytes,
    e.connect, e.read, e.write, e.status, e.timeout,
    latency.min, latency.max, latency.mean,
    latency:percentile(50), latency:percentile(90), latency:percentile(99),
    latency:percentile(99.9), table.concat(cdf, ",")))
end
`
}

func (w WrkLoad) withDefaults() WrkLoad {
	if w.Connections == 0 {
		w.Connections = 8
	}
	if w.Threads == 0 {
		w.Threads = 1
	}
	if w.Timeout == 0 {
		w.Timeout = 10 * time.Second
	}
	return w
}

// wholeSeconds rounds d up to whole seconds, at least one.
func wholeSeconds(d time.Duration) int64 {
	return max(int64(math.Ceil(d.Seconds())), 1)
}

// Args returns wrk's command-line arguments for a run of d, script being
// the path of the Lua script ("" for none).
func (w WrkLoad) args(d time.Duration, script string) []string {
	a := []string{
		"-t", strconv.Itoa(w.Threads),
		"-c", strconv.Itoa(w.Connections),
		"-d", fmt.Sprintf("%ds", wholeSeconds(d)),
		"--timeout", fmt.Sprintf("%ds", wholeSeconds(w.Timeout)),
		"--latency",
	}
	if script != "" {
		a = append(a, "-s", script)
	}
	return append(a, w.URL)
}

// Wrk runs wrk against w.URL (after an optional warm-up run) and parses its
// report into a Result. It returns ErrNoWrk if the binary is missing.
func Wrk(ctx context.Context, w WrkLoad) (*Result, error) {
	w = w.withDefaults()
	switch {
	case w.URL == "":
		return nil, fmt.Errorf("%w: no url", ErrInvalidLoad)
	case w.Duration <= 0:
		return nil, fmt.Errorf("%w: duration %s: want more than 0", ErrInvalidLoad, w.Duration)
	case w.Threads < 1 || w.Connections < w.Threads:
		return nil, fmt.Errorf("%w: %d threads, %d connections: want 1 <= threads <= connections", ErrInvalidLoad, w.Threads, w.Connections)
	}
	bin := w.Binary
	if bin == "" {
		p, err := wrkPath()
		if err != nil {
			return nil, ErrNoWrk
		}
		bin = p
	}
	dir, err := os.MkdirTemp("", "corepin-wrk-")
	if err != nil {
		return nil, fmt.Errorf("creating wrk script directory: %w", err)
	}
	defer os.RemoveAll(dir)
	script := filepath.Join(dir, "summary.lua")
	if err := os.WriteFile(script, []byte(wrkScript()), 0o644); err != nil {
		return nil, fmt.Errorf("writing wrk script: %w", err)
	}
	if w.Warmup > 0 {
		if _, err := runWrk(ctx, bin, w.args(w.Warmup, "")); err != nil {
			return nil, fmt.Errorf("warming up: %w", err)
		}
	}
	out, err := runWrk(ctx, bin, w.args(w.Duration, script))
	if err != nil {
		return nil, err
	}
	r, err := ParseWrk(out)
	if err != nil {
		return nil, err
	}
	if r.URL == "" {
		r.URL = w.URL
	}
	r.Warmup = w.Warmup
	return r, nil
}

func runWrk(ctx context.Context, bin string, args []string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = strings.TrimSpace(string(out))
		}
		return nil, fmt.Errorf("running wrk: %w: %s", err, firstLine(msg))
	}
	return out, nil
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// ErrWrkOutput means wrk's report could not be read.
var ErrWrkOutput = errors.New("unrecognised wrk output")

// wrkSummary is the JSON line of wrkScript.
type wrkSummary struct {
	DurationUs float64      `json:"duration_us"`
	Requests   int64        `json:"requests"`
	Connect    int64        `json:"connect"`
	Read       int64        `json:"read"`
	Write      int64        `json:"write"`
	Status     int64        `json:"status"`
	Timeout    int64        `json:"timeout"`
	MaxUs      float64      `json:"max_us"`
	MeanUs     float64      `json:"mean_us"`
	P50Us      float64      `json:"p50_us"`
	P90Us      float64      `json:"p90_us"`
	P99Us      float64      `json:"p99_us"`
	P999Us     float64      `json:"p999_us"`
	CDF        [][2]float64 `json:"cdf"`
}

// ParseWrk reads the report of `wrk --latency` into a Result. It needs the
// "N requests in T" and "Requests/sec" lines; it takes p50/p90/p99 from the
// latency distribution (p99.9 is not there) and errors from the "Socket
// errors" and "Non-2xx or 3xx responses" lines. If the report ends with
// the JSON line of corepin's Lua script, its exact figures (p99.9, CDF,
// error counts) take precedence. Requests counts responses plus timeouts;
// Errors counts socket errors plus responses that were not 2xx or 3xx.
func ParseWrk(out []byte) (*Result, error) {
	r := &Result{Tool: ToolWrk, ClosedLoop: true}
	var (
		haveReqs, haveRate bool
		responses          int64
		connect, rd, wr    int64
		inDist             bool
		sum                *wrkSummary
	)
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		f := strings.Fields(line)
		switch {
		case strings.HasPrefix(line, wrkMarker):
			var s wrkSummary
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, wrkMarker)), &s); err != nil {
				return nil, fmt.Errorf("%w: reading summary line: %w", ErrWrkOutput, err)
			}
			sum = &s
		case strings.HasPrefix(line, "Running ") && len(f) >= 5 && f[3] == "@":
			r.URL = f[4]
		case len(f) == 5 && f[1] == "threads" && f[2] == "and" && f[4] == "connections":
			n, err := strconv.Atoi(f[3])
			if err != nil || n < 0 {
				return nil, fmt.Errorf("%w: connections in %q", ErrWrkOutput, line)
			}
			r.Connections = n
		case line == "Latency Distribution":
			inDist = true
		case inDist && len(f) == 2 && strings.HasSuffix(f[0], "%"):
			d, err := parseWrkTime(f[1])
			if err != nil {
				return nil, fmt.Errorf("%w: %q: %w", ErrWrkOutput, line, err)
			}
			switch strings.TrimSuffix(f[0], "%") {
			case "50.000", "50":
				r.P50 = d
			case "90.000", "90":
				r.P90 = d
			case "99.000", "99":
				r.P99 = d
			case "99.900", "99.9":
				r.P999 = d
			}
		case len(f) >= 4 && f[0] == "Latency" && !inDist:
			// Thread Stats: Latency avg stdev max +/-stdev
			avg, err1 := parseWrkTime(f[1])
			mx, err2 := parseWrkTime(f[3])
			if err := errors.Join(err1, err2); err != nil {
				return nil, fmt.Errorf("%w: %q: %w", ErrWrkOutput, line, err)
			}
			r.Mean, r.Max = avg, mx
		case len(f) >= 4 && f[1] == "requests" && f[2] == "in":
			inDist = false
			n, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("%w: request count in %q", ErrWrkOutput, line)
			}
			d, err := parseWrkTime(strings.TrimSuffix(f[3], ","))
			if err != nil {
				return nil, fmt.Errorf("%w: %q: %w", ErrWrkOutput, line, err)
			}
			responses, r.Duration, haveReqs = n, d, true
		case strings.HasPrefix(line, "Socket errors:"):
			// Socket errors: connect 0, read 0, write 0, timeout 5
			vals := map[string]*int64{"connect": &connect, "read": &rd, "write": &wr, "timeout": &r.Timeouts}
			for _, part := range strings.Split(strings.TrimPrefix(line, "Socket errors:"), ",") {
				kv := strings.Fields(part)
				if len(kv) != 2 || vals[kv[0]] == nil {
					return nil, fmt.Errorf("%w: %q", ErrWrkOutput, line)
				}
				n, err := strconv.ParseInt(kv[1], 10, 64)
				if err != nil || n < 0 {
					return nil, fmt.Errorf("%w: %q", ErrWrkOutput, line)
				}
				*vals[kv[0]] = n
			}
		case strings.HasPrefix(line, "Non-2xx or 3xx responses:"):
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimPrefix(line, "Non-2xx or 3xx responses:")), 10, 64)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("%w: %q", ErrWrkOutput, line)
			}
			r.BadStatus = n
		case strings.HasPrefix(line, "Requests/sec:") && len(f) == 2:
			v, err := strconv.ParseFloat(f[1], 64)
			if err != nil || v < 0 || math.IsInf(v, 0) {
				return nil, fmt.Errorf("%w: %q", ErrWrkOutput, line)
			}
			r.AchievedRPS, haveRate = v, true
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrWrkOutput, err)
	}
	if !haveReqs || !haveRate {
		return nil, fmt.Errorf("%w: no request count or Requests/sec line", ErrWrkOutput)
	}
	if sum != nil {
		if err := sum.apply(r); err != nil {
			return nil, err
		}
		responses = sum.Requests
		connect, rd, wr = sum.Connect, sum.Read, sum.Write
	}
	r.Requests = responses + r.Timeouts
	r.Errors = connect + rd + wr + r.Timeouts + r.BadStatus
	return r, nil
}

// apply copies the exact figures of the Lua summary into r.
func (s *wrkSummary) apply(r *Result) error {
	us := func(v float64) (time.Duration, error) {
		if !(v >= 0) || v > float64(math.MaxInt64/int64(time.Microsecond)) {
			return 0, fmt.Errorf("%w: latency %v out of range", ErrWrkOutput, v)
		}
		return time.Duration(math.Round(v * float64(time.Microsecond))), nil
	}
	var errs []error
	set := func(dst *time.Duration, v float64) {
		d, err := us(v)
		errs = append(errs, err)
		*dst = d
	}
	set(&r.P50, s.P50Us)
	set(&r.P90, s.P90Us)
	set(&r.P99, s.P99Us)
	set(&r.P999, s.P999Us)
	set(&r.Max, s.MaxUs)
	set(&r.Mean, s.MeanUs)
	r.CDF = nil
	for _, p := range s.CDF {
		var pt Point
		set(&pt.Latency, p[1])
		pt.Percentile = p[0]
		r.CDF = append(r.CDF, pt)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	// wrk 4.1 answers 0 for latency:percentile(100); the maximum is right.
	if n := len(r.CDF); n > 0 && r.CDF[n-1].Percentile >= 100 && r.CDF[n-1].Latency < r.Max {
		r.CDF[n-1].Latency = r.Max
	}
	if s.Requests < 0 || s.Connect < 0 || s.Read < 0 || s.Write < 0 || s.Status < 0 || s.Timeout < 0 {
		return fmt.Errorf("%w: negative count in summary line", ErrWrkOutput)
	}
	r.Timeouts, r.BadStatus = s.Timeout, s.Status
	return nil
}

// parseWrkTime reads wrk's time format: a number with unit us, ms, s, m
// or h ("3.21ms", "1.00s", "2.00m").
func parseWrkTime(s string) (time.Duration, error) {
	units := []struct {
		suffix string
		d      time.Duration
	}{{"us", time.Microsecond}, {"ms", time.Millisecond}, {"m", time.Minute}, {"s", time.Second}, {"h", time.Hour}}
	for _, u := range units {
		num, ok := strings.CutSuffix(s, u.suffix)
		if !ok || num == "" {
			continue
		}
		v, err := strconv.ParseFloat(num, 64)
		if err != nil || !(v >= 0) || v*float64(u.d) >= float64(math.MaxInt64) {
			return 0, fmt.Errorf("parsing time %q", s)
		}
		return time.Duration(math.Round(v * float64(u.d))), nil
	}
	return 0, fmt.Errorf("parsing time %q: unknown unit", s)
}
