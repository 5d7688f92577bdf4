package nodecore

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
)

// The agent's YAML and the shared state spell a node's settings the same
// way; ParseSettings reads them once, naming the key at fault.
func TestParseSettings(t *testing.T) {
	tests := []struct {
		name                      string
		reserved, policy, topoPol string
		options                   []string
		want                      alloc.NodeSettings
		wantErr                   string
	}{
		{name: "empty is the corepin engine with nothing reserved", want: alloc.NodeSettings{}},
		{name: "all set", reserved: "0-1", policy: "kubelet", topoPol: "single-numa-node", options: []string{alloc.OptFullPCPUsOnly},
			want: alloc.NodeSettings{Reserved: cpuset.New(0, 1), Policy: alloc.PolicyKubelet, TopologyPolicy: alloc.TopologySingleNUMANode,
				Options: []string{alloc.OptFullPCPUsOnly}}},
		{name: "bad reserved", reserved: "1-0", wantErr: "reserved_cpus"},
		{name: "bad policy", policy: "gold", wantErr: "policy \"gold\": want corepin or kubelet"},
		{name: "bad topology policy", topoPol: "numa", wantErr: "topology_policy \"numa\""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseSettings(tc.reserved, tc.policy, tc.options, tc.topoPol)
			if tc.wantErr != "" {
				if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseSettings = %v, want ErrInvalid naming %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(cpuset.CPUSet.Equals)); diff != "" {
				t.Errorf("ParseSettings (-want +got):\n%s", diff)
			}
		})
	}
}

// What ParseSettings accepts, recorded in the state file and read back,
// is the same node settings: SharedConfigOf and Settings are inverses.
func FuzzParseSettings(f *testing.F) {
	f.Add("0-1", "kubelet", "full-pcpus-only", "single-numa-node")
	f.Add("", "", "", "")
	f.Add("3,5-7", "corepin", "", "best-effort")
	f.Add("0-", "x", "a,b", "none")
	f.Fuzz(func(t *testing.T, reserved, policy, options, topoPol string) {
		var opts []string
		if options != "" {
			opts = strings.Split(options, ",")
		}
		s, err := ParseSettings(reserved, policy, opts, topoPol)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("ParseSettings error %v does not wrap ErrInvalid", err)
			}
			return
		}
		if !utf8.ValidString(options) {
			return // neither YAML nor JSON carries such a name; NewState refuses every unknown one
		}
		doc, err := json.Marshal(SharedConfigOf("agent", s))
		if err != nil {
			t.Fatal(err)
		}
		var c SharedConfig
		if err := json.Unmarshal(doc, &c); err != nil {
			t.Fatal(err)
		}
		back, err := c.Settings()
		if err != nil {
			t.Fatalf("recorded %s does not read back: %v", doc, err)
		}
		if diff := cmp.Diff(s, back, cmp.Comparer(cpuset.CPUSet.Equals)); diff != "" {
			t.Errorf("settings recorded as %s read back differently (-parsed +read):\n%s", doc, diff)
		}
	})
}
