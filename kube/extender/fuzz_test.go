package extender

import (
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

// FuzzHandlerDecode feeds arbitrary bodies to DecodeArgs and, when they
// decode, runs Filter and Prioritize on them: nothing may panic, and every
// node of the request gets exactly one answer.
func FuzzHandlerDecode(f *testing.F) {
	seed, err := os.ReadFile("testdata/filter-single-numa.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte(`{"Pod":{"metadata":{"annotations":{"scheduling.koordinator.sh/resource-spec":"{\"preferredCPUBindPolicy\":\"FullPCPUs\"}"}}},"Nodes":{"items":[{"metadata":{"name":"a","annotations":{"corepin.io/topology":"{\"cpus\":[{\"cpu\":0,\"online\":true,\"allowed\":true}]}"}}}]}}`))
	f.Add([]byte(`{"Pod":{},"NodeNames":["a"]}`))
	f.Add([]byte(`{"Pod":{},"Nodes":{"items":[{"metadata":{"name":"a","annotations":{"corepin.io/numa-free":"[4,4]","corepin.io/allocator":"{\"policy\":\"kubelet\",\"topology_policy\":\"single-numa-node\"}"}}}]}}`))
	// Two nodes of one name: one answer could only stand for both.
	f.Add([]byte(`{"Pod":{"spec":{"containers":[{"resources":{"limits":{"cpu":"2","memory":"1"}}}]}},"Nodes":{"items":[{"metadata":{"name":"a","annotations":{"corepin.io/numa-free":"[1]"}}},{"metadata":{"name":"a","annotations":{"corepin.io/numa-free":"[0]"}}}]}}`))
	e := New(WithMaxNodes(64))
	f.Fuzz(func(t *testing.T, body []byte) {
		args, err := DecodeArgs(body, 64)
		if err != nil {
			return
		}
		res := e.Filter(args)
		checkEveryNodeAnsweredOnce(t, args.Nodes.Items, res)
		prio := e.Prioritize(args)
		checkEveryNodeScoredOnce(t, args.Nodes.Items, *prio)
	})
}

// checkEveryNodeAnsweredOnce fails t unless each node of in is in exactly
// one of res's kept nodes, FailedNodes and FailedAndUnresolvableNodes,
// once, and res names no other node.
func checkEveryNodeAnsweredOnce(t *testing.T, in []corev1.Node, res *extenderv1.ExtenderFilterResult) {
	t.Helper()
	if res.Error != "" {
		t.Errorf("Filter answered the error %q", res.Error)
	}
	seen := map[string]int{}
	for _, n := range res.Nodes.Items {
		seen[n.Name]++
	}
	for name := range res.FailedNodes {
		seen[name]++
	}
	for name := range res.FailedAndUnresolvableNodes {
		seen[name]++
	}
	want := map[string]int{}
	for _, n := range in {
		want[n.Name]++
	}
	if diff := cmp.Diff(want, seen); diff != "" {
		t.Errorf("nodes answered by Filter, by name (-asked +answered):\n%s", diff)
	}
}

// checkEveryNodeScoredOnce fails t unless out scores each node of in once,
// in order, from 0 to MaxExtenderPriority.
func checkEveryNodeScoredOnce(t *testing.T, in []corev1.Node, out extenderv1.HostPriorityList) {
	t.Helper()
	var want, got []string
	for _, n := range in {
		want = append(want, n.Name)
	}
	for _, p := range out {
		got = append(got, p.Host)
		if p.Score < 0 || p.Score > extenderv1.MaxExtenderPriority {
			t.Errorf("score %d of %s outside [0, %d]", p.Score, p.Host, extenderv1.MaxExtenderPriority)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("nodes scored by Prioritize (-asked +scored):\n%s", diff)
	}
}
