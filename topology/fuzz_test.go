package topology

import (
	"strings"
	"testing"
	"testing/fstest"
)

// FuzzMountinfo checks ParseMountinfo never panics and keeps what it parses
// consistent with its input.
func FuzzMountinfo(f *testing.F) {
	for _, s := range []string{
		"30 25 0:26 / /sys/fs/cgroup/cpuset rw,relatime shared:9 - cgroup cgroup rw,cpuset\n",
		"29 23 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate\n",
		"36 35 98:0 /mnt1 /mnt\\040two rw,noatime master:1 - ext3 /dev/root rw,errors=continue\n",
		"x - y\n", "", "\\", "1 2 3 4 5 6 - 7\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		mounts, err := ParseMountinfo(s)
		if err != nil {
			return
		}
		if len(mounts) > strings.Count(s, "\n")+1 {
			t.Fatalf("%d mounts from %d lines", len(mounts), strings.Count(s, "\n")+1)
		}
		for _, m := range mounts {
			if m.FSType == "" {
				t.Fatalf("mount %+v without a file system type", m)
			}
		}
	})
}

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
