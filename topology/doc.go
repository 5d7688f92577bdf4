// Package topology discovers and models a machine's CPU topology: for every
// logical CPU its online state, physical package, die, cluster, core, NUMA
// node, last-level cache group and hybrid kind, plus the NUMA distance table
// and the CPUs corepin's own cpuset cgroup allows.
//
// Discovery reads everything through one fs.FS rooted at a sysfs root, so a
// saved dump of another machine is read exactly like the live one (see
// Discover). Indexes in the model are machine-wide and derived from the
// kernel's sibling masks and lists, never from raw ids such as core_id,
// which repeat across packages
// (https://www.kernel.org/doc/html/latest/admin-guide/cputopology.html).
//
// The package decides nothing: placement lives in package alloc.
package topology
