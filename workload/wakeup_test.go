package workload

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestWakeupRecordsEveryRound(t *testing.T) {
	res, err := Wakeup(context.Background(), WakeupOptions{Threads: 3, Period: 5 * time.Millisecond, Burn: time.Millisecond, Rounds: 4, Class: ClassNormal})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.WakeCPUs) != 4 || len(res.RunqWaitNS) != 4 {
		t.Fatalf("rounds = %d, %d; want 4 each (the first, unrecorded round dropped)", len(res.WakeCPUs), len(res.RunqWaitNS))
	}
	ncpu := runtime.NumCPU()
	for r := range 4 {
		if len(res.WakeCPUs[r]) != 3 || len(res.RunqWaitNS[r]) != 3 {
			t.Fatalf("round %d has %d CPUs and %d waits, want 3 each", r, len(res.WakeCPUs[r]), len(res.RunqWaitNS[r]))
		}
		for i := range 3 {
			if c := res.WakeCPUs[r][i]; c < 0 || c >= ncpu {
				t.Errorf("round %d thread %d woke on CPU %d, want 0-%d", r, i, c, ncpu-1)
			}
			if w := res.RunqWaitNS[r][i]; w < 0 {
				t.Errorf("round %d thread %d waited %d ns", r, i, w)
			}
		}
	}
	// Each thread burnt at least its 1 ms of CPU per recorded round.
	if min := int64(4 * 3 * time.Millisecond); res.CPUNS < min {
		t.Errorf("cpu_ns = %d, want at least %d", res.CPUNS, min)
	}
}

func TestWakeupOptionsBounds(t *testing.T) {
	ok := WakeupOptions{Threads: 2, Period: 10 * time.Millisecond, Burn: 2 * time.Millisecond, Rounds: 10, Class: ClassNormal}
	tests := []struct {
		name string
		edit func(*WakeupOptions)
		want string
	}{
		{"no threads", func(o *WakeupOptions) { o.Threads = 0 }, "threads 0"},
		{"too many threads", func(o *WakeupOptions) { o.Threads = MaxWakeupThreads + 1 }, "threads"},
		{"too many rounds", func(o *WakeupOptions) { o.Rounds = MaxWakeupRounds + 1 }, "rounds"},
		{"burn above period", func(o *WakeupOptions) { o.Burn = o.Period }, "burn"},
		{"period too long", func(o *WakeupOptions) { o.Period = 2 * time.Second }, "period"},
		{"unknown class", func(o *WakeupOptions) { o.Class = "deadline" }, `class "deadline"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := ok
			tc.edit(&o)
			_, err := Wakeup(context.Background(), o)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Wakeup(%+v) = %v, want ErrInvalid naming %q", o, err, tc.want)
			}
		})
	}
}

// SetClass puts the calling thread in SCHED_RR or SCHED_FIFO at priority
// 1, or fails with EPERM where this process has no right to it.
func TestSetClass(t *testing.T) {
	for _, tc := range []struct {
		class  string
		policy uint32
	}{{ClassRR, unix.SCHED_RR}, {ClassFIFO, unix.SCHED_FIFO}} {
		t.Run(tc.class, func(t *testing.T) {
			type got struct {
				a   *unix.SchedAttr
				err error
			}
			c := make(chan got, 1)
			go func() {
				runtime.LockOSThread() // never unlocked: the thread ends with its class
				err := SetClass(tc.class)
				a, aerr := unix.SchedGetAttr(0, 0)
				c <- got{a, errors.Join(err, aerr)}
			}()
			g := <-c
			if errors.Is(g.err, unix.EPERM) {
				t.Skipf("skipping: no right to real-time priority here: %v", g.err)
			}
			if g.err != nil || g.a.Policy != tc.policy || g.a.Priority != 1 {
				t.Errorf("after SetClass(%s): %+v, %v; want policy %d priority 1", tc.class, g.a, g.err, tc.policy)
			}
		})
	}
}
