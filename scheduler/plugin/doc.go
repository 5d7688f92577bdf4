// Package plugin is corepin inside kube-scheduler: a scheduling framework
// plugin (PreFilter, Filter, PostFilter, PreScore, Score, Reserve/Unreserve, PostBind), a thin
// adapter from the framework's calls to the scheduler side's one node
// view (kube/nodeview), which the scheduler extender (kube/extender)
// judges through as well: the same decoders (kube/nodestate: the
// corepin.io/ node annotations, else the node's NodeResourceTopology
// object, Koordinator's included, under its Koordinator labels), the same
// judge and the same reading of the pod (kube/podreq), without a call
// over HTTP per pod.
//
// The plugin keeps the view fed from the scheduler's informers: node
// states are decoded once per change, in the Node and
// NodeResourceTopology event handlers (View.SetNode, View.SetNRT), never
// per pod, and a pod deleted or finished before its node published it is
// forgotten (View.Forget). PreFilter numbers the pod's request shape once
// (View.Key) and, for a pod that needs aligned CPUs, names the nodes
// whose counts or kept verdicts do not rule it out (View.Candidates) when
// that has the scheduler visit and score fewer nodes, Filter and Score ask the view (View.JudgeNode, View.Judge:
// Score finds Filter's verdict kept on the node's entry; PreScore skips
// Score when every node Filter kept scored the same), Reserve places the pod on
// the node's state in the view at once and Unreserve releases it, and
// PostBind notes the binding (View.Bound), so a burst is never booked
// twice on the same CPUs. A pod the plugin refused is requeued only by
// events that could help (EventsToRegister, nodeview.Changed). Framework
// statuses are the view's verdicts: refused for good is
// UnschedulableAndUnresolvable.
//
// It lives in its own module (github.com/corepin/corepin/scheduler): the
// product's module never depends on k8s.io/kubernetes.
package plugin
