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
// The file is opened in WAL journal mode with synchronous=NORMAL, and every
// write is one SQLite transaction: AddJob commits each job on its own, so a
// run killed halfway keeps the jobs that finished; Admit reads the current
// assignments, decides and inserts inside one BEGIN IMMEDIATE transaction,
// so two agents on one file can't hand out the same CPUs. A process killed
// at any instant leaves either the whole transaction or none of it, and
// keeps every transaction committed before: a commit is in the log file
// (the kernel's page cache) when it returns, and the next open replays the
// log, whatever the synchronous setting
// (https://www.sqlite.org/atomiccommit.html, https://www.sqlite.org/wal.html).
//
// A power loss or a kernel crash is different: under NORMAL SQLite syncs
// the log only before a checkpoint, so such a loss may roll the file back
// to an earlier state, always a whole one (a prefix of the commits; never
// a torn or mixed one). Results must survive it, as under synchronous=FULL:
// their writes (BeginRun, AddJob, AddMeasurement, FinishRun,
// MarkInterrupted) fsync the log after their commit (and, once per log
// file, its directory), which also makes every earlier commit durable.
// Assignments do not pay that fsync (about 0.2 ms p50 and 10-20 ms p99 of
// an admission on a loaded machine): every assignment names something
// running on this boot (a process, a group, a container, a run), which a
// power loss or kernel crash ends; the next start's reconcile releases
// each assignment whose group, process or container is gone, so the
// assignments a rollback brings back or drops concern nothing that still
// runs, and since the file rolls back to a whole earlier state, no two of
// its assignments share a CPU. The exception is an adopted cgroup
// (Spec.Cgroup) that the service manager makes again at boot: a rollback
// can undo its adoption or its release, as if the last requests had not
// been made; it can not double-assign it.
//
// Checkpoints (copying the log into the main file, with an fsync of each)
// run in the background, on a connection of their own, every 32 commits
// (checkpoint.go); a commit runs one itself only once the log holds 10000
// pages (the background fallen that far behind). SQLite would otherwise run one inside every
// commit that takes the log past 1000 pages, and an admission landing on
// it would wait for both fsyncs. A checkpoint only moves what is
// committed, so none of the above depends on where it runs.
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
