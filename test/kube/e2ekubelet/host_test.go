package e2ekubelet

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// kernelTunables are the sysctls the kubelet's container manager sets
// when protectKernelDefaults is false (pkg/kubelet/cm:
// setupKernelTunables); with it true the kubelet refuses to start on a
// machine where they differ, as they do here (vm.overcommit_memory 0,
// kernel.panic 0). The test lets the kubelet set them and puts them back.
var kernelTunables = []string{
	"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
}

// hostDirs are the kubelet's default directories; the test points every
// configurable one under its temporary directory, but the kubelet
// creates DefaultContainerLogsDir (/var/log/containers, not
// configurable) and links each container's log there, and its device
// manager serves kubelet.sock in /var/lib/kubelet/device-plugins (the
// device plugin API's fixed path, not under --root-dir).
var hostDirs = []string{"/var/lib/kubelet", devicePluginDir, "/var/log/pods", "/var/log/containers", "/usr/libexec/kubernetes", "/etc/kubernetes", "/run/containerd"}

const (
	containerLogsDir = "/var/log/containers"
	devicePluginDir  = "/var/lib/kubelet/device-plugins"
)

// snapshot is the state of the machine the test must leave as it found it.
type snapshot struct {
	sysctl   map[string]string
	dirs     map[string]bool
	mounts   []string // mount points
	iptables string   // iptables-save (empty where iptables is absent)
	cgroups  map[string][]string
}

func takeSnapshot(t *testing.T) snapshot {
	t.Helper()
	s := snapshot{sysctl: map[string]string{}, dirs: map[string]bool{}, cgroups: map[string][]string{}}
	for _, k := range kernelTunables {
		b, err := os.ReadFile("/proc/sys/" + k)
		if err != nil {
			t.Fatalf("reading a kernel setting the kubelet changes: %v", err)
		}
		s.sysctl[k] = strings.TrimSpace(string(b))
	}
	for _, d := range hostDirs {
		_, err := os.Lstat(d)
		s.dirs[d] = err == nil
	}
	s.mounts = mountPoints(t)
	s.iptables = iptablesSave()
	for _, ctrl := range cgroupControllers(t) {
		s.cgroups[ctrl] = topCgroups(ctrl)
	}
	return s
}

// restoreSysctls writes back the kernel settings the kubelet changed.
func (s snapshot) restoreSysctls(t *testing.T) {
	for _, k := range kernelTunables {
		b, err := os.ReadFile("/proc/sys/" + k)
		if err != nil {
			t.Errorf("reading %s: %v", k, err)
			continue
		}
		if now := strings.TrimSpace(string(b)); now != s.sysctl[k] {
			if err := os.WriteFile("/proc/sys/"+k, []byte(s.sysctl[k]+"\n"), 0o644); err != nil {
				t.Errorf("restoring %s to %s (the kubelet set %s): %v", k, s.sysctl[k], now, err)
			}
		}
	}
}

// compare reports what differs from s in what this run could have
// touched. Other engineers' tests run on the machine at the same time, so
// processes, cgroups and mounts are checked for this run's traces (its
// directory, its cgroup root, the kubelet's names), not for equality.
func (s snapshot) compare(t *testing.T, dir, cgroupRoot string) []string {
	var diffs []string
	for _, k := range kernelTunables {
		b, _ := os.ReadFile("/proc/sys/" + k)
		if now := strings.TrimSpace(string(b)); now != s.sysctl[k] {
			diffs = append(diffs, fmt.Sprintf("sysctl %s = %s, was %s", k, now, s.sysctl[k]))
		}
	}
	for _, d := range hostDirs {
		_, err := os.Lstat(d)
		if exists := err == nil; exists != s.dirs[d] {
			diffs = append(diffs, fmt.Sprintf("%s: exists %v, before %v", d, exists, s.dirs[d]))
		}
	}
	for _, m := range mountPoints(t) {
		if !slices.Contains(s.mounts, m) && (strings.HasPrefix(m, dir) || strings.Contains(m, "kubelet") || strings.Contains(m, "kubepods")) {
			diffs = append(diffs, "mount left: "+m)
		}
	}
	if now := iptablesSave(); stripComments(now) != stripComments(s.iptables) {
		diffs = append(diffs, fmt.Sprintf("iptables-save changed:\nbefore:\n%s\nafter:\n%s", s.iptables, now))
	}
	for ctrl, before := range s.cgroups {
		for _, c := range topCgroups(ctrl) {
			if !slices.Contains(before, c) && (c == strings.TrimPrefix(cgroupRoot, "/") || strings.HasPrefix(c, "kubepods")) {
				diffs = append(diffs, fmt.Sprintf("cgroup left: /sys/fs/cgroup/%s/%s", ctrl, c))
			}
		}
	}
	for _, pid := range procsMentioning(dir) {
		diffs = append(diffs, fmt.Sprintf("process %d still running: %s", pid, cmdline(pid)))
	}
	return diffs
}

func stripComments(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func iptablesSave() string {
	if _, err := exec.LookPath("iptables-save"); err != nil {
		return ""
	}
	out, _ := exec.Command("iptables-save").CombinedOutput()
	return string(out)
}

// mountPoints lists the mount points of /proc/self/mountinfo, field 5.
func mountPoints(t *testing.T) []string {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fs := strings.Fields(sc.Text()); len(fs) > 4 {
			out = append(out, unescapeMount(fs[4]))
		}
	}
	return out
}

func unescapeMount(s string) string {
	return strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`).Replace(s)
}

// unmountUnder unmounts every mount point at or under dir, deepest
// first: what the kubelet (or containerd) mounted there.
func unmountUnder(t *testing.T, dir string) []string {
	var ms []string
	for _, m := range mountPoints(t) {
		if m == dir || strings.HasPrefix(m, dir+"/") {
			ms = append(ms, m)
		}
	}
	slices.SortFunc(ms, func(a, b string) int { return len(b) - len(a) })
	var done []string
	for _, m := range ms {
		if err := syscall.Unmount(m, 0); err != nil {
			if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil {
				t.Errorf("unmounting %s: %v", m, err)
				continue
			}
		}
		done = append(done, m)
	}
	return done
}

// cgroupControllers are the cgroup v1 hierarchies mounted under
// /sys/fs/cgroup (their directory names: cpu, cpuset, name=systemd's
// "systemd", ...).
func cgroupControllers(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir("/sys/fs/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", e.Name(), "cgroup.procs")); err == nil {
			out = append(out, e.Name())
		}
	}
	return out
}

func topCgroups(ctrl string) []string {
	ents, _ := os.ReadDir(filepath.Join("/sys/fs/cgroup", ctrl))
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out
}

// makeCgroupRoot creates the kubelet's --cgroup-root in every hierarchy
// (the kubelet requires it to exist); a new cpuset cgroup starts with no
// CPUs and no memory nodes, so it copies its parent's.
func makeCgroupRoot(t *testing.T, root string) {
	t.Helper()
	for _, ctrl := range cgroupControllers(t) {
		d := filepath.Join("/sys/fs/cgroup", ctrl, root)
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatalf("creating the kubelet's cgroup root: %v", err)
		}
		if ctrl == "cpuset" {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/cpuset", f))
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(d, f), b, 0o644); err != nil {
					t.Fatalf("seeding %s: %v", f, err)
				}
			}
		}
	}
}

// removeCgroupRoot removes root and everything under it, depth-first,
// in every hierarchy; it returns how many cgroups it removed.
func removeCgroupRoot(t *testing.T, root string) int {
	n := 0
	for _, ctrl := range cgroupControllers(t) {
		top := filepath.Join("/sys/fs/cgroup", ctrl, root)
		var dirs []string
		filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		slices.SortFunc(dirs, func(a, b string) int { return len(b) - len(a) })
		for _, d := range dirs {
			if err := syscall.Rmdir(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("removing cgroup %s: %v", d, err)
				continue
			}
			n++
		}
	}
	return n
}

// cleanContainerLogsDir removes the kubelet's links in /var/log/containers
// that point into dir, and the directory itself when the kubelet created it.
func cleanContainerLogsDir(t *testing.T, dir string, existed bool) {
	ents, err := os.ReadDir(containerLogsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	for _, e := range ents {
		p := filepath.Join(containerLogsDir, e.Name())
		if target, err := os.Readlink(p); err == nil && strings.HasPrefix(target, dir+"/") {
			if err := os.Remove(p); err != nil {
				t.Errorf("removing the kubelet's log link: %v", err)
			}
		}
	}
	if !existed {
		if err := os.Remove(containerLogsDir); err != nil {
			t.Errorf("removing %s, which the kubelet created: %v", containerLogsDir, err)
		}
	}
}

// cleanDevicePluginDir removes the device manager's socket and the
// directories the kubelet created for it.
func cleanDevicePluginDir(t *testing.T, before snapshot) {
	if before.dirs[devicePluginDir] {
		return // a kubelet of the machine's own: leave its directory alone
	}
	if err := os.Remove(filepath.Join(devicePluginDir, "kubelet.sock")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("removing the kubelet's device plugin socket: %v", err)
	}
	for _, d := range []string{devicePluginDir, filepath.Dir(devicePluginDir)} {
		if before.dirs[d] {
			break
		}
		if err := os.Remove(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("removing %s, which the kubelet created: %v", d, err)
		}
	}
}

// procsMentioning lists the processes whose command line names dir.
func procsMentioning(dir string) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	self := os.Getpid()
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil || pid == self {
			continue
		}
		if strings.Contains(cmdline(pid), dir) {
			out = append(out, pid)
		}
	}
	return out
}

func cmdline(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
}
