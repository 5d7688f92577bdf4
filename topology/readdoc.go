package topology

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/internal/quote"
)

// MaxDocSize caps the `corepin topo -o json` document ReadDoc reads, in
// bytes: the document of an 8192-CPU machine is under 2 MiB, and a full
// distance table of MaxNodeID+1 nodes about 4 MiB.
const MaxDocSize = 16 << 20

// ReadDoc reads one `corepin topo -o json` document (a saved machine, the
// --topology file of simulate) and builds its Topology. It is strict: a key
// outside the contract, a second document, a document above MaxDocSize or
// more CPUs than cpuset.MaxCPU+1 is an error, and so is every inconsistency
// New finds. Errors wrap ErrInvalid.
func ReadDoc(r io.Reader) (*Topology, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxDocSize+1))
	if err != nil {
		return nil, fmt.Errorf("reading topology document: %w", err)
	}
	if len(b) > MaxDocSize {
		return nil, fmt.Errorf("%w: document larger than %d bytes", ErrInvalid, MaxDocSize)
	}
	var d struct {
		CPUs          []CPU            `json:"cpus"`
		NUMADistances map[string][]int `json:"numa_distances"`
		Isolated      string           `json:"isolated"`
		NohzFull      string           `json:"nohz_full"`
		Warnings      []string         `json:"warnings"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return nil, fmt.Errorf("%w: parsing document: %w", ErrInvalid, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: more than one JSON document", ErrInvalid)
	}
	t, err := FromCPUs(d.CPUs, d.NUMADistances)
	if err != nil {
		return nil, err
	}
	if t, err = withDocIsolation(t, d.Isolated, d.NohzFull); err != nil {
		return nil, err
	}
	if len(d.Warnings) > 0 { // "warnings": [] reads as none, as Doc writes it
		t.Warnings = d.Warnings
	}
	return t, nil
}

// FromCPUs builds a Topology from the "cpus" and "numa_distances" of the
// topo JSON contract as decoded (a plan's "topology": {"cpus": ...} or a
// ReadDoc document): distance keys are decimal node ids within
// [0, MaxNodeID]; everything else is checked by New.
func FromCPUs(cpus []CPU, distances map[string][]int) (*Topology, error) {
	if len(cpus) > cpuset.MaxCPU+1 {
		return nil, fmt.Errorf("%w: %d cpus, more than the %d a machine can have", ErrInvalid, len(cpus), cpuset.MaxCPU+1)
	}
	dist := make(map[NodeID][]int, len(distances))
	for k, v := range distances {
		n, err := strconv.Atoi(k)
		if err != nil || n < 0 || n > MaxNodeID || strconv.Itoa(n) != k {
			return nil, fmt.Errorf("%w: numa_distances key %s is not a node id in [0, %d]", ErrInvalid, quote.Short(k), MaxNodeID)
		}
		dist[NodeID(n)] = v
	}
	return New(cpus, dist)
}
