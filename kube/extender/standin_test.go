package extender

import (
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/kube/nodestate"
)

func TestStandInTopology(t *testing.T) {
	t.Run("one socket and L3 per NUMA node with CPUs", func(t *testing.T) {
		topo, err := StandInTopology([]int{2, 0, 3})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := topo.Allowed().String(), "0-4"; got != want {
			t.Errorf("Allowed() = %s, want %s", got, want)
		}
		if topo.NumSockets() != 2 || topo.NumL3() != 2 || topo.NumCores() != 5 || topo.ThreadsPerCore() != 1 {
			t.Errorf("%d sockets, %d L3, %d cores, %d threads per core; want 2, 2, 5, 1", topo.NumSockets(), topo.NumL3(), topo.NumCores(), topo.ThreadsPerCore())
		}
		if got := topo.NodeCPUs(2).String(); got != "2-4" {
			t.Errorf("NodeCPUs(2) = %s, want 2-4 (node 1 has none)", got)
		}
	})
	t.Run("no CPU", func(t *testing.T) {
		if topo, err := StandInTopology([]int{0, 0}); topo != nil || err != nil {
			t.Errorf("StandInTopology([0 0]) = %v, %v; want nil, nil", topo, err)
		}
	})
	for _, free := range [][]int{{-1, 4}, {cpuset.MaxCPU, 2}, make([]int, 70000)} {
		if _, err := StandInTopology(free); err == nil || !strings.Contains(err.Error(), "stand-in machine") {
			t.Errorf("StandInTopology(%d entries starting %v) error = %v, want one about the stand-in machine", len(free), free[:2], err)
		}
	}
}

// TestParseNRTAgreesWithTheStore: every object ParseNRT accepts, the
// store judges by the same free counts or Koordinator state; every one it
// refuses, the store leaves unjudged or fails.
func TestParseNRTAgreesWithTheStore(t *testing.T) {
	badZones := nrtObject(t, "bad-zones", 4, 4)
	badZones.Object["zones"] = "nope"
	badPolicy := nrtObject(t, "bad-policy", 4, 4)
	badPolicy.Object["topologyPolicies"] = []any{"Sometimes"}
	delete(badPolicy.Object, "attributes")
	tests := []struct {
		name    string
		u       *unstructured.Unstructured
		wantErr string
		free    []int
		tp      string
		cpus    int
		held    []alloc.Assignment
	}{
		{name: "corepin zones", u: nrtObject(t, "zones", 3, 8), free: []int{3, 8}, tp: "single-numa-node", cpus: 11},
		{name: "koordinator", u: koordObject(t, "koord", nil), tp: "single-numa-node", cpus: 16, held: []alloc.Assignment{
			{ID: nodestate.ReservedID, QoS: alloc.LSE, CPUs: cpuset.New(0, 8)},
			{ID: "default/web", QoS: alloc.LSE, CPUs: cpuset.New(1, 9)},
			{ID: nodestate.KoordLSRID, QoS: alloc.LSR, CPUs: cpuset.New(6, 14)},
			{ID: nodestate.KoordLSEID, QoS: alloc.LSE, CPUs: cpuset.New(4, 5, 12, 13)},
		}},
		{name: "zones not a list", u: badZones, wantErr: "zones is not a list"},
		{name: "unknown topology policy", u: badPolicy, wantErr: `"Sometimes"`},
		{name: "koordinator topology broken", u: koordObject(t, "koord-bad", map[string]string{nodestate.AnnotationKoordCPUTopology: `{"detail":[`}), wantErr: nodestate.AnnotationKoordCPUTopology},
		{name: "no free CPU", u: nrtObject(t, "full", 0, 0), free: []int{0, 0}, tp: "single-numa-node", wantErr: "no free CPU"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := NewNRTStore(10, slog.New(slog.DiscardHandler))
			s.onSet(tc.u)
			ent, inStore := s.get(tc.u.GetName())
			n, err := ParseNRT(tc.u)
			if err == nil {
				if !inStore || ent.koordErr != nil {
					t.Fatalf("ParseNRT accepts what the store refuses (in store %v, koord error %v)", inStore, ent.koordErr)
				}
				if diff := cmp.Diff(ent.free, n.Free); diff != "" {
					t.Errorf("free counts differ from the store's (-store +ParseNRT):\n%s", diff)
				}
				if (ent.koord == nil) != (n.Koord == nil) || ent.settings.TopologyPolicy != n.Settings.TopologyPolicy {
					t.Errorf("Koordinator %v, policy %q; the store: %v, %q", n.Koord != nil, n.Settings.TopologyPolicy, ent.koord != nil, ent.settings.TopologyPolicy)
				}
				if n.Settings.TopologyPolicy != tc.tp {
					t.Errorf("topology policy %q, want %q", n.Settings.TopologyPolicy, tc.tp)
				}
				var topoCPUs int
				var held []alloc.Assignment
				topo, h, merr := n.Machine()
				if merr != nil {
					err = merr
				} else {
					topoCPUs, held = topo.Online().Size(), h
				}
				if err == nil && (topoCPUs != tc.cpus || !cmp.Equal(held, tc.held, cmp.Comparer(func(a, b cpuset.CPUSet) bool { return a.Equals(b) }))) {
					t.Errorf("Machine() = %d CPUs, held %v; want %d, %v", topoCPUs, held, tc.cpus, tc.held)
				}
			} else if inStore && ent.koordErr == nil {
				t.Errorf("ParseNRT refuses (%v) what the store judges", err)
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("error %v, want none", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, ErrNode)):
				t.Errorf("error %v, want an ErrNode containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestNRTNodeTopologyPolicy(t *testing.T) {
	koord, err := ParseNRT(koordObject(t, "k", nil)) // kubelet engine, SingleNUMANode
	if err != nil {
		t.Fatal(err)
	}
	corepinEngine, err := ParseNRT(koordObject(t, "k", map[string]string{nodestate.AnnotationKoordKubeletPolicy: `{"policy":"none"}`}))
	if err != nil {
		t.Fatal(err)
	}
	zones, err := ParseNRT(nrtObject(t, "z", 4, 4))
	if err != nil {
		t.Fatal(err)
	}
	label := func(v string) map[string]string { return map[string]string{nodestate.LabelKoordNUMATopologyPolicy: v} }
	tests := []struct {
		name    string
		n       NRTNode
		labels  map[string]string
		want    alloc.TopologyPolicy
		wantErr bool
	}{
		{name: "object's", n: koord, want: alloc.TopologySingleNUMANode},
		{name: "kubelet engine keeps the stricter", n: koord, labels: label("BestEffort"), want: alloc.TopologySingleNUMANode},
		{name: "label replaces it under corepin's engine", n: corepinEngine, labels: label("BestEffort"), want: alloc.TopologyBestEffort},
		{name: "zones do not read labels", n: zones, labels: label("Sometimes"), want: alloc.TopologySingleNUMANode},
		{name: "unknown label", n: koord, labels: label("Sometimes"), wantErr: true},
		{name: "unknown bind label", n: koord, labels: map[string]string{nodestate.LabelKoordCPUBindPolicy: "Tight"}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			set, err := tc.n.JudgedSettings(tc.labels)
			if (err != nil) != tc.wantErr || (err != nil && !errors.Is(err, ErrNode)) {
				t.Fatalf("JudgedSettings() error = %v, want error %v (ErrNode)", err, tc.wantErr)
			}
			if got := set.TopologyPolicy; got != tc.want {
				t.Errorf("JudgedSettings().TopologyPolicy = %q, want %q", got, tc.want)
			}
		})
	}
}

// FuzzParseNRT feeds arbitrary objects to ParseNRT: nothing may panic,
// and every object it accepts makes a machine whose held CPUs are its own
// and do not overlap, or a stand-in of exactly the free CPUs counted.
func FuzzParseNRT(f *testing.F) {
	for _, p := range []string{"testdata/koordinator-nrt-v1alpha1.json"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"apiVersion":"topology.node.k8s.io/v1alpha2","kind":"NodeResourceTopology","metadata":{"name":"a"},"zones":[{"name":"node-0","type":"Node","resources":[{"name":"cpu","capacity":"8","allocatable":"8","available":"6"}]}],"attributes":[{"name":"topologyManagerPolicy","value":"restricted"}]}`))
	f.Add([]byte(`{"apiVersion":"topology.node.k8s.io/v1alpha1","kind":"NodeResourceTopology","metadata":{"name":"a"},"topologyPolicies":["BestEffortPodLevel"],"zones":[{"name":"node-1","type":"Node","resources":[{"name":"cpu","available":"2"}]},{"name":"core-0","type":"Core"}]}`))
	f.Add([]byte(`{"metadata":{"name":"a","annotations":{"node.koordinator.sh/cpu-topology":"{\"detail\":[{\"id\":0,\"core\":0,\"socket\":0,\"node\":0},{\"id\":1,\"core\":0,\"socket\":0,\"node\":0}]}","node.koordinator.sh/reservation":"{\"reservedCPUs\":\"1\"}"}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		u := &unstructured.Unstructured{}
		if u.UnmarshalJSON(b) != nil {
			return
		}
		n, err := ParseNRT(u)
		if err != nil {
			if !errors.Is(err, ErrNode) {
				t.Errorf("error %v does not wrap ErrNode", err)
			}
			return
		}
		if _, err := n.JudgedSettings(nil); err != nil {
			t.Errorf("JudgedSettings(no labels) of an accepted object: %v", err)
		}
		topo, held, err := n.Machine()
		if err != nil {
			if n.Koord != nil || !errors.Is(err, ErrNoFreeCPU) {
				t.Errorf("Machine() of an accepted object: %v", err)
			}
			return
		}
		if n.Koord == nil {
			total := 0
			for _, c := range n.Free {
				total += c
			}
			if topo.Online().Size() != total || len(held) != 0 {
				t.Errorf("stand-in of %v has %d CPUs and %d held, want %d and none", n.Free, topo.Online().Size(), len(held), total)
			}
			return
		}
		var all cpuset.Builder
		seen := 0
		for _, a := range held {
			if !a.CPUs.IsSubsetOf(topo.Online()) {
				t.Errorf("held %s %s outside the machine %s", a.ID, a.CPUs, topo.Online())
			}
			all.AddSet(a.CPUs)
			seen += a.CPUs.Size()
		}
		if all.Result().Size() != seen {
			t.Errorf("held CPUs overlap: %v", held)
		}
	})
}
