package plan

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/topology"
)

// MaxBytes is the largest document Decode reads: room for about a million
// requests, far below what would exhaust memory.
const MaxBytes = 64 << 20

// ErrInvalid is matched by every error about a document as written.
var ErrInvalid = errors.New("invalid plan document")

// invalidError marks err as the document's fault without changing its text.
type invalidError struct{ err error }

func (e invalidError) Error() string        { return e.err.Error() }
func (e invalidError) Unwrap() error        { return e.err }
func (e invalidError) Is(target error) bool { return target == ErrInvalid }

func invalid(err error) error { return invalidError{err} }

func invalidf(format string, args ...any) error { return invalid(fmt.Errorf(format, args...)) }

// Topology names the machine: a sysfs dump (SysfsRoot) or the CPUs of
// `corepin topo -o json`; neither means the machine the caller runs on.
type Topology struct {
	SysfsRoot     string           `json:"sysfs_root,omitempty"`
	CPUs          []topology.CPU   `json:"cpus,omitempty"`
	NUMADistances map[string][]int `json:"numa_distances,omitempty"`
	// Isolated and NohzFull are the topo document's optional lists of
	// isolated and tick-free CPUs, with CPUs.
	Isolated string `json:"isolated,omitempty"`
	NohzFull string `json:"nohz_full,omitempty"`
}

// TopologyOf returns t in the document's "cpus" form (that of corepin topo
// -o json), so a caller can send another machine's topology with its
// requests.
func TopologyOf(t *topology.Topology) *Topology {
	dist := make(map[string][]int)
	for n, d := range t.Distances() {
		dist[strconv.Itoa(int(n))] = d
	}
	return &Topology{CPUs: t.CPUs(), NUMADistances: dist, Isolated: t.Isolated().String(), NohzFull: t.NohzFull().String()}
}

// Assigned is a workload already placed.
// ReservedID names the assigned entry that stands for a node's reserved
// CPUs when a node publishes its state for others to place on (the
// scheduler extender): held like an exclusive workload, never released.
const ReservedID = "(reserved)"

type Assigned struct {
	ID        string   `json:"id"`
	CPUSet    string   `json:"cpuset"`
	QoS       string   `json:"qos"`
	Exclusive string   `json:"exclusive"`
	CPUs      *float64 `json:"cpus"` // quota of an LS or BE workload
	// PodUID is the UID of the Kubernetes pod whose container holds
	// this, when a node's NRI plugin publishes it (nodestate.NodeAnnotations):
	// the scheduler extender tells a pod the node has admitted from one
	// bound but not admitted yet by it.
	PodUID string `json:"pod_uid,omitempty"`
}

// Assignment returns a as the allocator's assignment, without checking it
// against a machine (alloc.State.Assign does). A malformed cpuset or quota
// is an error matching ErrInvalid.
func (a Assigned) Assignment() (alloc.Assignment, error) {
	set, err := parseSet("assigned cpuset of "+strconv.Quote(a.ID), a.CPUSet)
	if err != nil {
		return alloc.Assignment{}, err
	}
	as := alloc.Assignment{ID: a.ID, CPUs: set, QoS: alloc.QoS(a.QoS), Exclusive: alloc.Exclusive(a.Exclusive)}
	if a.CPUs != nil {
		if as.MilliCPUs, err = alloc.MilliCPUs(a.ID, *a.CPUs); err != nil {
			return alloc.Assignment{}, invalid(err)
		}
	}
	return as, nil
}

// Request is a request object of the document.
type Request = alloc.RequestSpec

// Document is the input of `corepin plan`.
type Document struct {
	Topology  *Topology  `json:"topology"`
	Reserved  string     `json:"reserved"`
	Available *string    `json:"available"`
	Assigned  []Assigned `json:"assigned"`
	Policy    string     `json:"policy"`
	Options   []string   `json:"options"`
	Requests  []Request  `json:"requests"`
}

// Result is the outcome of one request: a placement, or the reason there
// is none.
type Result struct {
	ID        string         `json:"id"`
	CPUSet    *string        `json:"cpuset,omitempty"`
	NUMANodes *string        `json:"numa_nodes,omitempty"`
	Quality   *alloc.Quality `json:"quality,omitempty"`
	Error     string         `json:"error,omitempty"`
}

// Output is the output of `corepin plan`.
type Output struct {
	Results []Result `json:"results"`
}

// Loader returns the topology of a sysfs dump at sysfsRoot, or of the
// machine it runs on when sysfsRoot is empty.
type Loader func(sysfsRoot string) (*topology.Topology, error)

// Plan is a placed document: the output, the state after the last request,
// and what a renderer needs to tell old placements from new ones.
type Plan struct {
	Output Output
	State  *alloc.State
	// Held are the exclusive CPUs held before the plan: the assigned LSE
	// and LSR sets and, with "available", every allowed CPU outside it.
	Held cpuset.CPUSet
	// Exclusive are the new exclusive (LSE, LSR) placements, in order.
	Exclusive []alloc.Placement
}

// Decode reads one document from r, refusing unknown keys, trailing data
// and documents over MaxBytes.
func Decode(r io.Reader) (Document, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxBytes+1))
	if err != nil {
		return Document{}, fmt.Errorf("reading plan input: %w", err)
	}
	if len(data) > MaxBytes {
		return Document{}, invalidf("parsing plan input: longer than %d bytes", MaxBytes)
	}
	var d Document
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return Document{}, invalidf("parsing plan input: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Document{}, invalidf("parsing plan input: more than one JSON document on stdin")
	}
	return d, nil
}

// Place builds the machine's state from d and places d's requests in order.
// A request the state cannot take gets a Result with its reason; anything
// wrong with the document as written fails the whole plan with an error
// matching ErrInvalid. An error that does not match it is load's failure to
// read this machine.
func (d Document) Place(load Loader) (*Plan, error) {
	topo, err := d.topology(load)
	if err != nil {
		return nil, err
	}
	return d.place(topo)
}

// PlaceOn is Place on the machine topo, already built: a node's published
// topology that every node of the same machine shares read-only
// (kube/nodestate), so that placing on it builds no copy. d.Topology must
// be nil: the machine is given once.
func (d Document) PlaceOn(topo *topology.Topology) (*Plan, error) {
	if d.Topology != nil {
		return nil, invalidf("topology: give the machine either in the document or to PlaceOn, not both")
	}
	if topo == nil {
		return nil, invalidf("topology: PlaceOn needs a machine")
	}
	return d.place(topo)
}

// place builds the state of machine topo from d and places d's requests.
func (d Document) place(topo *topology.Topology) (*Plan, error) {
	reserved, err := parseSet("reserved", d.Reserved)
	if err != nil {
		return nil, err
	}
	st, err := alloc.NewState(topo, alloc.NodeSettings{Policy: alloc.Policy(d.Policy), Options: d.Options, Reserved: reserved})
	if err != nil {
		return nil, invalid(err)
	}
	p := &Plan{State: st, Output: Output{Results: make([]Result, 0, len(d.Requests))}}
	var held cpuset.Builder
	if d.Available != nil && d.Assigned != nil {
		return nil, invalidf("give either \"available\" or \"assigned\", not both")
	}
	if d.Available != nil {
		avail, err := parseSet("available", *d.Available)
		if err != nil {
			return nil, err
		}
		if !avail.IsSubsetOf(topo.Online()) {
			return nil, invalidf("available cpus %s are not all online (online: %s)", avail.Difference(topo.Online()), topo.Online())
		}
		busy := topo.Allowed().Difference(avail).Difference(st.Reserved())
		if !busy.IsEmpty() {
			if err := st.Assign(alloc.Assignment{ID: "(unavailable)", QoS: alloc.LSE, CPUs: busy}); err != nil {
				return nil, invalid(err)
			}
			held.AddSet(busy)
		}
	}
	for _, a := range d.Assigned {
		as, err := a.Assignment()
		if err != nil {
			return nil, err
		}
		if err := st.Assign(as); err != nil {
			return nil, invalid(err)
		}
		if exclusive(as.QoS) {
			held.AddSet(as.CPUs)
		}
	}
	p.Held = held.Result()
	seen := make(map[string]bool, len(d.Requests))
	for i, spec := range d.Requests {
		if spec.ID == "" {
			return nil, invalidf("request %d has no id", i)
		}
		req, err := spec.Request(spec.ID)
		if err != nil {
			return nil, invalid(err)
		}
		if seen[req.ID] {
			return nil, invalidf("request id %q appears twice", req.ID)
		}
		seen[req.ID] = true
		pl, err := st.Allocate(req)
		if errors.Is(err, alloc.ErrRejected) {
			p.Output.Results = append(p.Output.Results, Result{ID: req.ID, Error: err.Error()})
			continue
		}
		if err != nil {
			return nil, invalid(err)
		}
		set, nodes, q := pl.CPUs.String(), pl.NUMANodes.String(), pl.Quality
		p.Output.Results = append(p.Output.Results, Result{ID: req.ID, CPUSet: &set, NUMANodes: &nodes, Quality: &q})
		if exclusive(pl.QoS) {
			p.Exclusive = append(p.Exclusive, pl)
		}
	}
	return p, nil
}

func exclusive(q alloc.QoS) bool { return q == "" || q == alloc.LSE || q == alloc.LSR }

// topology returns the machine d names.
func (d Document) topology(load Loader) (*topology.Topology, error) {
	pt := d.Topology
	switch {
	case pt == nil || (pt.SysfsRoot == "" && pt.CPUs == nil):
		if pt != nil && (pt.NUMADistances != nil || pt.Isolated != "" || pt.NohzFull != "") {
			return nil, invalidf("topology has numa_distances, isolated or nohz_full but no cpus")
		}
		t, err := load("")
		if err != nil {
			return nil, fmt.Errorf("reading this machine's topology: %w", err)
		}
		return t, nil
	case pt.SysfsRoot != "" && pt.CPUs != nil:
		return nil, invalidf("topology: give either sysfs_root or cpus, not both")
	case pt.SysfsRoot != "":
		t, err := load(pt.SysfsRoot)
		if err != nil {
			return nil, invalidf("topology from sysfs_root %q: %w", pt.SysfsRoot, err)
		}
		return t, nil
	}
	t, err := topology.FromCPUs(pt.CPUs, pt.NUMADistances)
	if err != nil {
		return nil, invalidf("topology: %w", err)
	}
	if pt.Isolated == "" && pt.NohzFull == "" {
		return t, nil
	}
	var iso topology.Isolation
	if iso.Isolcpus, err = parseSet("topology: isolated", pt.Isolated); err != nil {
		return nil, err
	}
	if iso.NohzFull, err = parseSet("topology: nohz_full", pt.NohzFull); err != nil {
		return nil, err
	}
	if t, err = t.WithIsolation(iso); err != nil {
		return nil, invalidf("topology: %w", err)
	}
	return t, nil
}

func parseSet(what, s string) (cpuset.CPUSet, error) {
	set, err := cpuset.Parse(s)
	if err != nil {
		return cpuset.CPUSet{}, invalidf("%s: %w", what, err)
	}
	return set, nil
}
