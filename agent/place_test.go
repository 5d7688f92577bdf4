package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/corepin/corepin/enforce/enforcetest"
	"github.com/corepin/corepin/topology"
)

// openFake opens a Node on state with the live topology and a driver that
// makes no groups: enough for what Open does to the state file, as any
// user.
func openFake(t *testing.T, state string) (*Node, error) {
	t.Helper()
	topo, err := topology.Discover(os.DirFS("/"))
	if err != nil {
		t.Fatal(err)
	}
	n, err := Open(Options{StatePath: state, Topology: topo, Driver: enforcetest.NoGroups{}})
	if err == nil {
		t.Cleanup(func() { n.Close() })
	}
	return n, err
}

// TestStateFileIsPrivate (issue 17 §5): the state file names every
// workload and command; it, its -wal and -shm are 0600 from the start,
// and an older agent's 0644 files are made 0600 when the agent opens them.
func TestStateFileIsPrivate(t *testing.T) {
	old := syscallUmask(0o022) // the usual umask, whatever the test runner's
	t.Cleanup(func() { syscallUmask(old) })
	dir := t.TempDir()
	state := filepath.Join(dir, "state.db")
	n, err := openFake(t, state)
	if err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		for _, p := range []string{state, state + "-wal", state + "-shm", state + ".lock"} {
			fi, err := os.Stat(p)
			if err != nil {
				t.Errorf("%s: %v", when, err)
				continue
			}
			if fi.Mode().Perm() != 0o600 {
				t.Errorf("%s: %s has mode %v, want 0600", when, filepath.Base(p), fi.Mode().Perm())
			}
		}
	}
	check("new state")
	n.Close()
	for _, p := range []string{state, state + "-wal", state + "-shm"} {
		if err := os.Chmod(p, 0o644); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
	}
	if _, err := openFake(t, state); err != nil {
		t.Fatal(err)
	}
	check("reopened 0644 state")
}

// TestKernelFileSystemPaths (issue 17 §5): a state file or socket under
// /sys/fs/cgroup made a cgroup (the agent created the directory before
// refusing); they are refused, clearly, before anything is created.
func TestKernelFileSystemPaths(t *testing.T) {
	name := fmt.Sprintf("corepin-place-test-%d", os.Getpid())
	var dirs []string
	for _, d := range []string{"/sys/fs/cgroup/cpuset", "/sys/fs/cgroup/cpu", "/sys/fs/cgroup/unified", "/sys/fs/cgroup", "/sys/kernel", "/proc/self"} {
		if _, err := os.Stat(d); err == nil {
			dirs = append(dirs, d)
		}
	}
	if len(dirs) == 0 {
		t.Skip("skipping: no /sys or /proc here")
	}
	for _, d := range dirs {
		made := []string{filepath.Join(d, name), filepath.Join(d, name+".db")}
		t.Cleanup(func() { // only what a broken check leaves behind
			x := filepath.Join(made[0], "x")
			for _, m := range []string{x + "/state.db", x + "/state.db.lock", x, made[0], made[1], made[1] + ".lock"} {
				os.Remove(m)
			}
		})
		for _, p := range []string{filepath.Join(d, name, "x", "state.db"), made[1]} {
			_, err := openFake(t, p)
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("Open(--state %s) = %v, want ErrInvalid", p, err)
			}
			ln, err := ListenUnix(p)
			if err == nil {
				ln.Close()
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("ListenUnix(%s) = %v, want ErrInvalid", p, err)
			}
		}
		for _, m := range made {
			if _, err := os.Lstat(m); err == nil {
				t.Errorf("%s was created", m)
			}
		}
	}
	// The daemon refuses them before it makes its cgroup root or state.
	state := filepath.Join(t.TempDir(), "state.db")
	root := name + "-root"
	bad := filepath.Join(dirs[0], name, "a.sock")
	for _, c := range []Config{{Socket: bad, State: state, CgroupRoot: root}, {Socket: state + ".sock", State: bad, CgroupRoot: root}} {
		if err := Run(context.Background(), c, slog.New(slog.DiscardHandler), nil); !errors.Is(err, ErrInvalid) {
			t.Errorf("Run(socket %s, state %s) = %v, want ErrInvalid", c.Socket, c.State, err)
		}
	}
	made, _ := filepath.Glob("/sys/fs/cgroup/*/" + root)
	for _, p := range append(made, state, filepath.Dir(bad)) {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("Run refused, yet %s was made", p)
			os.Remove(p)
		}
	}
}
