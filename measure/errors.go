package measure

import (
	"errors"
	"io"
	"io/fs"
	"syscall"
)

var (
	// ErrNotSupported is wrapped by errors for kernel features this kernel
	// lacks or has switched off: a missing PSI file, or one that returns
	// EOPNOTSUPP because the kernel booted with psi=0.
	ErrNotSupported = errors.New("not supported by this kernel")

	// ErrCounterReset is returned by Delta functions when a cumulative
	// counter went backwards, which happens when a cgroup is removed and
	// created again between the two reads.
	ErrCounterReset = errors.New("counter went backwards")

	// errFormat is wrapped by every parse error.
	errFormat = errors.New("unexpected format")
)

// isGone reports whether err is one of the expected races of reading the
// files of a process or thread that has just exited: the file or directory
// is gone (ENOENT), or the task died between open and read (ESRCH).
func isGone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH)
}

// readFile reads the whole of name into *buf, growing it when needed, and
// returns the filled part. Files in /proc report size 0, so os.ReadFile's
// fstat is wasted work; reading into one reused buffer keeps a sweep free of
// per-file allocations.
func readFile(fsys fs.FS, name string, buf *[]byte) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if cap(*buf) < 4096 {
		*buf = make([]byte, 4096)
	}
	b := (*buf)[:cap(*buf)]
	n := 0
	for {
		if n == len(b) {
			b = append(b, make([]byte, len(b))...)
			b = b[:cap(b)]
			*buf = b
		}
		m, err := f.Read(b[n:])
		n += m
		if err == io.EOF {
			return b[:n], nil
		}
		if err != nil {
			return nil, err // *os.File already names the path
		}
	}
}

// readAt reads the whole of an open file from offset 0 into *buf with
// pread, growing the buffer until the content fits. A procfs file read this
// way is generated afresh, so one descriptor serves every sweep, and a
// descriptor of a task that has exited fails with ESRCH rather than reading
// a later task that reused the id.
func readAt(f fs.File, buf *[]byte) ([]byte, error) {
	ra, ok := f.(io.ReaderAt)
	if !ok {
		return nil, errors.New("reading: file does not support ReadAt")
	}
	if cap(*buf) < 4096 {
		*buf = make([]byte, 4096)
	}
	for {
		b := (*buf)[:cap(*buf)]
		n, err := ra.ReadAt(b, 0)
		if err == io.EOF || (err == nil && n < len(b)) {
			return b[:n], nil
		}
		if err != nil {
			return nil, err
		}
		*buf = make([]byte, 2*len(b))
	}
}

// readDir lists a directory without sorting it (fs.ReadDir sorts).
func readDir(fsys fs.FS, name string) ([]fs.DirEntry, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	d, ok := f.(fs.ReadDirFile)
	if !ok {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: errors.New("not a directory")}
	}
	return d.ReadDir(-1)
}
