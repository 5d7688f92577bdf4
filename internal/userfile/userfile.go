// Package userfile opens and reads the files a user names on the command
// line (a spec, a jobs file, a topology document, a token): regular files
// only, opened without blocking, so that a named pipe with no writer, a
// device such as /dev/zero or a directory is refused at once with what it
// is, and read up to a cap, so that a huge file is refused rather than
// held in memory.
package userfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// ErrNotRegular is wrapped by the error about a path that names no
// regular file (a named pipe, a device, a socket, a directory).
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is wrapped by the error about a file longer than the cap.
var ErrTooLarge = errors.New("file too large")

// Open opens path for reading if it names a regular file (after
// symlinks). It opens with O_NONBLOCK, so that opening a named pipe
// returns at once (and is then refused) instead of waiting for a writer;
// reads of a regular file never block, so the flag changes nothing for
// them. The error for anything else is a *fs.PathError wrapping
// ErrNotRegular and naming the kind of file found.
func Open(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, &fs.PathError{Op: "open", Path: path, Err: fmt.Errorf("%w: a %s", ErrNotRegular, Kind(st.Mode()))}
	}
	return f, nil
}

// Read returns the content of the regular file path (Open) if it holds at
// most limit bytes. The size stat reports is not trusted (a file may grow
// while read, or a file system may report any size): the read itself
// stops one byte past the cap. Over the cap, the error is a
// *fs.PathError wrapping ErrTooLarge and naming the cap.
func Read(path string, limit int64) ([]byte, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadCapped(f, path, limit)
}

// ReadCapped reads r (named name in errors) to its end if it holds at most
// limit bytes, as Read does for a file: for standard input, say.
func ReadCapped(r io.Reader, name string, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: name, Err: err}
	}
	if int64(len(b)) > limit {
		return nil, &fs.PathError{Op: "read", Path: name, Err: fmt.Errorf("%w: over %d bytes", ErrTooLarge, limit)}
	}
	return b, nil
}

// Kind names the type of a file that is not regular, for errors.
func Kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeCharDevice != 0:
		return "character device"
	case m&fs.ModeDevice != 0:
		return "block device"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m.IsDir():
		return "directory"
	}
	return "file of mode " + m.Type().String()
}
