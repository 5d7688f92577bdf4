// Package irq steers movable device interrupts off the CPUs of exclusive
// (LSE, LSR) workloads while they run, and gives the affinities back when
// the CPUs are released: `corepin run --irq-isolate`, the agent's
// irq_isolate field.
//
// An interrupt's affinity is /proc/irq/N/smp_affinity_list (proc(5),
// Documentation/core-api/irq/irq-affinity.rst); the CPUs it is delivered
// to now are effective_affinity_list beside it (Linux >= 4.15). A holder
// asks for a set of CPUs to be kept clear: each movable interrupt whose
// affinity meets the union of what all holders ask for gets its affinity
// minus that union. An interrupt whose affinity holds nothing else is left
// as it is (its affinity would be empty), and one whose write the kernel
// refuses (EIO for per-CPU and managed interrupts, EINVAL) is skipped;
// both are reported, nothing is retried.
//
// # Crash safety
//
// Every user of the machine's interrupts (an agent, each `corepin run`)
// shares one record in the state file (store's settings table, key
// SettingKey), as package wakescan does for SIS_UTIL: the boot it was made
// on, the affinity found before corepin's first write to each interrupt
// it changed, and the holders, each a process identity (pid and start
// time) with the CPUs it keeps clear. The record naming an interrupt's
// prior affinity is committed before that interrupt is written, and every
// write happens inside a state-file write transaction (BEGIN IMMEDIATE, a
// host-wide lock):
//
//   - Hold: one transaction adds the holder and records the affinity of
//     every interrupt about to change; it commits; a second transaction
//     writes the new affinities and forgets the interrupts left as found.
//   - Release: one transaction drops the holder and every holder whose
//     process is gone, writes each interrupt's prior affinity minus what
//     the holders left still keep clear, and forgets the interrupts so
//     restored.
//
// A process killed at any instant leaves either no change or a record
// that undoes it: the next Hold, Release or Recover of any holder finds
// its process gone and restores. A record of an earlier boot is dropped
// without a write.
//
// # irqbalance
//
// irqbalance moves interrupts every 10 s and would move them back. corepin
// never edits irqbalance's own configuration nor restarts it: it writes
// the CPUs its holders keep clear into a file of its own (BannedFile,
// IRQBALANCE_BANNED_CPULIST and IRQBALANCE_BANNED_CPUS, the variables
// irqbalance reads from its environment), and where irqbalance runs it
// says so, once, with what to do (the file as an EnvironmentFile of
// irqbalance's unit, then restart irqbalance). See docs/reference/irq.md.
package irq
