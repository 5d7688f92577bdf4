// Package e2enode runs `corepin nri` under a real containerd and a real
// CRI-O (private instances built from their Go modules, runc of make
// runc-bin, busybox images built locally) and drives pods through the CRI,
// as the kubelet does: one set of scenarios, the runtime a parameter
// (engine); and runs the image make image builds under the same
// containerd. It is a separate module so that the CRI client stays out of
// corepin's go.mod. Run it with `make e2e-node` and `make e2e-node-crio`
// (root; see ../../../shared/kube-testing.md §2 and docs/kubernetes.md).
package e2enode
