// Package topology discovers and models a machine's CPU topology: for every
// logical CPU its online state, physical package, die, cluster, core, NUMA
// node, last-level cache group and hybrid kind, plus the NUMA distance table
// and the CPUs corepin's own cpuset cgroup allows.
//
// There is one way in for each source: Open(root) for a machine (the live
// one at "/", or a saved dump of another, read confined to the root,
// regular files only, each capped at MaxFileSize), ReadDoc for a saved
// `corepin topo -o json` document and FromCPUs for its decoded parts.
// Discovery reads everything through one fs.FS rooted at a sysfs root, so a
// saved dump of another machine is read exactly like the live one (see
// Discover). Every id the model carries is checked against documented caps
// (MaxNodeID, cpuset.MaxCPU, the CPU count) when it is built (New).
//
// Indexes in the model are machine-wide and derived from the kernel's
// sibling masks and lists, never from raw ids such as core_id, which repeat
// across packages
// (https://www.kernel.org/doc/html/latest/admin-guide/cputopology.html).
// Where the kernel leaves a level unknown, discovery guesses as hwloc does
// and records one warning per guess (Topology.Warnings).
//
// NUMA nodes are the node directories and the CPUs they list, as hwloc
// reads them (its Linux backend takes each node's cpumap and never follows
// cpuN/nodeM links). An online CPU that no node directory holds, such as one
// linking to a node that is possible but has no directory (issue 17), is in
// no NUMA node: its NUMA is None and Topology.NoNodeCPUs lists it, unless a
// thread sibling is in a node, which it then joins so that no core is
// split. Without any node directory (a kernel without NUMA) every CPU is in
// node 0. Real machines are never refused for their NUMA description.
//
// The package decides nothing: placement lives in package alloc.
package topology
