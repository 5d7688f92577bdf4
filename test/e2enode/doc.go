// Package e2enode runs `corepin nri` under a real containerd (a private
// instance built from its Go module, Debian's runc, busybox images built
// locally) and drives pods through the CRI, as the kubelet does; and runs
// the image make image builds under the same containerd. It is a
// separate module so that the CRI client stays out of corepin's go.mod.
// Run it with `make e2e-node` (root; see ../../../shared/kube-testing.md §2).
package e2enode
