package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// kernelFS are the statfs(2) magic numbers of file systems that are the
// kernel's interfaces, not storage (linux/magic.h). A database there is at
// best lost at reboot and at worst a side effect: mkdir in cgroupfs
// creates a cgroup.
var kernelFS = map[int64]string{
	unix.CGROUP_SUPER_MAGIC:  "cgroup",
	unix.CGROUP2_SUPER_MAGIC: "cgroup2",
	unix.SYSFS_MAGIC:         "sysfs",
	unix.PROC_SUPER_MAGIC:    "procfs",
	unix.DEBUGFS_MAGIC:       "debugfs",
	unix.TRACEFS_MAGIC:       "tracefs",
	unix.SECURITYFS_MAGIC:    "securityfs",
	unix.BPF_FS_MAGIC:        "bpffs",
	unix.DEVPTS_SUPER_MAGIC:  "devpts",
}

// checkPlace refuses a path whose nearest existing ancestor (or itself)
// lies on a kernel file system.
func checkPlace(path string) error {
	dir, name, err := KernelFS(path)
	if err != nil {
		return fmt.Errorf("opening %s: %w", path, err)
	}
	if name != "" {
		return fmt.Errorf("opening %s: %w: %s is on %s", path, ErrPlace, dir, name)
	}
	return nil
}

// KernelFS reports whether path, or its nearest existing ancestor, lies
// on one of the kernel's file systems (cgroup, sysfs, procfs, ...; see
// kernelFS): it returns that directory and the file system's name, or
// "" when it is storage or cannot be told (the open itself then says what
// is wrong). It creates nothing.
func KernelFS(path string) (dir, name string, err error) {
	p, err := filepath.Abs(path)
	if err != nil {
		return "", "", err
	}
	for {
		var st unix.Statfs_t
		err := unix.Statfs(p, &st)
		if err == nil {
			if name, ok := kernelFS[int64(st.Type)]; ok {
				return p, name, nil
			}
			return "", "", nil
		}
		if !errors.Is(err, os.ErrNotExist) && !errors.Is(err, unix.ENOTDIR) {
			return "", "", nil
		}
		parent := filepath.Dir(p)
		if parent == p {
			return "", "", nil
		}
		p = parent
	}
}
