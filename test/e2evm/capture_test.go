package e2evm

import (
	"archive/tar"
	"bytes"
	"compress/bzip2"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// captureShape is the isolcpus machine (isolcpus=6,7 nohz_full=6,7 on two
// sockets of two SMT cores) booted to dump the files corepin's topology
// reader reads, in the layout of the hwloc dumps in shared/fixtures/sysfs
// (one top directory holding sys/ and proc/), as a bzip2 tar printed in
// base64: once as booted (dump.isolcpus), once after making CPUs 4-5 a
// cgroup v2 isolated partition (dump.partition). corepin topo -o json is
// printed beside each, read from the live sysfs by the binary in the
// machine. TestVMs does not boot it; TestCaptureIsolcpusDump does.
var captureShape = shape{
	name: "isolcpus-dump", kernel: kernel612, mem: 768, cg: "v2", qemu: numa2SMT, append: "isolcpus=6,7 nohz_full=6,7",
	script: dumpFunc +
		"block uname uname -a\n" +
		"block dump.isolcpus dumpsys qemu-2s2c2t-isolcpus6-7\n" +
		"block topo.isolcpus corepin topo -o json\n" +
		"block partition sh -c 'echo +cpuset > /sys/fs/cgroup/cgroup.subtree_control && mkdir /sys/fs/cgroup/iso && " +
		"echo 4-5 > /sys/fs/cgroup/iso/cpuset.cpus && echo isolated > /sys/fs/cgroup/iso/cpuset.cpus.partition && " +
		"cat /sys/fs/cgroup/iso/cpuset.cpus.partition /sys/fs/cgroup/cpuset.cpus.isolated'\n" +
		"block dump.partition dumpsys qemu-2s2c2t-isolcpus6-7-partition4-5\n" +
		"block topo.partition corepin topo -o json\n",
}

// dumpFunc defines dumpsys NAME: it copies the files topology.Discover
// reads (cpu and node lists, each CPU's topology, caches and node links,
// the isolation files, the cgroup v2 root's cpuset files, the shell's own
// cgroup and mountinfo, and /proc/cpuinfo for people) under
// /tmp/dump/NAME, symlinks as symlinks, and prints them as a base64
// bzip2 tar.
const dumpFunc = `dumpsys() {
  rm -rf /tmp/dump; D=/tmp/dump/$1; mkdir -p $D/proc/self
  cd /
  find sys/devices/system/cpu sys/devices/system/node ! -type d 2>/dev/null | grep -E \
    -e '^sys/devices/system/cpu/(online|offline|possible|present|isolated|nohz_full|kernel_max)$' \
    -e '^sys/devices/system/cpu/cpu[0-9]+/(online|node[0-9]+|topology/[a-z_]+|cache/index[0-9]+/(level|type|id|size|shared_cpu_list|shared_cpu_map))$' \
    -e '^sys/devices/system/node/(online|possible|has_cpu|has_memory|has_normal_memory)$' \
    -e '^sys/devices/system/node/node[0-9]+/(cpulist|cpumap|distance|cpu[0-9]+)$' > /tmp/dump.list
  for f in sys/fs/cgroup/cgroup.controllers sys/fs/cgroup/cpuset.cpus.effective sys/fs/cgroup/cpuset.cpus.isolated \
    sys/fs/cgroup/cpuset.mems.effective; do [ -e $f ] && echo $f; done >> /tmp/dump.list
  while read f; do
    mkdir -p $D/$(dirname $f)
    if [ -L $f ]; then ln -s "$(readlink $f)" $D/$f; else cat $f > $D/$f; fi
  done < /tmp/dump.list
  cat /proc/self/cgroup > $D/proc/self/cgroup
  cat /proc/self/mountinfo > $D/proc/self/mountinfo
  cat /proc/cpuinfo > $D/proc/cpuinfo
  tar cjf - -C /tmp/dump $1 | base64
}
`

// TestCaptureIsolcpusDump boots captureShape and writes each dump as
// NAME.tar.bz2 into $COREPIN_E2E_CAPTURE, with NAME.topo.json (what
// corepin topo printed in the machine) and NAME.note (kernel, qemu
// options). It runs only with that variable set: the committed dumps
// (topology/testdata/qemu-*) are its output, made once.
func TestCaptureIsolcpusDump(t *testing.T) {
	out := os.Getenv("COREPIN_E2E_CAPTURE")
	if out == "" {
		t.Skip("COREPIN_E2E_CAPTURE (a directory) not set: the dumps are captured once, by hand")
	}
	v := boot(t, captureShape)
	t.Logf("partition: %s", v.get(t, "partition"))
	for _, which := range []string{"isolcpus", "partition"} {
		data, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(v.get(t, "dump."+which)), ""))
		if err != nil {
			t.Fatalf("dump.%s: decoding base64: %v", which, err)
		}
		name, err := tarTop(data)
		if err != nil {
			t.Fatalf("dump.%s: %v", which, err)
		}
		note := fmt.Sprintf("Made by test/e2evm TestCaptureIsolcpusDump (COREPIN_E2E_CAPTURE=DIR go test -run TestCaptureIsolcpusDump):\n"+
			"qemu-system-x86_64 -cpu Cascadelake-Server -m %d %s\nkernel command line: %s\nkernel package %s, uname -a: %s"+
			"partition block (cgroup v2, CPUs 4-5 made isolated in /sys/fs/cgroup/iso; dump.isolcpus is before it): %s",
			captureShape.mem, strings.Join(captureShape.qemu, " "), captureShape.append, v.kernel, v.get(t, "uname"), v.get(t, "partition"))
		for file, body := range map[string][]byte{name + ".tar.bz2": data, name + ".topo.json": []byte(v.get(t, "topo."+which)), name + ".note": []byte(note)} {
			if err := os.WriteFile(filepath.Join(out, file), body, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("wrote %s (%d bytes)", filepath.Join(out, name+".tar.bz2"), len(data))
	}
}

// tarTop checks that data is a bzip2 tar of one top directory and returns
// that directory's name.
func tarTop(data []byte) (string, error) {
	tr := tar.NewReader(bzip2.NewReader(bytes.NewReader(data)))
	top := ""
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", fmt.Errorf("reading the tar: %w", err)
		}
		first, _, _ := strings.Cut(strings.TrimPrefix(h.Name, "./"), "/")
		if top != "" && first != top {
			return "", fmt.Errorf("the tar holds %s and %s at its top, want one directory", top, first)
		}
		top = first
	}
	if top == "" {
		return "", errors.New("the tar is empty")
	}
	return top, nil
}
