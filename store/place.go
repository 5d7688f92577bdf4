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
	p, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("opening %s: %w", path, err)
	}
	for {
		var st unix.Statfs_t
		err := unix.Statfs(p, &st)
		if err == nil {
			if name, ok := kernelFS[int64(st.Type)]; ok {
				return fmt.Errorf("opening %s: %w: %s is on %s", path, ErrPlace, p, name)
			}
			return nil
		}
		if !errors.Is(err, os.ErrNotExist) && !errors.Is(err, unix.ENOTDIR) {
			return nil // let the open itself report what is wrong
		}
		parent := filepath.Dir(p)
		if parent == p {
			return nil
		}
		p = parent
	}
}
