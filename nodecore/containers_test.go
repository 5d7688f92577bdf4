package nodecore

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/topology"
)

func TestContainersAdmitIsIdempotentAndReleases(t *testing.T) {
	topo := topology.MustSynthetic(topology.Shape{Sockets: 2, NodesPerSocket: 1, L3PerNode: 1, CoresPerL3: 4, ThreadsPerCore: 2})
	c, err := OpenContainers(filepath.Join(t.TempDir(), "state.db"), topo, alloc.NodeSettings{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ref := ContainerRef{ID: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", Pod: "default/x"}
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
	if _, err := c.Admit(ContainerRef{ID: "big"}, Spec{QoS: "LSE", CPUs: f64(13)}, cpuset.CPUSet{}); !errors.Is(err, ErrRejected) {
		t.Errorf("Admit of 13 CPUs beside 4 of 16 = %v, want ErrRejected", err)
	}
	if _, err := c.Admit(ContainerRef{ID: ""}, Spec{QoS: "LSE", CPUs: f64(1)}, cpuset.CPUSet{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("Admit without an id = %v, want ErrInvalid", err)
	}
	if _, err := c.Admit(ContainerRef{ID: "long", Pod: strings.Repeat("p", MaxContainerIDLen+1)}, Spec{QoS: "LS", CPUs: f64(1)}, cpuset.CPUSet{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("Admit with a %d-byte pod name = %v, want ErrInvalid", MaxContainerIDLen+1, err)
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

func TestContainersSetBERouteKeepsTheAssignment(t *testing.T) {
	topo := topology.MustSynthetic(topology.Shape{Sockets: 1, NodesPerSocket: 1, L3PerNode: 1, CoresPerL3: 2, ThreadsPerCore: 2})
	c, err := OpenContainers(filepath.Join(t.TempDir(), "state.db"), topo, alloc.NodeSettings{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	be, err := c.Admit(ContainerRef{ID: "be", Pod: "default/batch"}, Spec{QoS: "BE", CPUs: f64(0.001)}, cpuset.CPUSet{})
	if err != nil {
		t.Fatal(err)
	}
	if be.BERoute != "" {
		t.Fatalf("BERoute of a container just admitted = %q, want none", be.BERoute)
	}
	if err := c.SetBERoute("be", "plugin-sched-idle"); err != nil {
		t.Fatalf("SetBERoute: %v", err)
	}
	got, err := c.Get("be")
	if err != nil {
		t.Fatal(err)
	}
	if got.BERoute != "plugin-sched-idle" || !got.CPUs.Equals(be.CPUs) || got.QoS != alloc.BE || got.Ref != be.Ref {
		t.Errorf("after SetBERoute: %+v, want %+v with BERoute plugin-sched-idle", got, be)
	}
	if err := c.SetBERoute("gone", "min-weight"); !errors.Is(err, ErrNotFound) {
		t.Errorf("SetBERoute of a container holding nothing = %v, want ErrNotFound", err)
	}
}
