// Package e2evm boots Debian's cloud kernels under qemu (software
// emulation, no root needed) in machines of several shapes: two sockets
// with SMT and two NUMA nodes, one socket with four NUMA nodes at uneven
// distances, a memory-only node, CPUs offline before start, isolcpus and
// nohz_full, and the same machine under cgroup v1. The initramfs holds
// busybox, corepin's static binary and an init script that runs corepin
// commands and prints their output between markers on a second serial
// port; the tests parse that and assert on what the kernel itself reports
// (sysfs, cgroup files, /proc/PID/status).
//
// TestVMIRQ (make e2e-vm-irq, issue 31 §2) boots a 4-CPU machine with
// two virtio-blk disks and a virtio-net card on qemu's user network and
// counts each interrupt per CPU under disk and network load while an LSE
// workload of the agent runs without and with irq_isolate, through a
// SIGKILL and restart of the agent, and beside Debian's irqbalance.
//
// TestVMSchedExt and TestVMSchedExtSMT2 (make e2e-vm-scx, issue 30)
// boot a 6.12 kernel with sched_ext in a 2-core and a 2-core SMT2
// machine and attach scx_layered on `corepin sched-ext config`: corepin
// topo must name it and the BE routes it leaves inert; the wake-placement
// probe's layered route runs on the fair class and under scx_layered (the
// placement table; make e2e-vm-scx-table asserts issue 30's target on
// it); on 2 cores scx_layered is SIGKILLed mid-probe and fed a config it
// refuses, and the kernel and corepin topo must be back on the fair class.
//
// It is its own module so that `go test ./...` in the repository root
// does not boot machines. `make e2e-vm` runs it with
// COREPIN_E2E_REQUIRED=1, which turns a missing prerequisite (qemu,
// busybox, apt-get, the corepin binary) into a failure; run directly, the
// tests skip then.
//
// The same machine shape (2 sockets x 2 cores x 2 threads, 2 NUMA nodes)
// also runs a real kubelet node: test/kube/e2evmkubelet (make
// e2e-vm-kubelet) boots the kubelet, containerd, runc and `corepin nri`
// in it, with the control plane on the host, and resizes a pinned pod
// through the API server (issue 21: grow 2 -> 4 on one NUMA node in whole
// cores, shrink back keeping the original CPUs, an impossible resize
// refused on the pod). It runs in a machine because this host has 2 CPUs;
// it lives in test/kube's module for client-go and the control plane.
package e2evm
