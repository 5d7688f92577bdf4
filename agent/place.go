package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/corepin/corepin/store"
)

// checkPlace refuses, before anything is created, a state file or socket
// path (flag names which) on a kernel file system or below /sys or /proc:
// a directory made in cgroupfs is a cgroup, and /sys/fs/cgroup itself is
// often a tmpfs holding the cgroup mounts. Errors wrap ErrInvalid.
func checkPlace(flag, path string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("%w: %s %s: %v", ErrInvalid, flag, path, err)
	}
	for _, k := range []string{"/sys", "/proc"} {
		if within(abs, k) {
			return fmt.Errorf("%w: %s %s is below %s, the kernel's interface, not storage (a directory made under /sys/fs/cgroup is a cgroup); "+
				"give a path on a disk, such as %s", ErrInvalid, flag, path, k, suggestPlace(flag))
		}
	}
	dir, name, err := store.KernelFS(abs)
	if err != nil {
		return fmt.Errorf("%w: %s %s: %v", ErrInvalid, flag, path, err)
	}
	if name != "" {
		return fmt.Errorf("%w: %s %s: %s is on %s, a kernel file system, not storage; give a path on a disk, such as %s",
			ErrInvalid, flag, path, dir, name, suggestPlace(flag))
	}
	return nil
}

func suggestPlace(flag string) string {
	if flag == "--socket" {
		return DefaultSocket
	}
	return DefaultState
}

// openState opens the state file at path, which names every workload and
// command: it is made 0600 from its creation (SQLite gives its -wal and
// -shm files the database's mode), and an existing file, -wal or -shm
// readable by others (made by an older corepin) is made 0600.
func openState(path string) (*store.DB, error) {
	// Not made where it must not be: store.Open refuses that (ErrPlace).
	if checkPlace("state", path) == nil {
		if f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
			f.Close() // SQLite takes an empty file for an empty database
		}
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := private(p); err != nil {
			return nil, err
		}
	}
	return store.Open(path)
}

// private makes the regular file p 0600 if others or its group may read
// it; a missing file, or one another user owns, is left alone.
func private(p string) error {
	fi, err := os.Lstat(p)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o077 == 0 {
		return nil
	}
	if err := os.Chmod(p, fi.Mode().Perm()&0o600); err != nil && !errors.Is(err, fs.ErrPermission) {
		return fmt.Errorf("making the state file private: %w", err)
	}
	return nil
}
