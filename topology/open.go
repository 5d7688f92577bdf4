package topology

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"

	"github.com/corepin/corepin/internal/userfile"
)

// MaxFileSize caps every file discovery reads, in bytes. The largest real
// files are far below it: a CPU list of an 8192-CPU machine without a
// single range ("0,2,4,...") is about 40 KiB, its mask about 2.3 KiB, a
// distance row of 1024 NUMA nodes 4 KiB, and proc/self/mountinfo of a busy
// container host a few hundred KiB. A file above the cap (a dump's link to
// /dev/zero, a huge file) is an error, never read to the end.
const MaxFileSize = 1 << 20

var (
	// ErrBadRoot is wrapped by Open's errors about the root itself: it does
	// not exist, is not a directory or holds no sys/devices/system/cpu.
	ErrBadRoot = errors.New("bad sysfs root")
	// ErrNotRegular is wrapped by errors about a file that is not a regular
	// file (a FIFO, a device, a socket): discovery never reads one.
	ErrNotRegular = errors.New("not a regular file")
	// ErrTooLarge is wrapped by errors about a file above MaxFileSize.
	ErrTooLarge = errors.New("file larger than the cap")
)

// Open reads the topology of the machine whose "/" is root: the live
// machine when root is "/" or "", else a saved dump (such as the hwloc test
// dumps). Only the live machine has corepin's own cpuset cgroup, so only
// there is "allowed" read from it; a dump counts every online CPU as
// allowed.
//
// Every read goes through an os.Root on root: no path or symlink leads out
// of it (real sysfs links such as node/node0/cpu0 -> ../../cpu/cpu0 and
// hwloc's self-links stay inside and work), files are opened non-blocking
// (a FIFO never hangs), only regular files are read, and each at most
// MaxFileSize bytes. Errors about the root wrap ErrBadRoot; about its
// content, ErrBadSysfs.
func Open(root string) (*Topology, error) {
	live := root == "" || root == "/"
	if live {
		root = "/"
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is root, said once below
		}
		return nil, fmt.Errorf("%w %s: %w", ErrBadRoot, root, err)
	}
	defer r.Close()
	if st, err := r.Stat(cpuDir); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("%w %s has no %s: give the directory that holds the dump's sys/", ErrBadRoot, root, cpuDir)
	}
	if live {
		return Discover(rootFS{r})
	}
	t, err := Discover(rootFS{r}, WithoutCgroup())
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", root, err)
	}
	return t, nil
}

// rootFS is the file system Open reads: (*os.Root).FS semantics, with files
// opened non-blocking so that opening a FIFO returns at once (readFile then
// refuses it as not regular).
type rootFS struct{ r *os.Root }

func (f rootFS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	file, err := f.r.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	return file, nil
}

func (f rootFS) ReadDir(name string) ([]fs.DirEntry, error) {
	return fs.ReadDir(f.r.FS(), name)
}

func (f rootFS) Stat(name string) (fs.FileInfo, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrInvalid}
	}
	return f.r.Stat(name)
}

// readFile reads name from fsys if it is a regular file of at most
// MaxFileSize bytes. The size reported by stat is not trusted (sysfs
// reports 4096 for every attribute): the read itself stops past the cap.
func readFile(fsys fs.FS, name string) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, &fs.PathError{Op: "read", Path: name, Err: fmt.Errorf("%w: a %s", ErrNotRegular, userfile.Kind(st.Mode()))}
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: name, Err: err}
	}
	if len(b) > MaxFileSize {
		return nil, &fs.PathError{Op: "read", Path: name, Err: fmt.Errorf("%w of %d bytes", ErrTooLarge, MaxFileSize)}
	}
	return b, nil
}
