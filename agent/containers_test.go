package agent

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/nodecore"
)

// The agent's reconcile keeps the NRI plugin's container assignments (it
// has no group for them): before nodecore.Containers, Open released them as gone.
func TestNodeKeepsContainerAssignments(t *testing.T) {
	requireCgroups(t)
	topo := liveTopology(t)
	state := filepath.Join(t.TempDir(), "state.db")
	c, err := nodecore.OpenContainers(state, topo, alloc.NodeSettings{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ca, err := c.Admit(nodecore.ContainerRef{ID: "ctr1", Pod: "default/p"}, Spec{QoS: "LSE", CPUs: f64(1)}, cpuset.CPUSet{})
	if err != nil {
		t.Fatal(err)
	}
	n, err := openNode(t, testRoot(t), state)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	w, err := n.Get(nodecore.ContainerName("ctr1"))
	if err != nil || w.Source != "container" || w.Cpuset != ca.CPUs.String() {
		t.Fatalf("agent Get = %+v (%v), want source container on %s", w, err, ca.CPUs)
	}
	if err := n.Delete(nodecore.ContainerName("ctr1")); !errors.Is(err, ErrInvalid) {
		t.Errorf("agent Delete of a runtime's container = %v, want ErrInvalid (the runtime owns it)", err)
	}
	if _, err := n.Create(Spec{Name: "all", QoS: "LSE", CPUs: f64(float64(topo.Allowed().Size())), Command: "sleep", Args: []string{"60"}}); !errors.Is(err, ErrRejected) {
		t.Errorf("agent admitted every CPU while a container holds %s: %v", ca.CPUs, err)
	}
}

// An agent that is running when the plugin admits a container shows it
// (/v1/workloads) and counts its CPUs as taken (/v1/topology), and
// forgets it when the plugin releases it.
func TestRunningNodeSeesContainersAdmittedAfterIt(t *testing.T) {
	n, _ := newNode(t)
	topo := n.Topology()
	c, err := nodecore.OpenContainers(n.StatePath(), topo, alloc.NodeSettings{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ca, err := c.Admit(nodecore.ContainerRef{ID: "late", Pod: "default/p"}, Spec{QoS: "LSE", CPUs: f64(1)}, cpuset.CPUSet{})
	if err != nil {
		t.Fatal(err)
	}
	v := n.View()
	if v.Pools.LSE != ca.CPUs.String() {
		t.Errorf("/v1/topology LSE pool = %q, want the container's %s", v.Pools.LSE, ca.CPUs)
	}
	for node, free := range v.FreeByNUMA {
		if cpuset.MustParse(free).Intersects(ca.CPUs) {
			t.Errorf("/v1/topology shows CPUs %s of node %s free; the container holds %s", free, node, ca.CPUs)
		}
	}
	if ws := n.List(); len(ws) != 1 || ws[0].Name != nodecore.ContainerName("late") {
		t.Errorf("/v1/workloads = %+v, want the container", ws)
	}
	if err := c.Release("late"); err != nil {
		t.Fatal(err)
	}
	if ws := n.List(); len(ws) != 0 {
		t.Errorf("/v1/workloads after the plugin released = %+v, want none", ws)
	}
}

// A BE container's route, recorded by the plugin after the agent
// started, is in the agent's usage (what `corepin ctl top` shows);
// other workloads have none.
func TestUsagesShowABEContainersRoute(t *testing.T) {
	n, _ := newNode(t)
	c, err := nodecore.OpenContainers(n.StatePath(), n.Topology(), alloc.NodeSettings{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, id := range []string{"batch", "svc"} {
		q := map[string]string{"batch": "BE", "svc": "LSE"}[id]
		cpus := map[string]float64{"batch": 0.001, "svc": 1}[id]
		if _, err := c.Admit(nodecore.ContainerRef{ID: id, Pod: "default/" + id}, Spec{QoS: q, CPUs: f64(cpus)}, cpuset.CPUSet{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.SetBERoute("batch", "plugin-sched-idle"); err != nil {
		t.Fatal(err)
	}
	if err := n.Refresh(); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, u := range n.Usages() {
		got[u.Name] = u.BERoute
	}
	want := map[string]string{nodecore.ContainerName("batch"): "plugin-sched-idle", nodecore.ContainerName("svc"): ""}
	if len(got) != 2 || got[nodecore.ContainerName("batch")] != want[nodecore.ContainerName("batch")] || got[nodecore.ContainerName("svc")] != "" {
		t.Errorf("usage routes = %v, want %v", got, want)
	}
}
