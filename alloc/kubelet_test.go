package alloc

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/topology"
)

// kubeCase is one allocation case published in kubelet's own tests
// (cpu_assignment_test.go, policy_static_test.go), with the topology it
// runs on described in the `corepin topo` JSON form.
type kubeCase struct {
	Name          string   `json:"name"`
	From          string   `json:"from"`
	Topology      string   `json:"topology"`
	Options       []string `json:"options"`
	Free          string   `json:"free"`
	Reserved      string   `json:"reserved"`
	ReservedCount int      `json:"reserved_count"`
	CPUs          int      `json:"cpus"`
	NUMAHint      string   `json:"numa_hint"`
	Want          string   `json:"want"`
	WantError     string   `json:"want_error"`
}

type kubeCaseFile struct {
	Source     string `json:"source"`
	Topologies map[string]struct {
		CPUs []topology.CPU `json:"cpus"`
	} `json:"topologies"`
	Cases []kubeCase `json:"cases"`
}

func loadKubeCases(t *testing.T) (kubeCaseFile, map[string]*topology.Topology) {
	t.Helper()
	data, err := os.ReadFile("testdata/kubelet_cases.json")
	if err != nil {
		t.Fatal(err)
	}
	var f kubeCaseFile
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	topos := map[string]*topology.Topology{}
	for name, tj := range f.Topologies {
		topo, err := topology.New(tj.CPUs, nil)
		if err != nil {
			t.Fatalf("topology %s: %v", name, err)
		}
		topos[name] = topo
	}
	return f, topos
}

// kubeState builds the State a kubelet case starts from: CPUs outside its
// free set (and outside the reserved CPUs) held by a placeholder workload.
func kubeState(t *testing.T, topo *topology.Topology, c kubeCase, policy Policy) *State {
	t.Helper()
	cfg := NodeSettings{Policy: policy, Options: c.Options, Reserved: cpuset.MustParse(c.Reserved), ReservedCount: c.ReservedCount}
	s, err := NewState(topo, cfg)
	if err != nil {
		t.Fatalf("NewState: %v", err)
	}
	free := cpuset.MustParse(c.Free)
	occupied := topo.Online().Difference(free).Difference(s.Reserved())
	if !occupied.IsEmpty() {
		if err := s.Assign(Assignment{ID: "(taken)", QoS: LSE, CPUs: occupied}); err != nil {
			t.Fatalf("Assign: %v", err)
		}
	}
	return s
}

func kubeRequest(c kubeCase) Request {
	r := Request{ID: "req", CPUs: c.CPUs}
	for n := range cpuset.MustParse(c.NUMAHint).All() {
		r.Hint = append(r.Hint, topology.NodeID(n))
	}
	return r
}

func TestKubeletPublishedCases(t *testing.T) {
	f, topos := loadKubeCases(t)
	if len(f.Cases) < 50 {
		t.Fatalf("only %d kubelet cases loaded", len(f.Cases))
	}
	for _, c := range f.Cases {
		t.Run(c.From+"/"+c.Name, func(t *testing.T) {
			s := kubeState(t, topos[c.Topology], c, PolicyKubelet)
			p, err := s.Allocate(kubeRequest(c))
			if c.WantError != "" {
				if err == nil {
					t.Fatalf("Allocate = %s, want error %q", p.CPUs, c.WantError)
				}
				if !errors.Is(err, ErrRejected) || !strings.Contains(err.Error(), c.WantError) {
					t.Fatalf("Allocate error = %v, want a rejection containing %q", err, c.WantError)
				}
				return
			}
			if err != nil {
				t.Fatalf("Allocate: %v (want %s)", err, c.Want)
			}
			if want := cpuset.MustParse(c.Want); !p.CPUs.Equals(want) {
				t.Fatalf("Allocate = %s, want %s (kubelet)", p.CPUs, want)
			}
		})
	}
}
