// Package kube tests corepin's scheduler extender against Kubernetes' own
// scheduler code, in a module of its own so that k8s.io/kubernetes never
// enters the product's go.mod: L1 drives the extender with kube-scheduler's
// HTTP extender client (scheduler.NewHTTPExtender); L2 runs an in-process
// kube-apiserver, etcd and the full default scheduler configured with the
// extender, creates nodes as API objects and checks that pods are bound to
// the node corepin can align them on, or left Unschedulable with corepin's
// reason. Run with `make test-kube`.
package kube
