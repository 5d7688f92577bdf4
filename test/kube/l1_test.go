package kube

import (
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler"
	schedulerapi "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/corepin/corepin/kube/extender"
	"github.com/corepin/corepin/test/kube/kubetest"
)

// L1: kube-scheduler's own HTTP extender client (the code the scheduler
// runs for each configured extender) against corepin's extender served
// over HTTP, with no API server.
func httpExtender(t *testing.T) fwk.Extender {
	t.Helper()
	srv := httptest.NewServer(extender.New().Handler())
	t.Cleanup(srv.Close)
	ext, err := scheduler.NewHTTPExtender(&schedulerapi.Extender{
		URLPrefix: srv.URL, FilterVerb: "filter", PrioritizeVerb: "prioritize", Weight: 2,
		HTTPTimeout: metav1.Duration{Duration: 10 * time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	return ext
}

func nodeInfos(t *testing.T) []fwk.NodeInfo {
	var out []fwk.NodeInfo
	for _, n := range kubetest.Nodes(t) {
		ni := framework.NewNodeInfo()
		ni.SetNode(n)
		out = append(out, ni)
	}
	return out
}

func names(nodes []fwk.NodeInfo) []string {
	var out []string
	for _, n := range nodes {
		out = append(out, n.Node().Name)
	}
	return out
}

func TestHTTPExtenderFilterKeepsTheOnlyAlignedNode(t *testing.T) {
	ext := httpExtender(t)
	kept, failed, unresolvable, err := ext.Filter(kubetest.CPUPod("enc", "default", "6"), nodeInfos(t))
	if err != nil {
		t.Fatalf("Filter: %v", err)
	}
	if got := names(kept); !slices.Equal(got, []string{"aligned"}) {
		t.Errorf("kept %v, want [aligned]", got)
	}
	for _, n := range []string{"split", "lopsided"} {
		reason := failed[n]
		if reason == "" {
			reason = unresolvable[n]
		}
		if reason != "no NUMA node with 6 free CPUs" {
			t.Errorf("node %s: reason %q, want %q", n, reason, "no NUMA node with 6 free CPUs")
		}
	}
}

func TestHTTPExtenderFilterRefusesEveryNodeWithOneReason(t *testing.T) {
	ext := httpExtender(t)
	kept, failed, unresolvable, err := ext.Filter(kubetest.CPUPod("big", "default", "9"), nodeInfos(t))
	if err != nil {
		t.Fatalf("Filter: %v", err)
	}
	if len(kept) != 0 {
		t.Errorf("kept %v, want none", names(kept))
	}
	for _, c := range kubetest.Cluster {
		reason := failed[c.Name]
		if reason == "" {
			reason = unresolvable[c.Name]
		}
		if reason != "no NUMA node with 9 free CPUs" {
			t.Errorf("node %s: reason %q", c.Name, reason)
		}
	}
}

func TestHTTPExtenderPrioritizePrefersAlignedAndTight(t *testing.T) {
	ext := httpExtender(t)
	// Without a topology policy the 6-CPU pod fits on all three; the node
	// where it lands on one NUMA node scores above the ones it would span.
	pod := kubetest.CPUPod("enc", "default", "6")
	delete(pod.Annotations, extender.AnnotationNUMAPolicy)
	scores, weight, err := ext.Prioritize(pod, nodeInfos(t))
	if err != nil {
		t.Fatalf("Prioritize: %v", err)
	}
	if weight != 2 {
		t.Errorf("weight %d, want 2 (the configuration's)", weight)
	}
	got := map[string]int64{}
	for _, hp := range *scores {
		got[hp.Host] = hp.Score
	}
	if len(got) != len(kubetest.Cluster) {
		t.Fatalf("scores %v: want one per node", got)
	}
	if !(got["aligned"] > got["split"] && got["aligned"] > got["lopsided"]) {
		t.Errorf("scores %v: want aligned above split and lopsided", got)
	}
	t.Logf("scores: %v", got)
}
