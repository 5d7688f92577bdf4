// Package extender is corepin's kube-scheduler extender: an http.Handler
// serving the extender protocol (k8s.io/kube-scheduler/extender/v1) whose
// /filter drops the nodes where a pod's CPUs cannot be placed under its
// topology policy and CPU wishes, and whose /prioritize scores the rest
// (0 to extenderv1.MaxExtenderPriority) by the placement each would get.
//
// It decides nothing itself: it feeds the nodes of each call into the
// scheduler side's one node view (kube/nodeview) and answers with the
// view's verdicts, the same the framework plugin (scheduler/plugin) gives,
// each found as the node's own admission finds it, so the cluster view
// and the node (the agent, the NRI plugin) cannot disagree about what
// fits. A node
// publishes its state in annotations (AnnotationTopology with
// AnnotationAssigned, or the coarse AnnotationNUMAFree, each beside
// AnnotationAllocator, its allocator's policy, options and default topology
// policy), written by the NRI plugin with --annotate-node
// (nodestate.NodeAnnotations; kube/nodestate decodes them too); a node is
// judged under its own settings (alloc.NodeSettings.Apply), and
// a pod naming no topology policy gets the node's default, as on the node.
// The view decodes a node's state once per change of those annotations
// (a node unchanged since the last call costs a hash of them), shares it
// between the nodes publishing the same, and keeps verdicts by state and
// request shape.
// With WithNRT, a node without those annotations is judged by its
// NodeResourceTopology object (topology.node.k8s.io v1alpha2, or v1alpha1
// where only that is served: NRTResourceOf) as an NRTStore keeps it from a
// client-go informer. An object Koordinator's koordlet wrote
// (nodestate.AnnotationKoordCPUTopology and the annotations beside it) makes the
// whole machine, its reserved and held CPUs and the kubelet's policy, as a
// corepin node's AnnotationTopology would; otherwise the free CPUs of its
// Node zones make the same stand-in machine as AnnotationNUMAFree. Its
// attributes (topologyManagerPolicy, corepin.io/policy, corepin.io/options)
// are its settings, and topologyPolicies its default topology policy when
// no attribute names one. A node judged by Koordinator's object is judged
// under its Node's Koordinator labels too (nodestate.LabelKoordCPUBindPolicy,
// nodestate.LabelKoordNUMATopologyPolicy), as koord-scheduler applies them (see
// nodestate.JudgeKoord). A node that publishes none of these is not corepin's to
// judge and passes with score 0.
//
// With WithPods, a node whose AnnotationAllocator says its
// AnnotationAssigned names the pod of each entry (nodestate.Allocator.PodUIDs)
// is judged with the pods bound to it that no entry names placed first, as
// a PodStore keeps them from a client-go informer: the pods the scheduler
// bound a moment ago that the node's NRI plugin has not admitted yet. A
// node judged by its NodeResourceTopology object, which names no pods, is
// judged with the pods bound to it since the object last changed.
//
// The handler reads a body as a stream (readStream): one node item at a
// time, each read by a walker for its name, corepin annotations and
// Koordinator labels (else decoded as a corev1.Node), judged at once, and
// kept only if /filter keeps it, to be answered exactly as sent. The calls
// in flight are bounded by count and by the bytes of their bodies (a gate;
// the others wait in a bounded queue, then get a 503), and the view's
// decoded states by an estimate of the heap they hold
// (nodeview.WithMaxBytes), all sized from WithMemoryLimit.
// DecodeArgs reads through the same stream for Filter and Prioritize.
//
// A pod's wishes are read from the metadata the NRI plugin honours (see
// RequestOf). The package touches no machine and keeps no state beyond its
// node view and the stores it is given (NRTStore, PodStore); a malformed
// request body is a 400, never a panic.
package extender
