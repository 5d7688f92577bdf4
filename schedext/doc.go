// Package schedext is what corepin does with sched_ext, the kernel's
// scheduler class whose decisions a BPF program makes (Linux 6.12,
// https://docs.kernel.org/scheduler/sched-ext.html). Reading whether one
// is attached, and which of corepin's routes it leaves inert, is package
// topology's (Scheduler, InertRoutes); this package holds the layered
// route of issue 30: the layer config corepin hands scx_layered, an
// existing scheduler from the sched-ext/scx project that matches tasks to
// layers by cgroup. corepin ships no BPF scheduler of its own.
//
// LayeredConfig maps corepin's classes onto layers matched by corepin's
// fixed parent cgroups only, never by a workload's own group, so that
// workloads coming and going never force scx_layered to reload (a reload
// leaves the node on the fair class for tens of milliseconds):
//
//   - "be": best-effort runs (the corepin-be root) and pods under the
//     NRI plugin's idle parent (kubepods/corepin-be), an Open layer that
//     does not preempt, at the lowest layer weight;
//   - "ls": corepin's other runs (the corepin root: LSE, LSR and LS jobs),
//     an Open layer that preempts other layers' tasks;
//   - "normal": everything else (the system, other pods, the agent's
//     workloads, which have no fixed parent per class yet), an Open layer
//     at the default weight; scx_layered needs a last layer matching all.
//
// LSE and LSR jobs keep their exclusive cpusets, which stay in force under
// sched_ext (the BPF scheduler picks among the CPUs a task may use).
//
// Supervise runs scx_layered on that config for the agent's node setting
// sched_ext (Setting) and keeps it running: it starts it in a session of
// its own so that it outlives the agent, records its pid and start time
// (Records, the state file's settings) so that the next agent adopts it
// instead of starting a second, watches the process and the kernel's
// /sys/kernel/sched_ext, restarts it with a bounded exponential back-off
// (Backoff), and reports every transition (Status, Observer): while it is
// down or ejected the kernel's fair class decides and corepin's BE routes
// act again. It never starts one beside a scheduler it did not start.
// The sysfs root, procfs and binary are options, so tests run it on a
// fake sysfs with a script standing in for scx_layered.
package schedext
