// Package agent is corepin's node agent, a front door on the node core
// (package nodecore: the state file, the allocator over it, the one
// admission and the adoption guard, which the NRI plugin and local runs
// share). It is a library first. Node holds the state file and makes,
// adopts and reconciles the agent's own enforcement groups (enforce);
// Server is a thin HTTP/JSON front door over a Node; Client is what
// `corepin ctl` and `corepin topo` use; Run is the daemon.
//
// # Admission, release, reconcile
//
// Node.Create validates a Spec, admits it (nodecore.Admit: alloc places
// it on the assignments read inside the store's write transaction, the
// pool guard checks it, the store commits it), shrinks
// the LS and BE groups if it took CPUs from their pool, makes its group
// and starts its command there (enforce.StartThread: the child is born in
// the group) or moves an existing process or cgroup into it. The API
// answers after all of that. Node.Delete commits the delete (the record's
// deleting mark), kills the group's processes, removes the group, then
// deletes the assignment: on a full disk nothing changes (ErrDiskFull),
// and a delete committed before a crash is finished at the next start.
// Because every
// assignment is committed before its group exists and outlives it, a
// crash at any instant leaves only states Reconcile repairs: an
// assignment with no group or an empty one (released), a live group with
// its assignment (adopted). A live group without an assignment (the state
// file was replaced) is admitted for the CPUs it holds, so no CPU a live
// exclusive group holds is ever handed out again. Open reconciles once;
// the running agent calls Sweep, which reads only the groups of adopted
// processes (its own children are reaped on SIGCHLD).
//
// What corepin already runs is never adopted (nodecore.Guard): a cgroup
// in or above a corepin root (the agent's, enforce.DefaultRoot of runs,
// nodecore.BERunRoot of best-effort runs) or holding the agent is
// ErrInvalid; a cgroup another workload adopted, in it or above it, or a
// process in any of those, is ErrTaken; a pid of one of the agent's
// threads, a zombie, a kernel thread or a thread other than its process's
// leader is ErrInvalid.
//
// An exclusive admission that would leave the LS pool smaller than the LS
// quotas committed, or an empty pool under live LS or BE work, is
// rejected (alloc.State.GuardPools): a cpuset can not be emptied under running tasks.
//
// A state file that is not a SQLite database, is corrupt, belongs to
// another program or has a newer schema stops Open with the store's
// sentinel and is left byte-identical. One agent holds a state file at a
// time (a flock on FILE.lock; ErrLocked).
//
// # Without a daemon
//
// A local `corepin run` places its pinned jobs with nodecore.StatePlacer
// on the same state file, in the same write transaction as the agent's
// admissions, so neither hands out a CPU the other holds. The agent
// records its node settings in the file when it opens it
// (nodecore.SharedConfig), and a run places with them, so it never takes
// a CPU the agent reserves. A run's reservations name their owner
// process: when it dies, they are released, by the next run that opens
// the file or by the agent's next sweep, once the job's group has no
// process left.
//
// # QoS controller
//
// With `qos: {enabled: true}` in the config, Run starts package qos's loop
// over the node's workloads (StartQoS): it shrinks the BE workloads'
// cpuset (or caps their quota) as LS usage and interference grow, within
// the current BE pool, never onto LSE CPUs. Its latest tick is in GET
// /v1/usage ("qos"), `corepin ctl top` and the corepin_qos and
// corepin_qos_actions_total metrics. Group settings of BE workloads follow
// its latest plan (resources), so an admission never undoes a shrink.
//
// # Errors
//
// ErrInvalid (HTTP 422; ErrTooLarge 413): the request is wrong as
// written. ErrExists and ErrRejected (409): the node can not admit it now;
// a Rejection from alloc says which constraint refused it. ErrTaken (409):
// what it would adopt is another workload's. ErrNotFound (404).
// ErrDiskFull (507): the state file's disk is full; nothing changed.
package agent
