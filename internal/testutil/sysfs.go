// Package testutil loads the real-machine sysfs dumps of
// ../shared/fixtures/sysfs for tests, in memory.
package testutil

import (
	"archive/tar"
	"compress/bzip2"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"testing/fstest"
)

// FixturesDir returns the directory of the sysfs dumps: $COREPIN_FIXTURES if
// set, else shared/fixtures/sysfs beside the repository.
func FixturesDir(tb testing.TB) string {
	tb.Helper()
	if d := os.Getenv("COREPIN_FIXTURES"); d != "" {
		return d
	}
	_, file, _, _ := runtime.Caller(0)
	repo := filepath.Join(filepath.Dir(file), "..", "..")
	for _, cand := range []string{
		filepath.Join(repo, "..", "shared", "fixtures", "sysfs"),
		filepath.Join(repo, "shared", "fixtures", "sysfs"),
	} {
		if st, err := os.Stat(cand); err == nil && st.IsDir() {
			return cand
		}
	}
	tb.Skip("sysfs fixtures not found: set COREPIN_FIXTURES to shared/fixtures/sysfs")
	return ""
}

// Fixtures returns the names of the dumps (without .tar.bz2), sorted.
func Fixtures(tb testing.TB) []string {
	tb.Helper()
	m, err := filepath.Glob(filepath.Join(FixturesDir(tb), "*.tar.bz2"))
	if err != nil || len(m) == 0 {
		tb.Fatalf("no fixtures in %s: %v", FixturesDir(tb), err)
	}
	var out []string
	for _, p := range m {
		out = append(out, strings.TrimSuffix(filepath.Base(p), ".tar.bz2"))
	}
	return out
}

// SysfsFromTarBz2 loads the named dump into an in-memory file system rooted
// where the dumped machine's "/" was (the tar's top directory is dropped).
// Symlinks are kept as symlinks.
func SysfsFromTarBz2(tb testing.TB, name string) fstest.MapFS {
	tb.Helper()
	fsys, err := LoadTarBz2(filepath.Join(FixturesDir(tb), name+".tar.bz2"))
	if err != nil {
		tb.Fatalf("loading fixture %s: %v", name, err)
	}
	return fsys
}

// VMDumpsDir is the directory of the sysfs dumps this repository made
// itself (topology/testdata/vm): machines booted under qemu by test/e2evm's
// TestCaptureIsolcpusDump, each NAME.tar.bz2 in the layout of the hwloc
// dumps beside NAME.note (how it was made) and NAME.topo.json (corepin topo
// -o json in that machine).
func VMDumpsDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "topology", "testdata", "vm")
}

// VMDump loads the named dump of VMDumpsDir as SysfsFromTarBz2 loads the
// hwloc ones.
func VMDump(tb testing.TB, name string) fstest.MapFS {
	tb.Helper()
	fsys, err := LoadTarBz2(filepath.Join(VMDumpsDir(), name+".tar.bz2"))
	if err != nil {
		tb.Fatalf("loading dump %s: %v", name, err)
	}
	return fsys
}

// LoadTarBz2 reads a bzip2-compressed tar into a MapFS, dropping the first
// path element of every entry.
func LoadTarBz2(file string) (fstest.MapFS, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tr := tar.NewReader(bzip2.NewReader(f))
	m := fstest.MapFS{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return m, nil
		}
		if err != nil {
			return nil, err
		}
		_, rest, ok := strings.Cut(strings.TrimPrefix(h.Name, "./"), "/")
		rest = strings.TrimSuffix(rest, "/")
		if !ok || rest == "" {
			continue
		}
		switch h.Typeflag {
		case tar.TypeDir:
			m[rest] = &fstest.MapFile{Mode: fs.ModeDir | 0o755}
		case tar.TypeSymlink:
			m[rest] = &fstest.MapFile{Mode: fs.ModeSymlink | 0o777, Data: []byte(h.Linkname)}
		case tar.TypeReg:
			b, err := io.ReadAll(tr)
			if err != nil {
				return nil, err
			}
			m[rest] = &fstest.MapFile{Data: b, Mode: 0o444}
		}
	}
}

// ExtractTarBz2 unpacks the named dump into a new temporary directory and
// returns the directory that holds its sys/ and proc/.
func ExtractTarBz2(tb testing.TB, name string) string {
	tb.Helper()
	return WriteDir(tb, SysfsFromTarBz2(tb, name))
}

// WriteDir writes fsys (files, directories and symlinks, as LoadTarBz2 or a
// test's MapFS literal holds them) into a new temporary directory and
// returns it, so that a fake machine can be read through the real file
// system (corepin topo --sysfs-root DIR).
func WriteDir(tb testing.TB, fsys fstest.MapFS) string {
	tb.Helper()
	dir := tb.TempDir()
	for p, f := range fsys {
		dst := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			tb.Fatal(err)
		}
		var err error
		switch {
		case f.Mode&fs.ModeDir != 0:
			err = os.MkdirAll(dst, 0o755)
		case f.Mode&fs.ModeSymlink != 0:
			err = os.Symlink(string(f.Data), dst)
		default:
			err = os.WriteFile(dst, f.Data, 0o644)
		}
		if err != nil && !errors.Is(err, fs.ErrExist) {
			tb.Fatal(err)
		}
	}
	return dir
}
