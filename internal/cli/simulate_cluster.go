package cli

import (
	"cmp"
	"context"
	"fmt"

	"github.com/corepin/corepin/kube/kubeclient"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/kube/extender"
	"github.com/corepin/corepin/kube/nrt"
	"github.com/corepin/corepin/sim"
	"github.com/corepin/corepin/topology"
)

// skippedNode is a cluster node simulate --from-cluster leaves out.
type skippedNode struct {
	Node   string `json:"node"`
	Reason string `json:"reason"`
}

// nodePageSize is the Nodes asked for per list request.
const nodePageSize = 500

// clusterView is what simulate --from-cluster reads of a cluster.
type clusterView struct {
	nodes   []sim.Node
	skipped []skippedNode
	// topologyPolicies counts the simulated nodes by the default topology
	// policy their corepin.io/allocator names ("none" when it names
	// none); unpublished counts those without a readable one.
	topologyPolicies map[alloc.TopologyPolicy]int
	unpublished      int
}

// nodesTopologyPolicy is the default topology policy every simulated node
// publishes, ok false when some node publishes none or they differ.
func (v clusterView) nodesTopologyPolicy() (tp alloc.TopologyPolicy, ok bool) {
	if v.unpublished > 0 || len(v.topologyPolicies) != 1 {
		return "", false
	}
	for tp := range v.topologyPolicies {
		return tp, true
	}
	return "", false
}

// clusterNodes lists the cluster's Node objects, a page at a time and at
// most sim.MaxNodes, and makes each one publishing corepin's
// corepin.io/topology annotation a simulated node, its
// corepin.io/assigned CPUs held. Nodes publishing the same machine share
// one topology. Nodes without the annotation, or with one that does not
// decode, are returned as skipped with the reason. Each simulated node's
// corepin.io/allocator, when it has a readable one, is counted by its
// default topology policy.
func clusterNodes(ctx context.Context, api kubeclient.Reader) (clusterView, error) {
	v := clusterView{topologyPolicies: map[alloc.TopologyPolicy]int{}}
	machines := map[string]*topology.Topology{}
	opts := metav1.ListOptions{Limit: nodePageSize}
	seen := 0
	for {
		list, err := api.ListNodes(ctx, opts)
		if err != nil {
			return clusterView{}, fmt.Errorf("listing the cluster's nodes: %w", err)
		}
		for i := range list.Items {
			n := &list.Items[i]
			if seen++; seen > sim.MaxNodes {
				return clusterView{}, Usagef("the cluster has more than %d nodes, the most simulate replays over", sim.MaxNodes)
			}
			t, held, ok, err := extender.NodeTopology(n)
			switch {
			case !ok:
				v.skipped = append(v.skipped, skippedNode{Node: n.Name, Reason: "no " + extender.AnnotationTopology + " annotation (the corepin agent or NRI plugin publishes it)"})
				continue
			case err != nil:
				v.skipped = append(v.skipped, skippedNode{Node: n.Name, Reason: err.Error()})
				continue
			}
			key := n.Annotations[extender.AnnotationTopology]
			if m, ok := machines[key]; ok {
				t = m
			} else {
				machines[key] = t
			}
			v.nodes = append(v.nodes, sim.Node{Name: n.Name, Topology: t, Held: held})
			if a, err := nrt.ParseAllocator(n.Annotations[extender.AnnotationAllocator]); err == nil && n.Annotations[extender.AnnotationAllocator] != "" {
				v.topologyPolicies[cmp.Or(alloc.TopologyPolicy(a.TopologyPolicy), alloc.TopologyNone)]++
			} else {
				v.unpublished++
			}
		}
		if list.Continue == "" {
			return v, nil
		}
		opts.Continue = list.Continue
	}
}
