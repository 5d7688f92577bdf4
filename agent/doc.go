// Package agent is corepin's node agent, a front door on the node core
// (package nodecore: the state file, the allocator over it, the one
// admission, the adoption guard, the agent's groups and their reconcile,
// which the NRI plugin and local runs share in part). It is a library
// first. Node is nodecore's Node with the API's views of what it holds
// (Workload, Usage, TopologyView); Server is a thin HTTP/JSON front door
// over a Node; Client is what `corepin ctl` and `corepin topo` use; Run is
// the daemon: it reads the YAML configuration (Config, whose node
// settings convert to alloc.NodeSettings with Config.Settings), opens the
// Node, serves the API and /metrics (Metrics, the Node's observer) and
// sweeps every reconcile_interval (Sweep, Refresh, CheckOnline).
//
// # Admission, release, reconcile
//
// Node.Create admits a Spec through nodecore (the allocator, the pool
// guard and the store's write transaction, then its group, started or
// adopted) and answers after all of that; Node.Delete stops it and
// releases its CPUs; a crash at any instant leaves only states the next
// Open reconciles. See package nodecore for each step and its guarantees.
// One agent holds a state file at a time (a flock on FILE.lock;
// ErrLocked). A state file that is not a SQLite database, is corrupt,
// belongs to another program or has a newer schema stops Open with the
// store's sentinel and is left byte-identical.
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
