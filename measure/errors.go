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
