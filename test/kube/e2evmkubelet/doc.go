// Package e2evmkubelet runs a real kubelet node inside a qemu machine
// (software emulation, no root, no KVM) and resizes a pinned pod on it
// through the API server (issue 21 §2 and §3).
//
// This host has 2 CPUs; a pod of 2 CPUs that grows to 4 on one NUMA node
// in whole cores, beside one whole core of reserved CPUs and a second
// pinned pod, needs 8, on two NUMA nodes with SMT. The machine has 8
// vCPUs (2 sockets x 2 cores x 2 threads, NUMA nodes 0-3 and 4-7) and
// boots Debian's 6.1 cloud kernel (its virtio network modules, from the
// same package, loaded by /init) with an initramfs holding busybox, the
// kubelet v1.36 (cpuManagerPolicy none: in-place resize is on by default
// in 1.35+), the private containerd v2.4 with its runc shim, Debian's runc
// (with the libraries ldd lists for it), corepin's static binary run as
// `corepin nri` with CPUs 0-1 reserved and --info-dir, and two images
// (pause and busybox) written by the test as docker archives and imported
// at boot. containerd uses the native snapshotter (overlay is a module in
// the cloud kernel) and runc no pivot_root (the root is the initramfs);
// the pods use the host network, so no CNI plugin runs.
//
// The test: a first pinned pod of 2 CPUs takes NUMA node 0's free core;
// the second, pin, lands on node 1 and is resized through the API
// server's resize subresource (as `kubectl patch --subresource resize`)
// to 4 (its own Cpus_allowed_list grows around the 2 it had, on one NUMA
// node, in whole cores), back to 2 (the original CPUs stay) and to 6,
// more than the node has free: refused with corepin's reason on the pod
// (PodResizeInProgress, reason Error; a ResizeError event), nothing
// changed; asked for 2 again, the kubelet clears the condition. The first
// pod's CPUs never move, the containers never restart.
//
// etcd and kube-apiserver run on the host (kubetest.StartControlPlane);
// the kubelet reaches the API server through qemu's user network at
// 10.0.2.2. No scheduler: the pod names its node. The container prints,
// every second, its own Cpus_allowed_list (/proc/1/status in its PID
// namespace), COREPIN_CPUSET and COREPIN_THREADS from its environment and
// the files cpuset and threads under /run/corepin; the machine copies the
// last line of each container log to its second serial port, which the
// test reads while the machine runs.
//
// It is a package of its own so that the other test/kube packages never
// boot it. `make e2e-vm-kubelet` runs it with COREPIN_E2E_REQUIRED=1,
// which turns a missing prerequisite into a failure; run directly, the
// test skips then.
package e2evmkubelet
