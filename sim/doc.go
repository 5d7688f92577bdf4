// Package sim replays a workload trace over a cluster of identical nodes (or
// of the unlike nodes of a real cluster, some CPUs already held: Config.Cluster),
// once per cluster policy, and compares the outcomes side by side: how many jobs
// were admitted and rejected (and how many rejections were avoidable because
// another node could have taken the job), how well the exclusive placements
// were aligned to NUMA nodes, L3 groups, sockets and whole cores, how
// fragmented the free CPUs became over time, and how fast the decisions were.
// It is how a user compares policies at cluster scale before touching a
// cluster. Every node decision is alloc's, so the simulator places exactly as
// `corepin plan` and the node agent would.
//
// # Trace format
//
// A trace is JSON lines, one event per line, in time order:
//
//	{"t": 12.5, "op": "arrive", "id": "job-17", "request": {"cpus": 4, "qos": "LSE", "bind": "FullPCPUs"}}
//	{"t": 40.0, "op": "depart", "id": "job-17"}
//
// t is in seconds (any origin; it must never go backwards). A request object
// has the keys of a `corepin plan` request: cpus (fractions for LS and BE),
// qos (LSE, LSR, LS, BE; default LSE, or LS for a fraction), bind, exclusive,
// numa and topology_policy; its id, if given, must be the event's. Parsing is
// strict: an unknown key or op, a depart of an id that has not arrived, an
// arrive of an id still present, or a time going backwards is an error that
// names its line. An id may arrive again after it departed. Blank lines are
// skipped.
//
// # Scenarios and node choice
//
// A run is a Scenario (the allocator every node runs, and what the scheduler
// writes into each request) crossed with a NodeChoice (how the scheduler
// picks the node): FirstFit counts CPUs as kube-scheduler's resource fit does
// and leaves topology to the node, which may refuse (kubelet's
// TopologyAffinityError); BestFit sees each node's free aligned capacity and
// tries nodes from the tightest aligned fit on. Nodes keep a scheduler's view
// of their free CPUs per core, L3 group and NUMA node in step with the
// placements, so ranking a node costs O(L3 groups + NUMA nodes), not an
// allocation.
//
// The AsDeployed scenario instead replays each node of a cluster under the
// settings it publishes (Node.Settings: engine, options, default topology
// policy, a forced bind), applied to a request when it is tried on that
// node; a node publishing none runs corepin's engine under
// Config.TopologyPolicy.
//
// # What it does not model
//
// Jobs run for exactly their trace duration, whatever CPUs they got: the
// simulator measures placement, not the slowdown a poor placement causes
// (bench measures that on real hardware). A rejected job is not retried.
// Memory, devices and other resources are not scheduled.
package sim
