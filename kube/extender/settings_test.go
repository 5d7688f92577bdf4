package extender

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/kube/nodestate"
	"github.com/corepin/corepin/kube/nodestate/nodestatetest"
	"github.com/corepin/corepin/topology"
)

// withoutSettings is n as a node of an older corepin publishes it: the
// same state, no AnnotationAllocator.
func withoutSettings(n corev1.Node, name string) corev1.Node {
	ann := maps.Clone(n.Annotations)
	delete(ann, AnnotationAllocator)
	return node(name, ann)
}

// TestNodeSettingsChangeTheVerdict: for each case the node itself refuses
// the pod (nodeAdmits), the extender judging the published state with its
// settings refuses it too, and an extender blind to the settings (the same
// annotations without AnnotationAllocator, as before this annotation
// existed) would have bound it there.
func TestNodeSettingsChangeTheVerdict(t *testing.T) {
	smt := topology.Shape{Sockets: 2, NodesPerSocket: 1, L3PerNode: 1, CoresPerL3: 4, ThreadsPerCore: 2}
	tests := []struct {
		name           string
		cfg            alloc.NodeSettings
		topologyPolicy string
		held           []alloc.Request
		pod            *corev1.Pod
		reason         string
	}{
		{name: "kubelet full-pcpus-only refuses an odd count on SMT",
			cfg: alloc.NodeSettings{Policy: alloc.PolicyKubelet, Options: []string{alloc.OptFullPCPUsOnly}},
			pod: guaranteedPod("odd", "3", nil, nil), reason: "3 CPUs is not a whole number of 2-thread cores"},
		{name: "corepin full-pcpus-only refuses an odd count on SMT",
			cfg:  alloc.NodeSettings{Options: []string{alloc.OptFullPCPUsOnly}},
			held: []alloc.Request{{ID: "a", CPUs: 2}},
			pod:  guaranteedPod("odd", "5", nil, nil), reason: "5 CPUs is not a whole number of 2-thread cores"},
		{name: "node default single-numa-node, pod names none",
			cfg: alloc.NodeSettings{}, topologyPolicy: "single-numa-node",
			pod: guaranteedPod("nine", "9", nil, nil), reason: "no NUMA node with 9 free CPUs (the node's default topology policy single-numa-node)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, err := alloc.NewState(topology.MustSynthetic(smt), tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range tc.held {
				if _, err := st.Allocate(r); err != nil {
					t.Fatalf("holding %s: %v", r.ID, err)
				}
			}
			req, err := RequestOf(tc.pod)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := nodeAdmits(st, req, tc.topologyPolicy); err == nil {
				t.Fatalf("the node admits %s: the case shows nothing", req.ID)
			}
			now := publishedNode(t, "now", st, tc.topologyPolicy)
			before := withoutSettings(now, "before")
			body := args(t, tc.pod, now, before)
			res := filter(t, New().Handler(), body)
			if diff := cmp.Diff([]string{"before"}, names(res.Nodes)); diff != "" {
				t.Errorf("kept nodes (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(extenderv1.FailedNodesMap{"now": tc.reason}, failedAll(res)); diff != "" {
				t.Errorf("failed nodes (-want +got):\n%s", diff)
			}
			checkSameAnswers(t, body, 2)
		})
	}
}

// failedAll is every node res fails, resolvable or not.
func failedAll(res extenderv1.ExtenderFilterResult) extenderv1.FailedNodesMap {
	m := extenderv1.FailedNodesMap{}
	maps.Copy(m, res.FailedNodes)
	maps.Copy(m, res.FailedAndUnresolvableNodes)
	return m
}

// A pod's own corepin.io/numa-policy overrides the node's default, as on
// the node; the node view's kept verdicts keep the two apart.
func TestPodTopologyPolicyOverridesTheNodeDefault(t *testing.T) {
	st, err := alloc.NewState(topology.MustSynthetic(topology.Shape{Sockets: 2, NodesPerSocket: 1, L3PerNode: 1, CoresPerL3: 4, ThreadsPerCore: 2}), alloc.NodeSettings{})
	if err != nil {
		t.Fatal(err)
	}
	n := publishedNode(t, "n", st, "single-numa-node")
	h := New().Handler()
	for _, tc := range []struct {
		policy string // "" names none
		kept   bool
		reason string
	}{
		{policy: "", reason: "no NUMA node with 9 free CPUs (the node's default topology policy single-numa-node)"},
		{policy: "none", kept: true},
		{policy: "best-effort", kept: true},
		{policy: "single-numa-node", reason: "no NUMA node with 9 free CPUs"},
		{policy: "", reason: "no NUMA node with 9 free CPUs (the node's default topology policy single-numa-node)"},
	} {
		var ann map[string]string
		if tc.policy != "" {
			ann = map[string]string{AnnotationNUMAPolicy: tc.policy}
		}
		pod := guaranteedPod("nine", "9", ann, nil)
		req, err := RequestOf(pod)
		if err != nil {
			t.Fatal(err)
		}
		_, nerr := nodeAdmits(st, req, "single-numa-node")
		res := filter(t, h, args(t, pod, n))
		if kept := len(res.Nodes.Items) == 1; kept != tc.kept || kept != (nerr == nil) || failedAll(res)["n"] != tc.reason {
			t.Errorf("pod naming %q: kept %v (node: %v), reason %q; want kept %v, reason %q", tc.policy, kept, nerr, failedAll(res)["n"], tc.kept, tc.reason)
		}
	}
}

// A malformed AnnotationAllocator fails its node, unresolvably, with a
// reason naming the annotation and what it allows, on the typed and the
// fast path alike; it never panics and never judges the node without it.
func TestBadAllocatorAnnotationFailsTheNode(t *testing.T) {
	st, err := alloc.NewState(topology.MustSynthetic(topology.Shape{Sockets: 2, NodesPerSocket: 1, L3PerNode: 1, CoresPerL3: 4, ThreadsPerCore: 2}), alloc.NodeSettings{})
	if err != nil {
		t.Fatal(err)
	}
	good := publishedNode(t, "good", st, "")
	tests := []struct {
		name, value string
		want        []string
	}{
		{name: "unknown policy", value: `{"policy":"static"}`, want: []string{"policy", `"static"`, "corepin or kubelet"}},
		{name: "unknown option", value: `{"options":["full-pcpu-only"]}`, want: []string{`"full-pcpu-only"`, "full-pcpus-only"}},
		{name: "unknown topology policy", value: `{"topology_policy":"numa"}`, want: []string{`"numa"`, "none, best-effort, restricted or single-numa-node"}},
		{name: "unknown field", value: `{"policy":"kubelet","reserved_cpus":"0"}`, want: []string{`unknown field "reserved_cpus"`}},
		{name: "not JSON", value: `kubelet`, want: []string{"is not a JSON object"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			full := node("full", maps.Clone(good.Annotations))
			full.Annotations[AnnotationAllocator] = tc.value
			coarse := node("coarse", map[string]string{AnnotationNUMAFree: "[8,8]", AnnotationAllocator: tc.value})
			body := args(t, guaranteedPod("p", "1", nil, nil), full, coarse)
			checkSameAnswers(t, body, 2)
			res := filter(t, New().Handler(), body)
			for _, n := range []string{"full", "coarse"} {
				reason, ok := res.FailedAndUnresolvableNodes[n]
				if !ok {
					t.Errorf("%s node with %s %s: not failed unresolvably (%+v)", n, AnnotationAllocator, tc.value, res)
					continue
				}
				for _, w := range append([]string{AnnotationAllocator}, tc.want...) {
					if !strings.Contains(reason, w) {
						t.Errorf("%s node: reason %q does not say %q", n, reason, w)
					}
				}
			}
		})
	}
	// Settings the machine cannot take: align-by-socket on two sockets
	// sharing one NUMA node.
	twoSockets := node("sockets", map[string]string{
		AnnotationTopology:  `{"cpus":[{"cpu":0,"online":true,"allowed":true,"socket":0,"numa":0,"l3":0,"core":0},{"cpu":1,"online":true,"allowed":true,"socket":1,"numa":0,"l3":1,"core":1}]}`,
		AnnotationAllocator: `{"policy":"kubelet","options":["align-by-socket"]}`})
	body := args(t, guaranteedPod("p", "1", nil, nil), twoSockets)
	checkSameAnswers(t, body, 1)
	reason := filter(t, New().Handler(), body).FailedAndUnresolvableNodes["sockets"]
	if !strings.Contains(reason, AnnotationAllocator) || !strings.Contains(reason, "align-by-socket needs at least as many NUMA nodes as sockets") {
		t.Errorf("align-by-socket on 2 sockets and 1 NUMA node: reason %q, want one naming %s and the option", reason, AnnotationAllocator)
	}
	// The annotation alone publishes no state: the node is not judged.
	lone := node("lone", map[string]string{AnnotationAllocator: `{"policy":"static"}`})
	res := filter(t, New().Handler(), args(t, guaranteedPod("p", "1", nil, nil), lone))
	if diff := cmp.Diff([]string{"lone"}, names(res.Nodes)); diff != "" {
		t.Errorf("a node with only %s: kept (-want +got):\n%s", AnnotationAllocator, diff)
	}
}

// A node's settings are part of what the node view keys its state by: the
// same machine and assignments under other settings are decoded anew,
// never served from the state of the first, on either path: an extender
// reading the node typed, and one reading it on the fast path, answer
// each as an extender that saw it alone.
func TestSettingsAreInTheStateKey(t *testing.T) {
	st, err := alloc.NewState(topology.MustSynthetic(topology.Shape{Sockets: 2, NodesPerSocket: 1, L3PerNode: 1, CoresPerL3: 4, ThreadsPerCore: 2}), alloc.NodeSettings{})
	if err != nil {
		t.Fatal(err)
	}
	asks := []alloc.Request{
		{ID: "a/b", CPUs: 6, QoS: alloc.LSE},
		{ID: "a/b", CPUs: 2, QoS: alloc.LSE, Bind: alloc.BindFullPCPUs},
		{ID: "a/b", CPUs: 3, QoS: alloc.LSE},
	}
	answers := func(e *Extender) string {
		var b strings.Builder
		for _, r := range asks {
			fmt.Fprintf(&b, "%+v;", e.view.Judge("n", r, nil, e.view.Key(r)))
		}
		return b.String()
	}
	typed, fast := New(), New()
	base := publishedNode(t, "n", st, "")
	seen := map[string]string{}
	for round := range 2 {
		for _, v := range []string{"", `{"policy":"corepin"}`, `{"policy":"kubelet"}`, `{"policy":"corepin","topology_policy":"single-numa-node"}`,
			`{"policy":"kubelet","options":["full-pcpus-only"]}`} {
			n := node("n", maps.Clone(base.Annotations))
			delete(n.Annotations, AnnotationAllocator)
			if v != "" {
				n.Annotations[AnnotationAllocator] = v
			}
			alone := New()
			alone.setNode(&n)
			want := answers(alone)
			typed.setNode(&n)
			if got := answers(typed); got != want {
				t.Errorf("round %d, settings %q: answers %s, alone %s", round, v, got, want)
			}
			raw := rawOf(t, n)
			fast.setRawNode(&raw)
			if got := answers(fast); got != want {
				t.Errorf("round %d, settings %q on the fast path: answers %s, alone %s", round, v, got, want)
			}
			seen[want] = v
		}
	}
	if len(seen) < 3 {
		t.Errorf("the settings give %d sets of answers: the requests tell them apart too little", len(seen))
	}
}

// rawOf is n as the fast path reads it.
func rawOf(t *testing.T, n corev1.Node) rawNode {
	t.Helper()
	b, err := json.Marshal(n)
	if err != nil {
		t.Fatal(err)
	}
	raw, ok := readNode(b)
	if !ok {
		t.Fatalf("the fast path does not read node %s", n.Name)
	}
	return raw
}

// A NodeResourceTopology's topologyManagerPolicy is the default of pods
// naming none, and its corepin attributes choose the engine; an object
// with an unknown name in them fails its node for pinned pods, with a
// warning.
func TestNRTAttributesAreTheNodeSettings(t *testing.T) {
	log := &logBuf{}
	s := NewNRTStore(10, slog.New(slog.NewTextHandler(log, nil)))
	topo := topology.MustSynthetic(topology.Shape{Sockets: 2, NodesPerSocket: 1, L3PerNode: 1, CoresPerL3: 8, ThreadsPerCore: 1})
	set := func(name string, a nodestate.Allocator) {
		o := nodestate.BuildNRTWith(name, topo, alloc.Pools{}, a)
		s.Set(name, o.Zones, o.Attributes...)
	}
	set("snn", nodestate.Allocator{TopologyPolicy: "single-numa-node"})
	set("none", nodestate.Allocator{})
	set("kubelet", nodestate.Allocator{Policy: "kubelet", Options: []string{alloc.OptFullPCPUsOnly}, TopologyPolicy: "restricted"})
	s.Set("bad", nodestate.BuildNRT("bad", topo, alloc.Pools{}, "").Zones, nodestate.Attribute{Name: nodestate.AttrTopologyPolicy, Value: "SingleNUMANodeContainerLevel"})
	if ent, ok := s.get("bad"); !ok || ent.readErr == nil || !strings.Contains(log.String(), "single-numa-node") {
		t.Errorf("an unknown topologyManagerPolicy: entry %+v (kept %v), log %q; want it failed with a warning listing the policies", ent, ok, log.String())
	}
	if got, _ := s.get("kubelet"); !cmp.Equal(got.settings, alloc.NodeSettings{Policy: alloc.PolicyKubelet, Options: []string{alloc.OptFullPCPUsOnly}, TopologyPolicy: alloc.TopologyRestricted},
		cmp.Comparer(cpuset.CPUSet.Equals)) {
		t.Errorf("kubelet node settings %+v", got.settings)
	}
	e := New(WithNRT(s))
	// The kubelet engine takes no bind strategy (alloc.ErrNoStrategy).
	kubelet := node("kubelet", nil)
	e.setNode(&kubelet)
	bind := alloc.Request{ID: "a/b", CPUs: 2, QoS: alloc.LSE, Bind: alloc.BindSpreadByPCPUs}
	if v := e.view.Judge("kubelet", bind, nil, e.view.Key(bind)); v.OK || !strings.Contains(v.Reason, alloc.ErrNoStrategy.Error()) {
		t.Errorf("a bind strategy on the kubelet node: %+v, want the kubelet engine's refusal", v)
	}
	body := args(t, guaranteedPod("nine", "9", nil, nil), node("snn", nil), node("none", nil), node("bad", nil))
	res := filter(t, e.Handler(), body)
	if diff := cmp.Diff([]string{"none"}, names(res.Nodes)); diff != "" {
		t.Errorf("kept (-want +got):\n%s", diff)
	}
	if got, want := failedAll(res)["snn"], "no NUMA node with 9 free CPUs (the node's default topology policy single-numa-node)"; got != want {
		t.Errorf("snn reason %q, want %q", got, want)
	}
}

// The settings of an object reach the store through the informer (its
// transform keeps the attributes).
func TestNRTInformerKeepsAttributes(t *testing.T) {
	s, _, _ := watchedStore(t, nodestatetest.NRT(t, "w1", 8, 2))
	got, ok := s.get("w1")
	if !ok || got.settings.TopologyPolicy != "single-numa-node" {
		t.Errorf("w1 settings %+v (kept %v), want topology policy single-numa-node", got.settings, ok)
	}
}
