package testutil

import (
	"fmt"
	"testing"
	"time"
)

// failures records Fatalf instead of stopping the goroutine.
type failures struct {
	testing.TB
	msgs []string
}

func (f *failures) Helper() {}
func (f *failures) Fatalf(format string, args ...any) {
	f.msgs = append(f.msgs, fmt.Sprintf(format, args...))
}

// The cases that hold have a minute's patience and the one that never
// holds none, so that how fast this machine looks changes nothing.
func TestEventually(t *testing.T) {
	for _, tc := range []struct {
		name      string
		holdsFrom int // the call from which cond holds; 0: never
		patience  time.Duration
		wantCalls int
		wantFail  bool
	}{
		{name: "holds at once", holdsFrom: 1, patience: time.Minute, wantCalls: 1},
		{name: "holds on the third look", holdsFrom: 3, patience: time.Minute, wantCalls: 3},
		{name: "never holds", holdsFrom: 0, wantFail: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &failures{TB: t}
			calls := 0
			cond := func() bool { calls++; return tc.holdsFrom > 0 && calls >= tc.holdsFrom }
			eventually(f, "the thing", cond, tc.patience, nil)
			if got := len(f.msgs) > 0; got != tc.wantFail {
				t.Fatalf("failed = %v (%q), want %v", got, f.msgs, tc.wantFail)
			}
			if tc.wantFail {
				if want := "never saw the thing within 0s"; f.msgs[0] != want {
					t.Errorf("message %q, want %q", f.msgs[0], want)
				}
				return
			}
			if calls != tc.wantCalls {
				t.Errorf("cond called %d times, want %d", calls, tc.wantCalls)
			}
		})
	}
}

func TestEventuallyNilNamesTheLastError(t *testing.T) {
	f := &failures{TB: t}
	n := 0
	var err error
	eventually(f, "the thing", func() bool { n++; err = fmt.Errorf("try %d", n); return false }, 0, func() error { return err })
	if want := "never saw the thing within 0s: try 1"; len(f.msgs) != 1 || f.msgs[0] != want {
		t.Errorf("failures %q, want [%q]", f.msgs, want)
	}
}
