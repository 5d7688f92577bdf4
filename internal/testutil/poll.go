package testutil

import (
	"testing"
	"time"
)

// Patience is how long a test waits for something the code under test
// brings about (a process leaving its cgroup, a watch event arriving, a
// server returning after cancel) before it fails. It times nothing: on a
// loaded machine, at nice 19, a second of wall time can be a few
// milliseconds of CPU, so it is far above what any of these needs and
// only bounds how long a broken test takes to say so.
const Patience = 2 * time.Minute

// pollEvery is how often Eventually looks.
const pollEvery = 10 * time.Millisecond

// Eventually returns once cond holds, looking every 10 ms, and fails t
// saying it never saw what once Patience has passed. Use it in place of
// a fixed sleep that stands for a condition.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	eventually(t, what, cond, Patience, nil)
}

// EventuallyNil returns once f returns nil, calling it every 10 ms, and
// fails t with f's last error once Patience has passed.
func EventuallyNil(t testing.TB, what string, f func() error) {
	t.Helper()
	var err error
	eventually(t, what, func() bool { err = f(); return err == nil }, Patience, func() error { return err })
}

// eventually polls cond until it holds or patience has passed; the
// failure names last's error, when there is one.
func eventually(t testing.TB, what string, cond func() bool, patience time.Duration, last func() error) {
	t.Helper()
	for deadline := time.Now().Add(patience); !cond(); time.Sleep(pollEvery) {
		if time.Now().After(deadline) {
			if last != nil {
				t.Fatalf("never saw %s within %v: %v", what, patience, last())
			} else {
				t.Fatalf("never saw %s within %v", what, patience)
			}
			return
		}
	}
}
