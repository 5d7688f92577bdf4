package qos

import (
	"testing"

	"github.com/corepin/corepin/enforce"
)

func TestBestLever(t *testing.T) {
	tests := []struct {
		name string
		f    Features
		want Lever
	}{
		{name: "cpu.idle first", f: Features{CPUIdle: Supported, ThreadIdle: Supported, MinWeight: Supported}, want: LeverCPUIdle},
		{name: "old kernel: SCHED_IDLE per thread", f: Features{CPUIdle: Unsupported, ThreadIdle: Supported, MinWeight: Supported}, want: LeverThreadIdle},
		{name: "unknown is not supported", f: Features{CPUIdle: Unknown, ThreadIdle: Unsupported, MinWeight: Supported}, want: LeverMinWeight},
		{name: "nothing", f: Features{}, want: LeverNone},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got, why := BestLever(tc.f); got != tc.want {
				t.Errorf("BestLever() = %s (%s), want %s", got, why, tc.want)
			}
		})
	}
}

// TestProbeThreadsReal runs the real probes: on any Linux SCHED_IDLE per
// thread is there; on an EEVDF kernel (6.12+) run as root the slice is too.
func TestProbeThreadsReal(t *testing.T) {
	f := ProbeThreads()
	if f.ThreadIdle != Supported {
		t.Errorf("ThreadIdle = %s, want yes on Linux", f.ThreadIdle)
	}
	if enforce.KernelAtLeast(6, 12) && f.Slice == Unsupported {
		t.Errorf("Slice = %s on a 6.12+ kernel, want yes or unknown", f.Slice)
	}
	if !enforce.KernelAtLeast(6, 12) && f.Slice != Unsupported {
		t.Errorf("Slice = %s before 6.12, want no", f.Slice)
	}
	if g := ProbeThreads(); g != f {
		t.Errorf("ProbeThreads() not cached: %+v then %+v", f, g)
	}
}
