package e2evm

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// required is set by `make e2e-vm`: a missing prerequisite fails the
// test instead of skipping it.
var required = os.Getenv("COREPIN_E2E_REQUIRED") == "1"

// vmTimeout bounds one machine from qemu's start to its poweroff. Under
// software emulation on a shared 2-CPU host a boot takes 5-30 s; the
// bound is for a hung machine, not a measure of anything.
const vmTimeout = 10 * time.Minute

// need skips (outside make) or fails (under make) for a missing
// prerequisite.
func need(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if required {
		t.Fatalf("prerequisite missing (COREPIN_E2E_REQUIRED=1): %s", msg)
	}
	t.Skipf("prerequisite missing: %s", msg)
}

// cacheDir is $COREPIN_CACHE, else $XDG_CACHE_HOME/corepin or
// ~/.cache/corepin, as in the Makefile.
func cacheDir(t *testing.T) string {
	if d := os.Getenv("COREPIN_CACHE"); d != "" {
		return d
	}
	d, err := os.UserCacheDir()
	if err != nil {
		need(t, "a cache directory: %v", err)
	}
	return filepath.Join(d, "corepin")
}

// Kernel meta-packages of Debian 12: the 6.1 cloud kernel and the 6.12
// one from bookworm's backports of the point releases. Each names the
// newest image package of its line, so the test follows security updates
// and the archive never drops what it asks for.
const (
	kernel61  = "linux-image-cloud-amd64"
	kernel612 = "linux-image-6.12-cloud-amd64"
)

var kernelMu sync.Mutex

// kernel returns the image package meta depends on and the path of its
// vmlinuz, downloaded with apt-get download and extracted with dpkg -x
// into the cache (once per version).
func kernel(t *testing.T, meta string) (pkg, vmlinuz string) {
	t.Helper()
	kernelMu.Lock()
	defer kernelMu.Unlock()
	for _, c := range []string{"apt-cache", "apt-get", "dpkg"} {
		if _, err := exec.LookPath(c); err != nil {
			need(t, "%s (Debian's package tools fetch the kernels)", c)
		}
	}
	out, err := exec.Command("apt-cache", "depends", meta).Output()
	if err != nil {
		need(t, "apt-cache depends %s: %v", meta, err)
	}
	m := regexp.MustCompile(`Depends: (linux-image-\S+)`).FindSubmatch(out)
	if m == nil {
		need(t, "apt-cache depends %s names no linux-image package (run apt-get update):\n%s", meta, out)
	}
	pkg = string(m[1])
	dir := filepath.Join(cacheDir(t), "vm", pkg)
	vmlinuz = filepath.Join(dir, "vmlinuz")
	if _, err := os.Stat(vmlinuz); err == nil {
		return pkg, vmlinuz
	}
	tmp := t.TempDir()
	cmd := exec.Command("apt-get", "download", pkg)
	cmd.Dir = tmp
	if out, err := cmd.CombinedOutput(); err != nil {
		need(t, "apt-get download %s: %v\n%s", pkg, err, out)
	}
	debs, _ := filepath.Glob(filepath.Join(tmp, "*.deb"))
	if len(debs) != 1 {
		t.Fatalf("apt-get download %s left %d .deb files, want 1", pkg, len(debs))
	}
	x := filepath.Join(tmp, "x")
	if out, err := exec.Command("dpkg", "-x", debs[0], x).CombinedOutput(); err != nil {
		t.Fatalf("dpkg -x %s: %v\n%s", debs[0], err, out)
	}
	imgs, _ := filepath.Glob(filepath.Join(x, "boot", "vmlinuz-*"))
	if len(imgs) != 1 {
		t.Fatalf("%s holds %d boot/vmlinuz-* files, want 1", debs[0], len(imgs))
	}
	data, err := os.ReadFile(imgs[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(vmlinuz+".tmp", data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(vmlinuz+".tmp", vmlinuz); err != nil {
		t.Fatal(err)
	}
	return pkg, vmlinuz
}

var (
	initrdOnce sync.Once
	initrdPath string
	initrdErr  error
	initrdDirs []string // removed by TestMain
	initrdMu   sync.Mutex
)

func TestMain(m *testing.M) {
	code := m.Run()
	for _, d := range initrdDirs {
		os.RemoveAll(d)
	}
	os.Exit(code)
}

// initrdParts are what every initramfs holds: corepin ($COREPIN_BIN,
// static) and busybox; a missing one is a missing prerequisite (need).
func initrdParts(t *testing.T) (bin, busybox string) {
	t.Helper()
	bin = os.Getenv("COREPIN_BIN")
	if bin == "" {
		need(t, "COREPIN_BIN, a static corepin binary (make build)")
	}
	if out, err := exec.Command("file", "-L", bin).Output(); err == nil && !bytes.Contains(out, []byte("statically linked")) &&
		!bytes.Contains(out, []byte("static-pie")) {
		t.Fatalf("%s is not static (build with CGO_ENABLED=0): %s", bin, out)
	}
	busybox, err := exec.LookPath("busybox")
	if err != nil {
		need(t, "busybox (apt-get install busybox-static)")
	}
	return bin, busybox
}

// initrd builds, once, the initramfs every machine boots: busybox,
// corepin ($COREPIN_BIN, static), /init and each shape's script under
// /scripts.
func initrd(t *testing.T) string {
	t.Helper()
	bin, busybox := initrdParts(t)
	initrdOnce.Do(func() {
		initrdPath, initrdErr = buildInitrd(bin, busybox, append(slices.Clone(shapes), captureShape, wakeScanShape, rtRouteShape), nil)
	})
	if initrdErr != nil {
		t.Fatalf("building the initramfs: %v", initrdErr)
	}
	return initrdPath
}

// buildInitrd writes an initramfs holding /init, busybox, corepin, each
// shape's script and the extra files (host path -> path in the
// initramfs, such as a program and the libraries it links).
func buildInitrd(bin, busybox string, shapes []shape, extra map[string]string) (string, error) {
	dir, err := os.MkdirTemp("", "corepin-e2evm-")
	if err != nil {
		return "", err
	}
	initrdMu.Lock()
	initrdDirs = append(initrdDirs, dir)
	initrdMu.Unlock()
	root := filepath.Join(dir, "root")
	files := map[string]string{"init": initScript, "bin/cginfo": cginfoScript}
	for _, s := range shapes {
		files["scripts/"+s.name+".sh"] = s.script
	}
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			return "", err
		}
	}
	copies := map[string]string{busybox: "bin/busybox", bin: "bin/corepin"}
	maps.Copy(copies, extra)
	for src, dst := range copies {
		data, err := os.ReadFile(src)
		if err != nil {
			return "", err
		}
		p := filepath.Join(root, dst)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(p, data, 0o755); err != nil {
			return "", err
		}
	}
	// Uncompressed: gzip costs the host and the emulated kernel more time
	// than loading 40 MB more into the machine's memory.
	out := filepath.Join(dir, "initrd.cpio")
	cmd := exec.Command("sh", "-c", `find . | "$0" cpio -o -H newc > "$1" 2>/dev/null`, busybox, out)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("cpio: %v: %s", err, b)
	}
	return out, nil
}

// initScript is /init: it mounts what a system has, cgroup v2 (or the v1
// hierarchies with corepin.cg=v1), runs /scripts/$corepin.script.sh with
// fd 3 on the second serial port, and powers off. block NAME CMD runs
// CMD with its stdout between "@@BEGIN NAME" and "@@END NAME RC" on fd 3
// and its stderr as the block NAME.err.
const initScript = `#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin HOME=/root
mkdir -p /proc /sys /dev /tmp /run /root /var/lib/corepin /etc
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
exec 3>/dev/ttyS1
CG=v2; SCRIPT=none
for a in $(cat /proc/cmdline); do
  case $a in corepin.cg=*) CG=${a#*=};; corepin.script=*) SCRIPT=${a#*=};; esac
done
if [ "$CG" = v1 ]; then
  mount -t tmpfs cgroup /sys/fs/cgroup
  for c in cpuset cpu,cpuacct memory pids; do
    mkdir -p /sys/fs/cgroup/$c && mount -t cgroup -o $c cgroup /sys/fs/cgroup/$c
  done
  ln -s cpu,cpuacct /sys/fs/cgroup/cpu; ln -s cpu,cpuacct /sys/fs/cgroup/cpuacct
else
  mount -t cgroup2 none /sys/fs/cgroup
fi
ip link set lo up 2>/dev/null
block() {
  _n=$1; shift
  echo "@@BEGIN $_n" >&3
  "$@" >&3 2>/tmp/block.err; _rc=$?
  echo "@@END $_n $_rc" >&3
  if [ -s /tmp/block.err ]; then
    echo "@@BEGIN $_n.err" >&3; cat /tmp/block.err >&3; echo "@@END $_n.err 0" >&3
  fi
  return $_rc
}
# sysfs prints the kernel's own view for the host to compare with corepin topo.
sysfs() {
  cd /sys/devices/system
  grep -H . cpu/online cpu/offline cpu/possible cpu/isolated cpu/nohz_full \
    cpu/cpu*/topology/thread_siblings_list cpu/cpu*/topology/physical_package_id \
    cpu/cpu*/topology/core_cpus_list node/online node/has_cpu node/has_memory \
    node/node*/cpulist node/node*/distance 2>/dev/null
  cd /
}
# cgfiles DIR FILE... prints FILE=CONTENT (first line) for each file.
cgfiles() {
  _d=$1; shift
  for _f in "$@"; do
    if [ -e "$_d/$_f" ]; then echo "$_f=$(head -n 1 "$_d/$_f")"; else echo "$_f=<missing>"; fi
  done
}
echo "@@BOOTED $(uname -r) $CG" >&3
if [ -f /scripts/$SCRIPT.sh ]; then . /scripts/$SCRIPT.sh; else echo "no script $SCRIPT" >&3; fi
echo "@@DONE" >&3
sync
poweroff -f
`

// cginfoScript is /bin/cginfo FILE: run as a job, it writes to FILE what
// the kernel says about its own process and cgroup as key=value lines:
// its Cpus_allowed_list and Mems_allowed_list, its cgroup, that group's
// files, and its parent's cgroup.subtree_control and process count.
const cginfoScript = `#!/bin/sh
out=$1
{
grep -E '^(Cpus|Mems)_allowed_list' /proc/self/status | sed 's/:[[:space:]]*/=/'
if [ -e /sys/fs/cgroup/cgroup.controllers ]; then
  cg=$(sed -n 's/^0:://p' /proc/self/cgroup)
  echo "cgroup=$cg"
  d=/sys/fs/cgroup$cg
  for f in cpuset.cpus cpuset.mems cpuset.cpus.effective cpuset.mems.effective cpu.max cpu.max.burst cpu.weight cpu.idle cpu.pressure; do
    echo "$f=$(head -n 1 $d/$f)"
  done
  p=$(dirname $d)
  echo "parent.subtree_control=$(cat $p/cgroup.subtree_control)"
  echo "parent.procs=$(wc -l < $p/cgroup.procs)"
else
  cs=$(sed -n 's/^[0-9]*:cpuset://p' /proc/self/cgroup)
  cc=$(sed -n 's/^[0-9]*:cpu,cpuacct://p' /proc/self/cgroup)
  echo "cgroup=$cs"
  for f in cpuset.cpus cpuset.mems cpuset.effective_cpus cpuset.effective_mems; do
    echo "$f=$(head -n 1 /sys/fs/cgroup/cpuset$cs/$f)"
  done
  for f in cpu.cfs_quota_us cpu.cfs_period_us cpu.shares cpu.idle; do
    echo "$f=$(head -n 1 /sys/fs/cgroup/cpu,cpuacct$cc/$f 2>/dev/null)"
  done
fi
} > "$out"
`

// block is one command's output between markers, and its exit code.
type block struct {
	out string
	rc  int
}

// vm is one finished machine: its result blocks and its console log.
type vm struct {
	kernel  string
	blocks  map[string]block
	order   []string
	console string
	wall    time.Duration
}

func (v *vm) get(t *testing.T, name string) string {
	t.Helper()
	b, ok := v.blocks[name]
	if !ok {
		t.Fatalf("no output block %q from the machine; blocks: %v\nconsole tail:\n%s", name, v.order, tail(v.console, 40))
	}
	if b.rc != 0 {
		t.Fatalf("%s exited %d:\n%s\nstderr:\n%s", name, b.rc, b.out, v.blocks[name+".err"].out)
	}
	return b.out
}

// shape is one machine: its qemu topology, kernel command line, cgroup
// mode and the script its init runs.
type shape struct {
	name   string
	kernel string   // meta-package (or, with vmlinuz, the kernel's name)
	mem    int      // MiB
	qemu   []string // -smp, -numa ...
	append string
	cg     string // v1 or v2
	script string
	// vmlinuz and initrd, when set, boot this kernel image and initramfs
	// instead of the meta-package's kernel and the shared initramfs.
	vmlinuz, initrd string
	cpu             string // qemu -cpu; default Cascadelake-Server (SMT needs an Intel model)
	// timeout bounds the machine from qemu's start to its poweroff
	// (default vmTimeout).
	timeout time.Duration
}

var (
	reportMu sync.Mutex
	report   []string
)

// boot runs s in qemu and returns its result blocks; it fails the test
// when qemu fails, times out, or the script did not reach its end.
func boot(t *testing.T, s shape) *vm {
	t.Helper()
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		need(t, "qemu-system-x86_64 (apt-get install qemu-system-x86)")
	}
	ird, pkg, vmlinuz := s.initrd, s.kernel, s.vmlinuz
	if ird == "" {
		ird = initrd(t)
	}
	if vmlinuz == "" {
		pkg, vmlinuz = kernel(t, s.kernel)
	}
	dir := t.TempDir()
	console, results := filepath.Join(dir, "console.log"), filepath.Join(dir, "results.log")
	// One host thread for all vCPUs (tcg,thread=single): under multi-threaded
	// TCG a guest's int3-based live code patching (a static key flipping,
	// as when the first CFS quota is set) raced with another vCPU's cached
	// translation of the patched code, and the 6.12 guest died of
	// "Oops: int3" in dequeue_entity about one boot in eight (isolcpus, at
	// its quota run). This host has 2 CPUs and runs several machines at
	// once, so a machine's wall time measured the same.
	accel := []string{"-accel", "tcg,thread=single"}
	if slices.Contains(s.qemu, "-accel") { // the shape's own
		accel = nil
	}
	args := []string{"-nodefaults", "-no-user-config", "-display", "none", "-no-reboot"}
	args = append(args, accel...)
	args = append(args, "-cpu", cmp.Or(s.cpu, "Cascadelake-Server"), "-m", strconv.Itoa(s.mem),
		"-kernel", vmlinuz, "-initrd", ird,
		"-append", "console=ttyS0 quiet loglevel=1 panic=-1 corepin.cg="+s.cg+" corepin.script="+s.name+" "+s.append,
		"-serial", "file:"+console, "-serial", "file:"+results)
	args = append(args, s.qemu...)
	limit := cmp.Or(s.timeout, vmTimeout)
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, "qemu-system-x86_64", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr // TCG's warnings about CPUID bits it cannot emulate
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	con, _ := os.ReadFile(console)
	res, _ := os.ReadFile(results)
	v := &vm{kernel: pkg, console: string(con), wall: wall, blocks: map[string]block{}}
	if dump := os.Getenv("COREPIN_E2E_VM_DUMP"); dump != "" {
		os.WriteFile(filepath.Join(dump, s.name+".results.log"), res, 0o644)
		os.WriteFile(filepath.Join(dump, s.name+".console.log"), con, 0o644)
	}
	if ctx.Err() != nil {
		t.Fatalf("%s did not power off within %v; console tail:\n%s\nresults tail:\n%s", s.name, limit, tail(v.console, 40), tail(string(res), 40))
	}
	if err != nil {
		t.Fatalf("qemu %s: %v\n%s\nconsole tail:\n%s", s.name, err, tail(stderr.String(), 20), tail(v.console, 40))
	}
	parse(v, string(res))
	if _, ok := v.blocks["@@DONE"]; !ok {
		t.Fatalf("%s: the init script did not finish; results:\n%s\nconsole tail:\n%s", s.name, tail(string(res), 60), tail(v.console, 40))
	}
	t.Logf("%s: kernel %s, cgroup %s, %d blocks, wall %.1fs", s.name, pkg, s.cg, len(v.order), wall.Seconds())
	reportMu.Lock()
	report = append(report, fmt.Sprintf("%-14s %-32s cgroup %s  %5.1fs  %s", s.name, pkg, s.cg, wall.Seconds(), strings.Join(v.order, " ")))
	reportMu.Unlock()
	return v
}

// parse splits the results port's text into blocks.
func parse(v *vm, text string) {
	var cur string
	var buf strings.Builder
	sc := bufio.NewScanner(strings.NewReader(strings.ReplaceAll(text, "\r", "")))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "@@BEGIN "):
			cur = strings.TrimPrefix(line, "@@BEGIN ")
			buf.Reset()
		case strings.HasPrefix(line, "@@END ") && cur != "":
			f := strings.Fields(line)
			rc := -1
			if len(f) == 3 {
				rc, _ = strconv.Atoi(f[2])
			}
			v.blocks[cur] = block{out: buf.String(), rc: rc}
			v.order = append(v.order, cur)
			cur = ""
		case line == "@@DONE":
			v.blocks["@@DONE"] = block{}
		case cur != "":
			buf.WriteString(line)
			buf.WriteByte('\n')
		}
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// kv parses "key=value" lines (cgfiles' output).
func kv(s string) map[string]string {
	m := map[string]string{}
	for _, l := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			m[k] = v
		}
	}
	return m
}

// TestReport logs every machine's kernel, cgroup mode, blocks and wall
// time, last (go test runs tests in source order; this file's Test
// functions come after the shapes' in shapes_test.go's order is not
// guaranteed, so it is called from TestVMs).
func logReport(t *testing.T) {
	reportMu.Lock()
	defer reportMu.Unlock()
	slices.Sort(report)
	t.Logf("machines:\n%s", strings.Join(report, "\n"))
	if p := os.Getenv("COREPIN_E2E_REPORT"); p != "" {
		os.WriteFile(p, []byte(strings.Join(report, "\n")+"\n"), 0o644)
	}
	logWakeTable(t)
}
