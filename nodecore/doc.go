// Package nodecore is the core every door on a node shares: the state
// file (store, SQLite in WAL mode), the allocator over it (alloc.State
// with its pool guard), the one admission (Admit), the guard against
// adopting what corepin already runs, and Node, the owner of the agent's
// enforcement groups with their release and reconcile. The agent (Node,
// behind its HTTP API), the NRI plugin (Containers) and a local `corepin
// run` (StatePlacer, SetUpHost) each admit through it, in the same write
// transaction (BEGIN IMMEDIATE, a host-wide lock), so none hands out a CPU
// another holds. It serves nothing and knows no Kubernetes or NRI type:
// the runtime applies the NRI plugin's answers, a run's driver makes its
// jobs' groups, Node makes the agent's.
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
// # Node: groups, release, reconcile
//
// Node.Create validates a Spec, admits it (Admit), shrinks the LS and BE
// groups if it took CPUs from their pool, makes its group and starts its
// command there (enforce.StartThread: the child is born in the group) or
// moves an existing process or cgroup into it, after the Guard's checks.
// Node.Delete commits the delete (the record's deleting mark), kills the
// group's processes, removes the group, then deletes the assignment: on a
// full disk nothing changes (ErrDiskFull), and a delete committed before
// a crash is finished at the next start. Because every assignment is
// committed before its group exists and outlives it, a crash at any
// instant leaves only states Reconcile repairs: an assignment with no
// group or an empty one (released), a live group with its assignment
// (adopted). A live group without an assignment (the state file was
// replaced) is admitted for the CPUs it holds, so no CPU a live exclusive
// group holds is ever handed out again. Open reconciles once; a running
// agent calls Sweep, which reads only the groups of adopted processes
// (its own children are reaped on SIGCHLD), Refresh, which brings in what
// other processes committed, and CheckOnline. An Observer (the agent's
// metrics) is told of each admission, release and pool change; StartQoS
// hosts package qos's controller over the node's workloads.
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
// with no agent running, start the QoS loop over its jobs. A BE batch with
// HostOptions.WakeScan full holds the wake_scan switch (package wakescan:
// SIS_UTIL off, recorded in the state file first) until Close; the agent
// and the NRI plugin hold it through OpenWakeFollower while they have BE
// work.
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
