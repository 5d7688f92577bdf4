// Package nri is corepin's NRI plugin (https://github.com/containerd/nri):
// containerd (>= 1.7, NRI on by default in 2.x) and CRI-O ask it about
// every container of every pod and apply what it answers. It runs on the
// node core: nodecore.Containers admits through the state file and
// allocator the agent shares (one state, one set of node settings:
// policy, options, reserved CPUs), so `corepin agent`, local `corepin
// run`s and the plugin never hand out one CPU twice. The plugin needs no
// root for its decisions: the runtime applies the adjustments, and the
// plugin writes no container's cgroup. Two things are written for it,
// both by package enforce (the one cgroup and scheduling writer): where
// the runtime did not, SCHED_IDLE on a BE container's process (BERoute,
// ProtectBE); and on the idle-parent route (RouteIdleParent) the cgroups
// of the idle parent, its own group under the kubelet's kubepods
// (IdleGroup). This package decides where that group lies (IdlePath,
// kubepodsParent) and when it is made, checked and cleaned (CreateContainer,
// StartContainer, Synchronize, the sandbox's stop and removal);
// enforce.IdleParents makes it, sets its cpu.idle to 1 and, on cgroup
// v1, its cpuset from kubepods, and removes a pod's group below it, all
// through an os.Root on the cgroup mount. The plugin itself calls no
// file-writing function on that mount (internal/archtest checks it).
//
// # Events
//
//   - CreateContainer admits the container and answers its cpuset cpus and
//     mems (memory follows the CPUs: the NUMA nodes of its CPUs), its CPU
//     shares (kubelet's mapping, 1024 per CPU) and, for LS, a CFS quota of
//     its size. A BE container gets the BE pool, cpu.shares 2 (BEShares)
//     and the scheduler SCHED_IDLE (SetLinuxScheduler: the OCI
//     linux.scheduler field, applied by runc >= 1.2 and crun).
//     The same answer carries updates for shared (LS, BE) containers whose
//     pool the admission shrank, and the environment variables
//     COREPIN_CPUSET and COREPIN_THREADS (EnvCPUSet, EnvThreads): what the
//     container was given, as at its creation. With Options.InfoDir the
//     container also gets a read-only directory at InfoMount (/run/corepin)
//     whose files cpuset and threads the plugin rewrites at every resize
//     and pool change (info.go), so they stay current where the
//     environment can not.
//   - StartContainer checks a BE container's process (it exists and has
//     not run the container's command yet): SCHED_IDLE from the runtime
//     is RouteRuntimeIdle; else the plugin sets it on the process's
//     threads (RoutePluginIdle: the host's PID namespace needed, the pid
//     checked to be the container's first); else RouteMinWeight. The
//     route is recorded in the state file (Record.BERoute: `corepin ctl
//     top`) and counted by the metric corepin_nri_be_protection
//     (Options.MetricsAddr). A start is never failed for it. An LS
//     container of the real-time route (corepin.io/sched) is checked the
//     same way (EnsureRealTime): the runtime's class, else the plugin's,
//     else the fair class with the reason logged, counted by the metric
//     corepin_nri_realtime_starts_total.
//   - UpdateContainer (kubelet's UpdateContainerResources) is answered with
//     the container's pin, which would otherwise be overwritten. New CPU
//     resources of another size (an in-place pod resize, which the kubelet
//     does with cpuManagerPolicy none) resize the assignment first, as the
//     agent's PATCH does (nodecore.Containers.Resize): an exclusive
//     container grows around the CPUs it has, on its NUMA node and in whole
//     cores where it can, and shrinks back never below the CPUs it was
//     created on; a resize that can not be placed, or that would change the
//     class, is refused with the reason (the kubelet shows the failed
//     update on the pod's resize status) and changes nothing.
//   - StopContainer and RemoveContainer release the container's CPUs and
//     grow the pools of the shared containers.
//   - Synchronize, on every connect, releases the assignments of containers
//     that are gone, admits live containers it does not know (an exclusive
//     container keeps the cpuset it holds when that is free and the right
//     size, so a lost state file moves nothing), and updates only the
//     containers whose cpuset differs from their assignment.
//   - PostStartContainer sends that update again to a container that
//     Synchronize found created but not started: containerd applies an
//     update of a created container to its spec, not to its cgroup.
//
// Plugin.Run owns the connection: when the runtime restarts (stub.Run
// returns), it reconnects with a doubling back-off (100ms..5s) and
// Synchronize runs again. With Options.Publish it also publishes the
// node's pools after each change (`corepin nri --publish-nrt`: a
// NodeResourceTopology object, written by package kube/publish), and with
// Options.Annotate the node annotations the scheduler extender reads
// (`corepin nri --annotate-node`: publish.Annotator merge-patches the
// Node).
//
// # What a pod asks for
//
// The label koordinator.sh/qosClass (LSE, LSR, LS, BE) names the class;
// the annotation scheduling.koordinator.sh/resource-spec (JSON, at most
// MaxResourceSpec bytes, strictly parsed: ParseResourceSpec) gives
// preferredCPUBindPolicy (Default, FullPCPUs, SpreadByPCPUs) and
// preferredCPUExclusivePolicy (None, PCPULevel, NUMANodeLevel); the
// annotation corepin.io/numa-policy (none, best-effort, restricted,
// single-numa-node) is the container's topology policy, else the node's
// configured default applies; the annotation corepin.io/isolated-cpus
// (prefer, require) lets an LSE or LSR container take the CPUs the kernel
// isolated first or only (a shared container never gets them). The
// scheduler extender reads the same
// metadata through the same code (package kube/podmeta). Without the
// label the kubelet's QoS is read from the container's CPU resources:
// Guaranteed with whole CPUs is LSE, Guaranteed with a fraction and
// Burstable are LS (sized at the limit, else the request), BestEffort is
// BE. With `policy: kubelet` the exclusive containers get the cpusets the
// kubelet's static CPU manager would give them (run the kubelet with
// cpuManagerPolicy: none, or its reconcile rewrites them). A container
// whose metadata can not be read or that the node can not admit is
// refused with the reason, not started unpinned.
//
// # Fail-open
//
// NRI is fail-open: a container created while the plugin is not connected
// (not deployed yet, restarting, mid rolling upgrade) runs unpinned on
// every CPU, beside pinned containers' CPUs, and the next Synchronize
// admits and pins it (make e2e-deploy shows both during an upgrade). A pod that must never run unpinned sets
// the annotation
//
//	required-plugins.noderesource.dev: '["corepin"]'
//
// with containerd's default validator enabled
// ([plugins.'io.containerd.nri.v1.nri'] default_validator = { enable = true });
// the runtime then refuses its containers while corepin is not connected.
// deploy/kubernetes/containerd-nri.toml is that snippet.
package nri
