package enforce

import (
	"errors"
	"fmt"
	"path"
	"slices"
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
