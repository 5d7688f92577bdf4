package nodeview

import (
	"errors"
	"strings"
	"testing"

	"github.com/corepin/corepin/alloc"
)

// TestKubeletEngineRefusesPodStrategy (issue 29, one answer per rule): on
// a node running the kubelet engine, a pod naming a bind, exclusive or
// NUMA strategy is refused for good with alloc.ErrNoStrategy's words, as
// the node refuses it (nodecore.Request): an LS pod too, which the
// summary would otherwise take by its shared pool; Reserve refuses it
// likewise. The same pods without a strategy are taken.
func TestKubeletEngineRefusesPodStrategy(t *testing.T) {
	st, err := alloc.NewState(machine(t).Topology(), alloc.NodeSettings{Policy: alloc.PolicyKubelet})
	if err != nil {
		t.Fatal(err)
	}
	c := New()
	c.SetNode(publish(t, baseNode("n1"), st, "", map[string]string{}))
	n := c.get("n1")
	if n == nil {
		t.Fatal("the node is not judged")
	}
	for _, tc := range []struct {
		name   string
		req    alloc.Request
		refuse bool
	}{
		{name: "LSE bind", req: alloc.Request{ID: "a/b", CPUs: 2, QoS: alloc.LSE, Bind: alloc.BindFullPCPUs}, refuse: true},
		{name: "LSE numa", req: alloc.Request{ID: "a/b", CPUs: 2, QoS: alloc.LSE, NUMA: alloc.LeastAllocated}, refuse: true},
		{name: "LSR exclusive", req: alloc.Request{ID: "a/b", CPUs: 2, QoS: alloc.LSR, Exclusive: alloc.ExclusivePCPULevel}, refuse: true},
		{name: "LS bind", req: alloc.Request{ID: "a/b", MilliCPUs: 1500, QoS: alloc.LS, Bind: alloc.BindSpreadByPCPUs}, refuse: true},
		{name: "LSE bind Default", req: alloc.Request{ID: "a/b", CPUs: 2, QoS: alloc.LSE, Bind: alloc.BindDefault}},
		{name: "LSE", req: alloc.Request{ID: "a/b", CPUs: 2, QoS: alloc.LSE}},
		{name: "LS", req: alloc.Request{ID: "a/b", MilliCPUs: 1500, QoS: alloc.LS}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := judge(n, tc.req, nil)
			if v.OK == tc.refuse {
				t.Fatalf("ok = %v (%s), want %v", v.OK, v.Reason, !tc.refuse)
			}
			err := c.Reserve("uid-"+tc.name, "n1", tc.req)
			if !tc.refuse {
				if err != nil {
					t.Fatalf("Reserve: %v", err)
				}
				c.Forget("uid-" + tc.name)
				return
			}
			if !v.Unresolvable || !strings.Contains(v.Reason, alloc.ErrNoStrategy.Error()) {
				t.Errorf("reason %q, unresolvable %v: want alloc.ErrNoStrategy's words, unresolvable", v.Reason, v.Unresolvable)
			}
			if !errors.Is(err, alloc.ErrNoStrategy) {
				t.Errorf("Reserve = %v, want alloc.ErrNoStrategy", err)
			}
		})
	}
}
