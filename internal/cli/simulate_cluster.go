package cli

import (
	"context"
	"fmt"

	"github.com/corepin/corepin/kube/kubeclient"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corepin/corepin/kube/extender"
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

// clusterNodes lists the cluster's Node objects, a page at a time and at
// most sim.MaxNodes, and makes each one publishing corepin's
// corepin.io/topology annotation a simulated node, its
// corepin.io/assigned CPUs held. Nodes publishing the same machine share
// one topology. Nodes without the annotation, or with one that does not
// decode, are returned as skipped with the reason.
func clusterNodes(ctx context.Context, api kubeclient.Reader) ([]sim.Node, []skippedNode, error) {
	var nodes []sim.Node
	var skipped []skippedNode
	machines := map[string]*topology.Topology{}
	opts := metav1.ListOptions{Limit: nodePageSize}
	seen := 0
	for {
		list, err := api.ListNodes(ctx, opts)
		if err != nil {
			return nil, nil, fmt.Errorf("listing the cluster's nodes: %w", err)
		}
		for i := range list.Items {
			n := &list.Items[i]
			if seen++; seen > sim.MaxNodes {
				return nil, nil, Usagef("the cluster has more than %d nodes, the most simulate replays over", sim.MaxNodes)
			}
			t, held, ok, err := extender.NodeTopology(n)
			switch {
			case !ok:
				skipped = append(skipped, skippedNode{Node: n.Name, Reason: "no " + extender.AnnotationTopology + " annotation (the corepin agent or NRI plugin publishes it)"})
				continue
			case err != nil:
				skipped = append(skipped, skippedNode{Node: n.Name, Reason: err.Error()})
				continue
			}
			key := n.Annotations[extender.AnnotationTopology]
			if m, ok := machines[key]; ok {
				t = m
			} else {
				machines[key] = t
			}
			nodes = append(nodes, sim.Node{Name: n.Name, Topology: t, Held: held})
		}
		if list.Continue == "" {
			return nodes, skipped, nil
		}
		opts.Continue = list.Continue
	}
}
