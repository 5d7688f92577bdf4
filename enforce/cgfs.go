package enforce

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"
)

// Write is one value written to one cgroup file. Drivers turn a Resources
// value into an ordered []Write before any I/O.
type Write struct {
	// File is the control file, relative to the group directory
	// ("cpuset.cpus", "cpu.max"). On cgroup v1 its prefix up to the first
	// '.' names the hierarchy it lives in.
	File string
	// Value is written verbatim, in one write(2).
	Value string
}

func (w Write) String() string { return w.File + "=" + w.Value }

// cgfs is one mounted cgroup hierarchy. Every path is relative to the
// mount point. rootFS is the implementation; tests wrap it to emulate
// cgroupfs (control files appearing on mkdir) and to record writes.
type cgfs interface {
	// mount names the hierarchy in errors (its mount point).
	mount() string
	mkdir(dir string) error
	rmdir(dir string) error
	write(file, value string) error
	read(file string) (string, error)
	exists(file string) (bool, error)
	subdirs(dir string) ([]string, error)
	openDir(dir string) (dirFile, error)
}

// dirFile is an open directory; *os.File in production.
type dirFile interface {
	Fd() uintptr
	Close() error
}

// rootFS is a cgroup hierarchy opened with os.OpenRoot, so no path can
// resolve outside the mount point, whatever a name or a symlink says.
type rootFS struct {
	r *os.Root
}

// openRootFS opens the hierarchy mounted at dir.
func openRootFS(dir string) (*rootFS, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("opening cgroup hierarchy: %w", err)
	}
	return &rootFS{r: r}, nil
}

func (f *rootFS) mount() string { return f.r.Name() }

// close closes the mount; the drivers keep theirs open for good.
func (f *rootFS) close() error { return f.r.Close() }

func (f *rootFS) mkdir(dir string) error {
	if err := f.r.Mkdir(dir, 0o755); err != nil {
		return fmt.Errorf("creating cgroup in %s: %w", f.mount(), err)
	}
	return nil
}

func (f *rootFS) rmdir(dir string) error {
	// A cgroup directory holds control files that rmdir(2) removes with
	// it; os.Root.Remove falls back to unlinkat(AT_REMOVEDIR).
	if err := f.r.Remove(dir); err != nil {
		return fmt.Errorf("removing cgroup in %s: %w", f.mount(), err)
	}
	return nil
}

func (f *rootFS) write(file, value string) error {
	h, err := f.r.OpenFile(file, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("writing %q in %s: %w: %w", value, f.mount(), ErrNotSupported, err)
		}
		return fmt.Errorf("writing %q in %s: %w", value, f.mount(), err)
	}
	_, err = h.Write([]byte(value))
	if cerr := h.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %q in %s: %w", value, f.mount(), err)
	}
	return nil
}

func (f *rootFS) read(file string) (string, error) {
	b, err := f.r.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("reading cgroup file in %s: %w", f.mount(), err)
	}
	return strings.TrimSpace(string(b)), nil
}

func (f *rootFS) exists(file string) (bool, error) {
	_, err := f.r.Stat(file)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("probing cgroup file in %s: %w", f.mount(), err)
	}
	return true, nil
}

func (f *rootFS) subdirs(dir string) ([]string, error) {
	es, err := fs.ReadDir(f.r.FS(), dir)
	if err != nil {
		return nil, fmt.Errorf("listing cgroups in %s: %w", f.mount(), err)
	}
	var ds []string
	for _, e := range es {
		if e.IsDir() {
			ds = append(ds, e.Name())
		}
	}
	return ds, nil
}

func (f *rootFS) openDir(dir string) (dirFile, error) {
	h, err := f.r.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		return nil, fmt.Errorf("opening cgroup in %s: %w", f.mount(), err)
	}
	return h, nil
}

// writeAll writes ws in order into dir of the hierarchy pick chooses for
// each file, stopping at the first error.
func writeAll(pick func(file string) cgfs, dir string, ws []Write) error {
	for _, w := range ws {
		h := pick(w.File)
		if h == nil {
			return fmt.Errorf("writing %s: %w: no hierarchy for it", w.File, ErrNotSupported)
		}
		if err := h.write(path.Join(dir, w.File), w.Value); err != nil {
			return err
		}
	}
	return nil
}

// readProcs returns the pids listed in dir/cgroup.procs.
func readProcs(h cgfs, dir string) ([]string, error) {
	s, err := h.read(path.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil, err
	}
	return strings.Fields(s), nil
}

// ensureDir creates dir unless it exists as a directory already.
func ensureDir(h cgfs, dir string) error {
	err := h.mkdir(dir)
	if err == nil || !errors.Is(err, fs.ErrExist) {
		return err
	}
	ds, lerr := h.subdirs(path.Dir(dir))
	if lerr != nil {
		return lerr
	}
	for _, d := range ds {
		if d == path.Base(dir) {
			return nil
		}
	}
	return err // exists, but not as a directory (a control file)
}
