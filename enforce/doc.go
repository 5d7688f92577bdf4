// Package enforce applies corepin's decisions to processes: it puts them in
// groups whose CPUs, memory nodes, CFS bandwidth (quota, period, burst),
// weight and idleness it sets, and reads back their CPU accounting. It does
// not choose CPUs; package alloc does.
//
// # Drivers
//
// A Driver is one mechanism behind a small interface (Create, Cleanup,
// Limitations); a Group is one group in it (Update, AddProc, Stats,
// Remove). Detect picks, once at start:
//
//   - cgroup v2 (NewV2), on a unified hierarchy whose parent offers the
//     cpuset and cpu controllers. corepin enables them with
//     cgroup.subtree_control in the parent and in its own root, and never
//     puts a process in an inner node ("no internal processes").
//     https://docs.kernel.org/admin-guide/cgroup-v2.html
//   - cgroup v1 (NewV1), with cpuset and cpu hierarchies, and cpuacct for
//     usage, mounted apart or together. A new v1 cpuset has empty
//     cpuset.cpus and cpuset.mems, and no task may join it until both are
//     set, so corepin's root copies its parent's and every group writes
//     both before any task joins.
//     https://docs.kernel.org/admin-guide/cgroup-v1/cpusets.html,
//     https://docs.kernel.org/scheduler/sched-bwc.html
//   - affinity-only (NewAffinity), where no cgroup is writable:
//     sched_setaffinity(2) and sched_setattr(2) (nice, SCHED_IDLE) on every
//     thread. It cannot enforce a quota, memory nodes or a group weight;
//     Limitations says so, and Create refuses a Resources value it cannot
//     honour with ErrNotSupported instead of ignoring part of it. A nice
//     this process may not give (lowering one needs CAP_SYS_NICE or
//     RLIMIT_NICE, sched(7); ProbeNice) is not such a value: threads keep
//     the lowest nice allowed, the caller's at most, and Limitations says
//     so once (issue 17 §2).
//
// # Settings as data
//
// A Resources value becomes an ordered list of Write{File, Value} before any
// I/O, one list per cgroup version. The order is the kernel's: cpuset.cpus
// and cpuset.mems before a task joins; the burst reset to 0 before the
// quota (the kernel refuses a quota below the current burst); cpu.idle=0
// before a weight (the kernel refuses a weight on an idle group). A file
// the kernel lacks (cpu.max.burst before 5.14, cpu.idle before 5.15) is
// left out when not needed and is ErrNotSupported when it is, except idle,
// which falls back to the lowest weight and says so in Limitations.
//
// # Names and roots
//
// Every group lives in corepin's root group ("corepin", see WithRoot), in
// a directory "run-<pid>-<start>-<name>" naming the owning corepin process
// by pid and start time (so a reused pid is not mistaken for the owner).
// Names are checked by ValidateName (letters, digits, '-', '_', '.'; no
// ".."; at most 64 bytes), and every path is opened through os.Root on the
// hierarchy's mount point, so nothing is read or written outside it.
//
// # Crash cleanup
//
// Driver.Cleanup, called right after Detect, removes the groups whose owner
// has died. It only calls rmdir(2): a stale group that still holds
// processes (orphaned jobs of the crashed run) is kept and reported, never
// killed, because corepin cannot tell whether an operator still wants them.
//
// # Starting a process inside a group
//
// Start(g, cmd) starts cmd so that it runs none of its own code outside g.
// On cgroup v2 the kernel creates the child in the group (clone3 with
// CLONE_INTO_CGROUP, Linux 5.7). Elsewhere the child starts as a shim: the
// running executable re-executed, which blocks on a pipe until Start has
// added its pid to the group (or, for the affinity driver, set every
// thread's affinity and policy), then execs the real program in place.
// Start returns once that exec has succeeded, or its error. The shim runs
// with an environment of its own (GOMAXPROCS=1 and nothing else) and gets
// the command's environment on the pipe, so nothing a job sets can size or
// break the shim; it is recognised by its argv[0] and two pipe descriptors,
// never by a variable. StartContext kills a shim that has not exec'd when
// its context ends. The binary must call ShimMain first thing in main:
//
//	func main() {
//		enforce.ShimMain() // returns at once unless started as a shim
//		...
//	}
//
//	d, err := enforce.Detect()
//	...
//	if removed, err := d.Cleanup(); err != nil { log it }
//	g, err := d.Create("job-3", enforce.Resources{CPUs: set, Quota: 200 * time.Millisecond})
//	cmd := exec.Command("ffmpeg", args...)
//	if err := enforce.Start(g, cmd); err != nil { ... }
//	err = cmd.Wait()
//	st, _ := g.Stats()
//	g.Remove()
//
// Groups of the cgroup drivers also list their processes (ProcLister), kill
// them all (Killer: cgroup.kill on v2, SIGKILL passes on v1) and show their
// control files to measure (ControlFiler). Package proc builds on these to
// start and stop a process cleanly; most callers want proc, not Start.
//
// Tests use the test binary as the shim by calling ShimMain in TestMain.
//
// # Idle parents in a mount corepin does not own
//
// IdleParents is enforce's writer for the NRI plugin's idle parent
// (kube/nri decides where it lies and when; enforce writes): a group of
// the caller's name, one level below a group someone else keeps (the
// kubelet's kubepods), made idle with cpu.idle 1 (Linux 5.15, read back;
// ErrNoCPUIdle without it) so the groups the runtime creates below it
// meet their siblings as one idle entity. On cgroup v1 its cpuset group
// gets its parent's CPUs and memory nodes where empty, as corepin's own
// root does. It never makes more than that one level, writes nothing to
// the group above, and removes only pod<uid> groups below, by rmdir(2).
// The mount is opened through os.Root like every hierarchy here.
package enforce
