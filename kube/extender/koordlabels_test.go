package extender

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/kube/nodestate"
)

// Koordinator objects of the label tests, all on koordObject's machine
// (two NUMA nodes of 4 cores, 2 threads per core: NUMA node 0 is CPUs
// 0-3,8-11, node 1 4-7,12-15) with nothing held and CPU 8 reserved (the
// node's reservation), so node 0 has 7 free CPUs and node 1 8.
const (
	// koordNone: the kubelet's CPU manager policy none (corepin's engine),
	// topology policy None.
	koordNone = "k-none"
	// koordNoneSNN: as koordNone, topology policy SingleNUMANode.
	koordNoneSNN = "k-none-snn"
	// koordStatic: the kubelet's static policy without options (the
	// kubelet engine), topology policy None.
	koordStatic = "k-static"
	// koordStaticSNN: as koordStatic, topology policy SingleNUMANode.
	koordStaticSNN = "k-static-snn"
	// koordFull: the kubelet's static policy with full-pcpus-only.
	koordFull = "k-full"
	// zoneNode: a plain NodeResourceTopology of free CPUs per zone [4,4].
	zoneNode = "z"
)

// koordLabelObject is koordObject named name, nothing held, under kubelet
// policy kubelet and topology policy (topologyPolicies) policy.
func koordLabelObject(t testing.TB, name, kubelet, policy string) *unstructured.Unstructured {
	t.Helper()
	u := koordObject(t, name, map[string]string{
		nodestate.AnnotationKoordKubeletPolicy:    kubelet,
		nodestate.AnnotationKoordPodCPUAllocs:     "null",
		nodestate.AnnotationKoordCPUSharedPools:   koordAllShared,
		nodestate.AnnotationKoordBECPUSharedPools: koordAllShared,
	})
	u.Object["topologyPolicies"] = []any{policy}
	return u
}

// labelStore is a store of the label tests' objects, set without an
// informer (as the informer's handler sets them).
func labelStore(t testing.TB) *NRTStore {
	t.Helper()
	s := NewNRTStore(16, slog.New(slog.DiscardHandler))
	for _, u := range []*unstructured.Unstructured{
		koordLabelObject(t, koordNone, `{"policy":"none"}`, "None"),
		koordLabelObject(t, koordNoneSNN, `{"policy":"none"}`, "SingleNUMANodeContainerLevel"),
		koordLabelObject(t, koordStatic, `{"policy":"static"}`, "None"),
		koordLabelObject(t, koordStaticSNN, `{"policy":"static"}`, "SingleNUMANodePodLevel"),
		koordLabelObject(t, koordFull, `{"policy":"static","options":{"full-pcpus-only":"true"}}`, "None"),
	} {
		o, err := nodestate.FieldsOf(u)
		if err != nil {
			t.Fatal(err)
		}
		s.set(u.GetName(), o)
	}
	s.Set(zoneNode, []nodestate.Zone{zone("node-0", "4"), zone("node-1", "4")})
	if s.Len() != 6 {
		t.Fatalf("store kept %d nodes, want 6", s.Len())
	}
	return s
}

func zone(name, free string) nodestate.Zone {
	return nodestate.Zone{Name: name, Type: "Node", Resources: []nodestate.Resource{{Name: "cpu", Available: free}}}
}

// labeled is a Node named name carrying labels (key, value pairs).
func labeled(name string, annotations map[string]string, kv ...string) corev1.Node {
	n := node(name, annotations)
	if len(kv) > 0 {
		n.Labels = map[string]string{"kubernetes.io/hostname": name}
		for i := 0; i+1 < len(kv); i += 2 {
			n.Labels[kv[i]] = kv[i+1]
		}
	}
	return n
}

const (
	bindLabel = nodestate.LabelKoordCPUBindPolicy
	numaLabel = nodestate.LabelKoordNUMATopologyPolicy
)

// TestKoordinatorNodeLabels: each verdict differs with and without the
// node's Koordinator label, and the fast and typed paths agree on it.
func TestKoordinatorNodeLabels(t *testing.T) {
	s := labelStore(t)
	spread := map[string]string{AnnotationResourceSpec: `{"preferredCPUBindPolicy":"SpreadByPCPUs"}`}
	cases := []struct {
		name         string
		pod          *corev1.Pod
		node         corev1.Node
		unresolvable string // "" for kept
	}{
		// Topology policy. The label replaces the object's policy under
		// corepin's engine (the kubelet's CPU manager policy none).
		{name: "nine across NUMA nodes, no label", pod: guaranteedPod("nine", "9", nil, nil), node: labeled(koordNone, nil)},
		{name: "nine, label SingleNUMANode", pod: guaranteedPod("nine", "9", nil, nil), node: labeled(koordNone, nil, numaLabel, "SingleNUMANode"),
			unresolvable: "no NUMA node with 9 free CPUs (the node's label node.koordinator.sh/numa-topology-policy SingleNUMANode)"},
		{name: "nine, label Restricted", pod: guaranteedPod("nine", "9", nil, nil), node: labeled(koordNone, nil, numaLabel, "Restricted")},
		{name: "nine, object SingleNUMANode", pod: guaranteedPod("nine", "9", nil, nil), node: labeled(koordNoneSNN, nil),
			unresolvable: "no NUMA node with 9 free CPUs (the node's default topology policy single-numa-node)"},
		{name: "nine, object SingleNUMANode, label None", pod: guaranteedPod("nine", "9", nil, nil), node: labeled(koordNoneSNN, nil, numaLabel, "None")},
		{name: "nine, object SingleNUMANode, label BestEffort", pod: guaranteedPod("nine", "9", nil, nil), node: labeled(koordNoneSNN, nil, numaLabel, "BestEffort")},
		{name: "nine, object SingleNUMANode, empty label", pod: guaranteedPod("nine", "9", nil, nil), node: labeled(koordNoneSNN, nil, numaLabel, ""),
			unresolvable: "no NUMA node with 9 free CPUs (the node's default topology policy single-numa-node)"},
		{name: "nine naming none, label SingleNUMANode", pod: numaPod("nine", "9", "none"), node: labeled(koordNone, nil, numaLabel, "SingleNUMANode")},
		// Under the kubelet's static policy the kubelet still admits by
		// its own policy: the stricter one holds.
		{name: "static: nine, label SingleNUMANode", pod: guaranteedPod("nine", "9", nil, nil), node: labeled(koordStatic, nil, numaLabel, "SingleNUMANode"),
			unresolvable: "no NUMA node with 9 free CPUs (the node's label node.koordinator.sh/numa-topology-policy SingleNUMANode)"},
		{name: "static: nine, object SingleNUMANode, label None", pod: guaranteedPod("nine", "9", nil, nil), node: labeled(koordStaticSNN, nil, numaLabel, "None"),
			unresolvable: "no NUMA node with 9 free CPUs (the node's default topology policy single-numa-node)"},

		// Bind policy: FullPCPUsOnly refuses half cores, even to a pod
		// preferring SpreadByPCPUs (the node's policy comes first).
		{name: "three, no label", pod: guaranteedPod("three", "3", nil, nil), node: labeled(koordNone, nil)},
		{name: "three, label FullPCPUsOnly", pod: guaranteedPod("three", "3", nil, nil), node: labeled(koordNone, nil, bindLabel, "FullPCPUsOnly"),
			unresolvable: "(the node's label node.koordinator.sh/cpu-bind-policy FullPCPUsOnly)"},
		{name: "three spread, label FullPCPUsOnly", pod: guaranteedPod("three", "3", spread, nil), node: labeled(koordNone, nil, bindLabel, "FullPCPUsOnly"),
			unresolvable: "(the node's label node.koordinator.sh/cpu-bind-policy FullPCPUsOnly)"},
		{name: "four, label FullPCPUsOnly", pod: guaranteedPod("four", "4", nil, nil), node: labeled(koordNone, nil, bindLabel, "FullPCPUsOnly")},
		{name: "static: three, no label", pod: guaranteedPod("three", "3", nil, nil), node: labeled(koordStatic, nil)},
		{name: "static: three, label FullPCPUsOnly", pod: guaranteedPod("three", "3", nil, nil), node: labeled(koordStatic, nil, bindLabel, "FullPCPUsOnly"),
			unresolvable: "(the node's label node.koordinator.sh/cpu-bind-policy FullPCPUsOnly)"},
		{name: "three, label None", pod: guaranteedPod("three", "3", nil, nil), node: labeled(koordNone, nil, bindLabel, "None")},
		{name: "three, label SpreadByPCPUs", pod: guaranteedPod("three", "3", nil, nil), node: labeled(koordNone, nil, bindLabel, "SpreadByPCPUs")},
		// The kubelet's full-pcpus-only comes first: SpreadByPCPUs does not
		// lift it, and the refusal is not the label's.
		{name: "full: three, label SpreadByPCPUs", pod: guaranteedPod("three", "3", nil, nil), node: labeled(koordFull, nil, bindLabel, "SpreadByPCPUs"),
			unresolvable: "3 CPUs is not a whole number of 2-thread cores"},
		// A shared-pool pod is not bound.
		{name: "LS pod, label FullPCPUsOnly", pod: guaranteedPod("ls", "1500m", nil, nil), node: labeled(koordNone, nil, bindLabel, "FullPCPUsOnly")},

		// Only nodes Koordinator's object judges read the labels.
		{name: "zones: seven, label SingleNUMANode", pod: guaranteedPod("seven", "7", nil, nil), node: labeled(zoneNode, nil, numaLabel, "SingleNUMANode")},
		{name: "corepin node: label SingleNUMANode", pod: guaranteedPod("seven", "7", nil, nil),
			node: labeled("c", map[string]string{AnnotationNUMAFree: "[4,4]"}, numaLabel, "SingleNUMANode")},
	}
	h := New(WithNRT(s)).Handler()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := args(t, tc.pod, tc.node)
			res := filter(t, h, body)
			name := tc.node.Name
			got, ok := res.FailedAndUnresolvableNodes[name]
			switch {
			case tc.unresolvable == "" && (len(res.Nodes.Items) != 1 || len(res.FailedNodes)+len(res.FailedAndUnresolvableNodes) != 0):
				t.Errorf("failed %v, unresolvable %v; want %s kept", res.FailedNodes, res.FailedAndUnresolvableNodes, name)
			case tc.unresolvable != "" && (!ok || !strings.Contains(got, tc.unresolvable)):
				t.Errorf("kept %v, failed %v, unresolvable %v; want %s unresolvable: %q", names(res.Nodes), res.FailedNodes, res.FailedAndUnresolvableNodes, name, tc.unresolvable)
			}
			checkSameAnswers(t, body, 4, WithNRT(s))
		})
	}
}

// TestKoordinatorBindLabelPlaces: on an idle node a pod of 4 takes two
// whole cores; under SpreadByPCPUs one CPU on each of 4 cores, under
// FullPCPUsOnly two whole cores even when it prefers SpreadByPCPUs; under
// either engine. On this machine core c holds CPUs c and c+8.
func TestKoordinatorBindLabelPlaces(t *testing.T) {
	s := labelStore(t)
	for _, tc := range []struct {
		node, label string
		bind        alloc.Bind // the pod's own
		cores       int
	}{
		{node: koordNone, cores: 2},
		{node: koordNone, label: "SpreadByPCPUs", cores: 4},
		{node: koordNone, label: "SpreadByPCPUs", bind: alloc.BindFullPCPUs, cores: 4},
		{node: koordNone, label: "FullPCPUsOnly", bind: alloc.BindSpreadByPCPUs, cores: 2},
		{node: koordNone, bind: alloc.BindSpreadByPCPUs, cores: 4},
		{node: koordStatic, cores: 2},
		{node: koordStatic, label: "SpreadByPCPUs", cores: 4},
		{node: koordFull, label: "SpreadByPCPUs", cores: 2},
	} {
		t.Run(tc.node+"/"+tc.label+"/"+string(tc.bind), func(t *testing.T) {
			pl := koordPlacement(t, s, tc.node, tc.label, "", alloc.Request{ID: "p", CPUs: 4, QoS: alloc.LSE, Bind: tc.bind})
			cores := map[int]bool{}
			for _, c := range pl.CPUs.List() {
				cores[c%8] = true
			}
			if len(cores) != tc.cores {
				t.Errorf("placed on %s: %d cores, want %d", pl.CPUs, len(cores), tc.cores)
			}
		})
	}
}

// TestKoordinatorNUMAStrategyLabelPlaces: node.koordinator.sh/numa-allocate-strategy
// decides which NUMA node an exclusive pod's CPUs come from when several
// could take it. Koordinator's object reserves CPU 8, so NUMA node 0 has 7
// free CPUs and node 1 has 8: MostAllocated, the default, packs a 2-CPU
// pod on node 0, LeastAllocated spreads it to node 1, under corepin's
// engine; the kubelet engine (a static kubelet policy) places as the
// kubelet does, whatever the label. The fast and typed paths agree, and
// the label keys the state (TestKoordinatorLabelsKeyTheState).
func TestKoordinatorNUMAStrategyLabelPlaces(t *testing.T) {
	s := labelStore(t)
	place := func(node, label string) string {
		t.Helper()
		return koordPlacement(t, s, node, "", label, alloc.Request{ID: "p", CPUs: 2, QoS: alloc.LSE}).NUMANodes.String()
	}
	for _, tc := range []struct {
		node, label, want string
	}{
		{node: koordNone, want: "0"},
		{node: koordNone, label: "MostAllocated", want: "0"},
		{node: koordNone, label: "LeastAllocated", want: "1"},
		{node: koordStatic, label: "LeastAllocated", want: place(koordStatic, "")},
	} {
		if got := place(tc.node, tc.label); got != tc.want {
			t.Errorf("%s, label %q: placed on NUMA node %s, want %s", tc.node, tc.label, got, tc.want)
		}
		body := args(t, guaranteedPod("two", "2", nil, nil), labeled(tc.node, nil, nodestate.LabelKoordNUMAAllocateStrategy, tc.label))
		checkSameAnswers(t, body, 1, WithNRT(s))
	}
}

// koordPlacement places req on node's Koordinator object in s under its
// Node's labels bind (nodestate.LabelKoordCPUBindPolicy) and strategy
// (nodestate.LabelKoordNUMAAllocateStrategy), as the node view decodes
// and judges it (nodestate.JudgeKoord, nodestate.RequestOn, then the
// node's admission).
func koordPlacement(t *testing.T, s *NRTStore, node, bind, strategy string, req alloc.Request) alloc.Placement {
	t.Helper()
	ent, ok := s.get(node)
	if !ok || ent.koord == nil {
		t.Fatalf("%s: no Koordinator object in the store", node)
	}
	l, err := nodestate.ParseKoordLabels(bind, "", strategy)
	if err != nil {
		t.Fatal(err)
	}
	j, err := nodestate.JudgeKoord(ent.koord, ent.settings.TopologyPolicy, l)
	if err != nil {
		t.Fatal(err)
	}
	req, _, err = nodestate.RequestOn(j.Settings, req)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := j.State.Clone().Admit(req)
	if err != nil {
		t.Fatal(err)
	}
	return pl
}

// TestKoordinatorBadNodeLabel: an unknown value fails a node judged by
// Koordinator's object, naming the label and the values allowed; on other
// nodes the labels are not read.
func TestKoordinatorBadNodeLabel(t *testing.T) {
	s := labelStore(t)
	cases := []struct {
		name, label, value, want string
	}{
		{name: "bind lower case", label: bindLabel, value: "fullpcpusonly", want: `"fullpcpusonly": want None, FullPCPUsOnly, SpreadByPCPUs or empty`},
		{name: "bind pod vocabulary", label: bindLabel, value: "FullPCPUs", want: `"FullPCPUs": want None, FullPCPUsOnly, SpreadByPCPUs or empty`},
		{name: "numa kubelet vocabulary", label: numaLabel, value: "single-numa-node", want: `"single-numa-node": want None, BestEffort, Restricted, SingleNUMANode or empty`},
		{name: "numa scoped", label: numaLabel, value: "SingleNUMANodePodLevel", want: "want None, BestEffort, Restricted, SingleNUMANode or empty"},
		{name: "long", label: numaLabel, value: strings.Repeat("x", 300), want: `...": want None`},
		{name: "strategy kubelet-ish", label: nodestate.LabelKoordNUMAAllocateStrategy, value: "most-allocated",
			want: `"most-allocated": want MostAllocated, LeastAllocated, DistributeEvenly or empty`},
	}
	h := New(WithNRT(s)).Handler()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := args(t, guaranteedPod("two", "2", nil, nil), labeled(koordNone, nil, tc.label, tc.value),
				labeled(zoneNode, nil, tc.label, tc.value), labeled("c", map[string]string{AnnotationNUMAFree: "[4,4]"}, tc.label, tc.value))
			res := filter(t, h, body)
			r := res.FailedAndUnresolvableNodes[koordNone]
			if !strings.Contains(r, ErrNode.Error()) || !strings.Contains(r, tc.label) || !strings.Contains(r, tc.want) || len(r) > 300 {
				t.Errorf("unresolvable reason %q: want %q naming %s and saying %q, bounded", r, ErrNode, tc.label, tc.want)
			}
			if diff := cmp.Diff([]string{zoneNode, "c"}, names(res.Nodes)); diff != "" {
				t.Errorf("kept (-want +got):\n%s", diff)
			}
			checkSameAnswers(t, body, 4, WithNRT(s))
		})
	}
}

// TestKoordinatorLabelsKeyTheState: the labels are part of what the node
// view keys a node's state by: one extender asked about the same node
// with and without a label, in turn, on both paths, answers each call by
// that call's label, never by a state decoded under the other.
func TestKoordinatorLabelsKeyTheState(t *testing.T) {
	e := New(WithNRT(labelStore(t)))
	h := e.Handler()
	nine := guaranteedPod("nine", "9", nil, nil)
	for round := range 3 {
		for _, tc := range []struct {
			node corev1.Node
			kept bool
		}{
			{node: labeled(koordNone, nil), kept: true},
			{node: labeled(koordNone, nil, numaLabel, "SingleNUMANode")},
			{node: labeled(koordNone, nil, bindLabel, "None"), kept: true},
			{node: labeled(koordNone, nil, bindLabel, "FullPCPUsOnly", numaLabel, "SingleNUMANode")},
		} {
			res := filter(t, h, args(t, nine, tc.node))
			typed := e.Filter(&extenderv1.ExtenderArgs{Pod: nine, Nodes: &corev1.NodeList{Items: []corev1.Node{tc.node}}})
			for path, r := range map[string]*extenderv1.ExtenderFilterResult{"fast": &res, "typed": typed} {
				if kept := len(r.Nodes.Items) == 1; kept != tc.kept {
					t.Errorf("round %d, %s path, labels %v: kept %v, want %v (%v)", round, path, tc.node.Labels, kept, tc.kept, r.FailedAndUnresolvableNodes)
				}
			}
		}
	}
}

// TestRawLabel: the fast path reads a label's JSON string as the typed
// path reads its value.
func TestRawLabel(t *testing.T) {
	for raw, want := range map[string]string{
		`"FullPCPUsOnly"`:       "FullPCPUsOnly",
		`"Full\u0050CPUsOnly"`:  "FullPCPUsOnly",
		`""`:                    "",
		`"Sometimes"`:           "Sometimes",
		`"a\"b"`:                `a"b`,
		`"SingleNUMANode"`:      "SingleNUMANode",
		`"\u0053ingleNUMANode"`: "SingleNUMANode",
	} {
		if got := rawLabel([]byte(raw)); got != want {
			t.Errorf("rawLabel(%s) = %q, want %q", raw, got, want)
		}
	}
	if got := rawLabel(nil); got != "" {
		t.Errorf("rawLabel(nil) = %q, want empty", got)
	}
	raw := []byte(`"SingleNUMANode"`)
	if n := testing.AllocsPerRun(100, func() { rawLabel(raw) }); n != 0 {
		t.Errorf("rawLabel of a known name allocates %v times, want 0", n)
	}
}
