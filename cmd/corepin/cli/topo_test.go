package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"

	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/internal/testutil"
)

// smallDump writes a two-CPU machine's sysfs into a temporary directory.
func smallDump(t *testing.T) string {
	t.Helper()
	m := fstest.MapFS{}
	for p, c := range map[string]string{
		"sys/devices/system/cpu/online":                             "0-1\n",
		"sys/devices/system/cpu/cpu0/topology/thread_siblings_list": "0\n",
		"sys/devices/system/cpu/cpu0/topology/core_siblings_list":   "0-1\n",
		"sys/devices/system/cpu/cpu1/topology/thread_siblings_list": "1\n",
		"sys/devices/system/cpu/cpu1/topology/core_siblings_list":   "0-1\n",
		"sys/devices/system/node/node0/cpulist":                     "0-1\n",
		"sys/devices/system/node/node0/distance":                    "10\n",
		"sys/devices/system/cpu/cpu0/cache/index3/level":            "3\n",
		"sys/devices/system/cpu/cpu0/cache/index3/shared_cpu_list":  "0-1\n",
		"sys/devices/system/cpu/cpu1/cache/index3/level":            "3\n",
		"sys/devices/system/cpu/cpu1/cache/index3/shared_cpu_list":  "0-1\n",
	} {
		m[p] = &fstest.MapFile{Data: []byte(c)}
	}
	return testutil.WriteDir(t, m)
}

// A hostile --sysfs-root (issue 8 §3) is bad input: exit 2 at once with one
// line that quotes nothing from outside the root, for topo, plan and
// simulate alike.
func TestTopoHostileSysfsRoot(t *testing.T) {
	const online = "sys/devices/system/cpu/online"
	const secret = "TOPSECRET-do-not-print"
	tests := []struct {
		name  string
		setup func(t *testing.T, root string)
		want  string
	}{
		{
			name: "fifo",
			setup: func(t *testing.T, root string) {
				if err := syscall.Mkfifo(filepath.Join(root, online), 0o644); err != nil {
					t.Skipf("mkfifo: %v", err)
				}
			},
			want: "not a regular file: a named pipe",
		},
		{
			name:  "link to /dev/zero",
			setup: func(t *testing.T, root string) { replaceWithLink(t, "/dev/zero", filepath.Join(root, online)) },
			want:  "escapes",
		},
		{
			name: "huge file",
			setup: func(t *testing.T, root string) {
				if err := os.WriteFile(filepath.Join(root, online), []byte(strings.Repeat("0,", 1<<20)), 0o644); err != nil {
					t.Fatal(err)
				}
			},
			want: "larger than the cap",
		},
		{
			name: "link to a secret outside the root",
			setup: func(t *testing.T, root string) {
				p := filepath.Join(t.TempDir(), "secret")
				if err := os.WriteFile(p, []byte(secret), 0o600); err != nil {
					t.Fatal(err)
				}
				replaceWithLink(t, p, filepath.Join(root, online))
			},
			want: "escapes",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := smallDump(t)
			tc.setup(t, root)
			for _, args := range []struct {
				stdin string
				argv  []string
			}{
				{argv: []string{"topo", "--sysfs-root", root}},
				{stdin: `{"topology": {"sysfs_root": "` + root + `"}, "requests": [{"id": "a", "cpus": 1}]}`, argv: []string{"plan"}},
				{argv: []string{"simulate", "--gen", "farm", "--jobs", "5", "--nodes", "1", "--sysfs-root", root}},
			} {
				code, _, errs := runMain(t, args.stdin, args.argv...)
				if code != 2 {
					t.Errorf("%s: exit %d, want 2 (stderr %q)", args.argv[0], code, errs)
				}
				if !strings.Contains(errs, tc.want) || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
					t.Errorf("%s: stderr %q, want one line containing %q", args.argv[0], errs, tc.want)
				}
				if strings.Contains(errs, "do-not-print") {
					t.Errorf("%s: stderr quotes the secret: %q", args.argv[0], errs)
				}
			}
		})
	}
}

func replaceWithLink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// corepin topo --sysfs-root reads each kind of machine of issue 8 §1 from a
// dump on disk as hwloc does, printing each guess once on stderr.
func TestTopoMachineKindsHwlocReads(t *testing.T) {
	tests := []struct {
		name      string
		files     map[string]string
		cores     []string // the CPUs of each core, by core index
		sockets   int
		numa      map[int]string
		distances string
		warning   string
	}{
		{
			name: "empty cpu1/online",
			files: map[string]string{
				"sys/devices/system/cpu/cpu0/topology/thread_siblings_list": "0\n",
				"sys/devices/system/cpu/cpu1/topology/thread_siblings_list": "1\n",
				"sys/devices/system/cpu/cpu0/topology/core_siblings_list":   "0-1\n",
				"sys/devices/system/cpu/cpu1/topology/core_siblings_list":   "0-1\n",
				"sys/devices/system/cpu/cpu1/online":                        "",
			},
			cores: []string{"0", "1"}, sockets: 1, numa: map[int]string{0: "0-1"}, distances: `{"0":[10]}`,
			warning: "empty online file",
		},
		{
			name: "node0 absent, node1 distance 21 10",
			files: map[string]string{
				"sys/devices/system/cpu/online":                             "0-1\n",
				"sys/devices/system/cpu/cpu0/topology/thread_siblings_list": "0-1\n",
				"sys/devices/system/cpu/cpu0/topology/core_siblings_list":   "0-1\n",
				"sys/devices/system/cpu/cpu1/topology/thread_siblings_list": "0-1\n",
				"sys/devices/system/cpu/cpu1/topology/core_siblings_list":   "0-1\n",
				"sys/devices/system/node/node1/cpulist":                     "0-1\n",
				"sys/devices/system/node/node1/distance":                    "21 10\n",
			},
			cores: []string{"0-1"}, sockets: 1, numa: map[int]string{1: "0-1"}, distances: `{"1":[10]}`,
		},
		{
			// Issue 17 §1: package 0's CPUs link to node0, which has no
			// directory; node1 writes its row by possible id; CPU 0 is
			// offline. hwloc: two packages, one NUMA node (1), package 0
			// in none.
			name:  "package 0 links to node0, which has no directory",
			files: issue17Files(),
			cores: []string{"1,3", "2", "4,6", "5,7"}, sockets: 2, numa: map[int]string{-1: "1-3", 1: "4-7"}, distances: `{"1":[10]}`,
			warning: "link to node 0",
		},
		{
			name: "ia64 all-zero shared_cpu_map",
			files: map[string]string{
				"sys/devices/system/cpu/cpu0/topology/thread_siblings":    "00000003\n",
				"sys/devices/system/cpu/cpu0/topology/core_siblings":      "00000003\n",
				"sys/devices/system/cpu/cpu1/topology/thread_siblings":    "00000003\n",
				"sys/devices/system/cpu/cpu1/topology/core_siblings":      "00000003\n",
				"sys/devices/system/cpu/cpu0/cache/index3/level":          "3\n",
				"sys/devices/system/cpu/cpu0/cache/index3/shared_cpu_map": "00000000\n",
				"sys/devices/system/cpu/cpu1/cache/index3/level":          "3\n",
				"sys/devices/system/cpu/cpu1/cache/index3/shared_cpu_map": "00000000\n",
			},
			cores: []string{"0-1"}, sockets: 1, numa: map[int]string{0: "0-1"}, distances: `{"0":[10]}`,
			warning: "empty index3/shared_cpu_map",
		},
		{
			name: "PS3 thread_siblings only",
			files: map[string]string{
				"sys/devices/system/cpu/cpu0/topology/thread_siblings": "00000003\n",
				"sys/devices/system/cpu/cpu1/topology/thread_siblings": "00000003\n",
			},
			cores: []string{"0-1"}, sockets: 1, numa: map[int]string{0: "0-1"}, distances: `{"0":[10]}`,
			warning: "no package information",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := testutil.WriteDir(t, mapFS(tc.files))
			code, out, errs := runMain(t, "", "topo", "--sysfs-root", root, "-o", "json")
			if code != 0 {
				t.Fatalf("exit %d, stderr %q", code, errs)
			}
			var doc struct {
				CPUs []struct {
					CPU    int  `json:"cpu"`
					Online bool `json:"online"`
					Socket int  `json:"socket"`
					Core   int  `json:"core"`
					NUMA   int  `json:"numa"`
				} `json:"cpus"`
				Distances json.RawMessage `json:"numa_distances"`
			}
			if err := json.Unmarshal([]byte(out), &doc); err != nil {
				t.Fatal(err)
			}
			cores := map[int]*cpuset.Builder{}
			nodes := map[int]*cpuset.Builder{}
			sockets := map[int]bool{}
			for _, c := range doc.CPUs {
				if !c.Online {
					continue
				}
				for _, g := range []struct {
					m map[int]*cpuset.Builder
					k int
				}{{cores, c.Core}, {nodes, c.NUMA}} {
					if g.m[g.k] == nil {
						g.m[g.k] = &cpuset.Builder{}
					}
					g.m[g.k].Add(c.CPU)
				}
				sockets[c.Socket] = true
			}
			var gotCores []string
			for i := range len(cores) {
				gotCores = append(gotCores, cores[i].Result().String())
			}
			gotNodes := map[int]string{}
			for n, b := range nodes {
				gotNodes[n] = b.Result().String()
			}
			if !slices.Equal(gotCores, tc.cores) || len(sockets) != tc.sockets || !maps.Equal(gotNodes, tc.numa) {
				t.Errorf("cores %q, %d sockets, numa %v; want %q, %d, %v", gotCores, len(sockets), gotNodes, tc.cores, tc.sockets, tc.numa)
			}
			var dist bytes.Buffer
			if err := json.Compact(&dist, doc.Distances); err != nil || dist.String() != tc.distances {
				t.Errorf("numa_distances = %s, want %s", dist.String(), tc.distances)
			}
			if got := strings.Count(errs, "corepin: warning: "); (tc.warning == "") != (got == 0) || got > 1 || !strings.Contains(errs, tc.warning) {
				t.Errorf("stderr %q, want exactly one warning containing %q", errs, tc.warning)
			}
		})
	}
}

// issue17Files is the machine of issue 17 §1 in small: two packages of two
// dual-threaded cores (siblings 0,2 1,3 4,6 5,7); package 0's CPUs link to
// node0, which has no directory (node/online is 1, node/possible 0-1);
// node1 holds package 1 and writes its distance row by possible id
// ("21 10"); CPU 0 is offline. Entries whose content starts with "->" are
// symlinks.
func issue17Files() map[string]string {
	files := map[string]string{
		"sys/devices/system/cpu/online":          "1-7\n",
		"sys/devices/system/cpu/present":         "0-7\n",
		"sys/devices/system/cpu/cpu0/online":     "0\n",
		"sys/devices/system/node/online":         "1\n",
		"sys/devices/system/node/possible":       "0-1\n",
		"sys/devices/system/node/node1/cpulist":  "4-7\n",
		"sys/devices/system/node/node1/distance": "21 10\n",
	}
	for cpu := range 8 {
		dir := fmt.Sprintf("sys/devices/system/cpu/cpu%d", cpu)
		node := cpu / 4
		files[fmt.Sprintf("%s/node%d", dir, node)] = fmt.Sprintf("->../../node/node%d", node)
		if cpu == 0 {
			continue // offline: no topology directory
		}
		files[dir+"/topology/thread_siblings_list"] = []string{"0,2", "1,3", "0,2", "1,3", "4,6", "5,7", "4,6", "5,7"}[cpu] + "\n"
		files[dir+"/topology/core_siblings_list"] = []string{"0-3", "4-7"}[node] + "\n"
	}
	return files
}

// mapFS turns files into a MapFS; content "->target" makes a symlink.
func mapFS(files map[string]string) fstest.MapFS {
	m := fstest.MapFS{}
	for p, c := range files {
		if target, ok := strings.CutPrefix(c, "->"); ok {
			m[p] = &fstest.MapFile{Mode: fs.ModeSymlink | 0o777, Data: []byte(target)}
			continue
		}
		m[p] = &fstest.MapFile{Data: []byte(c)}
	}
	return m
}

// TestTopoIssue17TextAndPlan reads the issue 17 machine through the
// command line: the text view shows package 0's CPUs under "(no NUMA
// node)", and plan places requests there and on node 1.
func TestTopoIssue17TextAndPlan(t *testing.T) {
	root := testutil.WriteDir(t, mapFS(issue17Files()))
	code, out, errs := runMain(t, "", "topo", "--sysfs-root", root)
	if code != 0 {
		t.Fatalf("topo: exit %d, stderr %q", code, errs)
	}
	for _, want := range []string{"Machine: 2 packages, 1 NUMA node (3 CPUs in none)", "  (no NUMA node)  cpus 1-3\n", "  NUMA node 1  cpus 4-7\n", "Offline: 0\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("topo text lacks %q:\n%s", want, out)
		}
	}
	in := fmt.Sprintf(`{"topology": {"sysfs_root": %q}, "requests": [
		{"id": "a", "cpus": 4, "qos": "LSE", "topology_policy": "single-numa-node"},
		{"id": "b", "cpus": 2, "qos": "LSE", "topology_policy": "single-numa-node"},
		{"id": "c", "cpus": 1, "qos": "LSE"}]}`, root)
	got := map[string]string{}
	for id, r := range planResults(t, in) {
		got[id] = r.Cpuset + " numa=" + r.NUMANodes + " " + r.Error
	}
	want := map[string]string{"a": "4-7 numa=1 ", "b": "1,3 numa= ", "c": "2 numa= "}
	if !maps.Equal(got, want) {
		t.Errorf("plan = %v, want %v", got, want)
	}
}

// planResult is one result of `corepin plan -o json`.
type planResult struct {
	ID        string `json:"id"`
	Cpuset    string `json:"cpuset"`
	NUMANodes string `json:"numa_nodes"`
	Error     string `json:"error"`
}

// planResults runs plan on in and returns its results by request id.
func planResults(t *testing.T, in string) map[string]planResult {
	t.Helper()
	code, out, errs := runMain(t, in, "plan", "-o", "json")
	if code != 0 {
		t.Fatalf("plan: exit %d, stderr %q", code, errs)
	}
	var res struct {
		Results []planResult `json:"results"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("plan output %q: %v", out, err)
	}
	byID := map[string]planResult{}
	for _, r := range res.Results {
		byID[r.ID] = r
	}
	return byID
}

// A hand-written topology is bad input for plan and simulate (exit 2),
// never a panic or a silent guess, read by the one strict reader
// (topology.FromCPUs, topology.ReadDoc): a NUMA node id above the cap once
// panicked both (issue 8 §3), and a misspelt CPU key put the CPU in node 0.
func TestHandWrittenTopologyBadInput(t *testing.T) {
	tests := []struct {
		name, cpus, want string
	}{
		{
			name: "numa id above the cap",
			cpus: `[{"cpu": 0, "socket": 0, "core": 0, "numa": 70000, "l3": 0}, {"cpu": 1, "socket": 0, "core": 1, "numa": 0, "l3": 0}]`,
			want: "numa node 70000 outside [0, 1023]",
		},
		{
			name: "misspelt cpu key",
			cpus: `[{"cpu": 0, "socket": 0, "core": 0, "numa_node": 1, "l3": 0}]`,
			want: `unknown field "numa_node"`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			doc := `{"cpus": ` + tc.cpus + `, "numa_distances": {}}`
			topoFile := filepath.Join(t.TempDir(), "topo.json")
			if err := os.WriteFile(topoFile, []byte(doc), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, run := range []struct {
				stdin string
				args  []string
			}{
				{stdin: `{"topology": ` + doc + `, "requests": [{"id": "a", "cpus": 1}]}`, args: []string{"plan"}},
				{args: []string{"simulate", "--gen", "farm", "--jobs", "5", "--nodes", "1", "--topology", topoFile}},
				{stdin: doc, args: []string{"simulate", "--gen", "farm", "--jobs", "5", "--nodes", "1", "--topology", "-"}},
			} {
				code, _, errs := runMain(t, run.stdin, run.args...)
				if code != 2 || !strings.Contains(errs, tc.want) {
					t.Errorf("%s: exit %d, stderr %q; want 2 containing %q", strings.Join(run.args, " "), code, errs, tc.want)
				}
			}
		})
	}
}

// In text form too, a warning is printed once, on stderr, not in the view.
func TestTopoTextWarnsOnceOnStderr(t *testing.T) {
	m := fstest.MapFS{
		"sys/devices/system/cpu/cpu0/topology/thread_siblings": {Data: []byte("00000003\n")},
		"sys/devices/system/cpu/cpu1/topology/thread_siblings": {Data: []byte("00000003\n")},
	}
	code, out, errs := runMain(t, "", "topo", "--sysfs-root", testutil.WriteDir(t, m))
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	if strings.Contains(out, "warning") || strings.Count(errs, "corepin: warning: ") != 1 {
		t.Errorf("stdout %q, stderr %q; want the one warning on stderr only", out, errs)
	}
}

// plan on a dump where discovery guessed says so once on stderr.
func TestPlanSysfsRootWarnsOnce(t *testing.T) {
	m := fstest.MapFS{
		"sys/devices/system/cpu/cpu0/topology/thread_siblings": {Data: []byte("00000003\n")},
		"sys/devices/system/cpu/cpu1/topology/thread_siblings": {Data: []byte("00000003\n")},
	}
	in := `{"topology": {"sysfs_root": "` + testutil.WriteDir(t, m) + `"}, "requests": [{"id": "a", "cpus": 2}]}`
	code, out, errs := runMain(t, in, "plan", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	if !strings.Contains(out, `"cpuset": "0-1"`) || strings.Count(errs, "corepin: warning: ") != 1 {
		t.Errorf("stdout %q, stderr %q; want cpus 0-1 placed and one warning", out, errs)
	}
}
