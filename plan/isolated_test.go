package plan

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/topology"
)

// A machine's isolated CPUs travel with its topology in the "cpus" form
// (TopologyOf, as the extender sends a node's topology): plan keeps shared
// requests off them and gives them to a request that requires them.
func TestTopologyOfCarriesIsolatedCPUs(t *testing.T) {
	base := topology.MustSynthetic(planShape)
	topo, err := base.WithIsolation(topology.Isolation{Isolcpus: cpuset.New(6, 7), NohzFull: cpuset.New(6, 7)})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(TopologyOf(topo))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"isolated":"6-7","nohz_full":"6-7"`) {
		t.Errorf("TopologyOf JSON lacks the isolated cpus: %.300s...", b)
	}
	p, err := place(t, `{"topology": `+string(b)+`, "requests": [{"id": "ls", "cpus": 1.5, "qos": "LS"},
		{"id": "rt", "cpus": 2, "qos": "LSE", "isolated": "require"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range p.Output.Results {
		if r.CPUSet == nil {
			t.Fatalf("%s: %s", r.ID, r.Error)
		}
		set := cpuset.MustParse(*r.CPUSet)
		if (r.ID == "ls") == set.Intersects(cpuset.New(6, 7)) || (r.ID == "rt" && !set.Equals(cpuset.New(6, 7))) {
			t.Errorf("%s placed on %s", r.ID, set)
		}
	}
	for _, in := range []string{
		`{"topology": {"cpus": [{"cpu": 0}], "isolated": "1"}}`,
		`{"topology": {"cpus": [{"cpu": 0}], "nohz_full": "0-"}}`,
		`{"topology": {"isolated": "0"}}`,
	} {
		if _, err := place(t, in); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err %v, want ErrInvalid", in, err)
		}
	}
}
