package extender

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/internal/testutil"
	"github.com/corepin/corepin/kube/nodestate"
	"github.com/corepin/corepin/kube/podmeta"
	"github.com/corepin/corepin/topology"
)

// isolatedNode publishes, as the node's plugin does (NodeAnnotations), a
// real kernel's machine with isolcpus=6,7 nohz_full=6,7
// (topology/testdata/vm) holding what held asks for.
func isolatedNode(t *testing.T, name string, held ...alloc.Request) corev1.Node {
	t.Helper()
	topo, err := topology.Discover(testutil.VMDump(t, "qemu-2s2c2t-isolcpus6-7"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := alloc.NewState(topo, alloc.NodeSettings{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range held {
		if _, err := st.Allocate(r); err != nil {
			t.Fatal(err)
		}
	}
	ann, _, err := nodestate.NodeAnnotations(st, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for k, v := range ann {
		if v != nil {
			m[k] = *v
		}
	}
	return node(name, m)
}

// TestFilterIsolatedCPUs: a pod annotated corepin.io/isolated-cpus require
// is kept on the node whose isolated CPUs are free, refused where another
// pod holds them (preemption could help), on a node without isolated CPUs
// (it could not) and on one publishing only free CPUs per NUMA node (which
// names no isolated CPUs), with the one reason the scheduler plugin gives too
// (nodestate.Reason); without the annotation it fits everywhere.
func TestFilterIsolatedCPUs(t *testing.T) {
	free := isolatedNode(t, "free")
	held := isolatedNode(t, "held", alloc.Request{ID: "a/rt", CPUs: 2, QoS: alloc.LSE, Isolated: alloc.IsolatedRequire})
	plain := topoNode(t, "plain", "")
	// The coarse form says no more than free CPUs per NUMA node: no
	// isolated ones.
	coarse := node("coarse", map[string]string{AnnotationNUMAFree: "[4,4]"})
	pod := guaranteedPod("rt", "2", map[string]string{podmeta.AnnotationIsolatedCPUs: "require"}, nil)
	h := New().Handler()
	res := filter(t, h, args(t, pod, free, held, plain, coarse))
	const reason = "fewer than 2 free isolated CPUs (the pod requires them)"
	if diff := cmp.Diff([]string{"free"}, names(res.Nodes)); diff != "" {
		t.Errorf("kept nodes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"held": reason, "coarse": reason}, map[string]string(res.FailedNodes)); diff != "" {
		t.Errorf("failed nodes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"plain": reason}, map[string]string(res.FailedAndUnresolvableNodes)); diff != "" {
		t.Errorf("failed and unresolvable nodes (-want +got):\n%s", diff)
	}
	pod.Annotations = nil
	res = filter(t, h, args(t, pod, free, held, plain, coarse))
	if diff := cmp.Diff([]string{"free", "held", "plain", "coarse"}, names(res.Nodes)); diff != "" {
		t.Errorf("without the annotation, kept nodes (-want +got):\n%s", diff)
	}
}
