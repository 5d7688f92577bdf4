// Package kubetest holds the cluster the extender tests schedule on: its
// nodes as API objects publishing corepin's annotations, and its pods.
package kubetest

import (
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corepin/corepin/kube/extender"
	"github.com/corepin/corepin/topology"
)

// The cluster of every test: three nodes of the same machine, two NUMA
// nodes of 4 two-thread cores each (16 CPUs; in this synthetic x86 order
// NUMA node 0 is CPUs 0-3,8-11 and node 1 is 4-7,12-15), each publishing
// its topology and what it already holds the way a corepin node does.
//
//   - split: 3 CPUs held on each NUMA node, 10 free, 5 per NUMA node;
//   - lopsided: 5 held on node 0 and 3 on node 1, 8 free, 3 and 5;
//   - aligned: NUMA node 0 full, 8 free, all on NUMA node 1.
//
// A 6-CPU single-numa-node pod fits only on aligned, though split has the
// most free CPUs and every node has 16 allocatable CPUs for the scheduler's
// own resource fit. A 9-CPU one fits nowhere: no NUMA node has 9 CPUs.
var Cluster = []struct{ Name, Assigned string }{
	{"split", `[{"id":"a/x","cpuset":"0-2","qos":"LSE"},{"id":"a/y","cpuset":"4-6","qos":"LSE"}]`},
	{"lopsided", `[{"id":"a/x","cpuset":"0-3,8","qos":"LSE"},{"id":"a/y","cpuset":"4,12,13","qos":"LSE"}]`},
	{"aligned", `[{"id":"a/x","cpuset":"0-3,8-11","qos":"LSE"}]`},
}

// TopologyDoc is the node type's compact `corepin topo -o json` document.
func TopologyDoc(t testing.TB) string {
	t.Helper()
	topo := topology.MustSynthetic(topology.Shape{Sockets: 2, NodesPerSocket: 1, L3PerNode: 1, CoresPerL3: 4, ThreadsPerCore: 2})
	doc, err := json.Marshal(topo.Doc())
	if err != nil {
		t.Fatal(err)
	}
	return string(doc)
}

// Nodes returns the cluster's nodes as API objects: capacity and
// allocatable (16 CPUs, 64Gi, 110 pods), Ready, corepin's annotations.
func Nodes(t testing.TB) []*corev1.Node {
	var out []*corev1.Node
	for _, c := range Cluster {
		out = append(out, Node(t, c.Name, c.Assigned))
	}
	return out
}

// Node is one node of the cluster's machine type named name, holding the
// CPUs of assigned (the "assigned" list of corepin plan, "" for none).
func Node(t testing.TB, name, assigned string) *corev1.Node {
	doc := TopologyDoc(t)
	res := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("16"),
		corev1.ResourceMemory: resource.MustParse("64Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	ann := map[string]string{extender.AnnotationTopology: doc}
	if assigned != "" {
		ann[extender.AnnotationAssigned] = assigned
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      map[string]string{corev1.LabelHostname: name},
			Annotations: ann,
		},
		Status: corev1.NodeStatus{
			Capacity:    res,
			Allocatable: res,
			Conditions: []corev1.NodeCondition{{
				Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
				LastHeartbeatTime: metav1.NewTime(time.Now()),
			}},
		},
	}
}

// CPUPod is a Guaranteed pod of n whole CPUs asking for single-numa-node.
func CPUPod(name, namespace, cpus string) *corev1.Pod {
	rl := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpus), corev1.ResourceMemory: resource.MustParse("1Gi")}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: namespace,
			Annotations: map[string]string{extender.AnnotationNUMAPolicy: "single-numa-node"},
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "transcode", Image: "corepin/corepin:test",
			Resources: corev1.ResourceRequirements{Requests: rl, Limits: rl},
		}}},
	}
}
