// Package cpuset provides CPUSet, an immutable set of logical CPU ids, with
// the two text forms Linux uses for them: the list format of cpuset(7)
// ("0-3,8,10-11", https://man7.org/linux/man-pages/man7/cpuset.7.html) and
// the hex mask format of sysfs cpumask files ("00000000,0000ff0f").
//
// The set is a bitset, so machines with thousands of CPUs cost a few words,
// and set algebra is a handful of word operations. Parse and String are
// inverses; so are ParseMask and Mask. The package does no I/O.
package cpuset
