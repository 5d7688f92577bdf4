package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corepin/corepin/internal/testutil"
)

// TestTopoVMDumpsEndToEnd runs the real binary on the dumps of a kernel
// with isolated CPUs (topology/testdata/vm), unpacked: corepin topo -o json
// prints what it printed in that machine, the text view names the isolated
// and nohz_full CPUs and their sources, and (on the isolcpus one) corepin
// plan places a request requiring isolated CPUs on them, refuses one
// requiring more with the count, and keeps a plain one off them.
func TestTopoVMDumpsEndToEnd(t *testing.T) {
	for _, tc := range []struct{ dump, line string }{
		{"qemu-2s2c2t-isolcpus6-7", "Isolated: 6-7 (isolcpus), nohz_full: 6-7"},
		{"qemu-2s2c2t-isolcpus6-7-partition4-5", "Isolated: 4-7 (isolcpus 6-7; cgroup isolated partition 4-5), nohz_full: 6-7"},
	} {
		t.Run(tc.dump, func(t *testing.T) {
			root := testutil.WriteDir(t, testutil.VMDump(t, tc.dump))
			out, errOut, code := run(t, "topo", "--sysfs-root", root, "-o", "json")
			if code != 0 {
				t.Fatalf("topo -o json: exit %d: %s", code, errOut)
			}
			live, err := os.ReadFile(filepath.Join(testutil.VMDumpsDir(), tc.dump+".topo.json"))
			if err != nil {
				t.Fatal(err)
			}
			// A dump counts every online CPU as allowed (topology.Open):
			// its cgroup is another machine's.
			if want := strings.ReplaceAll(string(live), `"allowed": false`, `"allowed": true`); out != want {
				t.Errorf("corepin topo -o json on the dump differs from its output in the machine:\n%s\nwant:\n%s", out, want)
			}
			text, errOut, code := run(t, "topo", "--sysfs-root", root)
			if code != 0 || !strings.Contains(text, "\n"+tc.line+"\n") {
				t.Errorf("topo (exit %d, %s) lacks the line %q:\n%s", code, errOut, tc.line, text)
			}
			if tc.dump != "qemu-2s2c2t-isolcpus6-7" {
				return
			}
			in := `{"topology": {"sysfs_root": "` + root + `"}, "requests": [` +
				`{"id": "iso", "cpus": 2, "qos": "LSE", "isolated": "require"},` +
				`{"id": "more", "cpus": 1, "qos": "LSE", "isolated": "require"},` +
				`{"id": "plain", "cpus": 2, "qos": "LSE"}]}`
			plan := exec.Command(binary, "plan", "-o", "json")
			plan.Stdin = strings.NewReader(in)
			b, _ := plan.Output() // exit 1: a request was refused
			var res struct {
				Results []struct{ ID, CPUSet, Error string }
			}
			if err := json.Unmarshal(b, &res); err != nil || len(res.Results) != 3 {
				t.Fatalf("plan output %s: %v, want 3 results", b, err)
			}
			got := map[string]string{}
			for _, r := range res.Results {
				got[r.ID] = r.CPUSet + r.Error
			}
			want := map[string]string{"iso": "6-7", "plain": "4-5", // beside iso (MostAllocated), off 6-7
				"more": `isolated CPUs: request "more" requires 1 isolated CPUs; 0 of the isolated CPUs 6-7 are free`}
			for id, w := range want {
				if !strings.HasPrefix(got[id], w) {
					t.Errorf("plan: %s = %q, want %q", id, got[id], w)
				}
			}
		})
	}
}
