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
// The package decides nothing: placement lives in package alloc.
package topology
