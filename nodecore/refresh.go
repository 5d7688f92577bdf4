package nodecore

import "maps"

// Refresh brings in what other processes committed to the state file
// since the agent last looked: the NRI plugin's containers and local runs'
// jobs (assignments without a group of the agent's) are added or dropped,
// the allocator state is rebuilt from the store, and the LS and BE groups
// are resized if the pools changed. List, View and the periodic sweep call
// it, so /v1/workloads and /v1/topology show the CPUs the plugin holds.
func (n *Node) Refresh() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil
	}
	as, err := n.db.Assignments()
	if err != nil {
		return err
	}
	st, recs, err := n.stateOf(as)
	if err != nil {
		return err
	}
	seen := make(map[string]bool, len(as))
	for _, a := range as {
		seen[a.Name] = true
		rec := recs[a.Name]
		if rec.Owner == nil && rec.Container == nil {
			continue
		}
		if e, ok := n.wl[a.Name]; ok && e.a.Generation == a.Generation && e.a.CreatedAt.Equal(a.CreatedAt) {
			continue
		}
		n.wl[a.Name] = entryOf(a, rec)
	}
	maps.DeleteFunc(n.wl, func(name string, e *entry) bool {
		return !seen[name] && (e.rec.Owner != nil || e.rec.Container != nil)
	})
	n.st = st
	return n.syncPools()
}
