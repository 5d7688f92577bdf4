package nodestate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/plan"
	"github.com/corepin/corepin/topology"
)

// ErrNode is wrapped by errors about a node's published state.
var ErrNode = errors.New("invalid node annotation")

// ErrNRT is wrapped by the error about a node's NodeResourceTopology
// object that does not read (its fields, settings, zones or Koordinator
// annotations): like a malformed annotation, it fails the node for the
// pods that need aligned CPUs (Prejudge).
var ErrNRT = errors.New("the node's NodeResourceTopology does not read")

// NRTError is the error of a node whose NodeResourceTopology object does
// not read (err), as both scheduler doors give it.
func NRTError(err error) error { return fmt.Errorf("%w: %w", ErrNRT, err) }

// nodeErr is an error about a node's published state.
func nodeErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrNode, fmt.Sprintf(format, args...))
}

// Published is what a node's corepin annotations publish, decoded (by
// DecodeTopology or DecodeNUMAFree): the neutral state the scheduler
// extender judges and simulate replays over.
type Published struct {
	// Topology is the node's machine (AnnotationTopology); nil when the
	// node publishes only AnnotationNUMAFree.
	Topology *topology.Topology
	// Assigned are the entries of AnnotationAssigned, the node's reserved
	// CPUs among them (ReservedID), as `corepin plan` places them; not
	// checked against the machine (alloc.State.Assign does that).
	Assigned []plan.Assigned
	// Free are the free CPUs per NUMA node of AnnotationNUMAFree, when
	// Topology is nil.
	Free []int
	// Settings are the node's allocator settings (AnnotationAllocator),
	// the zero settings when it publishes none (HasSettings false: a node
	// of an older corepin, whose ReservedID entries stay held).
	Settings    alloc.NodeSettings
	HasSettings bool
	// PodUIDs says the Assigned entries name their pods
	// (Allocator.PodUIDs, plan.Assigned.PodUID).
	PodUIDs bool
}

// DecodeTopology decodes the annotations of a node publishing its
// topology (AnnotationTopology) and assignments (AnnotationAssigned, ""
// when absent) under its settings (AnnotationAllocator; nil when the node
// publishes none). A malformed or oversized annotation is an error
// wrapping ErrNode and naming it; the settings are read first.
func DecodeTopology(topo, assigned string, settings *string) (Published, error) {
	a, err := parseSettings(settings)
	if err != nil {
		return Published{}, err
	}
	t, list, err := parseTopology(topo, assigned)
	if err != nil {
		return Published{}, err
	}
	return Published{Topology: t, Assigned: list, Settings: a.Settings(), HasSettings: settings != nil, PodUIDs: a.PodUIDs}, nil
}

// DecodeNUMAFree decodes the annotation of a node publishing only its free
// CPUs per NUMA node (AnnotationNUMAFree) under its settings
// (AnnotationAllocator; nil when the node publishes none). A malformed
// annotation, more than MaxNUMAFreeNodes NUMA nodes, a negative count or
// more than cpuset.MaxCPU+1 CPUs in all is an error wrapping ErrNode; the
// settings are read first.
func DecodeNUMAFree(raw string, settings *string) (Published, error) {
	a, err := parseSettings(settings)
	if err != nil {
		return Published{}, err
	}
	if len(raw) > MaxAnnotationBytes {
		return Published{}, nodeErr("%s longer than %d bytes", AnnotationNUMAFree, MaxAnnotationBytes)
	}
	var free []int
	dec := json.NewDecoder(bytes.NewReader([]byte(raw)))
	if err := dec.Decode(&free); err != nil {
		return Published{}, nodeErr("%s %q: want a JSON list of free CPUs per NUMA node, like [4,0]: %v", AnnotationNUMAFree, short(raw), err)
	}
	if dec.More() {
		return Published{}, nodeErr("%s %q: trailing data after the JSON list", AnnotationNUMAFree, short(raw))
	}
	if len(free) == 0 || len(free) > MaxNUMAFreeNodes {
		return Published{}, nodeErr("%s %q: want 1 to %d NUMA nodes", AnnotationNUMAFree, short(raw), MaxNUMAFreeNodes)
	}
	total := 0
	for _, f := range free {
		if f < 0 || f > cpuset.MaxCPU+1 || total+f > cpuset.MaxCPU+1 {
			return Published{}, nodeErr("%s %q: free CPUs must be 0 to %d in all", AnnotationNUMAFree, short(raw), cpuset.MaxCPU+1)
		}
		total += f
	}
	return Published{Free: free, Settings: a.Settings(), HasSettings: settings != nil}, nil
}

// NodeTopology decodes the corepin state a node publishes: its machine
// (AnnotationTopology, the compact `corepin topo -o json` document) and
// the workloads already holding CPUs on it (AnnotationAssigned, the
// "assigned" list of `corepin plan`). ok is false, with nothing decoded,
// for a node without AnnotationTopology. A malformed or oversized
// annotation is an error wrapping ErrNode. The assignments are not checked
// against the machine here: alloc.State.Assign does that.
func NodeTopology(node *corev1.Node) (t *topology.Topology, held []alloc.Assignment, ok bool, err error) {
	topo, ok := node.Annotations[AnnotationTopology]
	if !ok {
		return nil, nil, false, nil
	}
	t, assigned, err := parseTopology(topo, node.Annotations[AnnotationAssigned])
	if err != nil {
		return nil, nil, true, err
	}
	for _, a := range assigned {
		as, err := a.Assignment()
		if err != nil {
			return nil, nil, true, fmt.Errorf("%w: %s: %w", ErrNode, AnnotationAssigned, err)
		}
		held = append(held, as)
	}
	return t, held, true, nil
}

// parseTopology decodes the two annotations of a node publishing its
// topology and assignments. The machine is shared, read-only, by every
// node publishing the same AnnotationTopology (machines).
func parseTopology(topo, assigned string) (*topology.Topology, []plan.Assigned, error) {
	if len(topo) > MaxAnnotationBytes || len(assigned) > MaxAnnotationBytes {
		return nil, nil, fmt.Errorf("%w: annotation longer than %d bytes", ErrNode, MaxAnnotationBytes)
	}
	t, err := machines.read(topo)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s: %w", ErrNode, AnnotationTopology, err)
	}
	var list []plan.Assigned
	if assigned != "" {
		dec := json.NewDecoder(bytes.NewReader([]byte(assigned)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&list); err != nil {
			return nil, nil, fmt.Errorf("%w: %s: parsing: %w", ErrNode, AnnotationAssigned, err)
		}
		if dec.More() {
			return nil, nil, fmt.Errorf("%w: %s: trailing data after the JSON list", ErrNode, AnnotationAssigned)
		}
	}
	return t, list, nil
}

// parseSettings decodes AnnotationAllocator; nil (the node publishes none)
// is the zero settings: policy corepin, no options, topology policy none.
func parseSettings(raw *string) (Allocator, error) {
	if raw == nil {
		return Allocator{}, nil
	}
	a, err := ParseAllocator(*raw)
	if err != nil {
		return Allocator{}, fmt.Errorf("%w: %s: %w", ErrNode, AnnotationAllocator, err)
	}
	return a, nil
}
