package nodecore

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/enforce"
	"github.com/corepin/corepin/store"
)

// Reconcile actions, as counted in ReconcileReport and the metric
// corepin_agent_reconcile_actions_total.
const (
	ActAdopted  = "adopted"  // a live group kept with its assignment
	ActOrphan   = "orphan"   // a live group without an assignment, admitted for what it holds
	ActGone     = "gone"     // an assignment whose group or processes are gone, released
	ActRemoved  = "removed"  // an empty group without a live assignment, removed
	ActMerged   = "merged"   // a second live group of one workload, its processes moved
	ActRepaired = "repaired" // a group whose cpuset differed from its assignment, rewritten
	ActKept     = "conflict" // a live orphan group that could not be admitted; its CPUs are not free
	ActDeadRun  = "dead_run" // a dead corepin run's reservation whose job has no process left, released
)

// ReconcileReport counts what Reconcile did, by action.
type ReconcileReport map[string]int

// Reconcile makes the state and the live groups agree. For each group
// under the agent's cgroup root: with an assignment and processes, it is
// adopted (its cpuset rewritten if it differs); empty, it is removed and
// its assignment released; with processes but no assignment (a lost or
// replaced state file), it is admitted for the CPUs it holds (as LSE if
// they are free, else BE) so that no CPU a live group holds is handed out
// again. Assignments whose group is gone are released; an adopted
// cgroup (Spec.Cgroup) is kept while it has processes. Open runs it once;
// the running agent calls the lighter Sweep.
func (n *Node) Reconcile() (ReconcileReport, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	rep := ReconcileReport{}
	err := n.reconcile(rep)
	for act, c := range rep {
		for range c {
			n.obs.Reconciled(act)
		}
	}
	if len(rep) > 0 {
		n.log.Info("reconciled", "actions", map[string]int(rep), "err", err)
	}
	return rep, err
}

func (n *Node) reconcile(rep ReconcileReport) error {
	as, err := n.db.Assignments()
	if err != nil {
		return err
	}
	st, recs, err := n.stateOf(as)
	if err != nil {
		return fmt.Errorf("loading the state (%s): %w", n.db.Path(), err)
	}
	listed, err := n.lister.List()
	if err != nil {
		return err
	}
	// Keep the entries the agent made itself (their commands are its
	// children); rebuild the rest.
	old := n.wl
	n.wl = map[string]*entry{}
	n.st = st
	n.pools = alloc.Pools{}
	var errs []error
	byName := map[string][]enforce.Listed{}
	for _, l := range listed {
		byName[l.Name] = append(byName[l.Name], l)
	}
	for _, a := range as {
		e := entryOf(a, recs[a.Name])
		if o, ok := old[a.Name]; ok && o.a.Generation == a.Generation && o.a.CreatedAt.Equal(a.CreatedAt) {
			e.cmd = o.cmd
		}
		if e.rec.Owner != nil || e.rec.Container != nil {
			// A local run's job (StatePlacer) or a runtime's container
			// (Containers): its group is theirs, not ours. Held until
			// the run or the NRI plugin releases it.
			n.wl[a.Name] = e
			continue
		}
		if e.rec.Deleting {
			// Deleted, and the agent stopped before it finished:
			// finish it.
			errs = append(errs, n.finishDelete(e, byName[a.Name], rep))
			delete(byName, a.Name)
			continue
		}
		if e.rec.Cgroup != "" {
			if r, ok := n.guard().InRoots(e.rec.Cgroup); ok {
				// Admitted by an agent before checkCgroup: it adopted
				// one of corepin's own groups. Release the assignment
				// and leave the group to its owner.
				n.log.Warn("releasing a workload that adopted a group of corepin's", "name", a.Name, "cgroup", e.rec.Cgroup, "root", r)
				errs = append(errs, n.forget(e, rep))
				continue
			}
			g, err := n.lister.OpenExisting(e.rec.Cgroup)
			if err == nil {
				pids, perr := enforce.Pids(g)
				if perr == nil && len(pids) > 0 {
					e.group = g
					n.wl[a.Name] = e
					rep[ActAdopted]++
					if q := alloc.QoS(a.QoS); (q == alloc.LSE || q == alloc.LSR) && a.Generation > 1 {
						// Resized (Resize): the crash may have come between
						// the commit and the cgroup; write the state's.
						if err := g.Update(n.resources(e)); err != nil {
							errs = append(errs, err)
						}
					}
					continue
				}
			}
			errs = append(errs, n.forget(e, rep))
			continue
		}
		gs := byName[a.Name]
		delete(byName, a.Name)
		var keep *enforce.Listed
		for i := range gs {
			if len(gs[i].Pids) > 0 && keep == nil {
				keep = &gs[i]
			}
		}
		for i := range gs {
			l := gs[i]
			if keep != nil && l.Dir == keep.Dir {
				continue
			}
			g, err := n.lister.Reopen(l)
			if err == nil && keep != nil && len(l.Pids) > 0 {
				kg, kerr := n.lister.Reopen(*keep)
				if kerr == nil {
					for _, p := range l.Pids {
						kg.AddProc(p) // a process that exited meanwhile is no loss
					}
					rep[ActMerged]++
				}
			}
			if err == nil {
				err = enforce.RemoveWhenEmpty(g, n.stop)
			}
			if err != nil {
				errs = append(errs, err)
				continue
			}
			rep[ActRemoved]++
		}
		if keep == nil {
			errs = append(errs, n.forget(e, rep))
			continue
		}
		g, err := n.lister.Reopen(*keep)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		e.group = g
		n.wl[a.Name] = e
		rep[ActAdopted]++
		if q := alloc.QoS(a.QoS); (q == alloc.LSE || q == alloc.LSR) && keep.CPUs.String() != a.Cpuset {
			if err := g.Update(n.resources(e)); err != nil {
				errs = append(errs, err)
			} else {
				rep[ActRepaired]++
			}
		}
	}
	// Groups without an assignment.
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		for _, l := range byName[name] {
			g, err := n.lister.Reopen(l)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if len(l.Pids) == 0 {
				if err := enforce.RemoveWhenEmpty(g, n.stop); err != nil {
					errs = append(errs, err)
				} else {
					rep[ActRemoved]++
				}
				continue
			}
			if _, dup := n.wl[name]; dup {
				errs = append(errs, fmt.Errorf("keeping group %s: a second live group of workload %q", l.Dir, name))
				rep[ActKept]++
				continue
			}
			if err := n.adoptOrphan(l, g); err != nil {
				errs = append(errs, err)
				rep[ActKept]++
				continue
			}
			rep[ActOrphan]++
		}
	}
	if err := n.syncPools(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Sweep is the light periodic check of a running agent: it releases the
// workloads whose groups have no process left, and (with
// Options.RunGroups) the reservations of local runs that died and whose
// jobs have no process left, by the rule a run applies when it opens the
// state file. Commands the agent started itself are released when they
// exit (it waits for them), so Sweep reads only the groups of adopted
// processes and cgroups and of commands started by an earlier agent, and
// the runs' groups only when a run's owner is dead: an idle agent with
// only its own children reads no cgroup at all.
func (n *Node) Sweep() (released []string, err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, nil
	}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(n.wl)) {
		e := n.wl[name]
		if e.rec.Deleting || e.gone {
			// A delete or a release that could not finish (a full
			// disk): again.
			if err := n.release(e, ActGone); err != nil {
				errs = append(errs, err)
			} else {
				released = append(released, name)
			}
			continue
		}
		if e.cmd != nil || e.group == nil {
			continue
		}
		pids, perr := enforce.Pids(e.group)
		if perr != nil && !errors.Is(perr, fs.ErrNotExist) {
			errs = append(errs, perr)
			continue
		}
		if len(pids) > 0 {
			continue
		}
		if err := n.release(e, ActGone); err != nil {
			errs = append(errs, err)
			continue
		}
		released = append(released, name)
	}
	if len(released) > 0 {
		n.log.Info("released workloads whose processes are gone", "names", released)
	}
	runs, err := n.releaseDeadRuns()
	if err != nil {
		errs = append(errs, err)
	}
	return append(released, runs...), errors.Join(errs...)
}

// releaseDeadRuns releases the reservations of dead runs whose jobs have
// no process left (see ReleaseDeadRuns), logging and counting each.
// Callers hold n.mu.
func (n *Node) releaseDeadRuns() ([]string, error) {
	if n.runs == nil {
		return nil, nil
	}
	gone, err := ReleaseDeadRuns(n.db, n.runs)
	if err != nil {
		return nil, fmt.Errorf("releasing dead runs' CPUs: %w", err)
	}
	if len(gone) == 0 {
		return nil, nil
	}
	var names []string
	for _, a := range gone {
		rec, _, _ := DecodeAssignment(a) // ReleaseDeadRuns decoded it
		n.log.Info("released a dead run's reservation", "name", a.Name, "job", rec.Job, "owner_pid", rec.Owner.PID,
			"cpuset", a.Cpuset)
		delete(n.wl, a.Name)
		if err := n.st.Release(a.Name); err != nil && !errors.Is(err, alloc.ErrUnknownID) {
			return names, err
		}
		n.obs.Reconciled(ActDeadRun)
		names = append(names, a.Name)
	}
	return names, n.syncPools()
}

// finishDelete stops the processes of e, a workload whose delete was
// committed, in each of its groups gs (or gives its adopted cgroup every
// CPU back), removes them and releases its assignment. What fails is kept
// in n.wl for the next sweep to try again.
func (n *Node) finishDelete(e *entry, gs []enforce.Listed, rep ReconcileReport) error {
	var errs []error
	if e.rec.Cgroup != "" {
		if g, err := n.lister.OpenExisting(e.rec.Cgroup); err == nil {
			e.group = g
			errs = append(errs, n.stopGroup(e))
		}
	}
	for _, l := range gs {
		g, err := n.lister.Reopen(l)
		if err == nil {
			e.group = g
			err = n.stopGroup(e)
		}
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		n.wl[e.a.Name] = e
		return fmt.Errorf("finishing the delete of %q: %w", e.a.Name, err)
	}
	e.group = nil
	if e.cmd != nil {
		reaped(e.cmd, 0) // killed with its group: collect the zombie
		e.cmd = nil
	}
	if err := n.forget(e, rep); err != nil {
		n.wl[e.a.Name] = e
		return err
	}
	return nil
}

// forget releases an assignment whose workload is gone. When the state
// file can not drop it (a full disk), it stays listed, as the file holds
// it, for Sweep to release later.
func (n *Node) forget(e *entry, rep ReconcileReport) error {
	if err := n.db.DeleteAssignment(e.a.Name); err != nil && !errors.Is(err, store.ErrNotFound) {
		e.group, e.gone = nil, true
		n.wl[e.a.Name] = e
		return fmt.Errorf("releasing %q, whose workload is gone: %w", e.a.Name, err)
	}
	if err := n.st.Release(e.a.Name); err != nil && !errors.Is(err, alloc.ErrUnknownID) {
		return err
	}
	rep[ActGone]++
	return nil
}

// adoptOrphan admits a live group that has no assignment, for the CPUs it
// holds: LSE when they are all free for an exclusive set, BE otherwise.
func (n *Node) adoptOrphan(l enforce.Listed, g enforce.Group) error {
	rec := Record{Spec: Spec{Name: l.Name}, Excl: string(alloc.ExclusiveNone), Adopted: true, Threads: max(1, l.CPUs.Size())}
	a := store.Assignment{Name: l.Name, QoS: string(alloc.LSE), Cpuset: l.CPUs.String()}
	probe := n.st.Clone()
	_, aa, _ := DecodeAssignment(a)
	if l.CPUs.IsEmpty() || probe.Assign(aa) != nil || probe.GuardPools(alloc.LSE) != nil {
		a.QoS, a.Cpuset = string(alloc.BE), ""
	}
	doc, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	a.Request = doc
	if _, err := n.db.SaveAssignment(a); err != nil {
		return err
	}
	saved, err := n.db.Assignments()
	if err != nil {
		return err
	}
	for _, s := range saved {
		if s.Name == l.Name {
			a = s
		}
	}
	_, aa, _ = DecodeAssignment(a)
	if err := n.st.Assign(aa); err != nil {
		return err
	}
	e := entryOf(a, rec)
	e.group = g
	n.wl[l.Name] = e
	return nil
}
