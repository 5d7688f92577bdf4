package userfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Issue 27 §3: `corepin bench --spec /dev/zero` grew to 1.8 GB and
// `--spec FIFO` hung. Read refuses both at once, and a directory, and
// reads a regular file up to its cap exactly.
func TestRead(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("making a FIFO: %v", err)
	}
	atCap := filepath.Join(dir, "at-cap.yaml")
	overCap := filepath.Join(dir, "over-cap.yaml")
	for path, n := range map[string]int{atCap: 16, overCap: 17} {
		if err := os.WriteFile(path, []byte(strings.Repeat("x", n)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(atCap, link); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		path    string
		wantErr error
		msg     string
		wantLen int
	}{
		{name: "named pipe without a writer", path: fifo, wantErr: ErrNotRegular, msg: "a named pipe"},
		{name: "endless device", path: "/dev/zero", wantErr: ErrNotRegular, msg: "a character device"},
		{name: "directory", path: dir, wantErr: ErrNotRegular, msg: "a directory"},
		{name: "one byte over the cap", path: overCap, wantErr: ErrTooLarge, msg: "over 16 bytes"},
		{name: "missing", path: filepath.Join(dir, "none"), wantErr: os.ErrNotExist},
		{name: "at the cap", path: atCap, wantLen: 16},
		{name: "symlink to a regular file", path: link, wantLen: 16},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := Read(tc.path, 16)
			if tc.wantErr == nil {
				if err != nil || len(b) != tc.wantLen {
					t.Fatalf("Read = %d bytes, %v; want %d bytes", len(b), err, tc.wantLen)
				}
				return
			}
			if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("Read error = %v, want %v saying %q", err, tc.wantErr, tc.msg)
			}
		})
	}
}
