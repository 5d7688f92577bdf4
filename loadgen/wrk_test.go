package loadgen

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func us(n float64) time.Duration { return time.Duration(n * float64(time.Microsecond)) }

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatalf("reading fixture: %v", err)
	}
	return b
}

// The fixtures are real wrk 4.1.0 (Debian 4.1.0-3+b2) reports, captured
// on a busy 2-core machine: against `corepin serve cpu` and against nginx
// 1.22, with and without corepin's Lua summary script.
func TestParseWrk(t *testing.T) {
	tests := []struct {
		file string
		want Result
		// cdfLen is the number of CDF points (0 without the Lua script).
		cdfLen int
	}{
		{
			file: "wrk-cpu3ms-c4.txt",
			want: Result{
				URL: "http://127.0.0.1:43119/", Connections: 4, Duration: 2010 * time.Millisecond,
				Requests: 577, AchievedRPS: 287.15,
				P50: us(13490), P90: us(21600), P99: us(37860), Mean: us(14190), Max: us(51750),
			},
		},
		{
			file: "wrk-cpu3ms-c4-lua.txt",
			want: Result{
				URL: "http://127.0.0.1:46227/", Connections: 4, Duration: 2310 * time.Millisecond,
				Requests: 129, AchievedRPS: 55.79,
				P50: us(21690), P90: us(323112), P99: us(477193), P999: us(538662), Mean: us(96928.912), Max: us(538662),
			},
			cdfLen: len(cdfPercentiles),
		},
		{
			file: "wrk-nginx-404-c4.txt",
			want: Result{
				URL: "http://127.0.0.1:18080/missing", Connections: 4, Duration: time.Second,
				Requests: 33945, Errors: 33945, BadStatus: 33945, AchievedRPS: 33917.26,
				P50: us(87), P90: us(1240), P99: us(10270), Mean: us(527.70), Max: us(23030),
			},
		},
		{
			file: "wrk-nginx-c4-lua.txt",
			want: Result{
				URL: "http://127.0.0.1:18080/", Connections: 4, Duration: 1100 * time.Millisecond,
				Requests: 36296, AchievedRPS: 32983.80,
				P50: us(95), P90: us(956), P99: us(4470), P999: us(10829), Mean: us(382.355), Max: us(12072),
			},
			cdfLen: len(cdfPercentiles),
		},
		{
			file: "wrk-cpu300ms-timeout-lua.txt",
			want: Result{
				URL: "http://127.0.0.1:45737/", Connections: 6, Duration: 3040 * time.Millisecond,
				Requests: 3, Errors: 1, Timeouts: 1, AchievedRPS: 0.66,
				P50: us(420656), P90: us(420656), P99: us(420656), P999: us(420656), Mean: us(420656), Max: us(420656),
			},
			cdfLen: len(cdfPercentiles),
		},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			got, err := ParseWrk(readTestdata(t, tc.file))
			if err != nil {
				t.Fatalf("ParseWrk: %v", err)
			}
			want := tc.want
			want.Tool, want.ClosedLoop = ToolWrk, true
			cdf := got.CDF
			got.CDF = nil
			if diff := cmp.Diff(want, *got); diff != "" {
				t.Errorf("ParseWrk (-want +got):\n%s", diff)
			}
			if len(cdf) != tc.cdfLen {
				t.Fatalf("len(CDF) = %d, want %d", len(cdf), tc.cdfLen)
			}
			if tc.cdfLen > 0 {
				if last := cdf[len(cdf)-1]; last.Percentile != 100 || last.Latency != want.Max {
					t.Errorf("last CDF point = %+v, want (100, max %s)", last, want.Max)
				}
				for i := 1; i < len(cdf); i++ {
					if cdf[i].Percentile <= cdf[i-1].Percentile || cdf[i].Latency < cdf[i-1].Latency {
						t.Errorf("CDF not ascending at %d: %+v then %+v", i, cdf[i-1], cdf[i])
					}
				}
			}
		})
	}
}

// TestParseWrkP100Zero: wrk 4.1 answers 0 for latency:percentile(100);
// scripts before the workaround printed that 0.
func TestParseWrkP100Zero(t *testing.T) {
	out := strings.Join([]string{
		"  577 requests in 2.01s, 67.05KB read",
		"Requests/sec:    287.15",
		`corepin-wrk-json: {"requests":577,"max_us":51750,"p50_us":13490,"cdf":[[50,13490],[100,0]]}`,
	}, "\n")
	r, err := ParseWrk([]byte(out))
	if err != nil {
		t.Fatalf("ParseWrk: %v", err)
	}
	if last := r.CDF[len(r.CDF)-1]; last.Latency != us(51750) {
		t.Errorf("CDF at 100 = %s, want the max 51.75ms", last.Latency)
	}
}

func TestParseWrkRejects(t *testing.T) {
	tests := []struct {
		name string
		out  string
	}{
		{name: "empty", out: ""},
		{name: "usage", out: "Usage: wrk <options> <url>\n  Options:\n"},
		{name: "no rate line", out: "  10 requests in 1.00s, 1KB read\n"},
		{name: "bad time unit", out: "  10 requests in 1.00x, 1KB read\nRequests/sec: 10.00\n"},
		{name: "negative count", out: "  -10 requests in 1.00s, 1KB read\nRequests/sec: 10.00\n"},
		{name: "bad socket errors", out: "  10 requests in 1.00s, 1KB read\n  Socket errors: connect x\nRequests/sec: 10.00\n"},
		{name: "bad summary", out: "  10 requests in 1.00s, 1KB read\nRequests/sec: 10.00\ncorepin-wrk-json: {\n"},
		{name: "negative summary latency", out: "  10 requests in 1.00s, 1KB read\nRequests/sec: 10.00\ncorepin-wrk-json: {\"p50_us\":-1}\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if r, err := ParseWrk([]byte(tc.out)); !errors.Is(err, ErrWrkOutput) {
				t.Errorf("ParseWrk(%q) = %+v, %v; want ErrWrkOutput", tc.out, r, err)
			}
		})
	}
}

func TestParseWrkTime(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
	}{
		{in: "87.00us", want: 87 * time.Microsecond},
		{in: "3.21ms", want: 3210 * time.Microsecond},
		{in: "1.00s", want: time.Second},
		{in: "2.00m", want: 2 * time.Minute},
		{in: "1.50h", want: 90 * time.Minute},
	}
	for _, tc := range tests {
		if got, err := parseWrkTime(tc.in); err != nil || got != tc.want {
			t.Errorf("parseWrkTime(%q) = %s, %v; want %s", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "ms", "-1ms", "1.0", "NaNms", "1e300h", "3.2xs"} {
		if got, err := parseWrkTime(bad); err == nil {
			t.Errorf("parseWrkTime(%q) = %s, want an error", bad, got)
		}
	}
}

func FuzzParseWrk(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "wrk-*.txt"))
	if err != nil {
		f.Fatal(err)
	}
	for _, p := range files {
		f.Add(readTestdata(f, filepath.Base(p)))
	}
	f.Fuzz(func(t *testing.T, out []byte) {
		r, err := ParseWrk(out)
		if err != nil {
			if !errors.Is(err, ErrWrkOutput) {
				t.Fatalf("ParseWrk error %v does not wrap ErrWrkOutput", err)
			}
			return
		}
		if r.Requests < 0 || r.Errors < 0 || r.Timeouts < 0 || r.BadStatus < 0 {
			t.Fatalf("negative count in %+v", r)
		}
		for _, d := range []time.Duration{r.P50, r.P90, r.P99, r.P999, r.Max, r.Mean, r.Duration} {
			if d < 0 {
				t.Fatalf("negative duration in %+v", r)
			}
		}
		if r.AchievedRPS < 0 || math.IsNaN(r.AchievedRPS) || math.IsInf(r.AchievedRPS, 0) {
			t.Fatalf("AchievedRPS = %v", r.AchievedRPS)
		}
		if !r.ClosedLoop || r.Tool != ToolWrk {
			t.Fatalf("Result not marked as wrk's: %+v", r)
		}
	})
}

func TestWrkScriptListsCDFPercentiles(t *testing.T) {
	s := wrkScript()
	for _, want := range []string{"done = function(summary, latency, requests)", wrkMarker, "99.999, 100}", "latency:percentile(99.9)"} {
		if !strings.Contains(s, want) {
			t.Errorf("wrk script lacks %q:\n%s", want, s)
		}
	}
}

// TestWrkReal runs the real wrk binary against a CPUService.
func TestWrkReal(t *testing.T) {
	if !WrkAvailable() {
		t.Skip("wrk not on PATH: install the Debian package wrk to run this test")
	}
	const cost = time.Millisecond
	s := newService(t, WithCost(cost))
	url := startService(t, s)
	r, err := Wrk(t.Context(), WrkLoad{URL: url, Duration: time.Second, Connections: 2})
	if err != nil {
		t.Fatalf("Wrk: %v", err)
	}
	t.Logf("wrk: %d requests, %.1f/s, p50 %s p99 %s p99.9 %s max %s", r.Requests, r.AchievedRPS, r.P50, r.P99, r.P999, r.Max)
	if r.Requests == 0 || r.Errors != 0 {
		t.Errorf("Requests = %d, Errors = %d; want some requests and no errors", r.Requests, r.Errors)
	}
	if r.P50 < cost {
		t.Errorf("P50 = %s, want at least the cost %s", r.P50, cost)
	}
	if r.P999 < r.P99 || r.Max < r.P999 || len(r.CDF) != len(cdfPercentiles) {
		t.Errorf("Lua summary missing or inconsistent: p99 %s p99.9 %s max %s, %d CDF points", r.P99, r.P999, r.Max, len(r.CDF))
	}
	if !r.ClosedLoop || r.URL != url || r.Connections != 2 {
		t.Errorf("Result header: closed %v url %q conns %d, want true %q 2", r.ClosedLoop, r.URL, r.Connections, url)
	}
	if served := s.Served(); served < r.Requests {
		t.Errorf("service served %d, fewer than wrk's %d", served, r.Requests)
	}
}

func TestWrkRealConnectionRefused(t *testing.T) {
	if !WrkAvailable() {
		t.Skip("wrk not on PATH: install the Debian package wrk to run this test")
	}
	_, err := Wrk(t.Context(), WrkLoad{URL: "http://127.0.0.1:1/", Duration: time.Second})
	if err == nil || !strings.Contains(err.Error(), "unable to connect") {
		t.Errorf("Wrk against a closed port = %v, want wrk's \"unable to connect\"", err)
	}
}

func TestWrkMissingBinary(t *testing.T) {
	_, err := Wrk(t.Context(), WrkLoad{URL: "http://127.0.0.1:1/", Duration: time.Second, Binary: filepath.Join(t.TempDir(), "no-wrk")})
	if err == nil {
		t.Fatal("Wrk with a missing binary = nil error, want one")
	}
}

func TestWrkArgs(t *testing.T) {
	w := WrkLoad{URL: "http://h/", Timeout: 1500 * time.Millisecond}.withDefaults()
	got := strings.Join(w.args(2500*time.Millisecond, "/tmp/s.lua"), " ")
	want := "-t 1 -c 8 -d 3s --timeout 2s --latency -s /tmp/s.lua http://h/"
	if got != want {
		t.Errorf("args = %q, want %q", got, want)
	}
}
