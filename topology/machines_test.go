package topology

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Machine kinds that hwloc reads and corepin once refused or misread
// (issue 8 §1). Each is a fake tree built from the description of a real
// kind of machine; want is what hwloc reports for it: the CPUs of each
// package, core, L3 and NUMA node (hwloc shows no Package where the kernel
// names none; corepin then reports the one package its model needs).
var hwlocMachines = []struct {
	name  string
	files map[string]string
	want  hwlocWant
	warn  string // the one warning, or "" for none
}{
	{
		name: "x86 dump whose cpu1/online is empty",
		files: merge(
			smt2Package4(),
			map[string]string{
				"sys/devices/system/cpu/cpu1/online": "",
				"sys/devices/system/cpu/cpu2/online": "1\n",
				"sys/devices/system/cpu/cpu3/online": "1\n",
			}),
		want: hwlocWant{packages: []string{"0-3"}, cores: []string{"0,2", "1,3"}, l3s: []string{"0-3"}, nodes: map[NodeID]string{0: "0-3"},
			distances: map[NodeID][]int{0: {10}}},
		warn: "cpus 1 have an empty online file",
	},
	{
		name:  "x86 whose cpu/online is empty",
		files: merge(smt2Package4(), map[string]string{"sys/devices/system/cpu/online": "\x00\n"}),
		want: hwlocWant{packages: []string{"0-3"}, cores: []string{"0,2", "1,3"}, l3s: []string{"0-3"}, nodes: map[NodeID]string{0: "0-3"},
			distances: map[NodeID][]int{0: {10}}},
		warn: "cpu/online is empty",
	},
	{
		name: "node0 absent, node1 distance row by possible ids",
		files: merge(twoCPUs(), map[string]string{
			"sys/devices/system/node/node1/cpulist":  "0-1\n",
			"sys/devices/system/node/node1/distance": "21 10\n",
		}),
		want: hwlocWant{packages: []string{"0-1"}, cores: []string{"0", "1"}, nodes: map[NodeID]string{1: "0-1"},
			distances: map[NodeID][]int{1: {10}}},
	},
	{
		name: "nodes 1 and 3 of 4 possible, rows by possible ids",
		files: merge(smt2Package4(), map[string]string{
			"sys/devices/system/node/node0/cpulist":  "DELETE",
			"sys/devices/system/node/node0/distance": "DELETE",
			"sys/devices/system/node/node1/cpulist":  "0,2\n",
			"sys/devices/system/node/node1/distance": "20 10 20 21\n",
			"sys/devices/system/node/node3/cpulist":  "1,3\n",
			"sys/devices/system/node/node3/distance": "20 21 20 10\n",
		}),
		want: hwlocWant{packages: []string{"0-3"}, cores: []string{"0,2", "1,3"}, l3s: []string{"0-3"}, nodes: map[NodeID]string{1: "0,2", 3: "1,3"},
			distances: map[NodeID][]int{1: {10, 21}, 3: {21, 10}}},
	},
	{
		name: "distance row matching nothing",
		files: merge(twoCPUs(), map[string]string{
			"sys/devices/system/node/node0/cpulist":  "0\n",
			"sys/devices/system/node/node0/distance": "10 20\n",
			"sys/devices/system/node/node1/cpulist":  "1\n",
			"sys/devices/system/node/node1/distance": "10\n",
		}),
		want: hwlocWant{packages: []string{"0-1"}, cores: []string{"0", "1"}, nodes: map[NodeID]string{0: "0", 1: "1"},
			distances: map[NodeID][]int{0: {10, 20}, 1: {20, 10}}},
		warn: "node1/distance has 1 entries, matching neither",
	},
	{
		name:  "ia64 whose shared_cpu_map is all zeros",
		files: ia64ZeroCacheMaps(),
		want: hwlocWant{packages: []string{"0-3", "4-7"}, cores: []string{"0-1", "2-3", "4-5", "6-7"}, l3s: []string{"0-1", "2-3", "4-5", "6-7"},
			nodes: map[NodeID]string{0: "0-7"}, distances: map[NodeID][]int{0: {10}}},
		warn: "have an empty index3/shared_cpu_map",
	},
	{
		name: "PS3: thread_siblings only",
		files: merge(
			topoFiles(0, map[string]string{"thread_siblings": "00000003\n"}),
			topoFiles(1, map[string]string{"thread_siblings": "00000003\n"}),
		),
		want: hwlocWant{packages: []string{"0-1"}, cores: []string{"0-1"}, nodes: map[NodeID]string{0: "0-1"},
			distances: map[NodeID][]int{0: {10}}},
		warn: "cpus 0-1 have no package information",
	},
	{
		name:  "POWER LPAR: SMT4 threads and core_id, no package, two nodes",
		files: powerNoPackage(),
		want: hwlocWant{packages: []string{"0-7"}, cores: []string{"0-3", "4-7"}, nodes: map[NodeID]string{0: "0-3", 1: "4-7"},
			distances: map[NodeID][]int{0: {10, 40}, 1: {40, 10}}},
		warn: "cpus 0-7 have no package information",
	},
	{
		// Not a hwloc case: corepin's model needs a node for every online
		// CPU; the unknown must not split core 1,3 (it once did).
		name: "cpu 1 listed by no node",
		files: merge(smt2Package4(), map[string]string{
			"sys/devices/system/node/node0/cpulist":  "0,2\n",
			"sys/devices/system/node/node0/distance": "10 20\n",
			"sys/devices/system/node/node1/cpulist":  "3\n",
			"sys/devices/system/node/node1/distance": "20 10\n",
		}),
		want: hwlocWant{packages: []string{"0-3"}, cores: []string{"0,2", "1,3"}, l3s: []string{"0-3"}, nodes: map[NodeID]string{0: "0,2", 1: "1,3"},
			distances: map[NodeID][]int{0: {10, 20}, 1: {20, 10}}},
		warn: "cpus 1 belong to no numa node",
	},
	{
		name: "L3 listed on one thread of a core only",
		files: merge(smt2Package4(), map[string]string{
			"sys/devices/system/cpu/cpu2/cache/index3/level":           "1\n",
			"sys/devices/system/cpu/cpu2/cache/index3/shared_cpu_list": "2\n",
		}),
		want: hwlocWant{packages: []string{"0-3"}, cores: []string{"0,2", "1,3"}, l3s: []string{"0-3"}, nodes: map[NodeID]string{0: "0-3"},
			distances: map[NodeID][]int{0: {10}}},
	},
}

type hwlocWant struct {
	packages, cores, l3s []string
	nodes                map[NodeID]string
	distances            map[NodeID][]int
}

// smt2Package4 is one package of two cores with two threads each (siblings
// 0,2 and 1,3), one L3 and one NUMA node, without cpu/online.
func smt2Package4() map[string]string {
	files := map[string]string{
		"sys/devices/system/node/node0/cpulist":  "0-3\n",
		"sys/devices/system/node/node0/distance": "10\n",
	}
	for cpu := range 4 {
		files = merge(files, topoFiles(cpu, map[string]string{
			"thread_siblings_list": []string{"0,2", "1,3"}[cpu%2] + "\n",
			"core_siblings_list":   "0-3\n",
		}))
		dir := "sys/devices/system/cpu/cpu" + itoa(cpu) + "/cache/index3/"
		files[dir+"level"] = "3\n"
		files[dir+"shared_cpu_list"] = "0-3\n"
	}
	return files
}

// ia64ZeroCacheMaps is a 2.6-era Itanium (Montecito: two packages of two
// dual-threaded cores, an L3 per core): masks only, and every cache's
// shared_cpu_map all zeros.
func ia64ZeroCacheMaps() map[string]string {
	files := map[string]string{}
	for cpu := range 8 {
		files = merge(files, topoFiles(cpu, map[string]string{
			"thread_siblings":     []string{"00000003", "0000000c", "00000030", "000000c0"}[cpu/2] + "\n",
			"core_siblings":       []string{"0000000f", "000000f0"}[cpu/4] + "\n",
			"core_id":             itoa(cpu / 2 % 2),
			"physical_package_id": itoa(cpu / 4),
		}))
		for idx, level := range []string{"1", "2", "3"} {
			dir := "sys/devices/system/cpu/cpu" + itoa(cpu) + "/cache/index" + itoa(idx+1) + "/"
			files[dir+"level"] = level + "\n"
			files[dir+"type"] = "Unified\n"
			files[dir+"shared_cpu_map"] = "00000000\n"
		}
	}
	return files
}

// powerNoPackage is a POWER LPAR with two SMT4 cores on two NUMA nodes
// whose kernel writes thread_siblings_list and core_id but neither
// physical_package_id nor core_siblings.
func powerNoPackage() map[string]string {
	files := map[string]string{
		"sys/devices/system/cpu/online":          "0-7\n",
		"sys/devices/system/node/node0/cpulist":  "0-3\n",
		"sys/devices/system/node/node0/distance": "10 40\n",
		"sys/devices/system/node/node1/cpulist":  "4-7\n",
		"sys/devices/system/node/node1/distance": "40 10\n",
	}
	for cpu := range 8 {
		files = merge(files, topoFiles(cpu, map[string]string{
			"thread_siblings_list": []string{"0-3", "4-7"}[cpu/4] + "\n",
			"core_id":              itoa(cpu / 4 * 8),
		}))
	}
	return files
}

// TestDiscoverMachinesHwlocReads checks each machine kind against hwloc's
// reading, and that each guess is one warning, not one per CPU.
func TestDiscoverMachinesHwlocReads(t *testing.T) {
	for _, tc := range hwlocMachines {
		t.Run(tc.name, func(t *testing.T) {
			topo := mustDiscover(t, machine(tc.files))
			checkHwlocWant(t, topo, tc.want)
			if tc.warn == "" {
				if len(topo.Warnings) != 0 {
					t.Errorf("warnings = %q, want none", topo.Warnings)
				}
				return
			}
			if len(topo.Warnings) != 1 || !strings.Contains(topo.Warnings[0], tc.warn) {
				t.Errorf("warnings = %q, want one containing %q", topo.Warnings, tc.warn)
			}
		})
	}
}

func checkHwlocWant(t *testing.T, topo *Topology, want hwlocWant) {
	t.Helper()
	got := hwlocWant{
		packages:  groups(topo, func(c CPU) int { return int(c.Socket) }),
		cores:     groups(topo, func(c CPU) int { return int(c.Core) }),
		l3s:       groups(topo, func(c CPU) int { return int(c.L3) }),
		nodes:     map[NodeID]string{},
		distances: topo.Doc().NUMADistances,
	}
	for _, n := range topo.NodesWithCPUs() {
		got.nodes[n] = topo.NodeCPUs(n).String()
	}
	if d := cmp.Diff(want, got, cmp.AllowUnexported(hwlocWant{})); d != "" {
		t.Errorf("topology differs from hwloc's reading (-hwloc +corepin):\n%s", d)
	}
}
