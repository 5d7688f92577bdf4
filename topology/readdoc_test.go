package topology

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corepin/corepin/internal/testutil"
)

// ReadDoc reads back every golden `corepin topo -o json` document as the
// topology it was written from.
func TestReadDocGoldens(t *testing.T) {
	for _, name := range testutil.Fixtures(t) {
		t.Run(name, func(t *testing.T) {
			f, err := os.Open(filepath.Join("testdata", "TestDiscoverGolden", name+".golden.json"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			got, err := ReadDoc(f)
			if err != nil {
				t.Fatalf("ReadDoc: %v", err)
			}
			want, err := Discover(testutil.SysfsFromTarBz2(t, name))
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(want.Doc(), got.Doc()); d != "" {
				t.Errorf("ReadDoc differs from Discover (-want +got):\n%s", d)
			}
		})
	}
}

func TestReadDocRejects(t *testing.T) {
	const cpus = `[{"cpu": 0, "socket": 0, "core": 0, "numa": 0, "l3": 0}]`
	tests := []struct {
		name, doc, want string
	}{
		{name: "unknown key", doc: `{"cpus": ` + cpus + `, "numa_distance": {}}`, want: `unknown field "numa_distance"`},
		{name: "unknown cpu key", doc: `{"cpus": [{"cpu": 0, "numa_node": 3}]}`, want: `unknown field "numa_node"`},
		{name: "two documents", doc: `{"cpus": ` + cpus + `} {}`, want: "more than one JSON document"},
		{name: "not json", doc: `cpus: 0`, want: "parsing document"},
		{name: "no cpus", doc: `{}`, want: "no cpus"},
		{name: "distance key not a number", doc: `{"cpus": ` + cpus + `, "numa_distances": {"zero": [10]}}`, want: `key "zero" is not a node id`},
		{name: "distance key with a sign", doc: `{"cpus": ` + cpus + `, "numa_distances": {"+0": [10]}}`, want: `key "+0"`},
		{name: "distance key with a leading zero", doc: `{"cpus": ` + cpus + `, "numa_distances": {"00": [10]}}`, want: `key "00"`},
		{name: "distance key above the cap", doc: `{"cpus": ` + cpus + `, "numa_distances": {"70000": [10]}}`, want: `key "70000"`},
		{name: "numa above the cap", doc: `{"cpus": [{"cpu": 0, "numa": 70000}]}`, want: "numa node 70000"},
		{name: "cpu above MaxCPU", doc: `{"cpus": [{"cpu": 65536}]}`, want: "cpu id 65536"},
		{name: "huge document", doc: `{"cpus": ` + cpus + strings.Repeat(" ", MaxDocSize) + `}`, want: "larger than"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadDoc(strings.NewReader(tc.doc))
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ReadDoc error = %v, want ErrInvalid containing %q", err, tc.want)
			}
		})
	}
}

// A hand-written document may leave out online, allowed and the distances.
func TestReadDocHandWritten(t *testing.T) {
	topo, err := ReadDoc(strings.NewReader(`{"cpus": [
		{"cpu": 0, "socket": 0, "core": 0, "numa": 1, "l3": 0},
		{"cpu": 1, "socket": 0, "core": 0, "numa": 1, "l3": 0}],
		"numa_distances": {"1": [10]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := topo.Summary(); got != "1 package, 1 NUMA node, 1 L3, 1 core, 2 CPUs (SMT2)" {
		t.Errorf("Summary() = %q", got)
	}
	if got := topo.Allowed().String(); got != "0-1" {
		t.Errorf("Allowed() = %q, want 0-1", got)
	}
}
