// Package nodestate is the codec of what a node publishes about its CPUs
// for a scheduler: the encoder beside the decoder. A corepin node (the NRI
// plugin with --annotate-node) publishes its machine, the CPUs held on it
// and its allocator settings in Node annotations (NodeAnnotations); a
// NodeResourceTopology object (BuildNRTWith) carries free CPUs per NUMA
// node in its zones and the settings in its attributes (read back by
// FreeCPUs and AllocatorFromAttributes), and Koordinator's koordlet describes the whole
// machine in that object's annotations (ParseKoord) and forces bind and
// NUMA strategy with Node labels (ParseKoordLabels). Settings come out as
// alloc.NodeSettings, whatever their wire form (Allocator).
//
// The scheduler doors (kube/extender, scheduler/plugin) and `corepin
// simulate --from-cluster` read nodes through it, so that what judges a
// node and what replays over it agree. It also builds the allocator state
// a node is judged on (Judged: JudgeTopology, JudgeFree, JudgeKoord, one
// per wire form, through the plan document `corepin plan` places on) and
// puts the node's settings on a pod's request (RequestOn, by
// alloc.NodeSettings.On, the rule the node's own admission uses), and
// words a refusal the way the scheduler shows it (Reason, Refusal). It
// talks to no API server: kube/publish writes what it encodes, the
// scheduler doors place on the states it builds.
package nodestate
