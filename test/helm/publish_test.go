package helm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/kube/kubeclient"
	"github.com/corepin/corepin/kube/nodestate"
	"github.com/corepin/corepin/kube/publish"
	"github.com/corepin/corepin/test/kube/kubetest"
	"github.com/corepin/corepin/topology"
)

// pluginPublishes runs corepin nri's own publisher (kube/publish, built
// as the CLI builds it for --kubeconfig: kubeclient.Config, here a
// kubeconfig whose user reads node A's pod-bound token from a file, as a
// pod's projected token is read) against the API server with the CRD and
// the shipped policy: node A's NodeResourceTopology is created, then
// patched, and reads back through the extender's decoder as published;
// node A's annotations read back as the machine and assignments
// published, beside the annotation it does not own; node B's object and
// Node stay out of reach, refused by the policy.
func pluginPublishes(ctx context.Context, t *testing.T, cp *kubetest.ControlPlane, admin dynamic.Interface, tokenA string) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(tokenA+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	kc := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kc, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: test, cluster: {server: %q, insecure-skip-tls-verify: true}}]
users: [{name: plugin, user: {tokenFile: %q}}]
contexts: [{name: plugin, context: {cluster: test, user: plugin}}]
current-context: plugin
`, cp.API, tokenFile)), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := kubeclient.Config(kubeclient.Options{Kubeconfig: kc, UserAgent: "corepin-nri/test"})
	if err != nil {
		t.Fatal(err)
	}
	pub, err := publish.New(cfg)
	if err != nil {
		t.Fatal(err)
	}

	// The plugin's first publication creates the object: remove the one
	// the attempts above wrote.
	if err := admin.Resource(nrtResource).Delete(ctx, nodeA, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	topo := topology.MustSynthetic(topology.Shape{Sockets: 2, NodesPerSocket: 1, L3PerNode: 1, CoresPerL3: 4, ThreadsPerCore: 2})
	set := alloc.NodeSettings{Policy: alloc.PolicyKubelet, Options: []string{alloc.OptFullPCPUsOnly}, Reserved: cpuset.New(0, 8)}
	st, err := alloc.NewState(topo, set)
	if err != nil {
		t.Fatal(err)
	}
	set.TopologyPolicy = alloc.TopologySingleNUMANode
	settings := nodestate.AllocatorOf(set)
	nrtOf := func(node string) nodestate.NRTObject { return nodestate.BuildNRTWith(node, topo, st.Pools(), settings) }
	if err := pub.Publish(ctx, nrtOf(nodeA)); err != nil {
		t.Fatalf("the plugin's first publication (a create): %v", err)
	}
	if _, err := st.Allocate(alloc.Request{ID: "db", CPUs: 4, QoS: alloc.LSE, TopologyPolicy: alloc.TopologySingleNUMANode}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Allocate(alloc.Request{ID: "web", MilliCPUs: 1500, QoS: alloc.LS}); err != nil {
		t.Fatal(err)
	}
	if err := pub.Publish(ctx, nrtOf(nodeA)); err != nil {
		t.Fatalf("the plugin's next publication (a merge patch): %v", err)
	}
	u, err := admin.Resource(nrtResource).Get(ctx, nodeA, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := nodestate.ParseNRT(u)
	if err != nil {
		t.Fatalf("node A's object does not read back: %v", err)
	}
	wantFree, err := nodestate.FreeCPUs(nrtOf(nodeA).Zones)
	if err != nil {
		t.Fatal(err)
	}
	cpusets := cmp.Comparer(func(a, b cpuset.CPUSet) bool { return a.Equals(b) })
	if diff := cmp.Diff(nodestate.NRTNode{Name: nodeA, Free: wantFree, Settings: settings.Settings()}, got, cpusets); diff != "" {
		t.Errorf("node A's NodeResourceTopology read back (-published +stored):\n%s", diff)
	}
	if sum := wantFree[0] + wantFree[1]; sum != 10 {
		t.Errorf("published free CPUs %v, want 10 (16 less 2 reserved and 4 held)", wantFree)
	}

	pods := map[string]string{"db": "uid-db", "web": "uid-web"}
	a := &publish.Annotator{Publisher: pub, Node: nodeA, TopologyPolicy: alloc.TopologySingleNUMANode}
	if err := a.Annotate(ctx, st, pods); err != nil {
		t.Fatalf("the plugin annotating its own node: %v", err)
	}
	node, err := cp.Client.CoreV1().Nodes().Get(ctx, nodeA, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gotTopo, held, ok, err := nodestate.NodeTopology(node)
	if err != nil || !ok {
		t.Fatalf("node A's annotations do not read back: ok %v, %v (%v)", ok, err, node.Annotations)
	}
	if len(gotTopo.CPUs()) != len(topo.CPUs()) {
		t.Errorf("the published machine has %d CPUs, want %d", len(gotTopo.CPUs()), len(topo.CPUs()))
	}
	wantHeld := []alloc.Assignment{{ID: nodestate.ReservedID, QoS: alloc.LSE, CPUs: set.Reserved}}
	for _, as := range st.Assignments() {
		if as.QoS == alloc.LS {
			as.Exclusive = "" // a quota has no exclusivity on the wire
		}
		wantHeld = append(wantHeld, as)
	}
	if diff := cmp.Diff(wantHeld, held, cpusets); diff != "" {
		t.Errorf("node A's published assignments (-state +read back):\n%s", diff)
	}
	if node.Annotations["example.com/owner"] != "ops" || node.Annotations[nodestate.AnnotationNUMAFree] != "" || node.Labels["kubernetes.io/hostname"] != nodeA {
		t.Errorf("node A after the plugin's patch: annotations %v labels %v; want example.com/owner kept, %s removed, labels as created",
			node.Annotations, node.Labels, nodestate.AnnotationNUMAFree)
	}
	var set2 nodestate.Allocator
	if raw := node.Annotations[nodestate.AnnotationAllocator]; !strings.Contains(raw, `"pod_uids":true`) || !strings.Contains(raw, `"topology_policy":"single-numa-node"`) {
		t.Errorf("%s = %s, want the settings with pod_uids", nodestate.AnnotationAllocator, raw)
	} else if set2, err = nodestate.ParseAllocator(raw); err != nil || set2.Policy != "kubelet" {
		t.Errorf("%s = %s: %+v, %v", nodestate.AnnotationAllocator, raw, set2, err)
	}

	// Node B is not node A's plugin's to write, by the same code.
	err = pub.Publish(ctx, nrtOf(nodeB))
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), policyName) {
		t.Errorf("node A's plugin publishing node B's object: %v, want the policy's refusal", err)
	}
	v := "[1]"
	err = pub.AnnotateNode(ctx, nodeB, nodestate.Annotations{nodestate.AnnotationNUMAFree: &v})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), policyName) {
		t.Errorf("node A's plugin annotating node B: %v, want the policy's refusal", err)
	}
}
