package topology

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
)

// fuzzMachine is the base of FuzzDiscoverSysfsContent: one package of two
// SMT2 cores (siblings 0,2 and 1,3) on two NUMA nodes with a shared L3,
// with every file kind discovery reads, lists and masks side by side.
func fuzzMachine() map[string]string {
	files := map[string]string{
		"sys/devices/system/cpu/online":          "0-3\n",
		"sys/devices/system/cpu/present":         "0-3\n",
		"sys/devices/system/node/node0/cpulist":  "0,2\n",
		"sys/devices/system/node/node0/distance": "10 20\n",
		"sys/devices/system/node/node1/cpumap":   "0000000a\n",
		"sys/devices/system/node/node1/distance": "20 10\n",
	}
	for cpu := range 4 {
		files = merge(files, topoFiles(cpu, map[string]string{
			"thread_siblings_list": []string{"0,2", "1,3"}[cpu%2] + "\n",
			"thread_siblings":      []string{"00000005", "0000000a"}[cpu%2] + "\n",
			"core_siblings_list":   "0-3\n",
			"core_siblings":        "0000000f\n",
			"die_cpus_list":        "0-3\n",
			"cluster_cpus":         []string{"00000005", "0000000a"}[cpu%2] + "\n",
			"physical_package_id":  "0\n",
			"core_id":              itoa(cpu%2) + "\n",
		}))
		dir := "sys/devices/system/cpu/cpu" + itoa(cpu)
		files[dir+"/online"] = "1\n"
		files[dir+"/cache/index3/level"] = "3\n"
		files[dir+"/cache/index3/type"] = "Unified\n"
		files[dir+"/cache/index3/shared_cpu_list"] = "0-3\n"
		files[dir+"/cache/index3/shared_cpu_map"] = "0000000f\n"
	}
	return files
}

// FuzzDiscoverSysfsContent feeds arbitrary content to each kind of sysfs file
// discovery reads, optionally with another file of the base machine removed
// (old kernels lack many): it must return a topology or an error, never
// panic, and a topology it returns must be self-consistent and survive the
// JSON document both ways.
func FuzzDiscoverSysfsContent(f *testing.F) {
	base := fuzzMachine()
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range base {
			if !yield(k) {
				return
			}
		}
	})
	extra := []string{
		"sys/devices/system/node/node1/cpulist",
		"sys/devices/system/node/node3/distance",
		"sys/devices/cpu_core/cpus",
		"proc/self/cgroup",
	}
	files := append(slices.Clone(names), extra...)
	for i, s := range []string{"0-1\n", "0-3", "1\x00", "00000003", "0,2", "", "zz", "10 20", "3:cpuset:/x", "1-0",
		"21 10\n", "10 20 30 40\n", "00000000\n", "-1\n", "70000\n", "20 10 20 21\n"} {
		f.Add(uint8(i), uint8(255), s)
	}
	f.Fuzz(func(t *testing.T, which, drop uint8, content string) {
		m := fstest.MapFS{}
		for k, v := range base {
			m[k] = &fstest.MapFile{Data: []byte(v)}
		}
		if int(drop) < len(names) {
			delete(m, names[drop])
		}
		m[files[int(which)%len(files)]] = &fstest.MapFile{Data: []byte(content)}
		topo, err := Discover(m)
		if err != nil {
			return
		}
		if topo.Online().IsEmpty() || !topo.Allowed().IsSubsetOf(topo.Online()) {
			t.Fatalf("online %q, allowed %q", topo.Online(), topo.Allowed())
		}
		if _, err := FromDoc(topo.Doc()); err != nil {
			t.Fatalf("Doc does not rebuild: %v", err)
		}
		checkDocRoundTrip(t, topo)
	})
}

// checkDocRoundTrip fails t unless topo's JSON document reads back
// (ReadDoc) to the same document; it returns what ReadDoc built.
func checkDocRoundTrip(t *testing.T, topo *Topology) *Topology {
	t.Helper()
	b, err := json.Marshal(topo.Doc())
	if err != nil {
		t.Fatal(err)
	}
	back, err := ReadDoc(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("ReadDoc of its own document: %v", err)
	}
	if d := cmp.Diff(topo.Doc(), back.Doc()); d != "" {
		t.Fatalf("document changes through ReadDoc:\n%s", d)
	}
	return back
}

// FuzzReadDoc: ReadDoc never panics, and what it accepts it writes back as
// a document it reads to the same topology.
func FuzzReadDoc(f *testing.F) {
	golden, err := os.ReadFile(filepath.Join("testdata", "TestDiscoverGolden", "8em64t-2s2ca2c.golden.json"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(golden)
	for _, s := range []string{
		`{"cpus": [{"cpu": 0, "socket": 0, "core": 0, "numa": 0, "l3": 0}]}`,
		`{"cpus": [{"cpu": 0, "numa": 1}, {"cpu": 1, "numa": 3, "core": 1}], "numa_distances": {"1": [10, 21], "3": [21, 10]}}`,
		`{"cpus": [{"cpu": 3, "online": false, "socket": -1, "die": -1, "cluster": -1, "core": -1, "numa": -1, "l3": -1}, {"cpu": 0}]}`,
		`{"cpus": [{"cpu": 0, "numa": 70000}]}`,
		`{"cpus": [{"cpu": 0, "core": 1}]}`,
		`{"cpus": [], "numa_distances": {"0": []}}`,
		`{"cpus": [{"cpu": 0}], "warnings": ["x"]}`,
		`[]`, `null`, `{"cpus": null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		topo, err := ReadDoc(bytes.NewReader(doc))
		if err != nil {
			return
		}
		b, err := json.Marshal(topo.Doc())
		if err != nil {
			t.Fatal(err)
		}
		back, err := ReadDoc(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("ReadDoc of its own document %s: %v", b, err)
		}
		if d := cmp.Diff(topo.Doc(), back.Doc()); d != "" {
			t.Fatalf("document changes through ReadDoc:\n%s", d)
		}
	})
}
