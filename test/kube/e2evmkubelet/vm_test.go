package e2evmkubelet

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// Environment set by make e2e-vm-kubelet.
const (
	envKubeBin     = "COREPIN_KUBE_BIN" // etcd, kube-apiserver, kubelet
	envContainerd  = "COREPIN_E2E_BIN"  // containerd, ctr, containerd-shim-runc-v2
	envCorepin     = "COREPIN_BIN"      // static corepin
	envCache       = "COREPIN_CACHE"    // kernels, under vm/
	envReport      = "COREPIN_E2E_REPORT"
	envKeepConsole = "COREPIN_E2E_VM_DUMP" // a directory: the machine's serial output is copied there
)

// kernelMeta is Debian 12's cloud kernel meta-package; it names the newest
// image package of its line (make e2e-vm boots the same kernels).
const kernelMeta = "linux-image-cloud-amd64"

// The images of the node, written by the test (no registry, no root).
const (
	pauseImage   = "localhost/corepin/pause:vm"
	busyboxImage = "localhost/corepin/busybox:vm"
)

// missing skips the test for a prerequisite it lacks, or fails it under
// make (COREPIN_E2E_REQUIRED=1), which must not pass empty.
func missing(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("COREPIN_E2E_REQUIRED") == "1" {
		t.Fatalf("COREPIN_E2E_REQUIRED=1 and a prerequisite is missing: "+format, args...)
	}
	t.Skipf("skipping: "+format, args...)
}

// host is what the machine is built from, found on this host.
type host struct {
	kubeBin, ctdBin, corepin, runc, busybox, vmlinuz, modules, kernelPkg string
}

func prerequisites(t *testing.T) host {
	t.Helper()
	h := host{kubeBin: os.Getenv(envKubeBin), ctdBin: os.Getenv(envContainerd), corepin: os.Getenv(envCorepin), runc: "/usr/sbin/runc"}
	if h.kubeBin == "" || h.ctdBin == "" || h.corepin == "" {
		missing(t, "run through make e2e-vm-kubelet (%s, %s and %s unset)", envKubeBin, envContainerd, envCorepin)
	}
	for _, b := range []string{filepath.Join(h.kubeBin, "etcd"), filepath.Join(h.kubeBin, "kube-apiserver"), filepath.Join(h.kubeBin, "kubelet"),
		filepath.Join(h.ctdBin, "containerd"), filepath.Join(h.ctdBin, "ctr"), filepath.Join(h.ctdBin, "containerd-shim-runc-v2")} {
		if _, err := os.Stat(b); err != nil {
			missing(t, "%v (make e2e-kubelet-bin builds it)", err)
		}
	}
	if out, err := exec.Command("file", "-L", h.corepin).Output(); err != nil || !bytes.Contains(out, []byte("statically linked")) {
		missing(t, "%s: a static corepin binary (make build, CGO_ENABLED=0): %v %s", h.corepin, err, out)
	}
	var err error
	if h.busybox, err = exec.LookPath("busybox"); err != nil {
		missing(t, "busybox (apt-get install busybox-static)")
	}
	if out, err := exec.Command("file", "-L", h.busybox).Output(); err != nil || !bytes.Contains(out, []byte("statically linked")) {
		missing(t, "%s is not static (apt-get install busybox-static): %s", h.busybox, out)
	}
	for _, tool := range []string{h.runc, "qemu-system-x86_64", "ldd", "apt-cache", "apt-get", "dpkg"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing(t, "%s (apt-get install runc qemu-system-x86 libc-bin dpkg apt)", tool)
		}
	}
	h.kernelPkg, h.vmlinuz, h.modules = kernel(t)
	return h
}

// netModules are the modules of the machine's network card, in load
// order (each after those it depends on): virtio, its PCI transport and
// virtio_net are modules in the cloud kernel.
var netModules = []string{"virtio_ring", "virtio", "virtio_pci_modern_dev", "virtio_pci_legacy_dev", "virtio_pci",
	"failover", "net_failover", "virtio_net"}

// kernel returns the image package kernelMeta depends on, its vmlinuz and
// the directory of netModules' .ko files, fetched once per version into
// $COREPIN_CACHE/vm/PKG (where make e2e-vm keeps the same vmlinuz).
func kernel(t *testing.T) (pkg, vmlinuz, modules string) {
	t.Helper()
	cache := os.Getenv(envCache)
	if cache == "" {
		missing(t, "%s unset (make e2e-vm-kubelet sets it)", envCache)
	}
	out, err := exec.Command("apt-cache", "depends", kernelMeta).Output()
	m := regexp.MustCompile(`Depends: (linux-image-\S+)`).FindSubmatch(out)
	if err != nil || m == nil {
		missing(t, "apt-cache depends %s names no linux-image package (run apt-get update): %v\n%s", kernelMeta, err, out)
	}
	pkg = string(m[1])
	dir := filepath.Join(cache, "vm", pkg)
	vmlinuz, modules = filepath.Join(dir, "vmlinuz"), filepath.Join(dir, "modules")
	if haveKernel(vmlinuz, modules) == nil {
		return pkg, vmlinuz, modules
	}
	sh := `set -e; cd "$1"; apt-get download "$2" >/dev/null 2>&1; dpkg -x ./*.deb x; mkdir -p "$3/modules.tmp"
cp x/boot/vmlinuz-* "$3/vmlinuz.tmp"
for m in ` + strings.Join(netModules, " ") + `; do find x/lib/modules -name "$m.ko*" -exec cp {} "$3/modules.tmp/" \;; done
rm -rf "$3/modules"; mv "$3/modules.tmp" "$3/modules"; mv "$3/vmlinuz.tmp" "$3/vmlinuz"`
	if out, err := exec.Command("sh", "-c", sh, "sh", t.TempDir(), pkg, dir).CombinedOutput(); err != nil {
		missing(t, "fetching kernel %s: %v\n%s", pkg, err, out)
	}
	if err := haveKernel(vmlinuz, modules); err != nil {
		t.Fatalf("kernel %s: %v (compressed modules are not handled)", pkg, err)
	}
	return pkg, vmlinuz, modules
}

// haveKernel says whether vmlinuz and every module of netModules are there.
func haveKernel(vmlinuz, modules string) error {
	if _, err := os.Stat(vmlinuz); err != nil {
		return err
	}
	for _, mod := range netModules {
		if _, err := os.Stat(filepath.Join(modules, mod+".ko")); err != nil {
			return err
		}
	}
	return nil
}

// imageArchive writes a docker archive (what ctr images import reads) of
// one layer: busybox with its applets linked in /bin, /etc/passwd and
// /tmp, running cmd.
func imageArchive(path, busybox, ref string, cmd []string) error {
	bb, err := os.ReadFile(busybox)
	if err != nil {
		return err
	}
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	add := func(h *tar.Header, data []byte) {
		h.Size = int64(len(data))
		if h.Typeflag == tar.TypeSymlink || h.Typeflag == tar.TypeDir {
			h.Size = 0
		}
		tw.WriteHeader(h)
		tw.Write(data)
	}
	for _, d := range []string{"bin/", "etc/", "proc/", "sys/", "dev/", "run/"} {
		add(&tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: 0o755}, nil)
	}
	add(&tar.Header{Name: "tmp/", Typeflag: tar.TypeDir, Mode: 0o1777}, nil)
	add(&tar.Header{Name: "bin/busybox", Typeflag: tar.TypeReg, Mode: 0o755}, bb)
	for _, a := range []string{"sh", "sleep", "cat", "awk", "grep", "sed", "echo", "ls", "tail"} {
		add(&tar.Header{Name: "bin/" + a, Typeflag: tar.TypeSymlink, Linkname: "busybox", Mode: 0o777}, nil)
	}
	add(&tar.Header{Name: "etc/passwd", Typeflag: tar.TypeReg, Mode: 0o644}, []byte("root:x:0:0:root:/:/bin/sh\n"))
	add(&tar.Header{Name: "etc/group", Typeflag: tar.TypeReg, Mode: 0o644}, []byte("root:x:0:\n"))
	if err := tw.Close(); err != nil {
		return err
	}
	sum := sha256.Sum256(layer.Bytes())
	config, err := json.Marshal(map[string]any{
		"architecture": "amd64", "os": "linux",
		"config": map[string]any{"Env": []string{"PATH=/bin"}, "Cmd": cmd},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + hex.EncodeToString(sum[:])}},
	})
	if err != nil {
		return err
	}
	manifest, err := json.Marshal([]map[string]any{{"Config": "config.json", "RepoTags": []string{ref}, "Layers": []string{"layer.tar"}}})
	if err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	aw := tar.NewWriter(f)
	for _, e := range []struct {
		name string
		data []byte
	}{{"layer.tar", layer.Bytes()}, {"config.json", config}, {"manifest.json", manifest}} {
		if err := aw.WriteHeader(&tar.Header{Name: e.name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(e.data))}); err != nil {
			f.Close()
			return err
		}
		aw.Write(e.data)
	}
	if err := aw.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// libsOf lists the shared libraries ldd names for bin (and its
// interpreter), as absolute paths.
func libsOf(bin string) ([]string, error) {
	out, err := exec.Command("ldd", bin).CombinedOutput()
	if err != nil {
		if bytes.Contains(out, []byte("not a dynamic executable")) {
			return nil, nil
		}
		return nil, fmt.Errorf("ldd %s: %v: %s", bin, err, out)
	}
	var libs []string
	for _, l := range strings.Split(string(out), "\n") {
		for _, f := range strings.Fields(l) {
			if strings.HasPrefix(f, "/") {
				libs = append(libs, f)
			}
		}
	}
	return libs, nil
}

// buildInitrd writes the machine's root into dir/root: busybox, the
// binaries (dest path -> host path) with their libraries at the paths
// ldd gives, and files (path -> content, mode 0755), then packs it into
// an uncompressed cpio archive (the emulated kernel unpacks that faster
// than it gunzips) and returns its path.
func buildInitrd(dir, busybox string, bins, files map[string]string) (string, error) {
	root := filepath.Join(dir, "root")
	write := func(dst string, data []byte) error {
		p := filepath.Join(root, dst)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		return os.WriteFile(p, data, 0o755)
	}
	copyFile := func(src, dst string) error {
		data, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		return write(dst, data)
	}
	bins["/bin/busybox"] = busybox
	for dst, src := range bins {
		if err := copyFile(src, dst); err != nil {
			return "", err
		}
		libs, err := libsOf(src)
		if err != nil {
			return "", err
		}
		for _, l := range libs {
			real, err := filepath.EvalSymlinks(l)
			if err != nil {
				return "", err
			}
			if err := copyFile(real, l); err != nil {
				return "", err
			}
		}
	}
	for name, body := range files {
		if err := write(name, []byte(body)); err != nil {
			return "", err
		}
	}
	out := filepath.Join(dir, "initrd.cpio")
	pack := exec.Command("sh", "-c", `cd "$2" && find . | "$0" cpio -o -H newc > "$1" 2>/dev/null`, busybox, out, root)
	if b, err := pack.CombinedOutput(); err != nil {
		return "", fmt.Errorf("packing %s with busybox cpio: %v: %s", root, err, b)
	}
	return out, os.RemoveAll(root)
}

// machine is the running qemu: its serial ports as files, read while it
// runs.
type machine struct {
	cmd              *exec.Cmd
	console, results string
	done             chan struct{}
	stderr           bytes.Buffer
	start            time.Time
}

// The machine: 8 vCPUs as 2 sockets x 2 cores x 2 threads (an Intel CPU
// model: TCG gives AMD models no SMT), NUMA node 0 = CPUs 0-3, node 1 =
// 4-7, 2 GiB each; qemu's user network (the host at 10.0.2.2).
const memPerNode = 2048

func boot(t *testing.T, h host, initrd, dir string) *machine {
	t.Helper()
	m := &machine{console: filepath.Join(dir, "console.log"), results: filepath.Join(dir, "results.log"), done: make(chan struct{})}
	// Single-threaded TCG, as test/e2evm boots its machines: under
	// multi-threaded TCG a 6.12 guest's live code patching (a static key
	// flipping at the first CFS quota, which the kubelet sets for pods with
	// limits) raced another vCPU's cached translation and killed the guest
	// ("Oops: int3") about one boot in eight.
	args := []string{"-nodefaults", "-no-user-config", "-display", "none", "-no-reboot", "-accel", "tcg,thread=single",
		"-cpu", "Cascadelake-Server", "-m", fmt.Sprint(2 * memPerNode),
		"-smp", "8,sockets=2,cores=2,threads=2",
		"-object", fmt.Sprintf("memory-backend-ram,id=m0,size=%dM", memPerNode),
		"-object", fmt.Sprintf("memory-backend-ram,id=m1,size=%dM", memPerNode),
		"-numa", "node,cpus=0-3,nodeid=0,memdev=m0", "-numa", "node,cpus=4-7,nodeid=1,memdev=m1",
		"-netdev", "user,id=n0", "-device", "virtio-net-pci,netdev=n0",
		"-kernel", h.vmlinuz, "-initrd", initrd,
		"-append", "console=ttyS0 quiet loglevel=1 panic=-1",
		"-serial", "file:" + m.console, "-serial", "file:" + m.results}
	m.cmd = exec.Command("qemu-system-x86_64", args...)
	m.cmd.Stderr = &m.stderr // TCG's warnings about CPUID bits it cannot emulate
	m.start = time.Now()
	if err := m.cmd.Start(); err != nil {
		t.Fatalf("starting qemu: %v", err)
	}
	go func() { m.cmd.Wait(); close(m.done) }()
	t.Cleanup(func() {
		m.cmd.Process.Kill()
		<-m.done
		if d := os.Getenv(envKeepConsole); d != "" {
			for _, f := range []string{m.console, m.results} {
				if data, err := os.ReadFile(f); err == nil {
					os.WriteFile(filepath.Join(d, "vm-kubelet."+filepath.Base(f)), data, 0o644)
				}
			}
		}
		if t.Failed() {
			con, _ := os.ReadFile(m.console)
			res, _ := os.ReadFile(m.results)
			t.Logf("---- machine console (tail) ----\n%s\n---- results port (tail) ----\n%s", tail(string(con), 80), tail(string(res), 30))
		}
	})
	return m
}

// lines returns the results port's lines so far.
func (m *machine) lines() []string {
	data, _ := os.ReadFile(m.results)
	return strings.Split(strings.ReplaceAll(string(data), "\r", ""), "\n")
}

// waitLine polls the results port until a line after the first skip
// lines satisfies ok, and returns it and its index; it fails the test
// when the machine stops or limit passes.
func (m *machine) waitLine(t *testing.T, what string, skip int, limit time.Duration, ok func(string) bool) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	for {
		ls := m.lines()
		for i := skip; i < len(ls); i++ {
			if ok(ls[i]) {
				return ls[i], i
			}
		}
		select {
		case <-m.done:
			t.Fatalf("the machine stopped while waiting for %s: %v\n%s", what, m.cmd.ProcessState, tail(m.stderr.String(), 10))
		case <-ctx.Done():
			t.Fatalf("no %s from the machine within %v", what, limit)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// mark waits for the init script's "@@MARK name" line.
func (m *machine) mark(t *testing.T, name string, limit time.Duration) time.Duration {
	t.Helper()
	m.waitLine(t, "@@MARK "+name, 0, limit, func(l string) bool { return l == "@@MARK "+name })
	return time.Since(m.start)
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
