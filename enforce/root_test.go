package enforce

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// A best-effort root is idle against its siblings, and an empty root can be
// removed from every hierarchy.
func TestRealV1RootIdleAndRemove(t *testing.T) {
	d, m := realV1(t)
	what, err := d.SetRootIdle()
	if err != nil {
		t.Fatal(err)
	}
	file := "cpu.shares"
	want := "2"
	if d.feat.idle {
		file, want = "cpu.idle", "1"
	}
	if what != file+"="+want {
		t.Errorf("SetRootIdle() = %q, want %s=%s", what, file, want)
	}
	if got := readReal(t, filepath.Join(m.CPU, d.base, file)); got != want {
		t.Errorf("%s = %q, want %q", file, got, want)
	}
	g, err := d.Create("still-here", Resources{})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.RemoveRoot(); err == nil {
		t.Errorf("RemoveRoot with a group inside = nil error")
	}
	if err := g.Remove(); err != nil {
		t.Fatal(err)
	}
	if err := d.RemoveRoot(); err != nil {
		t.Fatalf("RemoveRoot: %v", err)
	}
	for _, dir := range []string{m.CPUSet, m.CPU} {
		if _, err := os.Stat(filepath.Join(dir, d.base)); !os.IsNotExist(err) {
			t.Errorf("root %s still in %s: %v", d.base, dir, err)
		}
	}
}

// busyGroup refuses removal until its tasks have gone.
type busyGroup struct {
	failingGroup
	busy  int
	calls int
	err   error
}

func (b *busyGroup) Remove() error {
	b.calls++
	if b.calls <= b.busy {
		return fmt.Errorf("removing group: %w", syscall.EBUSY)
	}
	return b.err
}

func TestRemoveWhenEmpty(t *testing.T) {
	g := &busyGroup{busy: 3}
	if err := RemoveWhenEmpty(g, 5*time.Second); err != nil || g.calls != 4 {
		t.Errorf("RemoveWhenEmpty = %v after %d calls, want nil after 4", err, g.calls)
	}
	g = &busyGroup{busy: 1 << 30}
	if err := RemoveWhenEmpty(g, 20*time.Millisecond); !errors.Is(err, syscall.EBUSY) {
		t.Errorf("RemoveWhenEmpty past the timeout = %v, want EBUSY", err)
	}
	g = &busyGroup{err: syscall.EPERM}
	if err := RemoveWhenEmpty(g, time.Second); !errors.Is(err, syscall.EPERM) || g.calls != 1 {
		t.Errorf("RemoveWhenEmpty = %v after %d calls, want EPERM at once", err, g.calls)
	}
}
