package extender

import (
	"crypto/sha256"
	"encoding/json"

	corev1 "k8s.io/api/core/v1"

	"github.com/corepin/corepin/kube/nodestate"
	"github.com/corepin/corepin/kube/nodeview"
)

// Node annotations a corepin node (the NRI plugin with --annotate-node)
// publishes; kube/nodestate encodes and decodes them.
const (
	// AnnotationTopology holds the node's `corepin topo -o json` document,
	// compact.
	AnnotationTopology = nodestate.AnnotationTopology
	// AnnotationAssigned holds the CPUs already held on the node, as the
	// "assigned" list of `corepin plan`: [{"id":"ns/pod","cpuset":"2-5","qos":"LSE"}].
	// Absent means nothing is held.
	AnnotationAssigned = nodestate.AnnotationAssigned
	// AnnotationNUMAFree is the coarse fallback: free CPUs per NUMA node,
	// in node order, e.g. "[4,0]". It stands for a machine of that many
	// single-thread cores per node, one socket and one L3 per node.
	AnnotationNUMAFree = nodestate.AnnotationNUMAFree
	// AnnotationAllocator holds the node allocator's settings beside
	// either form: {"policy":"kubelet","options":["full-pcpus-only"],"topology_policy":"single-numa-node"}
	// (nodestate.Allocator). Absent means policy corepin, no options, topology
	// policy none (a node of an older corepin).
	AnnotationAllocator = nodestate.AnnotationAllocator
)

// ErrNode is wrapped by errors about a node's published state
// (nodestate.ErrNode).
var ErrNode = nodestate.ErrNode

// Limits on what a node may publish.
const (
	// MaxAnnotationBytes bounds each annotation decoded (Kubernetes caps
	// all of an object's annotations at 256 KiB together).
	MaxAnnotationBytes = nodestate.MaxAnnotationBytes
)

// setNode feeds node into the extender's view (nodeview.View.SetNode): a
// change of what it publishes is decoded once, for every call after, and
// nodes publishing the same share one state.
func (e *Extender) setNode(node *corev1.Node) { e.view.SetNode(node) }

// setRawNode is setNode for a node item of the fast path, whose
// annotations are still JSON strings: they are fingerprinted as sent and
// unquoted only when the view has not decoded them yet.
func (e *Extender) setRawNode(n *rawNode) {
	topo, assigned, free, settings := n.ann[0], n.ann[1], n.ann[2], n.ann[3]
	if topo == nil && free == nil {
		e.view.SetPlain(n.name, [3]string{rawLabel(n.label[0]), rawLabel(n.label[1]), rawLabel(n.label[2])})
		return
	}
	e.view.SetPublished(n.name, rawFingerprint(n), func() nodeview.Annotations {
		unquote := func(raw []byte) *string {
			if raw == nil {
				return nil
			}
			var s string
			if json.Unmarshal(raw, &s) != nil {
				s = "\x00" // not reached: the walker took it from a valid document
			}
			return &s
		}
		return nodeview.Annotations{Topology: unquote(topo), Assigned: unquote(assigned), NUMAFree: unquote(free), Allocator: unquote(settings)}
	})
}

// rawFingerprint names what a node item of the fast path publishes by its
// annotations' JSON text as sent (never the fingerprint of a typed node,
// nodeview.FingerprintOf: the two never share a state).
func rawFingerprint(n *rawNode) nodeview.Fingerprint {
	h := sha256.New()
	h.Write([]byte("raw node annotations\x00"))
	for _, raw := range n.ann {
		if raw == nil {
			h.Write([]byte("-"))
			continue
		}
		// A raw JSON string ends at its first unescaped quote: it
		// delimits itself from the annotations after it.
		h.Write([]byte("+"))
		h.Write(raw)
	}
	return nodeview.Fingerprint(h.Sum(nil))
}

// rawLabel is the value of a label of the fast path (a raw JSON string;
// nil when absent) as the typed path reads it: one of Koordinator's names,
// without allocating, else unquoted.
func rawLabel(raw []byte) string {
	if raw == nil {
		return ""
	}
	v := raw[1 : len(raw)-1]
	for _, names := range [][]string{nodestate.KoordCPUBindPolicies, nodestate.KoordNUMATopologyPolicies, nodestate.KoordNUMAAllocateStrategies} {
		for _, name := range names {
			if string(v) == name {
				return name
			}
		}
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "\x00" // not reached: the walker took it from a valid document
	}
	return s
}

func short(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
