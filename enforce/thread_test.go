package enforce

import (
	"errors"
	"os/exec"
	"testing"
	"time"
)

func TestThreadSchedValidate(t *testing.T) {
	tests := []struct {
		name string
		s    ThreadSched
		ok   bool
	}{
		{name: "zero resets", s: ThreadSched{}, ok: true},
		{name: "idle", s: ThreadSched{Idle: true}, ok: true},
		{name: "1ms slice", s: ThreadSched{Slice: time.Millisecond}, ok: true},
		{name: "slice below the kernel clamp", s: ThreadSched{Slice: time.Microsecond}},
		{name: "slice above the kernel clamp", s: ThreadSched{Slice: time.Second}},
		{name: "slice on idle", s: ThreadSched{Idle: true, Slice: time.Millisecond}, ok: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.s.Validate()
			if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrInvalidResources)) {
				t.Errorf("Validate() = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

// TestSetThreadSchedReal sets SCHED_IDLE and a requested slice on a real
// child process and reads both back from the kernel.
func TestSetThreadSchedReal(t *testing.T) {
	pid := startSleeper(t)

	if err := SetThreadSched(pid, ThreadSched{Idle: true}); err != nil {
		t.Fatalf("SetThreadSched(idle) error: %v", err)
	}
	if _, idle, err := TaskSlice(pid); err != nil || !idle {
		t.Fatalf("TaskSlice() idle = %v, %v; want true", idle, err)
	}
	// Leaving SCHED_IDLE needs CAP_SYS_NICE or a permissive RLIMIT_NICE.
	if err := SetThreadSched(pid, ThreadSched{Slice: time.Millisecond}); err != nil {
		t.Skipf("cannot leave SCHED_IDLE here: %v", err)
	}
	slice, idle, err := TaskSlice(pid)
	if err != nil || idle {
		t.Fatalf("TaskSlice() = %v idle %v, %v; want a fair task", slice, idle, err)
	}
	if KernelAtLeast(6, 12) && slice != time.Millisecond {
		t.Errorf("TaskSlice() = %v on an EEVDF kernel, want 1ms", slice)
	}
}

// TestSetThreadSliceKeepsPolicy: a slice on a SCHED_IDLE process keeps it
// SCHED_IDLE (BE threads stay idle under the controller's BE slice).
func TestSetThreadSliceKeepsPolicy(t *testing.T) {
	pid := startSleeper(t)
	if err := SetThreadSched(pid, ThreadSched{Idle: true}); err != nil {
		t.Fatalf("SetThreadSched(idle) error: %v", err)
	}
	if err := SetThreadSlice(pid, 200*time.Microsecond); err != nil {
		t.Fatalf("SetThreadSlice() error: %v", err)
	}
	// The kernel may keep its default slice for a SCHED_IDLE thread (6.18
	// does); what must hold is the policy.
	if _, idle, err := TaskSlice(pid); err != nil || !idle {
		t.Fatalf("TaskSlice() idle = %v, %v; want still SCHED_IDLE", idle, err)
	}
	// A SCHED_OTHER thread takes the slice on EEVDF kernels.
	if err := SetThreadSched(pid, ThreadSched{}); err != nil {
		t.Skipf("cannot leave SCHED_IDLE here: %v", err)
	}
	if err := SetThreadSlice(pid, 200*time.Microsecond); err != nil {
		t.Fatalf("SetThreadSlice() error: %v", err)
	}
	if slice, idle, err := TaskSlice(pid); err != nil || idle || (KernelAtLeast(6, 12) && slice != 200*time.Microsecond) {
		t.Errorf("TaskSlice() = %v idle %v, %v; want 200µs on a fair thread", slice, idle, err)
	}
}

// startSleeper starts a real child process that lives until t ends.
func startSleeper(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skipf("no sleep binary: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd.Process.Pid
}
