// Package nodecore is the core every door on a node shares: the state
// file (store, SQLite in WAL mode), the allocator over it (alloc.State
// with its pool guard), the one admission (Admit) and the guard against
// adopting what corepin already runs. The agent (its HTTP API and its own
// groups), the NRI plugin (Containers) and a local `corepin run`
// (StatePlacer) each admit through it, in the same write transaction
// (BEGIN IMMEDIATE, a host-wide lock), so none hands out a CPU another
// holds. It writes no cgroup and serves nothing: the agent makes its
// groups, the runtime applies the NRI plugin's answers, a run's driver
// makes its jobs' groups.
//
// # Admission
//
// Admit takes a Record (a Spec, the request as a door decoded it, plus
// who holds it) and keeps it typed to the end: Request puts the node's
// settings on it (alloc.NodeSettings.Apply: the default topology policy;
// the kubelet engine refuses bind, exclusive and NUMA strategies, as
// alloc does), the allocator places it on the assignments read inside
// the transaction, alloc.State.GuardPools refuses an exclusive placement
// that would starve the shared pools, and the store commits the record
// with its cpuset. Admission returns the placement and the state as
// decided; nothing is read back from the file. The state file's request
// documents and cpuset strings are read in one place (DecodeAssignment).
//
// # Sharing a state file
//
// The agent and the NRI plugin record their node settings in the file
// when they open it (SharedConfig: reserved CPUs, policy, options,
// topology policy; the newest writer's wins, nothing assigned moves), and
// a run places with them, so it never takes a CPU the agent reserves. A
// run's reservations name their owner process (Owner): when it dies, they
// are released (ReleaseDeadRuns), by the next run that opens the file or
// by the agent's next sweep, once the job's group has no process left.
//
// # Host set-up of a batch
//
// SetUpHost is what `corepin run` and `corepin bench` do to this machine
// before their jobs: detect the driver (a BE batch's under BERunRoot,
// that root made idle), remove the groups of crashed runs, open the
// shared placer on the state file, and, for a BE batch that asks and
// with no agent running, start the QoS loop over its jobs.
//
// # Adoption guard
//
// Guard refuses to adopt a cgroup in or above a corepin root (the
// agent's, enforce.DefaultRoot of runs, BERunRoot of best-effort runs) or
// holding this process (ErrInvalid), a cgroup another workload adopted,
// in it or above it, or a process in any of those (ErrTaken), and a pid
// of one of this process's threads, a zombie, a kernel thread or a thread
// other than its process's leader (ErrInvalid). /proc/PID/status, stat
// and cgroup are read, each bounded.
//
// # Errors
//
// ErrInvalid: the request is wrong as written. ErrExists and ErrRejected:
// the node can not admit it now; a Rejection from alloc says which
// constraint refused it. ErrTaken: what it would adopt is another
// workload's. ErrNotFound. ErrDiskFull: the state file's disk is full;
// nothing changed.
package nodecore
