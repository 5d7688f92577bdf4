package plan

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/topology"
)

// TestPlaceOnPlacesAsPlace: a document placed on a machine already built
// gives the results and state Place gives with that machine in the
// document, on the very machine given; a document that also names a
// machine, or no machine at all, is refused as invalid.
func TestPlaceOnPlacesAsPlace(t *testing.T) {
	m := topology.MustSynthetic(topology.Shape{Sockets: 2, NodesPerSocket: 1, L3PerNode: 1, CoresPerL3: 4, ThreadsPerCore: 2})
	doc := Document{
		Reserved: "0",
		Assigned: []Assigned{{ID: "ns/held", CPUSet: "1-2", QoS: "LSE"}},
		Options:  []string{alloc.OptFullPCPUsOnly},
		Requests: []Request{{ID: "a", CPUs: new(4.0)}, {ID: "b", CPUs: new(20.0)}, {ID: "c", CPUs: new(2.0), QoS: string(alloc.LSR)}},
	}
	on, err := doc.PlaceOn(m)
	if err != nil {
		t.Fatal(err)
	}
	if on.State.Topology() != m {
		t.Errorf("PlaceOn's state is on topology %p, want the given %p", on.State.Topology(), m)
	}
	inDoc := doc
	inDoc.Topology = TopologyOf(m)
	want, err := inDoc.Place(func(string) (*topology.Topology, error) { return nil, errors.New("no sysfs") })
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want.Output, on.Output); diff != "" {
		t.Errorf("PlaceOn output (-Place +PlaceOn):\n%s", diff)
	}
	if diff := cmp.Diff(want.State.Assignments(), on.State.Assignments(), cmp.Comparer(cpuset.CPUSet.Equals)); diff != "" {
		t.Errorf("PlaceOn assignments (-Place +PlaceOn):\n%s", diff)
	}
	if !want.Held.Equals(on.Held) || len(want.Exclusive) != len(on.Exclusive) {
		t.Errorf("PlaceOn held %s and %d new exclusive, want %s and %d", on.Held, len(on.Exclusive), want.Held, len(want.Exclusive))
	}
	for _, tc := range []struct {
		name string
		doc  Document
		m    *topology.Topology
	}{
		{name: "machine twice", doc: inDoc, m: m},
		{name: "no machine", doc: doc},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.doc.PlaceOn(tc.m); !errors.Is(err, ErrInvalid) {
				t.Errorf("PlaceOn error %v, want one matching ErrInvalid", err)
			}
		})
	}
}
