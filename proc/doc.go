// Package proc is corepin's one way to run a process: start it confined
// to an enforcement group from its first instruction (enforce.Start), in
// a process group of its own, measured (package measure), and stop it
// cleanly: after its leader exits, whatever stayed in its group or
// process group is named (pid and comm), killed and reaped by the kernel,
// and the group is removed. It keeps a capped tail of stdout and stderr.
//
// runner's jobs, bench's experiments and loadgen's services all start
// processes through Start, so nice, pinning and idle go through enforce
// Resources, never through taskset(1) or nice(1).
//
// proc sits beside the core's leaves: it imports enforce and measure,
// and only runner, loadgen, netbench, workload and the front doors above
// them import it. It decides nothing about CPUs.
package proc
