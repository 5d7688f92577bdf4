package enforce

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"syscall"
	"time"
)

// RootPrioritizer is the optional ability to give corepin's root group
// itself the lowest CPU priority against its siblings. A best-effort batch
// runs under its own root (WithRoot("corepin-be")) made idle this way: cpu.idle
// and weights only rank a group against its siblings, so the protection of
// work outside corepin has to be set where corepin's tree meets it, not on
// the job groups inside (cgroup-v2.rst, "Weights"; "nice" ranks threads
// within one group only).
type RootPrioritizer interface {
	// SetRootIdle makes the root group idle (cpu.idle=1, Linux 5.15), or,
	// where the kernel lacks cpu.idle, gives it the lowest weight (v1
	// cpu.shares=2, v2 cpu.weight=1). It returns which of the two it did.
	SetRootIdle() (string, error)
}

// RootRemover is the optional ability to remove corepin's root groups when
// they are empty (tests, uninstall).
type RootRemover interface {
	RemoveRoot() error
}

var (
	_ RootPrioritizer = (*cgDriver)(nil)
	_ RootRemover     = (*cgDriver)(nil)
)

func (d *cgDriver) SetRootIdle() (string, error) {
	if !d.feat.cpu {
		return "", fmt.Errorf("making corepin's root idle: %w: no cpu controller", ErrNotSupported)
	}
	w := Write{File: "cpu.idle", Value: "1"}
	if !d.feat.idle {
		w = Write{File: "cpu.shares", Value: "2"}
		if d.name == NameV2 {
			w = Write{File: "cpu.weight", Value: "1"}
		}
	}
	if err := d.pick(w.File).write(path.Join(d.base, w.File), w.Value); err != nil {
		return "", fmt.Errorf("making corepin's root idle: %w", err)
	}
	return w.String(), nil
}

// RemoveRoot removes corepin's root group from every hierarchy, in reverse
// order; it fails (and keeps the rest) where a group remains inside.
func (d *cgDriver) RemoveRoot() error {
	var errs []error
	for _, h := range slices.Backward(d.hs) {
		if err := h.rmdir(d.base); err != nil {
			errs = append(errs, fmt.Errorf("removing corepin root: %w", err))
		}
	}
	return errors.Join(errs...)
}

// RemoveWhenEmpty removes g, waiting up to timeout for tasks that are
// exiting to leave it: kill(2) returns before its target has exited, and
// until then the kernel refuses to remove a group that holds it (EBUSY).
// Any other error, or EBUSY past the timeout, is returned at once.
func RemoveWhenEmpty(g Group, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for wait := time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		err := g.Remove()
		if err == nil || !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(wait)
	}
}
