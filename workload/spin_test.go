package workload

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corepin/corepin/internal/testutil"
)

func TestSpin(t *testing.T) {
	res, err := Spin(context.Background(), SpinOptions{Duration: 200 * time.Millisecond, Threads: 2})
	if err != nil {
		t.Fatalf("Spin: %v", err)
	}
	if res.Ops <= 0 {
		t.Errorf("Ops = %d, want > 0", res.Ops)
	}
	if res.Threads != 2 || len(res.PerThread) != 2 {
		t.Errorf("Threads = %d, PerThread = %v, want 2 threads", res.Threads, res.PerThread)
	}
	var sum int64
	for i, n := range res.PerThread {
		if n <= 0 {
			t.Errorf("PerThread[%d] = %d, want > 0", i, n)
		}
		sum += n
	}
	if sum != res.Ops {
		t.Errorf("sum(PerThread) = %d, Ops = %d, want equal", sum, res.Ops)
	}
	// No timing thresholds beyond "it ran at least as long as asked":
	// test machines are small and shared.
	if res.Wall < 200*time.Millisecond {
		t.Errorf("Wall = %v, want >= 200ms", res.Wall)
	}
	want := float64(res.Ops) / res.Wall.Seconds()
	if math.Abs(res.OpsPerSec-want) > 1e-9*want {
		t.Errorf("OpsPerSec = %v, want Ops/Wall = %v", res.OpsPerSec, want)
	}
}

func TestSpinOps(t *testing.T) {
	const ops = 2000
	res, err := Spin(context.Background(), SpinOptions{Ops: ops, Threads: 3})
	if err != nil {
		t.Fatalf("Spin: %v", err)
	}
	var sum int64
	for _, n := range res.PerThread {
		sum += n
	}
	if res.Ops != ops || sum != ops || len(res.PerThread) != 3 {
		t.Errorf("Spin(%d ops) = %d ops, per thread %v, want exactly %d", ops, res.Ops, res.PerThread, ops)
	}
	if want := float64(res.Ops) / res.Wall.Seconds(); math.Abs(res.OpsPerSec-want) > 1e-9*want {
		t.Errorf("OpsPerSec = %v, want Ops/Wall = %v", res.OpsPerSec, want)
	}
}

func TestSpinCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	start := time.Now()
	res, err := Spin(ctx, SpinOptions{Duration: time.Hour, Threads: 1})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Spin after cancel: err = %v, want context.Canceled", err)
	}
	if took := time.Since(start); took > testutil.Patience { // the spin lasts an hour
		t.Errorf("cancelled Spin took %v", took)
	}
	if res.Ops <= 0 || res.Threads != 1 {
		t.Errorf("cancelled Spin = %+v, want the ops done so far", res)
	}
}

func TestSpinInvalid(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts SpinOptions
	}{
		{name: "zero duration", opts: SpinOptions{Threads: 1}},
		{name: "negative duration", opts: SpinOptions{Duration: -time.Second, Threads: 1}},
		{name: "zero threads", opts: SpinOptions{Duration: time.Second}},
		{name: "both duration and ops", opts: SpinOptions{Duration: time.Second, Ops: 5, Threads: 1}},
		{name: "negative ops", opts: SpinOptions{Ops: -5, Threads: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Spin(context.Background(), tc.opts); !errors.Is(err, ErrInvalid) {
				t.Errorf("Spin(%+v) error = %v, want ErrInvalid", tc.opts, err)
			}
		})
	}
}

func TestSpinOpDeterministic(t *testing.T) {
	if a, b := spinOp(12345), spinOp(12345); a != b || a == 0 {
		t.Errorf("spinOp(12345) = %#x then %#x, want one nonzero value", a, b)
	}
}

func TestResolveThreads(t *testing.T) {
	auto := AffinityCPUs()
	for _, tc := range []struct {
		name    string
		spec    string
		env     string // "-" leaves $COREPIN_THREADS unset
		want    int
		wantErr bool
	}{
		{name: "auto", spec: "auto", env: "-", want: auto},
		{name: "empty is auto", spec: "", env: "-", want: auto},
		{name: "auto takes env", spec: "auto", env: "3", want: 3},
		{name: "empty env is unset", spec: "auto", env: "", want: auto},
		{name: "number beats env", spec: "5", env: "3", want: 5},
		{name: "more than CPUs", spec: "64", env: "-", want: 64},
		{name: "native is the program's own default", spec: "native", env: "3", want: 0},
		{name: "zero", spec: "0", env: "-", wantErr: true},
		{name: "negative", spec: "-2", env: "-", wantErr: true},
		{name: "word", spec: "many", env: "-", wantErr: true},
		{name: "bad env", spec: "auto", env: "two", wantErr: true},
		{name: "zero env", spec: "auto", env: "0", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env == "-" {
				t.Setenv(EnvThreads, "") // restores the old value after
				if err := unsetenv(EnvThreads); err != nil {
					t.Fatal(err)
				}
			} else {
				t.Setenv(EnvThreads, tc.env)
			}
			got, err := ResolveThreads(tc.spec)
			if tc.wantErr {
				if !errors.Is(err, ErrInvalid) {
					t.Errorf("ResolveThreads(%q) = %d, %v, want ErrInvalid", tc.spec, got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("ResolveThreads(%q) = %d, %v, want %d", tc.spec, got, err, tc.want)
			}
		})
	}
}

func TestAffinityCPUs(t *testing.T) {
	if n := AffinityCPUs(); n < 1 {
		t.Errorf("AffinityCPUs() = %d, want >= 1", n)
	}
}

// The nice study's batch runs every spinning thread at nice 19 without
// nice(1): each thread sets its own nice, and the nice goes with the thread
// (the caller's threads keep theirs).
func TestSpinNice(t *testing.T) {
	// The caller's nice is whatever the test runs at (nice -n 5 go test,
	// issue 17 §2): raising it to 19 needs no right.
	runtime.LockOSThread() // threadNice reads this thread
	defer runtime.UnlockOSThread()
	own := threadNice(t)
	if own == 19 {
		t.Skip("skipping: this test runs at nice 19 already; no thread can be told apart by its nice")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := Spin(ctx, SpinOptions{Duration: testutil.Patience, Threads: 2, Nice: 19}) // until cancel
		done <- err
	}()
	testutil.Eventually(t, "2 threads at nice 19 while spinning", func() bool { return countNiceThreads(t, 19) >= 2 })
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("Spin: %v", err)
	}
	if got := threadNice(t); got != own {
		t.Errorf("the caller's thread has nice %d after Spin, want %d as before", got, own)
	}
}

// threadNice is the nice of the calling thread (getpriority(2) with who 0
// is the thread on Linux; the raw syscall returns 20 - nice).
func threadNice(t *testing.T) int {
	t.Helper()
	n, err := syscall.Getpriority(syscall.PRIO_PROCESS, 0)
	if err != nil {
		t.Fatal(err)
	}
	return 20 - n
}

// Issue 17 §2: a nice below the one the caller runs at needs CAP_SYS_NICE;
// without it Spin keeps the threads' nice, says so in its result, and
// spins instead of failing. Run as nobody at nice +5.
func TestSpinNiceKept(t *testing.T) {
	if os.Getenv("COREPIN_TEST_SPIN_NICE_CHILD") == "" {
		testutil.RunAsNobodyNicer(t, "TestSpinNiceKept", "COREPIN_TEST_SPIN_NICE_CHILD=1")
		return
	}
	runtime.LockOSThread() // threadNice reads this thread
	defer runtime.UnlockOSThread()
	own := threadNice(t)
	ask := own - 1
	if ask == 0 {
		t.Skip("skipping: nice 0 asks for no change")
	}
	res, err := Spin(context.Background(), SpinOptions{Ops: 10, Threads: 2, Nice: ask})
	if err != nil {
		t.Fatalf("Spin(nice %d) at nice %d as uid %d: %v", ask, own, os.Geteuid(), err)
	}
	if !res.NiceKept || res.Nice != own || res.Ops != 10 {
		t.Errorf("Spin(nice %d) at nice %d = kept %v nice %d ops %d, want kept nice %d and 10 ops", ask, own, res.NiceKept, res.Nice, res.Ops, own)
	}
}

func TestSpinNiceOutOfRange(t *testing.T) {
	for _, nice := range []int{-21, 20} {
		if _, err := Spin(context.Background(), SpinOptions{Ops: 1, Threads: 1, Nice: nice}); !errors.Is(err, ErrInvalid) {
			t.Errorf("Spin(nice %d) = %v, want ErrInvalid", nice, err)
		}
	}
}

// countNiceThreads counts this process's threads at nice (field 19 of
// /proc/self/task/TID/stat, after the comm).
func countNiceThreads(t *testing.T, nice int) int {
	t.Helper()
	dirs, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range dirs {
		b, err := os.ReadFile("/proc/self/task/" + d.Name() + "/stat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) > 16 && f[16] == strconv.Itoa(nice) {
			n++
		}
	}
	return n
}
