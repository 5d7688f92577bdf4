// Package podreq turns a Kubernetes Pod into the allocation request
// corepin places for it: the pod's effective CPU request as the scheduler
// counts it, its kubelet QoS class (computed when the status has none) and
// its corepin metadata, read through kube/podmeta as the NRI plugin reads
// it on the node. The scheduler extender and the scheduler plugin
// (scheduler/plugin) both read pods through it.
package podreq
