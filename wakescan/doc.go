// Package wakescan is the node setting wake_scan: default (change
// nothing) or full, which turns the fair class's SIS_UTIL feature off
// while best-effort (BE) work runs, so that a waking task's idle-CPU scan
// of its L3 is not cut short by the BE work's utilisation
// (kernel/sched/fair.c, select_idle_cpu; Linux >= 6.0), and restores the
// value it found when the last BE user ends.
//
// The feature is switched in the scheduler's features file
// (/sys/kernel/debug/sched/features: debugfs, root only, a kernel with
// CONFIG_SCHED_DEBUG) by writing NO_SIS_UTIL or SIS_UTIL, as
// Koordinator's SystemStrategy.SchedFeatures does. It is machine-wide, so
// every user of it (an agent with BE workloads, each `corepin run --qos
// BE --wake-scan full`, the NRI plugin) holds it through the state file
// they share (store's settings table, key SettingKey), in one JSON
// record: the value found before the first write, the boot it was found
// on, and the holders, each a process identity (pid and start time).
//
// # Crash safety
//
// The record is committed before the first write, and every write of the
// file happens inside a state-file write transaction (BEGIN IMMEDIATE, a
// host-wide lock), so two processes never interleave a read and a write
// of it:
//
//   - Hold: one transaction adds the holder and, if there is no record,
//     reads the file and records its value; it commits; a second
//     transaction writes NO_SIS_UTIL if the file says SIS_UTIL.
//   - Release: one transaction drops the holder and every holder whose
//     process is gone; if none is left it writes the recorded value back,
//     then deletes the record, and commits.
//
// A process killed at any instant leaves either no change of the file or
// a record that undoes it: a killed holder stays in the record until a
// later Release or Recover (a run's, the agent's start or sweep) finds its
// process gone and, if it was the last, restores. A record of an earlier
// boot is dropped without a write: the kernel started with its defaults.
//
// Where the file is absent (debugfs not mounted, no CONFIG_SCHED_DEBUG),
// unreadable or not writable (not root), or the kernel has no SIS_UTIL,
// Probe says so and what to do, and nothing is changed; a malformed file
// is refused the same way.
package wakescan
