package store

import (
	"database/sql"
	"fmt"
)

// migrations[i] takes a file from schema version i to i+1. Append only:
// a released migration is never edited, since files in the field already
// carry its result. Tables are STRICT, so a value of the wrong type is an
// error rather than silently stored.
var migrations = []string{
	// 1: results (runs, jobs, measurements) and agent state (assignments).
	`
CREATE TABLE runs (
	id               INTEGER PRIMARY KEY AUTOINCREMENT,
	started_at       TEXT NOT NULL,
	finished_at      TEXT,
	command          TEXT NOT NULL,
	params           TEXT CHECK (params IS NULL OR json_valid(params)),
	corepin_version  TEXT NOT NULL DEFAULT '',
	kernel           TEXT NOT NULL DEFAULT '',
	hostname         TEXT NOT NULL DEFAULT '',
	topology_summary TEXT NOT NULL DEFAULT '',
	topology         TEXT CHECK (topology IS NULL OR json_valid(topology))
) STRICT;

CREATE TABLE jobs (
	run_id            INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
	job               INTEGER NOT NULL,
	cmd               TEXT NOT NULL,
	mode              TEXT NOT NULL,
	qos               TEXT NOT NULL,
	cpus              REAL NOT NULL,
	threads           INTEGER NOT NULL,
	cpuset            TEXT NOT NULL,
	wall_s            REAL NOT NULL,
	user_s            REAL NOT NULL,
	sys_s             REAL NOT NULL,
	max_rss_kb        INTEGER NOT NULL,
	cpus_used         TEXT NOT NULL,
	migrations        INTEGER NOT NULL,
	ctx_switches      INTEGER NOT NULL,
	run_delay_s       REAL NOT NULL,
	throttled_periods INTEGER NOT NULL,
	throttled_s       REAL NOT NULL,
	nr_periods        INTEGER NOT NULL,
	exit_code         INTEGER NOT NULL,
	signal            TEXT NOT NULL,
	stderr_tail       TEXT NOT NULL,
	frames_per_s      REAL,
	ops_per_s         REAL,
	started_at        TEXT,
	finished_at       TEXT,
	extra             TEXT CHECK (extra IS NULL OR json_valid(extra)),
	PRIMARY KEY (run_id, job)
) STRICT;

CREATE TABLE measurements (
	id           INTEGER PRIMARY KEY,
	run_id       INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
	experiment   TEXT NOT NULL,
	point        TEXT CHECK (point IS NULL OR json_valid(point)),
	metric       TEXT NOT NULL,
	value        REAL NOT NULL,
	repeat_index INTEGER NOT NULL
) STRICT;
CREATE INDEX measurements_by_run ON measurements(run_id, experiment, metric);

CREATE TABLE assignments (
	name       TEXT PRIMARY KEY,
	cpuset     TEXT NOT NULL,
	qos        TEXT NOT NULL,
	request    TEXT CHECK (request IS NULL OR json_valid(request)),
	created_at TEXT NOT NULL,
	generation INTEGER NOT NULL CHECK (generation > 0)
) STRICT;
`,
	// 2: who runs a run (its corepin process: measure.Identity), and when a
	// later corepin found that process gone before the run finished.
	`
ALTER TABLE runs ADD COLUMN owner TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN interrupted_at TEXT;
`,
	// 3: settings every process sharing a state file must agree on (the
	// agent's allocator configuration), one JSON document per key.
	`
CREATE TABLE settings (
	key        TEXT PRIMARY KEY,
	value      TEXT NOT NULL CHECK (json_valid(value)),
	updated_at TEXT NOT NULL
) STRICT;
`,
}

// minReadable is the oldest schema version whose results this binary
// reads without migrating it (OpenReadOnly): every results table and column
// the readers query exists from it on. Migration 3 added only the settings
// of processes sharing a state file, which readers of results never touch.
// Raise it when a migration adds something the readers query.
const minReadable = 2

// SchemaVersion is the schema version this binary writes (PRAGMA
// user_version); Open refuses files with a higher one.
const SchemaVersion = 3

func init() {
	if len(migrations) != SchemaVersion {
		panic("store: SchemaVersion does not match the migrations")
	}
}

// migrate applies the migrations the file lacks and sets user_version, all
// in one transaction. The version is read again inside the transaction, so
// two processes opening a new file at once migrate it once.
func (db *DB) migrate() error {
	return db.tx(func(tx *sql.Tx) error {
		var v int
		if err := tx.QueryRow("PRAGMA user_version").Scan(&v); err != nil {
			return fmt.Errorf("reading the schema version: %w", err)
		}
		if v > len(migrations) {
			return fmt.Errorf("opening %s: %w: schema version %d, this corepin knows up to %d", db.path, ErrTooNew, v, len(migrations))
		}
		for i := v; i < len(migrations); i++ {
			if _, err := tx.Exec(migrations[i]); err != nil {
				return fmt.Errorf("migrating %s to schema version %d: %w", db.path, i+1, err)
			}
		}
		if v == len(migrations) {
			return nil
		}
		// PRAGMA takes no bound parameters; the values are our own integers.
		// Both are header fields, written with the transaction.
		if _, err := tx.Exec(fmt.Sprintf("PRAGMA application_id = %d", applicationID)); err != nil {
			return fmt.Errorf("setting the application id: %w", err)
		}
		if _, err := tx.Exec(fmt.Sprintf("PRAGMA user_version = %d", len(migrations))); err != nil {
			return fmt.Errorf("setting the schema version: %w", err)
		}
		return nil
	})
}
