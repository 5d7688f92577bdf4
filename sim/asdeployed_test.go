package sim

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/topology"
)

// smtTwoNUMA is a machine of two NUMA nodes (one socket each) of 2 cores of
// 2 threads: 4 CPUs per NUMA node.
var smtTwoNUMA = topology.Shape{Sockets: 2, NodesPerSocket: 1, L3PerNode: 1, CoresPerL3: 2, ThreadsPerCore: 2}

// deployedCluster is three like nodes tried in order: "strict" runs the
// kubelet engine with full-pcpus-only, "single" corepin with topology
// policy single-numa-node, "plain" publishes nothing.
func deployedCluster() []Node {
	topo := topology.MustSynthetic(smtTwoNUMA)
	return []Node{
		{Name: "strict", Topology: topo, Settings: &alloc.NodeSettings{Policy: alloc.PolicyKubelet, Options: []string{alloc.OptFullPCPUsOnly}}},
		{Name: "single", Topology: topo, Settings: &alloc.NodeSettings{Policy: alloc.PolicyCorepin, TopologyPolicy: alloc.TopologySingleNUMANode}},
		{Name: "plain", Topology: topo},
	}
}

// lseJobs is a trace of LSE jobs of the given sizes that stay.
func lseJobs(sizes ...int) []Event {
	var evs []Event
	for i, n := range sizes {
		id := fmt.Sprintf("job-%d", i)
		evs = append(evs, Event{T: float64(i), Op: Arrive, ID: id, Request: alloc.Request{ID: id, QoS: alloc.LSE, CPUs: n}})
	}
	return evs
}

type outcome struct {
	Admitted, Rejected, Avoidable int
	RejectedBy                    map[string]int
}

func outcomes(rep Report) map[string]outcome {
	out := map[string]outcome{}
	for _, r := range rep.Results {
		out[r.Scenario+"/"+string(r.NodeChoice)] = outcome{r.Admitted, r.Rejected, r.Avoidable, r.RejectedBy}
	}
	return out
}

// TestAsDeployedReplaysEachNodeUnderItsSettings replays two 1-CPU jobs
// and three 6-CPU jobs. Under first fit each lands on the first node with
// the CPUs and is not retried: the kubelet node's full-pcpus-only refuses
// both odd jobs (another node would have taken them), takes the first
// 6-CPU job on three whole cores, and the next two go to the
// single-numa-node node, where no NUMA node holds 6. Under best fit the
// 1-CPU jobs go on to the single-numa-node node, the 6-CPU jobs to the
// kubelet node and the plain node, and the last finds none but the
// single-numa-node node, which refuses it. Every uniform scenario (the
// nodes' topology policy none) admits all five or refuses the 1-CPU jobs
// (koord-most/least: bind FullPCPUs), so as-deployed counts differ from
// each; with the settings dropped as-deployed is corepin's run.
func TestAsDeployedReplaysEachNodeUnderItsSettings(t *testing.T) {
	evs := lseJobs(1, 1, 6, 6, 6)
	deployed, err := ParseScenario(AsDeployed)
	if err != nil {
		t.Fatal(err)
	}
	scens := append(Scenarios(), deployed)
	rep, err := Replay(evs, Config{Cluster: deployedCluster()}, Runs(scens, []NodeChoice{FirstFit, BestFit}))
	if err != nil {
		t.Fatalf("Replay() error = %v", err)
	}
	got := outcomes(rep)
	for choice, want := range map[NodeChoice]outcome{
		FirstFit: {Admitted: 1, Rejected: 4, Avoidable: 4, RejectedBy: map[string]int{alloc.OptFullPCPUsOnly: 2, string(alloc.TopologySingleNUMANode): 2}},
		BestFit:  {Admitted: 4, Rejected: 1, RejectedBy: map[string]int{string(alloc.TopologySingleNUMANode): 1}},
	} {
		if diff := cmp.Diff(want, got[AsDeployed+"/"+string(choice)]); diff != "" {
			t.Errorf("as-deployed/%s (-want +got):\n%s", choice, diff)
		}
	}
	for _, choice := range []NodeChoice{FirstFit, BestFit} {
		d := got[AsDeployed+"/"+string(choice)]
		for _, s := range Scenarios() {
			u := got[s.Name+"/"+string(choice)]
			if u.Admitted == d.Admitted && u.Rejected == d.Rejected {
				t.Errorf("%s/%s admitted %d, rejected %d: the same as as-deployed; want them to differ", s.Name, choice, u.Admitted, u.Rejected)
			}
		}
	}
	for _, r := range rep.Results {
		if r.Scenario != AsDeployed {
			if r.NodeSettings != nil {
				t.Errorf("%s: node_settings %+v, want none outside as-deployed", r.Scenario, r.NodeSettings)
			}
			continue
		}
		wantSettings := []NodeSettingsCount{
			{SettingsDoc: SettingsDoc{Policy: alloc.PolicyKubelet, Options: []string{alloc.OptFullPCPUsOnly}, TopologyPolicy: alloc.TopologyNone}, Published: true, Nodes: 1},
			{SettingsDoc: SettingsDoc{Policy: alloc.PolicyCorepin, Options: []string{}, TopologyPolicy: alloc.TopologySingleNUMANode}, Published: true, Nodes: 1},
			{SettingsDoc: SettingsDoc{Policy: alloc.PolicyCorepin, Options: []string{}, TopologyPolicy: alloc.TopologyNone}, Nodes: 1},
		}
		if diff := cmp.Diff(wantSettings, r.NodeSettings); diff != "" {
			t.Errorf("as-deployed node settings (-want +got):\n%s", diff)
		}
		if r.Policy != "mixed" || len(r.Options) != 0 {
			t.Errorf("as-deployed policy %q options %v, want mixed and none shared", r.Policy, r.Options)
		}
	}

	// Without settings every node runs corepin's defaults: the corepin run.
	bare := deployedCluster()
	for i := range bare {
		bare[i].Settings = nil
	}
	corepin, err := ParseScenario("corepin")
	if err != nil {
		t.Fatal(err)
	}
	rep, err = Replay(evs, Config{Cluster: bare}, Runs([]Scenario{corepin, deployed}, []NodeChoice{FirstFit, BestFit}))
	if err != nil {
		t.Fatal(err)
	}
	got = outcomes(rep)
	for _, choice := range []string{"first-fit", "best-fit"} {
		if diff := cmp.Diff(got["corepin/"+choice], got[AsDeployed+"/"+choice]); diff != "" {
			t.Errorf("%s: as-deployed over nodes without settings differs from corepin (-corepin +as-deployed):\n%s", choice, diff)
		}
	}
}

// TestAsDeployedNodeWithoutSettingsTakesConfigPolicy: a node publishing
// nothing takes Config.TopologyPolicy, one publishing settings its own
// (none when they name none).
func TestAsDeployedNodeWithoutSettingsTakesConfigPolicy(t *testing.T) {
	topo := topology.MustSynthetic(smtTwoNUMA)
	deployed, err := ParseScenario(AsDeployed)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		settings *alloc.NodeSettings
		want     outcome
	}{
		{name: "no settings: single-numa-node of the config", want: outcome{Rejected: 1, RejectedBy: map[string]int{"single-numa-node": 1}}},
		{name: "settings naming none", settings: &alloc.NodeSettings{}, want: outcome{Admitted: 1, RejectedBy: map[string]int{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Cluster: []Node{{Name: "n", Topology: topo, Settings: tc.settings}}, TopologyPolicy: alloc.TopologySingleNUMANode}
			rep, err := Replay(lseJobs(6), cfg, Runs([]Scenario{deployed}, []NodeChoice{FirstFit}))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, outcomes(rep)[AsDeployed+"/first-fit"]); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestAsDeployedForcesTheNodesBind: a node forcing bind FullPCPUs
// (Koordinator's FullPCPUsOnly label) on corepin's engine gives each
// exclusive job whole cores, whatever bind it asks: a 1-CPU job is refused
// there, a 2-CPU one admitted. The kubelet engine refuses a job asking
// for a bind of its own, as the node does (issue 29: it was dropped).
func TestAsDeployedForcesTheNodesBind(t *testing.T) {
	topo := topology.MustSynthetic(smtTwoNUMA)
	deployed, err := ParseScenario(AsDeployed)
	if err != nil {
		t.Fatal(err)
	}
	evs := lseJobs(1, 2)
	for i := range evs {
		evs[i].Request.Bind = alloc.BindSpreadByPCPUs
	}
	for _, tc := range []struct {
		name     string
		settings alloc.NodeSettings
		want     outcome
	}{
		{name: "forced FullPCPUs", settings: alloc.NodeSettings{Bind: alloc.BindFullPCPUs},
			want: outcome{Admitted: 1, Rejected: 1, RejectedBy: map[string]int{string(alloc.BindFullPCPUs): 1}}},
		{name: "as requested", want: outcome{Admitted: 2, RejectedBy: map[string]int{}}},
		{name: "kubelet refuses a pod's bind", settings: alloc.NodeSettings{Policy: alloc.PolicyKubelet, Bind: alloc.BindFullPCPUs},
			want: outcome{Rejected: 2, RejectedBy: map[string]int{alloc.ErrNoStrategy.Error(): 2}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Cluster: []Node{{Name: "koord", Topology: topo, Settings: &tc.settings}}}
			rep, err := Replay(evs, cfg, Runs([]Scenario{deployed}, []NodeChoice{FirstFit, BestFit}))
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rep.Results {
				if diff := cmp.Diff(tc.want, outcome{r.Admitted, r.Rejected, r.Avoidable, r.RejectedBy}); diff != "" {
					t.Errorf("%s (-want +got):\n%s", r.NodeChoice, diff)
				}
			}
		})
	}
}

// TestAsDeployedTakesTheNodesNUMAStrategy: a node whose NUMA strategy is
// LeastAllocated (Koordinator's numa-allocate-strategy label) spreads two
// 2-CPU jobs over its two NUMA nodes of 8 CPUs, so a single-numa-node job
// of 8 finds no node; under the default MostAllocated they pack and it is
// admitted. The kubelet engine takes no strategy.
func TestAsDeployedTakesTheNodesNUMAStrategy(t *testing.T) {
	topo := topology.MustSynthetic(topology.Shape{Sockets: 2, NodesPerSocket: 1, L3PerNode: 1, CoresPerL3: 8, ThreadsPerCore: 1})
	deployed, err := ParseScenario(AsDeployed)
	if err != nil {
		t.Fatal(err)
	}
	evs := lseJobs(2, 2, 8)
	snn := alloc.TopologySingleNUMANode
	for _, tc := range []struct {
		name     string
		settings alloc.NodeSettings
		admitted int
	}{
		{name: "default packs", settings: alloc.NodeSettings{TopologyPolicy: snn}, admitted: 3},
		{name: "MostAllocated packs", settings: alloc.NodeSettings{TopologyPolicy: snn, NUMA: alloc.MostAllocated}, admitted: 3},
		{name: "LeastAllocated spreads", settings: alloc.NodeSettings{TopologyPolicy: snn, NUMA: alloc.LeastAllocated}, admitted: 2},
		{name: "kubelet takes none", settings: alloc.NodeSettings{Policy: alloc.PolicyKubelet, TopologyPolicy: snn, NUMA: alloc.LeastAllocated}, admitted: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Cluster: []Node{{Name: "koord", Topology: topo, Settings: &tc.settings}}}
			rep, err := Replay(evs, cfg, Runs([]Scenario{deployed}, []NodeChoice{FirstFit}))
			if err != nil {
				t.Fatal(err)
			}
			if got := rep.Results[0].Admitted; got != tc.admitted {
				t.Errorf("admitted %d, want %d (%+v)", got, tc.admitted, rep.Results[0])
			}
		})
	}
}

// TestAsDeployedRefusesSettingsTheMachineCanNotRun: a node's settings the
// allocator refuses fail the replay naming the node.
func TestAsDeployedRefusesSettingsTheMachineCanNotRun(t *testing.T) {
	topo := topology.MustSynthetic(smtTwoNUMA)
	deployed, err := ParseScenario(AsDeployed)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Cluster: []Node{{Name: "odd", Topology: topo, Settings: &alloc.NodeSettings{Policy: alloc.PolicyKubelet,
		Options: []string{alloc.OptFullPCPUsOnly, alloc.OptDistributeAcrossCores}}}}}
	_, err = Replay(lseJobs(2), cfg, Runs([]Scenario{deployed}, []NodeChoice{FirstFit}))
	if !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), "node odd") {
		t.Errorf("Replay() error = %v, want ErrBadConfig naming node odd", err)
	}
}
