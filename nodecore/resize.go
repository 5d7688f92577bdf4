package nodecore

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/store"
	"github.com/corepin/corepin/topology"
)

// AdmitResize is the one resize of every door, as Admit is the one
// admission: inside the state file's write transaction it loads the
// allocator state of every assignment committed, resizes workload name to
// cpus (whole CPUs for LSE and LSR, a quota for LS and BE, as a Spec's
// cpus) with alloc.State.Resize under the node settings cfg and the
// request as the workload was admitted, and commits the record with its
// new size, cpuset and added CPUs. The CPUs a workload was placed on
// (its promised CPUs) never leave it. Errors wrap ErrInvalid, ErrNotFound,
// ErrRejected (with the allocator's Rejection) or ErrDiskFull; on any
// error nothing changed.
func AdmitResize(db *store.DB, t *topology.Topology, cfg alloc.NodeSettings, name string, cpus float64) (Admission, error) {
	var ad Admission
	a, err := db.Replace(name, func(cur []store.Assignment, old store.Assignment) (store.Assignment, error) {
		rec, _, err := DecodeAssignment(old)
		if err != nil {
			return store.Assignment{}, err
		}
		if rec.Deleting {
			return store.Assignment{}, fmt.Errorf("%w: %q is being deleted", ErrRejected, name)
		}
		rec.Spec.CPUs = &cpus
		req, err := Request(cfg, rec.Spec)
		if err != nil {
			return store.Assignment{}, err
		}
		if req.QoS == alloc.BE && req.MilliCPUs == 0 {
			return store.Assignment{}, fmt.Errorf("%w: workload %q: a BE workload can not be resized to 0 CPUs; ask for at least 0.001 (delete it to stop it)", ErrInvalid, name)
		}
		if usable := t.Allowed(); req.CPUs > usable.Size() || req.MilliCPUs > 1000*usable.Size() {
			return store.Assignment{}, fmt.Errorf("%w: workload %q asks for %v CPUs; this node has %d usable (%s)",
				ErrInvalid, name, cpus, usable.Size(), usable)
		}
		st, err := stateFrom(t, cfg, cur)
		if err != nil {
			return store.Assignment{}, err
		}
		p, err := st.Resize(req)
		if err != nil {
			return store.Assignment{}, err
		}
		rec = placed(rec, req, p)
		rec.Added = nil
		for _, h := range st.Assignments() {
			if h.ID == name {
				rec.Added = h.Added
			}
		}
		ad.Record, ad.Placement, ad.State = rec, p, st
		return assignmentOf(rec, p)
	})
	if err != nil {
		return Admission{}, classifyResize(name, err)
	}
	ad.Assignment = a
	return ad, nil
}

// classifyResize maps store and allocator errors of a resize to the
// sentinels.
func classifyResize(name string, err error) error {
	switch {
	case errors.Is(err, store.ErrNotFound), errors.Is(err, alloc.ErrUnknownID):
		return fmt.Errorf("%w: %q", ErrNotFound, name)
	case errors.Is(err, ErrRejected):
		return err
	case store.IsFull(err):
		return fmt.Errorf("resizing %q: %w; nothing changed: free space there and retry (%v)", name, ErrDiskFull, err)
	case errors.Is(err, alloc.ErrRejected), errors.Is(err, alloc.ErrInvalid), errors.Is(err, ErrInvalid):
		return classify(name, err)
	}
	return fmt.Errorf("resizing %q: %w", name, err)
}

// Resize changes workload name's size to cpus (whole CPUs for LSE and
// LSR, a quota for LS and BE, as a Spec's cpus) in place: AdmitResize
// commits it, then its group follows (an exclusive workload's cpuset
// grows after the shared pools shrink, and shrinks before they grow, so
// its group and theirs never share a CPU) and the workload is answered.
// A crash between the commit and the group leaves an assignment whose
// group holds its old CPUs or quota; the next start's reconcile writes
// the state's (ActRepaired). If the group cannot follow, the state goes
// back to what it was. A job of a local run and a runtime's container
// are not the agent's to resize (ErrInvalid). Errors are AdmitResize's.
func (n *Node) Resize(name string, cpus float64) (Held, error) {
	t0 := time.Now()
	h, err := n.resize(name, cpus)
	n.obs.Admitted(time.Since(t0), err)
	if err != nil {
		n.log.Info("resize refused", "name", name, "cpus", cpus, "err", err)
	} else {
		n.log.Info("resized", "name", name, "qos", h.Assignment.QoS, "cpuset", h.CPUs.String(), "cpus", cpus)
	}
	return h, err
}

func (n *Node) resize(name string, cpus float64) (Held, error) {
	if err := ValidateName(name); err != nil {
		return Held{}, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	e, ok := n.wl[name]
	switch {
	case !ok:
		return Held{}, fmt.Errorf("%w: %q", ErrNotFound, name)
	case e.rec.Owner != nil:
		return Held{}, fmt.Errorf("%w: %q is job %s of a corepin run (pid %d); its size is the run's --cpus", ErrInvalid, name, e.rec.Job, e.rec.Owner.PID)
	case e.rec.Container != nil:
		return Held{}, fmt.Errorf("%w: %q is container %s of pod %s, run by the container runtime; resize the pod", ErrInvalid, name, e.rec.Container.Name, e.rec.Container.Pod)
	case e.rec.Deleting:
		return Held{}, fmt.Errorf("%w: %q is being deleted", ErrRejected, name)
	}
	old := *e
	ad, err := AdmitResize(n.db, n.topo, n.cfg, name, cpus)
	if err != nil {
		return Held{}, err
	}
	n.resized(e, ad)
	if err := n.follow(e, e.cpus.Size() > old.cpus.Size()); err != nil {
		n.log.Warn("rolling back a resize", "name", name, "err", err)
		if rerr := n.unresize(e, old); rerr != nil {
			err = errors.Join(err, rerr)
		}
		return Held{}, fmt.Errorf("resizing %q: %w", name, err)
	}
	return n.held(e), nil
}

// resized puts the committed resize ad on e and the node's state.
func (n *Node) resized(e *entry, ad Admission) {
	e.a, e.rec, e.mems = ad.Assignment, ad.Record, ad.Placement.NUMANodes
	if q := ad.Placement.QoS; q == alloc.LSE || q == alloc.LSR {
		e.cpus = ad.Placement.CPUs
	}
	n.st = ad.State
}

// follow writes e's size into its group and the shared pools: pools
// first when e grew (they give up CPUs), e's group first otherwise.
func (n *Node) follow(e *entry, grew bool) error {
	if grew {
		if err := n.syncPools(); err != nil {
			return err
		}
	}
	if e.group != nil {
		if err := e.group.Update(n.resources(e)); err != nil {
			return err
		}
	}
	return n.syncPools()
}

// unresize puts e back as it was before a resize its group could not
// follow: its assignment as committed before (unless another process
// took some of its CPUs meanwhile, which the error says), its group and
// the pools.
func (n *Node) unresize(e *entry, old entry) error {
	a, err := n.db.Replace(e.a.Name, func(cur []store.Assignment, _ store.Assignment) (store.Assignment, error) {
		back := slices.Clone(cur)
		for i := range back {
			if back[i].Name == old.a.Name {
				back[i] = old.a
			}
		}
		if _, err := stateFrom(n.topo, n.cfg, back); err != nil {
			return store.Assignment{}, fmt.Errorf("putting %q back at %s: %w", old.a.Name, old.a.Cpuset, err)
		}
		return old.a, nil
	})
	if err != nil {
		return err
	}
	cur, err := n.db.Assignments()
	if err != nil {
		return err
	}
	st, err := stateFrom(n.topo, n.cfg, cur)
	if err != nil {
		return err
	}
	group, grew := e.group, old.cpus.Size() > e.cpus.Size()
	*e = old
	e.a, e.group, n.st = a, group, st
	return n.follow(e, grew)
}
