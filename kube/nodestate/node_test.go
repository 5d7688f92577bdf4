package nodestate

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/topology"
)

// TestDecodeReadsWhatNodeAnnotationsWrite: the decoder gives back the
// machine, the held CPUs (the reserved ones as ReservedID) and the
// settings the encoder published, in both forms.
func TestDecodeReadsWhatNodeAnnotationsWrite(t *testing.T) {
	set := alloc.NodeSettings{Policy: alloc.PolicyKubelet, Options: []string{alloc.OptFullPCPUsOnly}, Reserved: cpuset.New(0, 8)}
	st, err := alloc.NewState(topology.MustSynthetic(twoNodes), set)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Allocate(alloc.Request{ID: "ns/a", CPUs: 2, QoS: alloc.LSE}); err != nil {
		t.Fatal(err)
	}
	ann, _, err := NodeAnnotations(st, alloc.TopologyRestricted, map[string]string{"ns/a": "uid-a"})
	if err != nil {
		t.Fatal(err)
	}
	pub, err := DecodeTopology(*ann[AnnotationTopology], *ann[AnnotationAssigned], ann[AnnotationAllocator])
	if err != nil {
		t.Fatal(err)
	}
	want := alloc.NodeSettings{Policy: alloc.PolicyKubelet, Options: []string{alloc.OptFullPCPUsOnly}, TopologyPolicy: alloc.TopologyRestricted}
	if diff := cmp.Diff(want, pub.Settings, cmp.Comparer(cpuset.CPUSet.Equals)); diff != "" || !pub.HasSettings || !pub.PodUIDs {
		t.Errorf("settings (-want +got):\n%s\nHasSettings %v, PodUIDs %v; want both", diff, pub.HasSettings, pub.PodUIDs)
	}
	if got, want := pub.Topology.Online().String(), st.Topology().Online().String(); got != want {
		t.Errorf("machine's CPUs %s, want %s", got, want)
	}
	held := map[string]string{}
	for _, a := range pub.Assigned {
		held[a.ID] = a.CPUSet
	}
	if held[ReservedID] != "0,8" || held["ns/a"] == "" || len(held) != 2 {
		t.Errorf("assigned %v, want the reserved CPUs 0,8 and ns/a", held)
	}
	free, err := NUMAFree(st)
	if err != nil {
		t.Fatal(err)
	}
	coarse, err := DecodeNUMAFree(free, ann[AnnotationAllocator])
	if err != nil {
		t.Fatal(err)
	}
	if got := coarse.Free; len(got) != 2 || got[0]+got[1] != 16-2-2 {
		t.Errorf("free CPUs per NUMA node %v, want 12 in all over 2 nodes", got)
	}
	if coarse.Settings.TopologyPolicy != alloc.TopologyRestricted {
		t.Errorf("coarse settings %+v, want topology policy restricted", coarse.Settings)
	}
}

// FuzzDecodeNode feeds arbitrary annotations to both decoders: nothing may
// panic, every error wraps ErrNode, what is accepted is within the limits
// the extender relies on, its machine is shared with the next decode of
// the same annotations, and judging it fails only with ErrNode.
func FuzzDecodeNode(f *testing.F) {
	st, err := alloc.NewState(topology.MustSynthetic(twoNodes), alloc.NodeSettings{Reserved: cpuset.New(0)})
	if err != nil {
		f.Fatal(err)
	}
	ann, _, err := NodeAnnotations(st, alloc.TopologySingleNUMANode, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(*ann[AnnotationTopology], *ann[AnnotationAssigned], "[3,4]", *ann[AnnotationAllocator], true)
	f.Add(`{"cpus":[]}`, `[{"id":"a","cpuset":"0-1","qos":"LSE"}]`, "[0]", `{"policy":"kubelet","options":["full-pcpus-only"]}`, false)
	f.Add("", "", "[-1,4]", `{"topology_policy":"sometimes"}`, true)
	f.Add("", "null", "[4,0] x", `[]`, true)
	f.Fuzz(func(t *testing.T, topo, assigned, free, settings string, hasSettings bool) {
		var set *string
		if hasSettings {
			set = &settings
		}
		if pub, err := DecodeTopology(topo, assigned, set); err != nil {
			if !errors.Is(err, ErrNode) {
				t.Errorf("DecodeTopology error %v does not wrap ErrNode", err)
			}
		} else if pub.Topology == nil || pub.HasSettings != hasSettings {
			t.Errorf("DecodeTopology accepted with topology %v, HasSettings %v", pub.Topology, pub.HasSettings)
		} else {
			// The machine is shared with the next node publishing it,
			// and judging places on it (plan.Document.PlaceOn).
			if again, err := DecodeTopology(topo, assigned, set); err != nil || again.Topology != pub.Topology {
				t.Errorf("DecodeTopology of the same annotations again: topology %p, error %v; want the shared %p", again.Topology, err, pub.Topology)
			}
			if _, err := JudgeTopology(pub); err != nil && !errors.Is(err, ErrNode) {
				t.Errorf("JudgeTopology error %v does not wrap ErrNode", err)
			}
		}
		pub, err := DecodeNUMAFree(free, set)
		if err != nil {
			if !errors.Is(err, ErrNode) {
				t.Errorf("DecodeNUMAFree error %v does not wrap ErrNode", err)
			}
			return
		}
		total := 0
		for _, c := range pub.Free {
			if c < 0 {
				t.Errorf("accepted a negative count: %v", pub.Free)
			}
			total += c
		}
		if len(pub.Free) == 0 || len(pub.Free) > MaxNUMAFreeNodes || total > cpuset.MaxCPU+1 {
			t.Errorf("accepted %d NUMA nodes, %d CPUs in all", len(pub.Free), total)
		}
	})
}
