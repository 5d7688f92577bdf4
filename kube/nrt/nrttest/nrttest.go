// Package nrttest builds NodeResourceTopology objects for tests, as
// corepin nri --publish-nrt builds them (nrt.Build).
package nrttest

import (
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/kube/nrt"
	"github.com/corepin/corepin/topology"
)

// Free is node's NodeResourceTopology object (v1alpha2) for a machine of
// 8 single-thread cores per NUMA node with free[i] of node i's CPUs not
// held by an exclusive workload, default topology policy
// single-numa-node.
func Free(node string, free ...int) (*unstructured.Unstructured, error) {
	topo, err := topology.Synthetic(topology.Shape{Sockets: len(free), NodesPerSocket: 1, L3PerNode: 1, CoresPerL3: 8, ThreadsPerCore: 1})
	if err != nil {
		return nil, fmt.Errorf("building the machine: %w", err)
	}
	var held cpuset.Builder
	for n, f := range free {
		for i, c := range topo.NodeCPUs(topology.NodeID(n)).List() {
			if i >= f {
				held.Add(c)
			}
		}
	}
	b, err := json.Marshal(nrt.Build(node, topo, alloc.Pools{LSE: held.Result()}, "single-numa-node"))
	if err != nil {
		return nil, fmt.Errorf("encoding the object: %w", err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(b); err != nil {
		return nil, fmt.Errorf("decoding the object: %w", err)
	}
	return u, nil
}
