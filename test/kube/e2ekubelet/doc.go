// Package e2ekubelet runs a corepin sweep's Jobs on a real node: etcd,
// kube-apiserver, kube-controller-manager (job and pod GC controllers),
// kube-scheduler and a kubelet built from the Kubernetes modules (make
// e2e-kubelet caches them), the kubelet on a private containerd with the
// real `corepin nri` plugged in. The Jobs `corepin kube jobs` writes run
// to completion, each pod's result says where it ran (pinned points on
// whole CPUs of their own, the others on the shared pool), and `corepin
// kube collect` brings the results into a results database that `corepin
// results` and `corepin report` read.
//
// The test needs root and leaves the machine as it found it: every
// process it started is stopped by its process group, the pods' cgroups
// (under a cgroup root of its own) are removed depth-first, whatever the
// kubelet mounted under its root directory is unmounted, the kernel
// settings the kubelet changes are restored, and it checks processes,
// cgroups, mounts, iptables and the kubelet's default directories
// against a snapshot taken before it started.
package e2ekubelet
