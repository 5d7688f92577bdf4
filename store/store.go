package store

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"modernc.org/sqlite"
)

// Sentinel errors of Open. Match them with errors.Is.
var (
	// ErrNotDB means the file is not a SQLite database at all.
	ErrNotDB = errors.New("not a SQLite database")
	// ErrCorrupt means the file is a SQLite database that fails PRAGMA
	// quick_check (truncated, overwritten, torn).
	ErrCorrupt = errors.New("database is corrupt")
	// ErrForeign means the file is a SQLite database of another
	// application: it has tables but not corepin's application_id.
	ErrForeign = errors.New("not a corepin database")
	// ErrTooNew means the file's schema version is newer than this binary
	// knows: it was written by a later corepin.
	ErrTooNew = errors.New("database schema is newer than this corepin knows")
	// ErrExists means an assignment of that name is already admitted.
	ErrExists = errors.New("already exists")
	// ErrNotFound means no row has the given key.
	ErrNotFound = errors.New("not found")
	// ErrPlace means a database path is somewhere a database must not
	// be: on a cgroup, sysfs, procfs or other kernel file system (where
	// creating a directory creates a cgroup), or in a directory that does
	// not exist, other than the default one.
	ErrPlace = errors.New("not a place for a database")
	// ErrReadOnly means a read-only database needs a write first (a
	// schema upgrade).
	ErrReadOnly = errors.New("database needs a write")
)

// EnvDB names the environment variable that overrides DefaultPath.
const EnvDB = "COREPIN_DB"

// sqliteMagic is the first 16 bytes of every SQLite 3 database file
// (https://www.sqlite.org/fileformat.html#the_database_header).
var sqliteMagic = []byte("SQLite format 3\x00")

// SQLite primary result codes that mean "this file is not a usable database"
// (https://www.sqlite.org/rescode.html).
const (
	sqliteBusy    = 5
	sqliteFull    = 13
	sqliteCorrupt = 11
	sqliteNotADB  = 26
)

// busyTimeout is how long a writer waits for another process's lock.
const busyTimeout = 10 * time.Second

// DB is an open corepin database. Its methods are safe for concurrent use;
// they share one connection, so each call runs after the previous one.
type DB struct {
	db   *sql.DB
	path string

	// fsync is (*os.File).Sync (tests count its calls); logMu guards
	// logIno, the inode of the write-ahead log whose directory entry
	// syncLog has made durable.
	fsync  func(*os.File) error
	logMu  sync.Mutex
	logIno uint64

	// ckpt checkpoints the log in the background (nil on a read-only
	// database).
	ckpt *checkpointer
}

// DefaultPath returns where corepin keeps results when no --db is given:
// $COREPIN_DB if set, else $XDG_DATA_HOME/corepin/results.db (an absolute
// XDG_DATA_HOME only, as the XDG base directory spec says), else
// ~/.local/share/corepin/results.db. It does not create anything.
func DefaultPath() (string, error) {
	if p := os.Getenv(EnvDB); p != "" {
		return p, nil
	}
	dir, err := defaultDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "results.db"), nil
}

// defaultDir is corepin's own data directory, the only one Open creates:
// $XDG_DATA_HOME/corepin or ~/.local/share/corepin.
func defaultDir() (string, error) {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "corepin"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("finding the default database: %w", err)
	}
	return filepath.Join(home, ".local", "share", "corepin"), nil
}

// Open opens the database at path, creating it if it does not exist, and
// brings its schema up to date. It creates the directory only when it is
// corepin's default data directory; a path on a kernel file system
// (cgroupfs, sysfs, procfs, ...) or in a missing directory is ErrPlace. A file that is not a
// SQLite database (ErrNotDB), fails quick_check (ErrCorrupt) or has a newer
// schema (ErrTooNew) is refused and left unchanged.
func Open(path string) (*DB, error) {
	if path == "" {
		return nil, fmt.Errorf("opening database: empty path")
	}
	if err := checkFile(path); err != nil {
		return nil, err
	}
	q := url.Values{}
	q.Set("_foreign_keys", "1")
	// NORMAL: a commit is not synced to disk, except results' (syncLog);
	// see "Crash safety" in doc.go.
	q.Set("_synchronous", "NORMAL")
	q.Set("_txlock", "immediate")
	// A commit checkpoints the log only past autoCheckpointPages: the
	// background checkpointer (checkpointEvery) keeps it far below.
	q.Add("_pragma", fmt.Sprintf("wal_autocheckpoint(%d)", autoCheckpointPages))
	// No _journal_mode here: switching to WAL writes the file header, which
	// must wait until the file has passed its checks.
	db, err := openDSN(path, q, (*DB).init)
	if err != nil {
		return nil, err
	}
	if db.ckpt, err = startCheckpointer(db.dsn(q)); err != nil {
		db.db.Close()
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	return db, nil
}

// openDSN opens path with the driver parameters q (plus the busy timeout)
// on one connection (SQLite serialises writers anyway, and per-connection
// pragmas then hold for every statement), and runs check before handing
// the database out.
func openDSN(path string, q url.Values, check func(*DB) error) (*DB, error) {
	q.Set("_busy_timeout", fmt.Sprint(busyTimeout.Milliseconds()))
	db := &DB{path: path, fsync: (*os.File).Sync}
	sdb, err := sql.Open("sqlite", db.dsn(q))
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	sdb.SetMaxOpenConns(1)
	db.db = sdb
	if err := check(db); err != nil {
		sdb.Close()
		return nil, err
	}
	return db, nil
}

// dsn is the driver's name for db's file with the parameters q.
func (db *DB) dsn(q url.Values) string {
	return "file:" + (&url.URL{Path: db.path}).EscapedPath() + "?" + q.Encode()
}

// checkFile refuses, without opening it with SQLite, a path that is a
// directory or a non-empty file without the SQLite header. A missing path
// gets its directory created.
func checkFile(path string) error {
	if err := checkPlace(path); err != nil {
		return err
	}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		dir := filepath.Dir(path)
		if _, err := os.Stat(dir); err == nil {
			return nil
		}
		if def, derr := defaultDir(); derr != nil || filepath.Clean(dir) != def {
			return fmt.Errorf("opening %s: %w: directory %s does not exist; create it first", path, ErrPlace, dir)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("creating the database directory: %w", err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("opening database: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("opening database: %w", err)
	}
	if st.IsDir() {
		return fmt.Errorf("opening %s: %w: it is a directory", path, ErrNotDB)
	}
	if st.Size() == 0 {
		return nil // SQLite treats an empty file as an empty database
	}
	head := make([]byte, len(sqliteMagic))
	if _, err := io.ReadFull(f, head); err != nil || !bytes.Equal(head, sqliteMagic) {
		return fmt.Errorf("opening %s: %w (no SQLite header); the file was left unchanged", path, ErrNotDB)
	}
	return nil
}

// init checks the file's integrity and schema version, then switches it to
// WAL and migrates it. Nothing is written before both checks pass.
//
// Two processes opening one file for the first time at once (two `corepin
// run`s sharing the state file) meet SQLITE_BUSY where SQLite does not call
// its busy handler: the switch to WAL needs the file to itself, and a
// reader of the other process may hold it. Every step of init is a read or
// one transaction, so it is tried again, with backoff, until busyTimeout.
func (db *DB) init() error {
	deadline := time.Now().Add(busyTimeout)
	for delay := 2 * time.Millisecond; ; delay = min(2*delay, 100*time.Millisecond) {
		err := db.initOnce()
		if err == nil || !isBusy(err) || time.Now().Add(delay).After(deadline) {
			return err
		}
		time.Sleep(delay)
	}
}

// IsFull reports whether err means the database's disk is full (SQLite's
// SQLITE_FULL, or ENOSPC): the write changed nothing, and may succeed once
// space is freed.
func IsFull(err error) bool {
	var se *sqlite.Error
	return errors.Is(err, syscall.ENOSPC) || (errors.As(err, &se) && se.Code()&0xff == sqliteFull)
}

// isBusy reports whether err is SQLite's SQLITE_BUSY (any extended code).
func isBusy(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqliteBusy
}

func (db *DB) initOnce() error {
	var res []string
	rows, err := db.db.Query("PRAGMA quick_check(5)")
	if err == nil {
		for rows.Next() {
			var s string
			if err = rows.Scan(&s); err != nil {
				break
			}
			res = append(res, strings.Join(strings.Fields(s), " "))
		}
		if err == nil {
			err = rows.Err()
		}
		rows.Close()
	}
	if err != nil {
		return db.classify("checking", err)
	}
	if len(res) != 1 || res[0] != "ok" {
		return fmt.Errorf("opening %s: %w: quick_check: %s; the file was left unchanged", db.path, ErrCorrupt, strings.Join(res, "; "))
	}
	if err := db.checkOwner(); err != nil {
		return err
	}
	v, err := db.userVersion()
	if err != nil {
		return db.classify("reading the schema version of", err)
	}
	if v > len(migrations) {
		return fmt.Errorf("opening %s: %w: schema version %d, this corepin knows up to %d; use a newer corepin (the file was left unchanged)", db.path, ErrTooNew, v, len(migrations))
	}
	var mode string
	if err := db.db.QueryRow("PRAGMA journal_mode=WAL").Scan(&mode); err != nil {
		return db.classify("setting WAL mode on", err)
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("setting WAL mode on %s: journal mode is still %q", db.path, mode)
	}
	return db.migrate()
}

// applicationID marks a file as corepin's in its header (PRAGMA
// application_id, https://www.sqlite.org/fileformat.html#application_id):
// "core" in ASCII.
const applicationID = 0x636f7265

// checkOwner refuses a SQLite database that is neither corepin's nor empty,
// so Open never adds its tables to another program's file. The id and the
// schema are read in one read transaction: another process migrating the
// new file meanwhile (tables and id in one commit) is seen wholly or not
// at all, never as tables without the id.
func (db *DB) checkOwner() error {
	tx, err := db.db.BeginTx(context.Background(), &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return db.classify("reading the application id of", err)
	}
	defer tx.Rollback() // read only: nothing to keep
	var app int64
	if err := tx.QueryRow("PRAGMA application_id").Scan(&app); err != nil {
		return db.classify("reading the application id of", err)
	}
	if app == applicationID {
		return nil
	}
	var names []string
	rows, err := tx.Query(`SELECT name FROM sqlite_schema ORDER BY name LIMIT 4`)
	if err != nil {
		return db.classify("reading the schema of", err)
	}
	defer rows.Close()
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return db.classify("reading the schema of", err)
		}
		names = append(names, n)
	}
	if err := rows.Err(); err != nil {
		return db.classify("reading the schema of", err)
	}
	if app == 0 && len(names) == 0 {
		return nil // a new database: ours to set up
	}
	what := "no tables"
	if len(names) > 0 {
		what = "schema " + strings.Join(names, ", ")
		if len(names) == 4 {
			what += ", ..."
		}
	}
	return fmt.Errorf("opening %s: %w: a SQLite database with application_id %#x and %s; the file was left unchanged", db.path, ErrForeign, app, what)
}

// classify turns SQLite's "not a database" and "corrupt" result codes into
// the package's sentinels, naming the file.
func (db *DB) classify(doing string, err error) error {
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqliteNotADB:
			return fmt.Errorf("opening %s: %w (%v); the file was left unchanged", db.path, ErrNotDB, err)
		case sqliteCorrupt:
			return fmt.Errorf("opening %s: %w (%v); the file was left unchanged", db.path, ErrCorrupt, err)
		}
	}
	return fmt.Errorf("%s %s: %w", doing, db.path, err)
}

func (db *DB) userVersion() (int, error) {
	var v int
	err := db.db.QueryRow("PRAGMA user_version").Scan(&v)
	return v, err
}

// Path returns the file the database was opened from.
func (db *DB) Path() string { return db.path }

// Close closes the database. On the last connection SQLite checkpoints the
// WAL into the main file.
func (db *DB) Close() error {
	if db.ckpt != nil {
		db.ckpt.stop()
	}
	if err := db.db.Close(); err != nil {
		return fmt.Errorf("closing %s: %w", db.path, err)
	}
	return nil
}

// tx runs f in one BEGIN IMMEDIATE transaction, committing if f returns nil.
func (db *DB) tx(f func(*sql.Tx) error) error {
	tx, err := db.db.Begin()
	if err != nil {
		return fmt.Errorf("beginning a transaction: %w", err)
	}
	if err := f(tx); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("committing: %w", err)
	}
	db.committed()
	return nil
}

// committed counts a commit towards the next background checkpoint.
func (db *DB) committed() {
	if db.ckpt != nil {
		db.ckpt.committed()
	}
}

// durableTx is tx for results, which must survive a power loss as well as
// a killed process: it syncs the log after the commit (syncLog).
func (db *DB) durableTx(f func(*sql.Tx) error) error {
	if err := db.tx(f); err != nil {
		return err
	}
	return db.syncLog()
}

// durableExec runs one results statement, its own transaction, and syncs
// the log after it (syncLog).
func (db *DB) durableExec(query string, args ...any) (sql.Result, error) {
	res, err := db.db.Exec(query, args...)
	if err != nil {
		return nil, err
	}
	db.committed()
	return res, db.syncLog()
}

// syncLog makes every transaction committed so far survive a power loss,
// as synchronous=FULL does at each commit: it fsyncs the write-ahead log
// and, the first time it meets a log file (a new inode: SQLite deletes the
// log when its last connection closes), the log's directory, as SQLite
// does for a log it creates. A failed sync leaves the transaction
// committed (readers see it) but perhaps not on disk; the error says so
// and does not wrap the errno, so that ENOSPC from the sync does not read
// as a write that changed nothing (IsFull).
func (db *DB) syncLog() error {
	f, err := os.Open(db.path + "-wal")
	if err != nil {
		return fmt.Errorf("committed, but not synced to disk: %v", err)
	}
	defer f.Close()
	if err := db.fsync(f); err != nil {
		return fmt.Errorf("committed, but not synced to disk: %v", err)
	}
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("committed, but not synced to disk: %v", err)
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("committed, but not synced to disk: no inode for %s", f.Name())
	}
	db.logMu.Lock()
	defer db.logMu.Unlock()
	if sys.Ino == db.logIno {
		return nil
	}
	d, err := os.Open(filepath.Dir(db.path))
	if err != nil {
		return fmt.Errorf("committed, but not synced to disk: %v", err)
	}
	defer d.Close()
	if err := db.fsync(d); err != nil {
		return fmt.Errorf("committed, but not synced to disk: %v", err)
	}
	db.logIno = sys.Ino
	return nil
}

// Times are stored as TEXT in UTC, RFC 3339 with nanoseconds, so that they
// sort as text and read well in the sqlite3 shell.
const timeLayout = "2006-01-02T15:04:05.000000000Z07:00"

// timeArg converts t for binding: the zero time is NULL.
func timeArg(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format(timeLayout)
}

// parseTime reads a time column; NULL is the zero time.
func parseTime(s sql.NullString) (time.Time, error) {
	if !s.Valid {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s.String)
	if err != nil {
		return time.Time{}, fmt.Errorf("parsing time %q: %w", s.String, err)
	}
	return t, nil
}

// OpenReadOnly opens an existing database for reading only: it writes
// nothing (no WAL switch, no migration, no journal), so it works on a file
// the caller may only read, in a directory the caller may not write. Where
// SQLite cannot open the file's WAL read-only (no -shm file and no right to
// make one), it reads the file as immutable: a writer running meanwhile is
// not seen. A database older than the results readers need (minReadable)
// is ErrReadOnly; one between that and SchemaVersion is read as it is.
func OpenReadOnly(path string) (*DB, error) {
	if path == "" {
		return nil, fmt.Errorf("opening database: empty path")
	}
	if err := checkPlace(path); err != nil {
		return nil, err
	}
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("opening database: %w", err)
	}
	if err := checkFile(path); err != nil {
		return nil, err
	}
	var lastErr error
	for _, extra := range []string{"mode=ro", "immutable=1"} {
		db, err := openRO(path, extra)
		if err == nil {
			return db, nil
		}
		if errors.Is(err, ErrNotDB) || errors.Is(err, ErrCorrupt) || errors.Is(err, ErrForeign) ||
			errors.Is(err, ErrTooNew) || errors.Is(err, ErrReadOnly) {
			return nil, err
		}
		lastErr = err
	}
	return nil, lastErr
}

func openRO(path, mode string) (*DB, error) {
	q := url.Values{}
	k, v, _ := strings.Cut(mode, "=")
	q.Set(k, v)
	q.Add("_pragma", "query_only(1)")
	return openDSN(path, q, (*DB).checkReadable)
}

// checkReadable is init without writes: the file must be corepin's, at
// the schema version this binary reads.
func (db *DB) checkReadable() error {
	if err := db.checkOwner(); err != nil {
		return err
	}
	v, err := db.userVersion()
	if err != nil {
		return db.classify("reading the schema version of", err)
	}
	switch {
	case v > len(migrations):
		return fmt.Errorf("opening %s: %w: schema version %d, this corepin knows up to %d; use a newer corepin", db.path, ErrTooNew, v, len(migrations))
	case v < minReadable:
		return fmt.Errorf("opening %s read-only: %w: schema version %d needs an upgrade to %d; run corepin once with write access to it", db.path, ErrReadOnly, v, len(migrations))
	}
	return nil
}
