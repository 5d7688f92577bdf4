package agent

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/nodecore"
	"github.com/corepin/corepin/topology"
)

func TestContainersAdmitIsIdempotentAndReleases(t *testing.T) {
	topo := topology.MustSynthetic(topology.Shape{Sockets: 2, NodesPerSocket: 1, L3PerNode: 1, CoresPerL3: 4, ThreadsPerCore: 2})
	c, err := nodecore.OpenContainers(filepath.Join(t.TempDir(), "state.db"), topo, alloc.NodeSettings{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ref := nodecore.ContainerRef{ID: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", Pod: "default/x"}
	first, err := c.Admit(ref, Spec{QoS: "LSE", CPUs: f64(4), Bind: "FullPCPUs"}, cpuset.CPUSet{})
	if err != nil {
		t.Fatalf("Admit: %v", err)
	}
	if first.CPUs.Size() != 4 || first.Mems.Size() != 1 || len(first.Name) > MaxNameLen {
		t.Fatalf("Admit = %+v, want 4 CPUs on one node under a name of at most %d bytes", first, MaxNameLen)
	}
	again, err := c.Admit(ref, Spec{QoS: "LSE", CPUs: f64(4)}, cpuset.CPUSet{})
	if err != nil || !again.CPUs.Equals(first.CPUs) {
		t.Fatalf("second Admit = %v (%v), want the first answer %v", again.CPUs, err, first.CPUs)
	}
	if _, err := c.Admit(nodecore.ContainerRef{ID: "big"}, Spec{QoS: "LSE", CPUs: f64(13)}, cpuset.CPUSet{}); !errors.Is(err, ErrRejected) {
		t.Errorf("Admit of 13 CPUs beside 4 of 16 = %v, want ErrRejected", err)
	}
	if _, err := c.Admit(nodecore.ContainerRef{ID: ""}, Spec{QoS: "LSE", CPUs: f64(1)}, cpuset.CPUSet{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("Admit without an id = %v, want ErrInvalid", err)
	}
	if _, err := c.Admit(nodecore.ContainerRef{ID: "long", Pod: strings.Repeat("p", nodecore.MaxContainerIDLen+1)}, Spec{QoS: "LS", CPUs: f64(1)}, cpuset.CPUSet{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("Admit with a %d-byte pod name = %v, want ErrInvalid", nodecore.MaxContainerIDLen+1, err)
	}
	if err := c.Release(ref.ID); err != nil {
		t.Fatal(err)
	}
	if err := c.Release(ref.ID); err != nil {
		t.Errorf("second Release = %v, want nil", err)
	}
	if l, err := c.List(); err != nil || len(l) != 0 {
		t.Errorf("List after Release = %v (%v), want none", l, err)
	}
}

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
	c, err := nodecore.OpenContainers(n.db.Path(), topo, alloc.NodeSettings{})
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
