package nodestate

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/topology"
)

// The settings annotation is published, exactly, in the full and the
// coarse form, and the extender's parser reads it back.
func TestNodeAnnotationsPublishTheAllocatorSettings(t *testing.T) {
	big := topology.Shape{Sockets: 8, NodesPerSocket: 2, L3PerNode: 2, CoresPerL3: 48, ThreadsPerCore: 2}
	tests := []struct {
		name           string
		shape          topology.Shape
		cfg            alloc.NodeSettings
		topologyPolicy alloc.TopologyPolicy
		coarse         bool
		want           string
	}{
		{name: "defaults", shape: twoNodes, want: `{"policy":"corepin"}`},
		{name: "kubelet with options and a default topology policy", shape: twoNodes,
			cfg:            alloc.NodeSettings{Policy: alloc.PolicyKubelet, Options: []string{alloc.OptFullPCPUsOnly, alloc.OptStrictCPUReservation}, Reserved: cpuset.New(0, 8)},
			topologyPolicy: "single-numa-node",
			want:           `{"policy":"kubelet","options":["full-pcpus-only","strict-cpu-reservation"],"topology_policy":"single-numa-node"}`},
		{name: "coarse form keeps the settings", shape: big, coarse: true,
			cfg:            alloc.NodeSettings{Options: []string{alloc.OptFullPCPUsOnly}},
			topologyPolicy: "restricted",
			want:           `{"policy":"corepin","options":["full-pcpus-only"],"topology_policy":"restricted"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, err := alloc.NewState(topology.MustSynthetic(tc.shape), tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			ann, coarse, err := NodeAnnotations(st, tc.topologyPolicy, nil)
			if err != nil || coarse != tc.coarse {
				t.Fatalf("NodeAnnotations: coarse %v, %v; want coarse %v", coarse, err, tc.coarse)
			}
			got := ann[AnnotationAllocator]
			if got == nil {
				t.Fatalf("%s not published: %v", AnnotationAllocator, ann)
			}
			if *got != tc.want {
				t.Errorf("%s = %s, want %s", AnnotationAllocator, *got, tc.want)
			}
			a, err := ParseAllocator(*got)
			if err != nil {
				t.Fatalf("ParseAllocator(%s): %v", *got, err)
			}
			if diff := cmp.Diff(AllocatorOf(settingsOf(st, tc.topologyPolicy)), a); diff != "" {
				t.Errorf("read back (-published +parsed):\n%s", diff)
			}
		})
	}
}

// The NRT publisher, which holds no State, names the same settings as the
// annotations of a State of those settings.
func TestAllocatorOfSettingsIsAllocatorOfItsState(t *testing.T) {
	for _, cfg := range []alloc.NodeSettings{
		{},
		{Policy: alloc.PolicyCorepin, Options: []string{alloc.OptFullPCPUsOnly}},
		{Policy: alloc.PolicyKubelet, Options: []string{alloc.OptDistributeAcrossNUMA, alloc.OptStrictCPUReservation}, Reserved: cpuset.New(0)},
	} {
		st, err := alloc.NewState(topology.MustSynthetic(twoNodes), cfg)
		if err != nil {
			t.Fatal(err)
		}
		cfg.TopologyPolicy = alloc.TopologyRestricted
		if diff := cmp.Diff(AllocatorOf(settingsOf(st, "restricted")), AllocatorOf(cfg)); diff != "" {
			t.Errorf("%+v (-state +config):\n%s", cfg, diff)
		}
	}
}

func TestParseAllocatorRefuses(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string // in the error
	}{
		{name: "unknown policy", in: `{"policy":"static"}`, want: []string{"policy", `"static"`, "corepin or kubelet"}},
		{name: "unknown option", in: `{"options":["full-pcpus"]}`, want: []string{"options", `"full-pcpus"`, "full-pcpus-only"}},
		{name: "options kubelet refuses together", in: `{"options":["full-pcpus-only","distribute-cpus-across-cores"]}`, want: []string{"can not be used together"}},
		{name: "unknown topology policy", in: `{"topology_policy":"SingleNUMANode"}`, want: []string{"topology_policy", "none, best-effort, restricted or single-numa-node"}},
		{name: "unknown field", in: `{"policy":"kubelet","reserved":"0"}`, want: []string{`unknown field "reserved"`, `{"policy":"kubelet"`}},
		{name: "not an object", in: `["kubelet"]`, want: []string{"is not a JSON object"}},
		{name: "null", in: `null`, want: []string{"is not a JSON object"}},
		{name: "options not a list", in: `{"options":"full-pcpus-only"}`, want: []string{"want a JSON object"}},
		{name: "trailing data", in: `{"policy":"kubelet"} {}`, want: []string{"trailing data"}},
		{name: "empty", in: ``, want: []string{"want a JSON object"}},
		{name: "too many options", in: `{"options":[` + strings.TrimSuffix(strings.Repeat(`"full-pcpus-only",`, MaxOptions+1), ",") + `]}`, want: []string{"options, more than"}},
		{name: "too long", in: `{"policy":"` + strings.Repeat("x", MaxAnnotationBytes) + `"}`, want: []string{"longer than"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, err := ParseAllocator(tc.in)
			if !errors.Is(err, ErrAllocator) {
				t.Fatalf("ParseAllocator(%.60s) = %+v, %v; want an error wrapping ErrAllocator", tc.in, a, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestBuildWithCarriesTheSettingsAsAttributes(t *testing.T) {
	topo := topology.MustSynthetic(twoNodes)
	tests := []struct {
		name string
		s    Allocator
		want []Attribute
	}{
		{name: "topology policy only (Build)", s: Allocator{TopologyPolicy: "single-numa-node"},
			want: []Attribute{{Name: AttrTopologyPolicy, Value: "single-numa-node"}, {Name: AttrTopologyScope, Value: "container"}}},
		{name: "none by default", s: Allocator{Policy: "corepin"},
			want: []Attribute{{Name: AttrTopologyPolicy, Value: "none"}, {Name: AttrTopologyScope, Value: "container"}, {Name: AttrPolicy, Value: "corepin"}}},
		{name: "kubelet with options", s: Allocator{Policy: "kubelet", Options: []string{"full-pcpus-only", "strict-cpu-reservation"}, TopologyPolicy: "restricted"},
			want: []Attribute{{Name: AttrTopologyPolicy, Value: "restricted"}, {Name: AttrTopologyScope, Value: "container"}, {Name: AttrPolicy, Value: "kubelet"}, {Name: AttrOptions, Value: "full-pcpus-only,strict-cpu-reservation"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := BuildNRTWith("n1", topo, alloc.Pools{}, tc.s)
			if diff := cmp.Diff(tc.want, o.Attributes); diff != "" {
				t.Errorf("attributes (-want +got):\n%s", diff)
			}
			got, err := AllocatorFromAttributes(o.Attributes)
			if err != nil {
				t.Fatalf("AllocatorFromAttributes: %v", err)
			}
			want := tc.s
			if want.TopologyPolicy == "" {
				want.TopologyPolicy = "none"
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("read back (-built +read):\n%s", diff)
			}
		})
	}
	if diff := cmp.Diff(BuildNRT("n1", topo, alloc.Pools{}, "best-effort"), BuildNRTWith("n1", topo, alloc.Pools{}, Allocator{TopologyPolicy: "best-effort"})); diff != "" {
		t.Errorf("Build differs from BuildWith of the topology policy alone:\n%s", diff)
	}
}

func TestAllocatorFromAttributesRefuses(t *testing.T) {
	tests := []struct {
		name  string
		attrs []Attribute
		want  string
	}{
		{name: "unknown topology policy", attrs: []Attribute{{Name: AttrTopologyPolicy, Value: "SingleNUMANodeContainerLevel"}}, want: "single-numa-node"},
		{name: "unknown policy", attrs: []Attribute{{Name: AttrPolicy, Value: "static"}}, want: "corepin or kubelet"},
		{name: "unknown option", attrs: []Attribute{{Name: AttrOptions, Value: "full-pcpus-only,,"}}, want: `unknown option ""`},
		{name: "given twice", attrs: []Attribute{{Name: AttrPolicy, Value: "kubelet"}, {Name: AttrPolicy, Value: "corepin"}}, want: "given twice"},
		{name: "too long", attrs: []Attribute{{Name: AttrOptions, Value: strings.Repeat("x", 2000)}}, want: "longer than"},
		{name: "too many", attrs: make([]Attribute, MaxAttributes+1), want: "attributes, more than"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, err := AllocatorFromAttributes(tc.attrs)
			if !errors.Is(err, ErrAllocator) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("AllocatorFromAttributes = %+v, %v; want an error wrapping ErrAllocator saying %q", a, err, tc.want)
			}
		})
	}
	// Attributes of others (NFD's, Koordinator's) are skipped.
	a, err := AllocatorFromAttributes([]Attribute{{Name: "nodeTopologyPodsFingerprint", Value: "pfp0v001abc"}, {Name: AttrTopologyScope, Value: "pod"}})
	if err != nil || !cmp.Equal(a, Allocator{}) {
		t.Errorf("foreign attributes read as %+v, %v; want no settings", a, err)
	}
}

// FuzzParseAllocator: ParseAllocator never panics, refuses with
// ErrAllocator, and what it accepts passes Check and reads back the same
// after encoding.
func FuzzParseAllocator(f *testing.F) {
	for _, s := range []string{
		`{"policy":"kubelet","options":["full-pcpus-only"],"topology_policy":"single-numa-node"}`,
		`{"policy":"corepin"}`,
		`{}`,
		`{"options":null}`,
		`{"options":["distribute-cpus-across-numa","align-by-socket","strict-cpu-reservation"]}`,
		`{"policy":"static"}`,
		`{"Policy":"kubelet"}`,
		`{"policy":"kubelet"} x`,
		`null`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseAllocator(s)
		if err != nil {
			if !errors.Is(err, ErrAllocator) {
				t.Fatalf("ParseAllocator(%q) error %v does not wrap ErrAllocator", s, err)
			}
			return
		}
		if err := CheckAllocator(a); err != nil {
			t.Fatalf("ParseAllocator(%q) accepted %+v, which Check refuses: %v", s, a, err)
		}
		b, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseAllocator(string(b))
		if err != nil {
			t.Fatalf("re-reading %s: %v", b, err)
		}
		if !cmp.Equal(a, back, cmpEmptyNil) {
			t.Fatalf("read %+v, re-read %+v", a, back)
		}
	})
}

// cmpEmptyNil equates nil and empty option lists ("options":[] encodes
// back as omitted).
var cmpEmptyNil = cmp.FilterValues(func(x, y []string) bool { return len(x) == 0 && len(y) == 0 }, cmp.Comparer(func(_, _ []string) bool { return true }))

// With the pods of the node's containers known, each entry names its pod
// and the settings say so; an entry of another front door names none, an
// oversized UID is dropped, and the coarse form, which lists no entries,
// does not claim to name pods.
func TestNodeAnnotationsNameThePods(t *testing.T) {
	for _, tc := range []struct {
		shape  topology.Shape
		coarse bool
	}{{twoNodes, false}, {topology.Shape{Sockets: 8, NodesPerSocket: 2, L3PerNode: 2, CoresPerL3: 48, ThreadsPerCore: 2}, true}} {
		st, err := alloc.NewState(topology.MustSynthetic(tc.shape), alloc.NodeSettings{Reserved: cpuset.New(0)})
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range []alloc.Assignment{
			{ID: "nri-c1", QoS: alloc.LSE, CPUs: cpuset.New(2, 3), Exclusive: alloc.ExclusiveNone},
			{ID: "nri-c2", QoS: alloc.LS, MilliCPUs: 1500},
			{ID: "nri-c3", QoS: alloc.LSE, CPUs: cpuset.New(4), Exclusive: alloc.ExclusiveNone},
			{ID: "batch-1", QoS: alloc.LSE, CPUs: cpuset.New(5)},
		} {
			if err := st.Assign(a); err != nil {
				t.Fatal(err)
			}
		}
		pods := map[string]string{"nri-c1": "uid-a", "nri-c2": "uid-b", "nri-c3": strings.Repeat("u", MaxPodUIDBytes+1)}
		ann, coarse, err := NodeAnnotations(st, "", pods)
		if err != nil || coarse != tc.coarse {
			t.Fatalf("NodeAnnotations: coarse %v, %v; want coarse %v", coarse, err, tc.coarse)
		}
		set, err := ParseAllocator(*ann[AnnotationAllocator])
		if err != nil {
			t.Fatal(err)
		}
		if set.PodUIDs == tc.coarse {
			t.Errorf("coarse %v: %s = %s, want pod_uids %v", tc.coarse, AnnotationAllocator, *ann[AnnotationAllocator], !tc.coarse)
		}
		if tc.coarse {
			continue
		}
		var list []struct {
			ID     string `json:"id"`
			PodUID string `json:"pod_uid"`
		}
		if err := json.Unmarshal([]byte(*ann[AnnotationAssigned]), &list); err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, e := range list {
			got[e.ID] = e.PodUID
		}
		want := map[string]string{"(reserved)": "", "nri-c1": "uid-a", "nri-c2": "uid-b", "nri-c3": "", "batch-1": ""}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("pod UIDs by entry (-want +got):\n%s", diff)
		}
	}
	// Without pods, the settings do not claim to name them.
	st, _ := alloc.NewState(topology.MustSynthetic(twoNodes), alloc.NodeSettings{})
	ann, _, err := NodeAnnotations(st, "", nil)
	if err != nil || strings.Contains(*ann[AnnotationAllocator], "pod_uids") {
		t.Errorf("without pods: %s = %s (%v), want no pod_uids", AnnotationAllocator, *ann[AnnotationAllocator], err)
	}
}
