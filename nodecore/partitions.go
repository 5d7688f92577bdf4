package nodecore

import (
	"fmt"

	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/store"
	"github.com/corepin/corepin/topology"
)

// withoutOwnPartitions returns t without, among its isolated cgroup v2
// partitions (cpuset.cpus.isolated, read when t was discovered), the
// CPUs of the workloads in as whose record asks for load_balance false,
// and with those CPUs allowed again: those partitions are the agent's own
// (enforce.Resources.NoLoadBalance), made by an earlier run of it, and
// the kernel took their CPUs out of the agent's own cgroup's effective
// set (what topology reads as allowed) only while they hold them. Left as
// they were, the CPUs would stay out of the shared pools after the
// workloads end, as CPUs the kernel isolates for someone else do. t itself
// when nothing changes.
func withoutOwnPartitions(t *topology.Topology, recs map[string]Record, as []store.Assignment) (*topology.Topology, error) {
	iso := t.Isolation()
	if iso.Partitions.IsEmpty() {
		return t, nil
	}
	var own cpuset.CPUSet
	for _, a := range as {
		if !recs[a.Name].NoLoadBalance() {
			continue
		}
		cpus, err := cpuset.Parse(a.Cpuset)
		if err != nil {
			return nil, fmt.Errorf("reading workload %s's cpuset: %w", a.Name, err)
		}
		own = own.Union(cpus)
	}
	own = own.Intersection(iso.Partitions)
	if own.IsEmpty() {
		return t, nil
	}
	cpus := t.CPUs()
	for i := range cpus {
		if own.Contains(cpus[i].ID) {
			cpus[i].Allowed = cpus[i].Online
		}
	}
	back, err := topology.New(cpus, t.Distances())
	if err != nil {
		return nil, fmt.Errorf("giving back the agent's own partitions: %w", err)
	}
	back.Warnings = t.Warnings
	iso.Partitions = iso.Partitions.Difference(own)
	return back.WithIsolation(iso)
}
