package extender

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/kube/nodestate"
	"github.com/corepin/corepin/kube/nodestate/nodestatetest"
)

// TestParseNRTAgreesWithTheStore: every object ParseNRT accepts, the
// store judges by the same free counts or Koordinator state; every one it
// refuses, the store fails (its node takes no pod that needs aligned CPUs).
func TestParseNRTAgreesWithTheStore(t *testing.T) {
	badZones := nodestatetest.NRT(t, "bad-zones", 4, 4)
	badZones.Object["zones"] = "nope"
	badPolicy := nodestatetest.NRT(t, "bad-policy", 4, 4)
	badPolicy.Object["topologyPolicies"] = []any{"Sometimes"}
	delete(badPolicy.Object, "attributes")
	tests := []struct {
		name    string
		u       *unstructured.Unstructured
		wantErr string
		free    []int
		tp      alloc.TopologyPolicy
		cpus    int
		held    []alloc.Assignment
	}{
		{name: "corepin zones", u: nodestatetest.NRT(t, "zones", 3, 8), free: []int{3, 8}, tp: "single-numa-node", cpus: 11},
		{name: "koordinator", u: koordObject(t, "koord", nil), tp: "single-numa-node", cpus: 16, held: []alloc.Assignment{
			{ID: nodestate.ReservedID, QoS: alloc.LSE, CPUs: cpuset.New(0, 8)},
			{ID: "default/web", QoS: alloc.LSE, CPUs: cpuset.New(1, 9)},
			{ID: nodestate.KoordLSRID, QoS: alloc.LSR, CPUs: cpuset.New(6, 14)},
			{ID: nodestate.KoordLSEID, QoS: alloc.LSE, CPUs: cpuset.New(4, 5, 12, 13)},
		}},
		{name: "zones not a list", u: badZones, wantErr: "zones is not a list"},
		{name: "unknown topology policy", u: badPolicy, wantErr: `"Sometimes"`},
		{name: "koordinator topology broken", u: koordObject(t, "koord-bad", map[string]string{nodestate.AnnotationKoordCPUTopology: `{"detail":[`}), wantErr: nodestate.AnnotationKoordCPUTopology},
		{name: "no free CPU", u: nodestatetest.NRT(t, "full", 0, 0), free: []int{0, 0}, tp: "single-numa-node", wantErr: "no free CPU"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := NewNRTStore(10, slog.New(slog.DiscardHandler))
			s.onSet(tc.u)
			ent, inStore := s.get(tc.u.GetName())
			n, err := nodestate.ParseNRT(tc.u)
			if err == nil {
				if !inStore || ent.readErr != nil {
					t.Fatalf("ParseNRT accepts what the store refuses (in store %v, koord error %v)", inStore, ent.readErr)
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
			} else if inStore && ent.readErr == nil {
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
	koord, err := nodestate.ParseNRT(koordObject(t, "k", nil)) // kubelet engine, SingleNUMANode
	if err != nil {
		t.Fatal(err)
	}
	corepinEngine, err := nodestate.ParseNRT(koordObject(t, "k", map[string]string{nodestate.AnnotationKoordKubeletPolicy: `{"policy":"none"}`}))
	if err != nil {
		t.Fatal(err)
	}
	zones, err := nodestate.ParseNRT(nodestatetest.NRT(t, "z", 4, 4))
	if err != nil {
		t.Fatal(err)
	}
	label := func(v string) map[string]string { return map[string]string{nodestate.LabelKoordNUMATopologyPolicy: v} }
	tests := []struct {
		name    string
		n       nodestate.NRTNode
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
