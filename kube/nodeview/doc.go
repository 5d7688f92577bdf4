// Package nodeview is the scheduler side's one view of corepin's nodes:
// the cache of their decoded states, the judge of a pod on each, and the
// pods placed there and not yet admitted. Both scheduler doors judge
// through it, the framework plugin (scheduler/plugin, fed by its
// scheduler's informers) and the extender (kube/extender, fed by the
// nodes of each call), so a fix or a scoring rule is written once.
//
// A node's state is decoded through kube/nodestate once per change of what
// it publishes (View.SetNode: the corepin.io/ annotations; else
// View.SetNRT: its NodeResourceTopology object, Koordinator's included,
// under its Node's Koordinator labels), never per pod. Each node keeps a
// summary (free CPUs per NUMA node and per socket, CPUs in whole free
// cores) that answers most requests without running the allocator, and
// the verdicts found on its current state by request shape (View.Key): the
// pods of a burst run the allocator once per shape and node change.
// Nodes publishing the same machine, settings and reserved CPUs share one
// empty state, on which "would preempting help" is asked once per machine
// type and shape.
//
// View.Judge answers as the node's own admission does
// (nodestate.Prejudge, nodestate.RequestOn, alloc.State.Try, worded by
// nodestate.Refusal), so the node, the scheduler and the simulator give
// one answer per rule (kube/nodestate's TestOneAnswerPerRule). A pod
// reserved (View.Reserve) or known bound (View.Hold) on a node is placed
// on the node's state at once and stays placed until the state the node
// publishes includes it (it names the pod's UID, or, for a state naming no
// pods, it was published after the binding) or the pod is forgotten
// (View.Forget): a burst is never booked twice on the same CPUs.
//
// It imports no scheduling framework: only k8s.io/api and apimachinery
// types, so that the product's module can hold it and both doors can
// import it. It talks to no API server; its callers feed it.
package nodeview
