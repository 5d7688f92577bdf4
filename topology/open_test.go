package topology

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"

	"github.com/corepin/corepin/internal/testutil"
)

// Open reads real dumps, through the real file system and their links
// (node0/cpu11 -> . in 16em64t), exactly as Discover reads them in memory.
// The end-to-end test in cmd/corepin diffs every dump's Open against the
// goldens; two small ones suffice here.
func TestOpenFixturesEqualDiscover(t *testing.T) {
	for _, name := range []string{"16em64t-4s2c2t", "8em64t-2s2ca2c"} {
		t.Run(name, func(t *testing.T) {
			fsys := testutil.SysfsFromTarBz2(t, name)
			want, err := Discover(fsys)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Open(testutil.WriteDir(t, fsys))
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			if d := cmp.Diff(want.Doc(), got.Doc()); d != "" {
				t.Errorf("Open differs from Discover (-want +got):\n%s", d)
			}
		})
	}
}

// A hostile --sysfs-root (issue 8 §3): every case is refused with an error,
// at once, without reading past the cap or quoting what lies outside the
// root.
func TestOpenHostileRoot(t *testing.T) {
	const online = "sys/devices/system/cpu/online"
	const secret = "TOPSECRET-do-not-print"
	tests := []struct {
		name    string
		setup   func(t *testing.T, root string) // replaces online
		wantErr error                           // nil: any error
		want    string                          // in the message
	}{
		{
			name: "fifo",
			setup: func(t *testing.T, root string) {
				if err := syscall.Mkfifo(filepath.Join(root, online), 0o644); err != nil {
					t.Skipf("mkfifo: %v", err)
				}
			},
			wantErr: ErrNotRegular, want: "named pipe",
		},
		{
			name: "character device like /dev/zero inside the root",
			setup: func(t *testing.T, root string) {
				if err := syscall.Mknod(filepath.Join(root, online), syscall.S_IFCHR|0o444, 1<<8|5); err != nil {
					t.Skipf("mknod (needs root): %v", err)
				}
			},
			wantErr: ErrNotRegular, want: "device",
		},
		{
			name:  "link to /dev/zero",
			setup: func(t *testing.T, root string) { symlink(t, "/dev/zero", filepath.Join(root, online)) },
			want:  "escapes",
		},
		{
			name: "huge file",
			setup: func(t *testing.T, root string) {
				if err := os.WriteFile(filepath.Join(root, online), []byte(strings.Repeat("0,", MaxFileSize)), 0o644); err != nil {
					t.Fatal(err)
				}
			},
			wantErr: ErrTooLarge,
		},
		{
			name: "relative link escaping the root to a secret",
			setup: func(t *testing.T, root string) {
				writeSecret(t, filepath.Join(filepath.Dir(root), "secret"), secret)
				symlink(t, "../../../../../secret", filepath.Join(root, online))
			},
			want: "escapes",
		},
		{
			name: "absolute link to a secret",
			setup: func(t *testing.T, root string) {
				p := filepath.Join(t.TempDir(), "secret")
				writeSecret(t, p, secret)
				symlink(t, p, filepath.Join(root, online))
			},
			want: "escapes",
		},
		{
			name: "directory link escaping the root",
			setup: func(t *testing.T, root string) {
				if err := os.RemoveAll(filepath.Join(root, "sys/devices/system/cpu/cpu1")); err != nil {
					t.Fatal(err)
				}
				symlink(t, "/sys/devices/system/cpu/cpu0", filepath.Join(root, "sys/devices/system/cpu/cpu1"))
			},
			want: "escapes",
		},
		{
			name: "secret inside the root is quoted by a prefix only",
			setup: func(t *testing.T, root string) {
				writeSecret(t, filepath.Join(root, online), "0-1,"+strings.Repeat("2,", 40)+secret)
			},
			wantErr: ErrBadSysfs, want: "106 bytes",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			top := t.TempDir()
			root := filepath.Join(top, "dump")
			m := fstest.MapFS{}
			for k, v := range twoCPUs() {
				m["dump/"+k] = &fstest.MapFile{Data: []byte(v)}
			}
			if err := os.CopyFS(top, m); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(filepath.Join(root, online)); err != nil {
				t.Fatal(err)
			}
			tc.setup(t, root)
			topo, err := Open(root)
			if err == nil {
				t.Fatalf("Open = %s, want an error", topo.Summary())
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Errorf("Open error %v does not wrap %v", err, tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Open error %q does not contain %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "do-not-print") || len(err.Error()) > 400 {
				t.Errorf("Open error quotes too much (%d bytes): %.200s", len(err.Error()), err)
			}
		})
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	_ = os.Remove(link)
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

func writeSecret(t *testing.T, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestOpenBadRoot(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f")
	writeSecret(t, file, "x")
	tests := []struct {
		name, root, want string
	}{
		{name: "missing", root: "/nonexistent-corepin", want: "no such file"},
		{name: "a file", root: file, want: "not a directory"},
		{name: "no sysfs", root: t.TempDir(), want: "has no sys/devices/system/cpu"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Open(tc.root)
			if !errors.Is(err, ErrBadRoot) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Open(%q) error = %v, want ErrBadRoot containing %q", tc.root, err, tc.want)
			}
		})
	}
}

// Open("/") and Open("") read this machine with its cgroup, like Discover.
func TestOpenLive(t *testing.T) {
	if _, err := os.Stat("/sys/devices/system/cpu"); err != nil {
		t.Skip("no /sys/devices/system/cpu on this machine")
	}
	want, err := Discover(os.DirFS("/"))
	if err != nil {
		t.Fatal(err)
	}
	for _, root := range []string{"/", ""} {
		got, err := Open(root)
		if err != nil {
			t.Fatalf("Open(%q): %v", root, err)
		}
		a, _ := json.Marshal(want.Doc())
		b, _ := json.Marshal(got.Doc())
		if string(a) != string(b) {
			t.Errorf("Open(%q) = %s, Discover(os.DirFS(\"/\")) = %s", root, b, a)
		}
	}
}

var _ fs.StatFS = rootFS{}
var _ fs.ReadDirFS = rootFS{}
