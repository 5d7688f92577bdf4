package topology

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"

	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/internal/testutil"
)

var update = flag.Bool("update", false, "rewrite golden files")

// TestDiscoverGolden pins `corepin topo -o json` for every fixture; refresh
// with `go test ./topology -run TestDiscoverGolden -update`.
func TestDiscoverGolden(t *testing.T) {
	for _, name := range testutil.Fixtures(t) {
		t.Run(name, func(t *testing.T) {
			topo, err := Discover(testutil.SysfsFromTarBz2(t, name))
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.MarshalIndent(topo.Doc(), "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			file := filepath.Join("testdata", t.Name()+".golden.json")
			if *update {
				if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(file, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("reading golden file (run with -update to create): %v", err)
			}
			if d := cmp.Diff(string(want), string(got)); d != "" {
				t.Errorf("topo JSON differs from %s (-want +got):\n%s", file, d)
			}
			// The document round-trips through FromDoc.
			var doc Doc
			if err := json.Unmarshal(got, &doc); err != nil {
				t.Fatal(err)
			}
			back, err := FromDoc(doc)
			if err != nil {
				t.Fatalf("FromDoc: %v", err)
			}
			if back.Summary() != topo.Summary() {
				t.Errorf("FromDoc summary = %q, want %q", back.Summary(), topo.Summary())
			}
		})
	}
}

// machine builds a MapFS of a small machine; tests then edit it.
// A file whose content is "DELETE" is left out, so that a test can remove
// a file of a base machine with merge.
func machine(files map[string]string) fstest.MapFS {
	m := fstest.MapFS{}
	for p, c := range files {
		if c != "DELETE" {
			m[p] = &fstest.MapFile{Data: []byte(c)}
		}
	}
	return m
}

func topoFiles(cpu int, kv map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range kv {
		out["sys/devices/system/cpu/cpu"+itoa(cpu)+"/topology/"+k] = v
	}
	return out
}

func itoa(i int) string { return strings.TrimSpace(cpuset.New(i).String()) }

func merge(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

func mustDiscover(t *testing.T, fsys fstest.MapFS) *Topology {
	t.Helper()
	topo, err := Discover(fsys)
	if err != nil {
		t.Fatalf("Discover: %v", err)
	}
	return topo
}

func cpuField(t *testing.T, topo *Topology, id int) CPU {
	t.Helper()
	c, ok := topo.CPU(id)
	if !ok {
		t.Fatalf("cpu %d missing", id)
	}
	return c
}

// Old kernels (2.6-era) expose only masks: thread_siblings, core_siblings.
func TestDiscoverMasksOnly(t *testing.T) {
	var files []map[string]string
	for cpu := range 4 {
		files = append(files, topoFiles(cpu, map[string]string{
			"thread_siblings":     []string{"00000005", "0000000a", "00000005", "0000000a"}[cpu] + "\n",
			"core_siblings":       "0000000f\n",
			"core_id":             []string{"0", "1", "0", "1"}[cpu],
			"physical_package_id": "0",
		}))
	}
	topo := mustDiscover(t, machine(merge(files...)))
	if got := topo.CoreCPUs(cpuField(t, topo, 0).Core).String(); got != "0,2" {
		t.Errorf("core of cpu 0 = %q, want 0,2 (siblings need not be consecutive)", got)
	}
	if topo.NumCores() != 2 || topo.NumSockets() != 1 {
		t.Errorf("cores/sockets = %d/%d, want 2/1", topo.NumCores(), topo.NumSockets())
	}
	if !topo.Online().Equals(cpuset.Range(0, 3)) {
		t.Errorf("online = %q, want 0-3 (no online file: topology dirs count)", topo.Online())
	}
}

// core_id repeats across packages; corepin's core index must not.
func TestDiscoverCoreIDRepeatsAcrossPackages(t *testing.T) {
	var files []map[string]string
	for cpu := range 4 {
		pkg := cpu / 2
		files = append(files, topoFiles(cpu, map[string]string{
			"thread_siblings_list": itoa(cpu),
			"core_siblings_list":   []string{"0-1", "2-3"}[pkg],
			"core_id":              itoa(cpu % 2 * 4), // sparse: 0, 4
			"physical_package_id":  "-1",              // s390/POWER style
		}))
	}
	topo := mustDiscover(t, machine(merge(files...)))
	if topo.NumCores() != 4 || topo.NumSockets() != 2 {
		t.Fatalf("cores/sockets = %d/%d, want 4/2", topo.NumCores(), topo.NumSockets())
	}
	for cpu := range 4 {
		if c := cpuField(t, topo, cpu); int(c.Core) != cpu || int(c.Socket) != cpu/2 {
			t.Errorf("cpu %d: core %d socket %d, want %d %d", cpu, c.Core, c.Socket, cpu, cpu/2)
		}
	}
}

// Without any sibling file, raw ids group CPUs within their package.
func TestDiscoverRawIDsOnly(t *testing.T) {
	var files []map[string]string
	for cpu := range 4 {
		files = append(files, topoFiles(cpu, map[string]string{
			"core_id":             "0",
			"physical_package_id": itoa(cpu / 2),
		}))
	}
	topo := mustDiscover(t, machine(merge(files...)))
	if topo.NumSockets() != 2 || topo.NumCores() != 2 {
		t.Fatalf("sockets/cores = %d/%d, want 2/2", topo.NumSockets(), topo.NumCores())
	}
	if got := topo.CoreCPUs(cpuField(t, topo, 2).Core).String(); got != "2-3" {
		t.Errorf("core of cpu 2 = %q, want 2-3", got)
	}
}

// AMD EPYC numbers SMT siblings 0 and 64; a stale list must not win.
func TestDiscoverStaleListFallsBackToMask(t *testing.T) {
	files := merge(
		topoFiles(0, map[string]string{"thread_siblings_list": "1-2\x00\n", "thread_siblings": "00000000,00000000,00000000,00000001,00000000,00000000,00000001", "core_siblings_list": "0,64"}),
		topoFiles(64, map[string]string{"thread_siblings_list": "0,64\x00\n", "core_siblings_list": "0,64"}),
		map[string]string{"sys/devices/system/cpu/online": "0,64\n"},
	)
	topo := mustDiscover(t, machine(files))
	if got := topo.CoreCPUs(cpuField(t, topo, 0).Core).String(); got != "0,64" {
		t.Errorf("core of cpu 0 = %q, want 0,64", got)
	}
	if len(topo.Warnings) == 0 || !strings.Contains(topo.Warnings[0], "stale") {
		t.Errorf("warnings = %q, want a stale-list warning", topo.Warnings)
	}
}

// CPU 0 can be the offline one; offline CPUs have no topology directory.
func TestDiscoverCPU0Offline(t *testing.T) {
	files := merge(
		map[string]string{
			"sys/devices/system/cpu/online":      "1-3\n",
			"sys/devices/system/cpu/present":     "0-3\n",
			"sys/devices/system/cpu/cpu0/online": "0\n",
		},
		topoFiles(1, map[string]string{"thread_siblings_list": "1", "core_siblings_list": "1-3"}),
		topoFiles(2, map[string]string{"thread_siblings_list": "2-3", "core_siblings_list": "1-3"}),
		topoFiles(3, map[string]string{"thread_siblings_list": "2-3", "core_siblings_list": "1-3"}),
	)
	topo := mustDiscover(t, machine(files))
	c0 := cpuField(t, topo, 0)
	if c0.Online || c0.Core != None || c0.Socket != None || c0.Allowed {
		t.Errorf("cpu 0 = %+v, want offline with no core or socket", c0)
	}
	if got := cpuField(t, topo, 1).Core; got != 0 {
		t.Errorf("cpu 1 core = %d, want 0 (indexes count online cpus only)", got)
	}
	if got := topo.Summary(); !strings.Contains(got, "1 offline") {
		t.Errorf("Summary() = %q, want it to mention 1 offline", got)
	}
}

// Per-CPU online files, as in dumps without cpu/online.
func TestDiscoverPerCPUOnlineFiles(t *testing.T) {
	files := merge(
		map[string]string{"sys/devices/system/cpu/cpu1/online": "0\n", "sys/devices/system/cpu/cpu2/online": "1\n"},
		topoFiles(0, map[string]string{"thread_siblings": "1"}),
		topoFiles(2, map[string]string{"thread_siblings": "4"}),
	)
	topo := mustDiscover(t, machine(files))
	if got := topo.Online().String(); got != "0,2" {
		t.Errorf("online = %q, want 0,2", got)
	}
	if got := topo.Present().String(); got != "0-2" {
		t.Errorf("present = %q, want 0-2", got)
	}
}

func twoCPUs() map[string]string {
	return merge(
		map[string]string{"sys/devices/system/cpu/online": "0-1\n"},
		topoFiles(0, map[string]string{"thread_siblings_list": "0", "core_siblings_list": "0-1"}),
		topoFiles(1, map[string]string{"thread_siblings_list": "1", "core_siblings_list": "0-1"}),
	)
}

// No node directory (kernel without NUMA): every CPU in node 0.
func TestDiscoverNoNUMA(t *testing.T) {
	topo := mustDiscover(t, machine(twoCPUs()))
	for cpu := range 2 {
		if n := cpuField(t, topo, cpu).NUMA; n != 0 {
			t.Errorf("cpu %d numa = %d, want 0", cpu, n)
		}
	}
	if d := topo.Doc().NUMADistances; !cmp.Equal(d, map[NodeID][]int{0: {10}}) {
		t.Errorf("distances = %v, want {0: [10]}", d)
	}
}

// Sparse node ids and a memory-only node (CXL, HBM).
func TestDiscoverSparseAndMemoryOnlyNodes(t *testing.T) {
	files := merge(twoCPUs(), map[string]string{
		"sys/devices/system/node/node0/cpulist":  "0\n",
		"sys/devices/system/node/node0/distance": "10 20 30\n",
		"sys/devices/system/node/node2/cpulist":  "1\n",
		"sys/devices/system/node/node2/distance": "20 10 30\n",
		"sys/devices/system/node/node5/cpulist":  "\n",
		"sys/devices/system/node/node5/distance": "30 30 10\n",
	})
	topo := mustDiscover(t, machine(files))
	if got := cpuField(t, topo, 1).NUMA; got != 2 {
		t.Errorf("cpu 1 numa = %d, want 2", got)
	}
	if got := topo.Nodes(); !cmp.Equal(got, []NodeID{0, 2, 5}) {
		t.Errorf("Nodes() = %v, want [0 2 5]", got)
	}
	if got := topo.NodesWithCPUs(); !cmp.Equal(got, []NodeID{0, 2}) {
		t.Errorf("NodesWithCPUs() = %v, want [0 2]", got)
	}
	if got := topo.Distance(2, 5); got != 30 {
		t.Errorf("Distance(2, 5) = %d, want 30", got)
	}
	if !strings.Contains(topo.Summary(), "+1 without CPUs") {
		t.Errorf("Summary() = %q, want the memory-only node counted", topo.Summary())
	}
}

// NUMA membership from cpuN link names only (hwloc-era dumps).
func TestDiscoverNodeLinks(t *testing.T) {
	m := machine(twoCPUs())
	m["sys/devices/system/node/node0/cpu0"] = &fstest.MapFile{Mode: os.ModeSymlink, Data: []byte("../../cpu/cpu0")}
	m["sys/devices/system/node/node1/cpu1"] = &fstest.MapFile{Mode: os.ModeSymlink, Data: []byte(".")}
	topo := mustDiscover(t, m)
	if got := cpuField(t, topo, 1).NUMA; got != 1 {
		t.Errorf("cpu 1 numa = %d, want 1", got)
	}
}

// L3 per package, per CCX, or none at all; found by level, not index.
func TestDiscoverL3(t *testing.T) {
	cache := func(cpu int, idx, level, shared string) map[string]string {
		dir := "sys/devices/system/cpu/cpu" + itoa(cpu) + "/cache/index" + idx + "/"
		return map[string]string{dir + "level": level + "\n", dir + "type": "Unified\n", dir + "shared_cpu_list": shared + "\n"}
	}
	files := merge(twoCPUs(), cache(0, "2", "2", "0"), cache(0, "3", "3", "0"), cache(1, "2", "3", "1"))
	topo := mustDiscover(t, machine(files))
	if topo.NumL3() != 2 || cpuField(t, topo, 0).L3 == cpuField(t, topo, 1).L3 {
		t.Errorf("L3 groups = %d, want one per cpu (per-CCX L3)", topo.NumL3())
	}
	noL3 := mustDiscover(t, machine(merge(twoCPUs(), cache(0, "2", "2", "0-1"), cache(1, "2", "2", "0-1"))))
	if noL3.NumL3() != 0 || cpuField(t, noL3, 0).L3 != None {
		t.Errorf("machine without L3: NumL3 = %d, cpu 0 l3 = %d, want 0 and -1", noL3.NumL3(), cpuField(t, noL3, 0).L3)
	}
}

// Hybrid kinds from the PMU device lists.
func TestDiscoverHybridKinds(t *testing.T) {
	files := merge(twoCPUs(), map[string]string{
		"sys/devices/cpu_core/cpus": "0\n",
		"sys/devices/cpu_atom/cpus": "1\n",
	})
	topo := mustDiscover(t, machine(files))
	if a, b := cpuField(t, topo, 0).Kind, cpuField(t, topo, 1).Kind; a != KindCore || b != KindAtom {
		t.Errorf("kinds = %q, %q, want core, atom", a, b)
	}
}

// The allowed set comes from the process's own cpuset cgroup, v1 and v2.
func TestDiscoverAllowedFromCgroup(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  string
	}{
		{
			name: "v1",
			files: map[string]string{
				"proc/self/cgroup":    "4:cpu,cpuacct:/\n3:cpuset:/batch\n",
				"proc/self/mountinfo": "30 25 0:26 / /sys/fs/cgroup/cpuset rw,relatime shared:9 - cgroup cgroup rw,cpuset\n",
				"sys/fs/cgroup/cpuset/batch/cpuset.effective_cpus": "1\n",
			},
			want: "1",
		},
		{
			name: "v2 walks up to the nearest cpuset",
			files: map[string]string{
				"proc/self/cgroup":    "0::/system.slice/corepin.service\n",
				"proc/self/mountinfo": "29 23 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate\n",
				"sys/fs/cgroup/system.slice/cpuset.cpus.effective":        "0\n",
				"sys/fs/cgroup/system.slice/corepin.service/cgroup.procs": "1\n",
			},
			want: "0",
		},
		{
			name:  "no procfs in a dump",
			files: map[string]string{},
			want:  "0-1",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			topo := mustDiscover(t, machine(merge(twoCPUs(), tc.files)))
			if got := topo.Allowed().String(); got != tc.want {
				t.Errorf("Allowed() = %q, want %q", got, tc.want)
			}
			var buf bytes.Buffer
			if err := topo.Render(&buf, RenderOptions{}); err != nil {
				t.Fatal(err)
			}
			if tc.want != "0-1" && !strings.Contains(buf.String(), "!") {
				t.Errorf("Render does not mark disallowed cpus:\n%s", buf.String())
			}
		})
	}
}

// Bad content is an error naming the file and quoting the content.
func TestDiscoverBadContent(t *testing.T) {
	tests := []struct {
		name, file, content, want string
		drop                      string // a file to remove first
	}{
		{name: "bad list", file: "sys/devices/system/cpu/cpu0/topology/thread_siblings_list", content: "0-x\n", want: "thread_siblings_list"},
		{name: "bad mask", file: "sys/devices/system/cpu/cpu1/topology/thread_siblings_list", content: "", want: ""},
		{name: "bad online", file: "sys/devices/system/cpu/online", content: "1-0\n", want: "sys/devices/system/cpu/online"},
		{name: "bad core id", file: "sys/devices/system/cpu/cpu0/topology/core_id", content: "zero\n", want: `"zero"`, drop: "sys/devices/system/cpu/cpu0/topology/thread_siblings_list"},
		{name: "bad distance", file: "sys/devices/system/node/node0/distance", content: "10 x\n", want: "node0/distance"},
		{name: "negative distance", file: "sys/devices/system/node/node0/distance", content: "-10\n", want: "is not a distance"},
		{name: "distance above a byte", file: "sys/devices/system/node/node0/distance", content: "256\n", want: "is not a distance"},
		{name: "distance row longer than any machine", file: "sys/devices/system/node/node0/distance", content: "10" + strings.Repeat(" 20", MaxNodeID+1) + "\n", want: "more than the 1024 numa nodes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			files := twoCPUs()
			files[tc.file] = tc.content
			delete(files, tc.drop)
			_, err := Discover(machine(files))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Discover: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Discover error = %v, want it to contain %q", err, tc.want)
			}
			if !errors.Is(err, ErrBadSysfs) {
				t.Errorf("error %v does not wrap ErrBadSysfs", err)
			}
		})
	}
	if _, err := Discover(fstest.MapFS{}); err == nil {
		t.Errorf("Discover(empty fs) = nil error")
	}
	// An empty cpu/online is a broken file, read past (see
	// TestDiscoverMachinesHwlocReads); CPUs that each say 0 are no machine.
	noneOnline := merge(twoCPUs(), map[string]string{
		"sys/devices/system/cpu/online":      "DELETE",
		"sys/devices/system/cpu/cpu0/online": "0\n",
		"sys/devices/system/cpu/cpu1/online": "0\n",
	})
	if _, err := Discover(machine(noneOnline)); err == nil || !strings.Contains(err.Error(), "no online cpu") {
		t.Errorf("Discover(no cpu online) error = %v, want no online cpu", err)
	}
}

// TestDiscoverLive reads this machine and checks it against the kernel's own
// files and the process's affinity.
func TestDiscoverLive(t *testing.T) {
	if _, err := os.Stat("/sys/devices/system/cpu"); err != nil {
		t.Skip("no /sys/devices/system/cpu on this machine")
	}
	topo, err := Discover(os.DirFS("/"))
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile("/sys/devices/system/cpu/online"); err == nil {
		want := cpuset.MustParse(string(b))
		if !topo.Online().Equals(want) {
			t.Errorf("online = %q, kernel says %q", topo.Online(), want)
		}
	}
	if topo.Allowed().IsEmpty() || !topo.Allowed().IsSubsetOf(topo.Online()) {
		t.Errorf("allowed %q is empty or not within online %q", topo.Allowed(), topo.Online())
	}
	for _, c := range topo.CPUs() {
		if c.Online && (c.Core == None || c.Socket == None || c.NUMA == None) {
			t.Errorf("online cpu %+v lacks a core, socket or node", c)
		}
	}
	t.Logf("this machine: %s", topo.Summary())
}

func BenchmarkDiscoverLargestFixture(b *testing.B) {
	var largest string
	var size int
	for _, name := range testutil.Fixtures(b) {
		st, err := os.Stat(filepath.Join(testutil.FixturesDir(b), name+".tar.bz2"))
		if err == nil && st.Size() > int64(size) {
			largest, size = name, int(st.Size())
		}
	}
	dir := testutil.ExtractTarBz2(b, largest)
	fsys := os.DirFS(dir)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Discover(fsys); err != nil {
			b.Fatal(err)
		}
	}
}

func TestCPUJSONDefaults(t *testing.T) {
	var cpus []CPU
	in := `[{"cpu": 0, "socket": 0, "core": 0, "numa": 0, "l3": 0},
	        {"cpu": 1, "online": false, "allowed": false, "socket": -1, "core": -1, "numa": -1, "l3": -1},
	        {"cpu": 2, "allowed": false, "socket": 0, "core": 1, "numa": 0, "l3": 0}]`
	if err := json.Unmarshal([]byte(in), &cpus); err != nil {
		t.Fatal(err)
	}
	want := []struct{ online, allowed bool }{{true, true}, {false, false}, {true, false}}
	for i, w := range want {
		if cpus[i].Online != w.online || cpus[i].Allowed != w.allowed {
			t.Errorf("cpu %d: online %v allowed %v, want %v %v", i, cpus[i].Online, cpus[i].Allowed, w.online, w.allowed)
		}
	}
	if cpus[2].Core != 1 || cpus[1].Socket != None {
		t.Errorf("fields lost: %+v", cpus)
	}
	topo, err := New(cpus, nil)
	if err != nil {
		t.Fatal(err)
	}
	if topo.Online().String() != "0,2" || topo.Allowed().String() != "0" {
		t.Errorf("online %q allowed %q", topo.Online(), topo.Allowed())
	}
}

// BenchmarkDiscover8192CPUs reads, with Open from a directory, a machine of
// 8192 CPUs in two packages (SMT2, siblings c and c+4096, one L3 per
// package): every CPU names its package's 4096 CPUs, which must cost a
// union per CPU, not per pair. (A MapFS would measure its own linear
// lookup of missing files instead.)
func BenchmarkDiscover8192CPUs(b *testing.B) {
	const n = 8192
	m := fstest.MapFS{"sys/devices/system/cpu/online": {Data: []byte("0-8191\n")}}
	pkgs := []string{"0-2047,4096-6143\n", "2048-4095,6144-8191\n"}
	for cpu := range n {
		dir := "sys/devices/system/cpu/cpu" + strconv.Itoa(cpu)
		core := cpu % (n / 2)
		pkg := pkgs[core/(n/4)]
		m[dir+"/topology/thread_siblings_list"] = &fstest.MapFile{Data: []byte(fmt.Sprintf("%d,%d\n", core, core+n/2))}
		m[dir+"/topology/core_siblings_list"] = &fstest.MapFile{Data: []byte(pkg)}
		m[dir+"/cache/index3/level"] = &fstest.MapFile{Data: []byte("3\n")}
		m[dir+"/cache/index3/shared_cpu_list"] = &fstest.MapFile{Data: []byte(pkg)}
	}
	dir := testutil.WriteDir(b, m)
	b.ReportAllocs()
	for b.Loop() {
		topo, err := Open(dir)
		if err != nil {
			b.Fatal(err)
		}
		if topo.NumSockets() != 2 || topo.NumCores() != n/2 || topo.NumL3() != 2 {
			b.Fatalf("%s", topo.Summary())
		}
	}
}
