package e2evm

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// parseList parses a Linux CPU list ("0-2,5"); it fails t on bad input.
func parseList(t *testing.T, s string) []int {
	t.Helper()
	s = strings.TrimSpace(strings.Trim(s, "\x00"))
	var out []int
	if s == "" {
		return out
	}
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			t.Fatalf("parsing cpu list %q: %v", s, err)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				t.Fatalf("parsing cpu list %q: %v", s, err)
			}
		}
		for c := a; c <= b; c++ {
			out = append(out, c)
		}
	}
	return out
}

// sameList reports whether two CPU lists name the same CPUs.
func sameList(t *testing.T, a, b string) bool {
	t.Helper()
	return slices.Equal(parseList(t, a), parseList(t, b))
}

// sysfsOf parses the sysfs block ("path:value" lines, grep -H).
func sysfsOf(t *testing.T, v *vm) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, l := range strings.Split(v.get(t, "sysfs"), "\n") {
		if p, val, ok := strings.Cut(l, ":"); ok {
			m[p] = strings.TrimSpace(val)
		}
	}
	return m
}

// topoCPU is one CPU of `corepin topo -o json`.
type topoCPU struct {
	CPU    int  `json:"cpu"`
	Online bool `json:"online"`
	Socket int  `json:"socket"`
	NUMA   int  `json:"numa"`
	Core   int  `json:"core"`
}

type topoJSON struct {
	CPUs      []topoCPU        `json:"cpus"`
	Distances map[string][]int `json:"numa_distances"`
	// Isolated and NohzFull are optional (corepin without them leaves
	// them out); when given they must be the kernel's.
	Isolated *string `json:"isolated"`
	NohzFull *string `json:"nohz_full"`
}

// machine is what a shape's qemu options make: the test's own
// expectation, independent of both the kernel and corepin.
type machine struct {
	online    string         // online CPUs
	sockets   int            // packages with online CPUs
	cores     int            // physical cores with online CPUs
	nodeCPUs  map[int]string // NUMA node -> its CPUs ("" for a memory-only node)
	distances map[int][]int  // NUMA node -> its distance row
}

// checkTopo compares `corepin topo -o json` with the kernel's sysfs read
// in the same machine, and both with what the shape's qemu options make.
func checkTopo(t *testing.T, v *vm, want machine) {
	t.Helper()
	sys := sysfsOf(t, v)
	var topo topoJSON
	if err := json.Unmarshal([]byte(v.get(t, "topo")), &topo); err != nil {
		t.Fatalf("corepin topo -o json: %v\n%s", err, v.get(t, "topo"))
	}
	// The kernel made the machine qemu was asked for.
	if !sameList(t, sys["cpu/online"], want.online) {
		t.Errorf("kernel: cpu/online = %s, the shape makes %s", sys["cpu/online"], want.online)
	}
	for n, cpus := range want.nodeCPUs {
		if got := sys[fmt.Sprintf("node/node%d/cpulist", n)]; !sameList(t, got, cpus) {
			t.Errorf("kernel: node%d/cpulist = %q, the shape makes %q", n, got, cpus)
		}
		wantRow := strings.Trim(fmt.Sprint(want.distances[n]), "[]")
		if got := sys[fmt.Sprintf("node/node%d/distance", n)]; got != wantRow {
			t.Errorf("kernel: node%d/distance = %q, the shape makes %q", n, got, wantRow)
		}
	}

	// corepin against the kernel.
	byCPU := map[int]topoCPU{}
	var online []int
	sockets, cores := map[int]bool{}, map[int]bool{}
	for _, c := range topo.CPUs {
		byCPU[c.CPU] = c
		if c.Online {
			online = append(online, c.CPU)
			sockets[c.Socket], cores[c.Core] = true, true
		}
	}
	slices.Sort(online)
	if want := parseList(t, sys["cpu/online"]); !slices.Equal(online, want) {
		t.Errorf("corepin topo: online cpus %v, kernel's cpu/online %v", online, want)
	}
	for _, off := range parseList(t, sys["cpu/offline"]) {
		if c, ok := byCPU[off]; ok && c.Online {
			t.Errorf("corepin topo: cpu %d online, kernel's cpu/offline lists it", off)
		}
	}
	if len(sockets) != want.sockets || len(cores) != want.cores {
		t.Errorf("corepin topo: %d sockets, %d cores; the shape makes %d and %d", len(sockets), len(cores), want.sockets, want.cores)
	}
	for _, c := range online {
		sib := parseList(t, sys[fmt.Sprintf("cpu/cpu%d/topology/thread_siblings_list", c)])
		var same, samePkg, kernelPkg []int
		pkg := sys[fmt.Sprintf("cpu/cpu%d/topology/physical_package_id", c)]
		for _, o := range online {
			if byCPU[o].Core == byCPU[c].Core {
				same = append(same, o)
			}
			if byCPU[o].Socket == byCPU[c].Socket {
				samePkg = append(samePkg, o)
			}
			if sys[fmt.Sprintf("cpu/cpu%d/topology/physical_package_id", o)] == pkg {
				kernelPkg = append(kernelPkg, o)
			}
		}
		if !slices.Equal(same, sib) {
			t.Errorf("corepin topo: cpu %d shares its core with %v, kernel's thread_siblings_list %v", c, same, sib)
		}
		if !slices.Equal(samePkg, kernelPkg) {
			t.Errorf("corepin topo: cpu %d shares its socket with %v, kernel's physical_package_id with %v", c, samePkg, kernelPkg)
		}
	}
	kernelNodes := map[string][]int{}
	for p, val := range sys {
		var n int
		if _, err := fmt.Sscanf(p, "node/node%d/cpulist", &n); err == nil {
			for _, c := range parseList(t, val) {
				if byCPU[c].NUMA != n {
					t.Errorf("corepin topo: cpu %d in numa %d, kernel's node%d/cpulist %s", c, byCPU[c].NUMA, n, val)
				}
			}
		}
		if _, err := fmt.Sscanf(p, "node/node%d/distance", &n); err == nil {
			var row []int
			for _, f := range strings.Fields(val) {
				d, _ := strconv.Atoi(f)
				row = append(row, d)
			}
			kernelNodes[strconv.Itoa(n)] = row
		}
	}
	for n, row := range kernelNodes {
		if !slices.Equal(topo.Distances[n], row) {
			t.Errorf("corepin topo: numa_distances[%s] = %v, kernel's node%s/distance %v", n, topo.Distances[n], n, row)
		}
	}
	for _, f := range []struct {
		name string
		got  *string
	}{{"isolated", topo.Isolated}, {"nohz_full", topo.NohzFull}} {
		if f.got != nil && !sameList(t, *f.got, strings.TrimPrefix(sys["cpu/"+f.name], "(null)")) {
			t.Errorf("corepin topo: %s %q, kernel's cpu/%s %q", f.name, *f.got, f.name, sys["cpu/"+f.name])
		}
	}
	for n := range topo.Distances {
		if _, ok := kernelNodes[n]; !ok {
			t.Errorf("corepin topo: numa_distances names node %s, which the kernel does not have (%v)", n, slices.Sorted(maps.Keys(kernelNodes)))
		}
	}
}

// job is one job of `corepin run -o json` and what cginfo wrote from
// inside it.
type job struct {
	Cpuset   string   `json:"cpuset"`
	Mode     string   `json:"mode"`
	QoS      string   `json:"qos"`
	ExitCode int      `json:"exit_code"`
	PSISome  *float64 `json:"psi_some_s"`
	PSIScope string   `json:"psi_scope"`
	info     map[string]string
}

// runJob reads the blocks "run.NAME" (corepin run -o json, one job) and
// "info.NAME" (cginfo's file).
func runJob(t *testing.T, v *vm, name string) job {
	t.Helper()
	var j job
	out := v.get(t, "run."+name)
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &j); err != nil {
		t.Fatalf("run.%s: corepin run -o json: %v\n%s", name, err, out)
	}
	if j.ExitCode != 0 {
		t.Fatalf("run.%s: job exit code %d:\n%s", name, j.ExitCode, out)
	}
	j.info = kv(v.get(t, "info."+name))
	return j
}

// want compares one key of cginfo's output.
func (j job) want(t *testing.T, name, key, want string) {
	t.Helper()
	if got, ok := j.info[key]; !ok || got != want {
		t.Errorf("%s: the kernel's %s = %q after corepin wrote it, want %q", name, key, got, want)
	}
}

// wantAll compares several keys of cginfo's output (key -> value).
func (j job) wantAll(t *testing.T, name string, want map[string]string) {
	t.Helper()
	for _, k := range slices.Sorted(maps.Keys(want)) {
		j.want(t, name, k, want[k])
	}
}

// wantList compares one CPU-list key of cginfo's output.
func (j job) wantList(t *testing.T, name, key, want string) {
	t.Helper()
	if got := j.info[key]; !sameList(t, got, want) {
		t.Errorf("%s: the kernel's %s = %q, want %q", name, key, got, want)
	}
}

// runScript runs corepin run with flags and cginfo as its one job; the
// blocks are run.NAME and info.NAME.
func runScript(name, flags string) string {
	return fmt.Sprintf("block run.%[1]s corepin run --no-db -o json %[2]s -- cginfo /tmp/%[1]s.info\nblock info.%[1]s cat /tmp/%[1]s.info\n", name, flags)
}

// leftScript lists corepin's cgroup directories after the runs.
const leftScript = "block left find /sys/fs/cgroup -path '*corepin*' -type d\n"

// checkLeft asserts that the runs left nothing behind but their empty
// root groups (corepin's drivers keep their roots).
func checkLeft(t *testing.T, v *vm, roots ...string) {
	t.Helper()
	for _, d := range strings.Fields(v.get(t, "left")) {
		if !slices.Contains(roots, d[strings.LastIndex(d, "/")+1:]) {
			t.Errorf("left behind after the runs: %s", d)
		}
	}
}

const topoScript = "block sysfs sysfs\nblock topo corepin topo -o json\n"
