// Package nodestatetest builds published node states for tests of their
// readers (the extender, the end-to-end cluster tests), the way corepin
// nri --publish-nrt builds them.
package nodestatetest

import (
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/kube/nodestate"
	"github.com/corepin/corepin/topology"
)

// NRT is node's NodeResourceTopology object as corepin nri --publish-nrt
// builds it (nodestate.BuildNRT, topology policy single-numa-node) for a
// machine of 8 single-thread cores per NUMA node, free[i] of node i's
// CPUs not held by an exclusive workload.
func NRT(tb testing.TB, node string, free ...int) *unstructured.Unstructured {
	tb.Helper()
	topo := topology.MustSynthetic(topology.Shape{Sockets: len(free), NodesPerSocket: 1, L3PerNode: 1, CoresPerL3: 8, ThreadsPerCore: 1})
	var held cpuset.Builder
	for n, f := range free {
		for i, c := range topo.NodeCPUs(topology.NodeID(n)).List() {
			if i >= f {
				held.Add(c)
			}
		}
	}
	return Unstructured(tb, nodestate.BuildNRT(node, topo, alloc.Pools{LSE: held.Result()}, "single-numa-node"))
}

// Unstructured is o, a Kubernetes object, as a dynamic client holds it.
func Unstructured(tb testing.TB, o any) *unstructured.Unstructured {
	tb.Helper()
	b, err := json.Marshal(o)
	if err != nil {
		tb.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(b); err != nil {
		tb.Fatalf("decoding %s: %v", b, err)
	}
	return u
}
