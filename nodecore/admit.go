package nodecore

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/store"
	"github.com/corepin/corepin/topology"
)

// Admission is one admission as committed, typed: what the agent's
// groups, the NRI plugin's answer and a run's job are made from, with no
// read back from the state file.
type Admission struct {
	// Assignment is the row the store committed (with its generation and
	// time); Record its request document.
	Assignment store.Assignment
	Record     Record
	// Placement is the allocator's decision.
	Placement alloc.Placement
	// State is the allocator state of everything committed, this
	// admission included.
	State *alloc.State
}

// Admit is the one admission of every door (the agent's API, the NRI
// plugin's Containers, a run's StatePlacer): inside the state file's
// write transaction (BEGIN IMMEDIATE, so no other process interleaves) it
// loads the allocator state of every assignment committed under the node
// settings, puts the settings on rec's request (Request), places it (on
// prefer when prefer is an exclusive request's size and free, else by the
// allocator), guards the shared pools (alloc.State.GuardPools) and
// commits rec with the placement. Errors wrap ErrInvalid, ErrExists,
// ErrRejected (with the allocator's Rejection) or ErrDiskFull.
func Admit(db *store.DB, t *topology.Topology, cfg alloc.NodeSettings, rec Record, prefer cpuset.CPUSet) (Admission, error) {
	name := rec.Name
	req, err := Request(cfg, rec.Spec)
	if err != nil {
		return Admission{}, err
	}
	var ad Admission
	a, err := db.Admit(name, func(cur []store.Assignment) (store.Assignment, error) {
		st, err := stateFrom(t, cfg, cur)
		if err != nil {
			return store.Assignment{}, err
		}
		p, ok := keep(st, req, prefer)
		if !ok {
			if p, err = st.Allocate(req); err != nil {
				return store.Assignment{}, err
			}
		}
		if err := st.GuardPools(p.QoS); err != nil {
			return store.Assignment{}, err
		}
		ad.Record, ad.Placement, ad.State = placed(rec, req, p), p, st
		return assignmentOf(ad.Record, p)
	})
	if err != nil {
		return Admission{}, classify(name, err)
	}
	ad.Assignment = a
	return ad, nil
}

// Request is the allocator's request for s on a node with settings cfg:
// s as alloc reads it, with the node's settings put on it by cfg.On, the
// rule the scheduler's judge and the simulator answer by too (the kubelet
// engine refuses a bind, exclusive or NUMA strategy rather than drop it).
// Errors wrap ErrInvalid.
func Request(cfg alloc.NodeSettings, s Spec) (alloc.Request, error) {
	req, err := s.request()
	if err != nil {
		return alloc.Request{}, err
	}
	if req, err = cfg.On(req); err != nil {
		return alloc.Request{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return req, nil
}

// placed is rec as admitted for req with p: what the allocator decided
// beyond the cpuset.
func placed(rec Record, req alloc.Request, p alloc.Placement) Record {
	rec.MilliCPUs, rec.Excl, rec.NUMANodes = p.MilliCPUs, string(req.Exclusive), p.NUMANodes.String()
	if rec.Excl == "" {
		rec.Excl = string(alloc.ExclusiveNone)
	}
	rec.Threads = threadsFor(p)
	return rec
}

// assignmentOf is what the store keeps for rec, placed as p: the one place
// an admission is written into the state file's form.
func assignmentOf(rec Record, p alloc.Placement) (store.Assignment, error) {
	doc, err := json.Marshal(rec)
	if err != nil {
		return store.Assignment{}, err
	}
	out := store.Assignment{QoS: string(p.QoS), Request: doc}
	if p.QoS == alloc.LSE || p.QoS == alloc.LSR {
		out.Cpuset = p.CPUs.String()
	}
	return out, nil
}

// classify maps store and allocator errors to the sentinels.
func classify(name string, err error) error {
	var rej alloc.Rejection
	switch {
	case errors.Is(err, store.ErrExists):
		return fmt.Errorf("%w: %q is admitted already; delete it first or pick another name", ErrExists, name)
	case errors.As(err, &rej):
		return fmt.Errorf("%w: %w", ErrRejected, rej)
	case errors.Is(err, alloc.ErrInvalid):
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	case errors.Is(err, ErrInvalid):
		return err
	case store.IsFull(err):
		return fmt.Errorf("admitting %q: %w; nothing was admitted: free space there and retry (%v)", name, ErrDiskFull, err)
	}
	return fmt.Errorf("admitting %q: %w", name, err)
}

// threadsFor sizes a workload's thread pools to what it was given.
func threadsFor(p alloc.Placement) int {
	switch p.QoS {
	case alloc.LS:
		return max(1, (p.MilliCPUs+999)/1000)
	default:
		return max(1, p.CPUs.Size())
	}
}
