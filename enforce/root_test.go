package enforce

import (
	"os"
	"path/filepath"
	"testing"
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
