// Package plugin is corepin inside kube-scheduler: a scheduling framework
// plugin (PreFilter, Filter, Score, Reserve/Unreserve, PostBind) that
// judges each node by the state it publishes, as the scheduler extender
// (kube/extender) does, through the same decoders (kube/nodestate: the
// corepin.io/ node annotations, else the node's NodeResourceTopology
// object, Koordinator's included, under its Koordinator labels) and the
// same reading of the pod (kube/podreq), without a call over HTTP per pod.
//
// Node states are decoded once per change, in the Node and
// NodeResourceTopology informers' event handlers (Cache.SetNode,
// Cache.SetNRT), never per pod. Each node keeps a summary (free
// CPUs per NUMA node and per socket, CPUs in whole free cores) that
// refuses most requests a node cannot take without running the allocator,
// and the verdicts found on its current state by request shape: the pods
// of a burst run the allocator once per shape and node change, and Score
// finds Filter's placement there. A pod the plugin refused is requeued
// only by events that could help (EventsToRegister). Reserve places the pod
// on the node's cached state at once and Unreserve releases it; a newly
// published state replaces the cache with the reserved pods it does not
// yet include (by pod UID, nodestate.Allocator.PodUIDs) placed again, so a burst
// is never booked twice on the same CPUs.
//
// It lives in its own module (github.com/corepin/corepin/scheduler): the
// product's module never depends on k8s.io/kubernetes.
package plugin
