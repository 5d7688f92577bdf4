// Package alloc decides which logical CPUs each workload gets. It is pure
// and deterministic: no I/O, no clocks, no global state, and the same
// State and Request always give the same Placement.
package alloc
