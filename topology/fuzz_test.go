package topology

import (
	"testing"
	"testing/fstest"
)

// FuzzDiscoverSysfsContent feeds arbitrary content to each kind of sysfs file
// discovery reads: it must return a topology or an error, never panic, and a
// topology it returns must be self-consistent.
func FuzzDiscoverSysfsContent(f *testing.F) {
	files := []string{
		"sys/devices/system/cpu/online",
		"sys/devices/system/cpu/present",
		"sys/devices/system/cpu/cpu1/topology/thread_siblings_list",
		"sys/devices/system/cpu/cpu1/topology/thread_siblings",
		"sys/devices/system/cpu/cpu0/topology/core_siblings_list",
		"sys/devices/system/cpu/cpu1/topology/die_cpus_list",
		"sys/devices/system/cpu/cpu1/topology/cluster_cpus",
		"sys/devices/system/cpu/cpu0/cache/index3/shared_cpu_list",
		"sys/devices/system/node/node0/cpulist",
		"sys/devices/system/node/node1/cpumap",
		"sys/devices/system/node/node0/distance",
		"sys/devices/cpu_core/cpus",
		"proc/self/cgroup",
	}
	for i, s := range []string{"0-1\n", "0-3", "1\x00", "00000003", "0,2", "", "zz", "10 20", "3:cpuset:/x", "1-0"} {
		f.Add(uint8(i), s)
	}
	f.Fuzz(func(t *testing.T, which uint8, content string) {
		m := fstest.MapFS{}
		for k, v := range twoCPUs() {
			m[k] = &fstest.MapFile{Data: []byte(v)}
		}
		m["sys/devices/system/cpu/cpu0/cache/index3/level"] = &fstest.MapFile{Data: []byte("3\n")}
		m["sys/devices/system/cpu/cpu0/cache/index3/shared_cpu_list"] = &fstest.MapFile{Data: []byte("0-1\n")}
		m["sys/devices/system/cpu/cpu1/cache/index3/level"] = &fstest.MapFile{Data: []byte("3\n")}
		m["sys/devices/system/cpu/cpu1/cache/index3/shared_cpu_list"] = &fstest.MapFile{Data: []byte("0-1\n")}
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
	})
}
