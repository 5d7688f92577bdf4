package nodecore

import (
	"testing"

	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/store"
	"github.com/corepin/corepin/topology"
)

// An agent started while its own load_balance false workloads hold
// isolated partitions does not count their CPUs as isolated by the
// kernel (they go back to the pools when the workloads end); a
// partition of someone else's stays isolated.
func TestWithoutOwnPartitions(t *testing.T) {
	base := topology.MustSynthetic(topology.Shape{Sockets: 1, NodesPerSocket: 1, L3PerNode: 1, CoresPerL3: 4, ThreadsPerCore: 1})
	// As the agent's topology reads on cgroup v2 while partitions hold
	// CPUs 0-2: gone from its own cgroup's effective CPUs.
	cpus := base.CPUs()
	for i := range cpus {
		cpus[i].Allowed = cpus[i].ID == 3
	}
	shrunk, err := topology.New(cpus, base.Distances())
	if err != nil {
		t.Fatal(err)
	}
	topo, err := shrunk.WithIsolation(topology.Isolation{Partitions: cpuset.MustParse("0-2")})
	if err != nil {
		t.Fatal(err)
	}
	off := false
	recs := map[string]Record{"lat": {Spec: Spec{LoadBalance: &off}}, "other": {}}
	as := []store.Assignment{{Name: "lat", Cpuset: "0-1"}, {Name: "other", Cpuset: "2"}}
	got, err := withoutOwnPartitions(topo, recs, as)
	if err != nil {
		t.Fatal(err)
	}
	if p := got.Isolation().Partitions; !p.Equals(cpuset.New(2)) {
		t.Errorf("isolated partitions = %s, want 2 (0-1 are lat's own)", p)
	}
	if a := got.Allowed(); !a.Equals(cpuset.MustParse("0-1,3")) {
		t.Errorf("allowed = %s, want 0-1,3 (lat's own partition allowed again)", a)
	}
	if p := topo.Isolation().Partitions; !p.Equals(cpuset.MustParse("0-2")) {
		t.Errorf("the topology given changed: partitions %s", p)
	}
	if same, _ := withoutOwnPartitions(base, recs, as); same != base {
		t.Error("a topology without partitions was copied")
	}
}
