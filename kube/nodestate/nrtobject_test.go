package nodestate

import (
	"errors"
	"os"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/corepin/corepin/cpuset"
)

func TestStandInTopology(t *testing.T) {
	t.Run("one socket and L3 per NUMA node with CPUs", func(t *testing.T) {
		topo, err := StandInTopology([]int{2, 0, 3})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := topo.Allowed().String(), "0-4"; got != want {
			t.Errorf("Allowed() = %s, want %s", got, want)
		}
		if topo.NumSockets() != 2 || topo.NumL3() != 2 || topo.NumCores() != 5 || topo.ThreadsPerCore() != 1 {
			t.Errorf("%d sockets, %d L3, %d cores, %d threads per core; want 2, 2, 5, 1", topo.NumSockets(), topo.NumL3(), topo.NumCores(), topo.ThreadsPerCore())
		}
		if got := topo.NodeCPUs(2).String(); got != "2-4" {
			t.Errorf("NodeCPUs(2) = %s, want 2-4 (node 1 has none)", got)
		}
	})
	t.Run("no CPU", func(t *testing.T) {
		if topo, err := StandInTopology([]int{0, 0}); topo != nil || err != nil {
			t.Errorf("StandInTopology([0 0]) = %v, %v; want nil, nil", topo, err)
		}
	})
	for _, free := range [][]int{{-1, 4}, {cpuset.MaxCPU, 2}, make([]int, 70000)} {
		if _, err := StandInTopology(free); err == nil || !strings.Contains(err.Error(), "stand-in machine") {
			t.Errorf("StandInTopology(%d entries starting %v) error = %v, want one about the stand-in machine", len(free), free[:2], err)
		}
	}
}

// FuzzParseNRT feeds arbitrary objects to ParseNRT: nothing may panic,
// and every object it accepts makes a machine whose held CPUs are its own
// and do not overlap, or a stand-in of exactly the free CPUs counted.
func FuzzParseNRT(f *testing.F) {
	for _, p := range []string{"testdata/koordinator-nrt-v1alpha1.json"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"apiVersion":"topology.node.k8s.io/v1alpha2","kind":"NodeResourceTopology","metadata":{"name":"a"},"zones":[{"name":"node-0","type":"Node","resources":[{"name":"cpu","capacity":"8","allocatable":"8","available":"6"}]}],"attributes":[{"name":"topologyManagerPolicy","value":"restricted"}]}`))
	f.Add([]byte(`{"apiVersion":"topology.node.k8s.io/v1alpha1","kind":"NodeResourceTopology","metadata":{"name":"a"},"topologyPolicies":["BestEffortPodLevel"],"zones":[{"name":"node-1","type":"Node","resources":[{"name":"cpu","available":"2"}]},{"name":"core-0","type":"Core"}]}`))
	f.Add([]byte(`{"metadata":{"name":"a","annotations":{"node.koordinator.sh/cpu-topology":"{\"detail\":[{\"id\":0,\"core\":0,\"socket\":0,\"node\":0},{\"id\":1,\"core\":0,\"socket\":0,\"node\":0}]}","node.koordinator.sh/reservation":"{\"reservedCPUs\":\"1\"}"}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		u := &unstructured.Unstructured{}
		if u.UnmarshalJSON(b) != nil {
			return
		}
		n, err := ParseNRT(u)
		if err != nil {
			if !errors.Is(err, ErrNode) {
				t.Errorf("error %v does not wrap ErrNode", err)
			}
			return
		}
		if _, err := n.JudgedSettings(nil); err != nil {
			t.Errorf("JudgedSettings(no labels) of an accepted object: %v", err)
		}
		topo, held, err := n.Machine()
		if err != nil {
			if n.Koord != nil || !errors.Is(err, ErrNoFreeCPU) {
				t.Errorf("Machine() of an accepted object: %v", err)
			}
			return
		}
		if n.Koord == nil {
			total := 0
			for _, c := range n.Free {
				total += c
			}
			if topo.Online().Size() != total || len(held) != 0 {
				t.Errorf("stand-in of %v has %d CPUs and %d held, want %d and none", n.Free, topo.Online().Size(), len(held), total)
			}
			return
		}
		var all cpuset.Builder
		seen := 0
		for _, a := range held {
			if !a.CPUs.IsSubsetOf(topo.Online()) {
				t.Errorf("held %s %s outside the machine %s", a.ID, a.CPUs, topo.Online())
			}
			all.AddSet(a.CPUs)
			seen += a.CPUs.Size()
		}
		if all.Result().Size() != seen {
			t.Errorf("held CPUs overlap: %v", held)
		}
	})
}
