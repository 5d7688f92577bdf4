// Package store is corepin's embedded SQLite database, in pure Go
// (modernc.org/sqlite, no cgo). It keeps two kinds of record:
//
//   - results: a row in runs per `corepin run` or `corepin bench`
//     invocation, a row in jobs per finished job, and generic bench
//     measurements, so that every claim about a policy is backed by a run
//     that anyone can export again (`corepin results`);
//   - agent state: the CPU assignment of each admitted workload, so that a
//     node agent restarted at any moment finds every assignment it made.
//
// # Crash safety
//
// The file is opened in WAL journal mode with synchronous=FULL, and every
// write is one SQLite transaction: AddJob commits each job on its own, so a
// run killed halfway keeps the jobs that finished; Admit reads the current
// assignments, decides and inserts inside one BEGIN IMMEDIATE transaction,
// so two agents on one file can't hand out the same CPUs. A process killed
// at any instant leaves either the whole transaction or none of it
// (https://www.sqlite.org/atomiccommit.html, https://www.sqlite.org/wal.html).
//
// # Broken files
//
// Open checks a file before it changes anything in it. A file that does not
// start with the SQLite header is refused with ErrNotDB without SQLite ever
// opening it; one that fails `PRAGMA quick_check` is refused with
// ErrCorrupt; a SQLite database of another program (tables, but not
// corepin's PRAGMA application_id) is refused with ErrForeign; one whose
// schema version (PRAGMA user_version) is newer than this binary knows is
// refused with ErrTooNew. In every case the main file
// is left byte for byte as it was: no table is created, nothing is
// truncated, the journal mode is not switched.
//
// # Schema
//
// The schema is versioned by PRAGMA user_version. Migrations are an ordered
// list of SQL scripts; Open applies the ones a file lacks, together with the
// new user_version, in one transaction, so a file is never left half
// migrated. A released migration is never edited, only followed by a new one.
//
// The store does no I/O besides its own file: callers pass the kernel
// release, host name and topology they want recorded, and the package never
// speaks HTTP or parses CPU sets (they are kept as strings in Linux list
// format, see cpuset(7)).
package store
