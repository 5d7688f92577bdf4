package store

import (
	"bytes"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// openT opens a database at path and closes it when the test ends.
func openT(t testing.TB, path string) *DB {
	t.Helper()
	db, err := Open(path)
	if err != nil {
		t.Fatalf("Open(%s) = %v", path, err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// rawExec runs statements on path with a plain connection, bypassing Open.
func rawExec(t *testing.T, path string, stmts ...string) {
	t.Helper()
	sdb, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer sdb.Close()
	for _, s := range stmts {
		if _, err := sdb.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// replace sets *p to v for the duration of the test.
func replace[T any](t *testing.T, p *T, v T) {
	t.Helper()
	old := *p
	*p = v
	t.Cleanup(func() { *p = old })
}

func pragma(t *testing.T, db *DB, name string) string {
	t.Helper()
	var s string
	if err := db.db.QueryRow("PRAGMA " + name).Scan(&s); err != nil {
		t.Fatalf("PRAGMA %s: %v", name, err)
	}
	return s
}

func TestOpenMigratesFromEmpty(t *testing.T) {
	// Open creates only the default directory (issue 8 §3).
	xdg := filepath.Join(t.TempDir(), "new")
	t.Setenv("XDG_DATA_HOME", xdg)
	path := filepath.Join(xdg, "corepin", "results.db")
	db := openT(t, path)
	for _, tc := range []struct{ pragma, want string }{
		{"user_version", strconv.Itoa(SchemaVersion)},
		{"application_id", "1668248165"}, // "core"
		{"journal_mode", "wal"},
		{"foreign_keys", "1"},
		{"synchronous", "1"}, // NORMAL; results sync the log themselves (syncLog)
		{"busy_timeout", "10000"},
	} {
		if got := pragma(t, db, tc.pragma); got != tc.want {
			t.Errorf("PRAGMA %s = %s, want %s", tc.pragma, got, tc.want)
		}
	}
	var tables []string
	rows, err := db.db.Query(`SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n string
		rows.Scan(&n)
		tables = append(tables, n)
	}
	rows.Close()
	if diff := cmp.Diff([]string{"assignments", "jobs", "measurements", "runs", "settings"}, tables); diff != "" {
		t.Errorf("tables (-want +got):\n%s", diff)
	}
}

func TestOpenEmptyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "empty.db")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	db := openT(t, path)
	if got := pragma(t, db, "user_version"); got != strconv.Itoa(SchemaVersion) {
		t.Errorf("user_version = %s, want %d", got, SchemaVersion)
	}
}

func TestReopenKeepsData(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.db")
	start := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
	run := Run{
		StartedAt: start, Command: "run", Params: raw(`{"jobs":2,"mode":"pinned"}`),
		CorepinVersion: "v0.1.0", Kernel: "6.1.0-18-amd64", Hostname: "enc-7",
		TopologySummary: "1 socket, 4 cores, 8 CPUs", Topology: raw(`{"cpus":[]}`),
	}
	jobs := []Job{sampleJob(0), sampleJob(1)}
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	id, err := db.BeginRun(run)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if err := db.AddJob(id, j); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.FinishRun(id, start.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.SaveAssignment(Assignment{Name: "enc-1", Cpuset: "2-5", QoS: "LSE", CreatedAt: start}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db = openT(t, path)
	runs, err := db.Runs(RunFilter{})
	if err != nil {
		t.Fatal(err)
	}
	run.ID, run.FinishedAt, run.Jobs, run.Status = id, start.Add(time.Minute), 2, RunFinished
	if diff := cmp.Diff([]Run{run}, runs); diff != "" {
		t.Errorf("Runs (-want +got):\n%s", diff)
	}
	got, err := db.Jobs(id)
	if err != nil {
		t.Fatal(err)
	}
	for i := range jobs {
		jobs[i].RunID = id
	}
	if diff := cmp.Diff(jobs, got); diff != "" {
		t.Errorf("Jobs (-want +got):\n%s", diff)
	}
	as, err := db.Assignments()
	if err != nil {
		t.Fatal(err)
	}
	want := []Assignment{{Name: "enc-1", Cpuset: "2-5", QoS: "LSE", CreatedAt: start, Generation: 1}}
	if diff := cmp.Diff(want, as); diff != "" {
		t.Errorf("Assignments (-want +got):\n%s", diff)
	}
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "new.db")
	openT(t, path).Close()
	rawExec(t, path, "PRAGMA user_version = 7", "PRAGMA wal_checkpoint(TRUNCATE)")
	before := readFile(t, path)

	_, err := Open(path)
	if !errors.Is(err, ErrTooNew) {
		t.Fatalf("Open = %v, want ErrTooNew", err)
	}
	for _, s := range []string{path, "schema version 7", "knows up to " + strconv.Itoa(SchemaVersion), "newer corepin"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not say %q", err, s)
		}
	}
	if !bytes.Equal(before, readFile(t, path)) {
		t.Error("Open changed a file it refused")
	}
}

// TestMigrationsAreOneTransaction: a migration that fails halfway leaves
// neither its first statements nor a new user_version behind.
func TestMigrationsAreOneTransaction(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.db")
	openT(t, path).Close()
	replace(t, &migrations, append(migrations[:len(migrations):len(migrations)],
		`CREATE TABLE half (x INTEGER); THIS IS NOT SQL;`))
	next := strconv.Itoa(SchemaVersion + 1)
	if _, err := Open(path); err == nil || !strings.Contains(err.Error(), "to schema version "+next) {
		t.Fatalf("Open with a broken migration = %v, want a migrating error", err)
	}
	replace(t, &migrations, migrations[:SchemaVersion])
	db := openT(t, path)
	if got := pragma(t, db, "user_version"); got != strconv.Itoa(SchemaVersion) {
		t.Errorf("user_version = %s, want %d", got, SchemaVersion)
	}
	var n int
	db.db.QueryRow(`SELECT count(*) FROM sqlite_schema WHERE name = 'half'`).Scan(&n)
	if n != 0 {
		t.Error("the failed migration's table was kept")
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestOpenRefusesNotDB(t *testing.T) {
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"text", []byte("cpu 0-3\nthis is a state file from something else\n")},
		{"json state file", []byte(`{"workloads": {"enc-1": "2-5"}}`)},
		{"short prefix", []byte("SQLite")},
		{"one byte", []byte{0}},
		{"png", []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")},
		{"zeros", make([]byte, 8192)},
		{"magic without NUL", []byte("SQLite format 3 and then some text that is not a header at all, padded out to a page......")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "state.db")
			if err := os.WriteFile(path, tc.data, 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Open(path)
			if !errors.Is(err, ErrNotDB) {
				t.Fatalf("Open = %v, want ErrNotDB", err)
			}
			if !strings.Contains(err.Error(), path) {
				t.Errorf("error %q does not name the file", err)
			}
			if got := readFile(t, path); !bytes.Equal(got, tc.data) {
				t.Errorf("Open changed the file: %q, was %q", got, tc.data)
			}
			assertOnlyFile(t, dir, "state.db")
		})
	}
}

func TestOpenRefusesForeignSQLite(t *testing.T) {
	for _, tc := range []struct {
		name  string
		stmts []string
		msg   string
	}{
		{name: "other program's tables", stmts: []string{"CREATE TABLE cookies (k TEXT, v TEXT)", "CREATE INDEX ck ON cookies(k)"},
			msg: "application_id 0x0 and schema ck, cookies"},
		{name: "other program's application_id", stmts: []string{"PRAGMA application_id = 42"}, msg: "application_id 0x2a and no tables"},
		{name: "tables and a user_version", stmts: []string{"CREATE TABLE runs (x)", "PRAGMA user_version = 1"}, msg: "schema runs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "other.db")
			rawExec(t, path, tc.stmts...)
			before := readFile(t, path)
			_, err := Open(path)
			if !errors.Is(err, ErrForeign) || !strings.Contains(err.Error(), tc.msg) || !strings.Contains(err.Error(), path) {
				t.Fatalf("Open = %v, want ErrForeign naming the file and saying %q", err, tc.msg)
			}
			if !bytes.Equal(before, readFile(t, path)) {
				t.Error("Open changed a file it refused")
			}
			assertOnlyFile(t, dir, "other.db")
		})
	}
}

// TestOpenConcurrentlyOnNewFile: handles opening one new file at once
// migrate it once and all succeed.
func TestOpenConcurrentlyOnNewFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "new.db")
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			db, err := Open(path)
			if err == nil {
				_, err = db.BeginRun(Run{Command: "run"})
				db.Close()
			}
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	runs, err := openT(t, path).Runs(RunFilter{})
	if err != nil || len(runs) != 4 {
		t.Errorf("Runs = %d runs, %v; want 4", len(runs), err)
	}
}

func TestOpenRefusesDirectory(t *testing.T) {
	_, err := Open(t.TempDir())
	if !errors.Is(err, ErrNotDB) {
		t.Fatalf("Open(dir) = %v, want ErrNotDB", err)
	}
}

// assertOnlyFile checks that dir holds no file but name: no -wal, -shm or
// -journal was left beside a refused file.
func assertOnlyFile(t *testing.T, dir, name string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() != name {
			t.Errorf("Open left %s beside the refused file", e.Name())
		}
	}
}

// validDB writes a database with enough rows to span many pages, closes it
// (checkpointing the WAL) and returns its bytes and page size.
func validDB(t *testing.T, path string) ([]byte, int) {
	t.Helper()
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	id, err := db.BeginRun(Run{Command: "run"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		j := sampleJob(i)
		j.StderrTail = strings.Repeat("frame= 100 fps=25 ", 40)
		if err := db.AddJob(id, j); err != nil {
			t.Fatal(err)
		}
	}
	var pageSize int
	db.db.QueryRow("PRAGMA page_size").Scan(&pageSize)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path + "-wal"); err == nil {
		t.Fatal("Close left a WAL file: the corruption cases below would not test the main file")
	}
	return readFile(t, path), pageSize
}

func TestOpenRefusesCorrupt(t *testing.T) {
	good, ps := validDB(t, filepath.Join(t.TempDir(), "good.db"))
	if len(good) < 20*ps {
		t.Fatalf("valid database is only %d bytes", len(good))
	}
	for _, tc := range []struct {
		name string
		mut  func([]byte) []byte
	}{
		{"truncated to half", func(b []byte) []byte { return b[:len(b)/2] }},
		{"truncated inside page 1", func(b []byte) []byte { return b[:ps/2] }},
		{"header only", func(b []byte) []byte { return b[:100] }},
		{"page 2 overwritten", func(b []byte) []byte {
			copy(b[ps:2*ps], bytes.Repeat([]byte("garbage!"), ps/8))
			return b
		}},
		{"last page zeroed", func(b []byte) []byte {
			clear(b[len(b)-ps:])
			return b
		}},
		{"bad page size", func(b []byte) []byte {
			b[16], b[17] = 0x03, 0x00 // 768: not a power of two
			return b
		}},
		{"freelist count wrong", func(b []byte) []byte {
			b[39] = 5 // header offset 36: total freelist pages
			return b
		}},
		{"schema page torn", func(b []byte) []byte {
			clear(b[100:ps])
			return b
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "results.db")
			data := tc.mut(bytes.Clone(good))
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Open(path)
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrNotDB) {
				t.Fatalf("Open = %v, want ErrCorrupt or ErrNotDB", err)
			}
			if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "left unchanged") {
				t.Errorf("error %q does not name the file or say it was left unchanged", err)
			}
			if !bytes.Equal(readFile(t, path), data) {
				t.Error("Open changed the file it refused")
			}
			assertOnlyFile(t, dir, "results.db")
		})
	}
}

func TestDefaultPath(t *testing.T) {
	for _, tc := range []struct {
		name, db, xdg, home, want string
	}{
		{name: "COREPIN_DB wins", db: "/tmp/x.db", xdg: "/xdg", home: "/home/u", want: "/tmp/x.db"},
		{name: "XDG_DATA_HOME", xdg: "/xdg", home: "/home/u", want: "/xdg/corepin/results.db"},
		{name: "relative XDG_DATA_HOME is ignored", xdg: "rel", home: "/home/u", want: "/home/u/.local/share/corepin/results.db"},
		{name: "home", home: "/home/u", want: "/home/u/.local/share/corepin/results.db"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvDB, tc.db)
			t.Setenv("XDG_DATA_HOME", tc.xdg)
			t.Setenv("HOME", tc.home)
			got, err := DefaultPath()
			if err != nil || got != tc.want {
				t.Errorf("DefaultPath() = %q, %v, want %q", got, err, tc.want)
			}
		})
	}
}

// TestConcurrentFirstOpens: processes that open one new file at the same
// moment (two `corepin run`s sharing the state file) all get it, though
// SQLite answers the switch to WAL with SQLITE_BUSY, without its busy
// handler, while another connection reads the file.
func TestConcurrentFirstOpens(t *testing.T) {
	for round := range 20 {
		path := filepath.Join(t.TempDir(), fmt.Sprintf("state-%d.db", round))
		var wg sync.WaitGroup
		errs := make(chan error, 6)
		for range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				db, err := Open(path)
				if err != nil {
					errs <- err
					return
				}
				errs <- db.Close()
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
	}
}
