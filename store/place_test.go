package store

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/corepin/corepin/internal/testutil"
)

// Issue 8 §3: --db created directories anywhere, even cgroups inside
// /sys/fs/cgroup. Open creates only corepin's own default directory, and
// refuses kernel file systems before touching them.
func TestOpenRefusesPlaces(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_DATA_HOME", filepath.Join(dir, "xdg"))
	tests := []struct {
		name string
		path string
		want error
	}{
		{name: "missing directory", path: filepath.Join(dir, "no", "such", "dir", "r.db"), want: ErrPlace},
		{name: "cgroupfs", path: "/sys/fs/cgroup/cpu/corepin-db-test/r.db", want: ErrPlace},
		{name: "sysfs", path: "/sys/kernel/r.db", want: ErrPlace},
		{name: "procfs", path: "/proc/self/r.db", want: ErrPlace},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			db, err := Open(tc.path)
			if err == nil {
				db.Close()
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("Open(%s) = %v, want %v", tc.path, err, tc.want)
			}
			if _, err := os.Stat(filepath.Dir(tc.path)); err == nil && tc.name != "sysfs" && tc.name != "procfs" {
				t.Errorf("Open(%s) created %s", tc.path, filepath.Dir(tc.path))
			}
		})
	}
	t.Run("default directory is created", func(t *testing.T) {
		def, err := DefaultPath()
		if err != nil {
			t.Fatal(err)
		}
		db, err := Open(def)
		if err != nil {
			t.Fatalf("Open(default %s) = %v", def, err)
		}
		db.Close()
	})
}

// Issue 8 §3: results could not read a database the caller may only read.
// OpenReadOnly reads a 0444 file in a 0555 directory and writes nothing,
// checked as nobody where the test runs as root.
func TestOpenReadOnly(t *testing.T) {
	if os.Getenv("COREPIN_TEST_RO_DB") != "" {
		readOnlyChild(t, os.Getenv("COREPIN_TEST_RO_DB"))
		return
	}
	base, err := os.MkdirTemp("", "corepin-ro-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(filepath.Join(base, "d"), 0o755); os.RemoveAll(base) })
	dir := filepath.Join(base, "d")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "results.db")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	id, err := db.BeginRun(Run{Command: "run"})
	if err == nil {
		err = db.AddJob(id, Job{Job: 0, Cmd: "true", Mode: "pinned", QoS: "LSE", CPUs: 1})
	}
	if err == nil {
		err = db.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{path + "-wal", path + "-shm"} {
		os.Remove(f)
	}
	if err := os.Chmod(path, 0o444); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 {
		readOnlyChild(t, path)
		return
	}
	testutil.RunAsNobody(t, "TestOpenReadOnly", "COREPIN_TEST_RO_DB="+path)
}

func readOnlyChild(t *testing.T, path string) {
	before, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path); err == nil {
		t.Log("note: Open (read-write) succeeded; the file is writable here")
	}
	db, err := OpenReadOnly(path)
	if err != nil {
		t.Fatalf("OpenReadOnly() as uid %d = %v", os.Geteuid(), err)
	}
	defer db.Close()
	runs, err := db.Runs(RunFilter{})
	if err != nil || len(runs) != 1 {
		t.Fatalf("Runs() = %v, %v; want one run", runs, err)
	}
	jobs, err := db.Jobs(runs[0].ID)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("Jobs() = %v, %v; want one job", jobs, err)
	}
	after, _ := os.ReadDir(filepath.Dir(path))
	if len(after) != len(before) {
		t.Errorf("OpenReadOnly wrote beside the database: %d entries, was %d", len(after), len(before))
	}
}
