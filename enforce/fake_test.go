package enforce

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fakeFS emulates one cgroupfs hierarchy on a directory under t.TempDir(),
// through the production rootFS (so writes still go through os.Root):
// mkdir makes the control files a kernel would show, rmdir removes them
// with the directory, and every mkdir, rmdir and write is logged in order.
type fakeFS struct {
	*rootFS
	dir  string
	name string // hierarchy name in the log: "cpuset", "cpu", "cpuacct", "v2"
	// seed returns the control files of a new cgroup made under parent.
	seed func(f *fakeFS, parent string) map[string]string
	log  *[]string
	// kernel, when set, sees each write first and returns the value to
	// store, or the error the kernel would give.
	kernel func(f *fakeFS, file, value string) (string, error)
}

func (f *fakeFS) mkdir(dir string) error {
	*f.log = append(*f.log, "mkdir "+f.name+" "+dir)
	if err := f.rootFS.mkdir(dir); err != nil {
		return err
	}
	for file, v := range f.seed(f, path.Dir(dir)) {
		if err := os.WriteFile(filepath.Join(f.dir, dir, file), []byte(v), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func (f *fakeFS) rmdir(dir string) error {
	*f.log = append(*f.log, "rmdir "+f.name+" "+dir)
	if procs, err := readProcs(f.rootFS, dir); err == nil && len(procs) > 0 {
		return fmt.Errorf("fake rmdir %s: device or resource busy", dir)
	}
	es, err := os.ReadDir(filepath.Join(f.dir, dir))
	if err != nil {
		return f.rootFS.rmdir(dir) // report as the real one would
	}
	for _, e := range es {
		if !e.IsDir() {
			os.Remove(filepath.Join(f.dir, dir, e.Name()))
		}
	}
	return f.rootFS.rmdir(dir)
}

func (f *fakeFS) write(file, value string) error {
	*f.log = append(*f.log, "write "+f.name+" "+file+"="+value)
	if path.Base(file) == v2Subtree {
		// The kernel merges "+c -c" into the enabled list.
		cur, err := f.rootFS.read(file)
		if err != nil {
			return err
		}
		on := strings.Fields(cur)
		for _, tok := range strings.Fields(value) {
			c := tok[1:]
			switch tok[0] {
			case '+':
				if !slices.Contains(on, c) {
					on = append(on, c)
				}
			case '-':
				on = slices.DeleteFunc(on, func(s string) bool { return s == c })
			}
		}
		value = strings.Join(on, " ")
	}
	if f.kernel != nil {
		v, err := f.kernel(f, file, value)
		if err != nil {
			return fmt.Errorf("fake write %s: %w", file, err)
		}
		value = v
	}
	return f.rootFS.write(file, value)
}

// readBack reads a file of the fake tree.
func (f *fakeFS) readBack(t *testing.T, file string) string {
	t.Helper()
	s, err := f.rootFS.read(file)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// newFake makes a fake hierarchy whose top directory holds top (a file
// may lie in a directory below, made for it), and whose new cgroups get
// the files seed returns.
func newFake(t *testing.T, name string, log *[]string, top map[string]string,
	seed func(f *fakeFS, parent string) map[string]string) *fakeFS {
	t.Helper()
	dir := t.TempDir()
	for file, v := range top {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, file)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, file), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r, err := openRootFS(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.r.Close() })
	return &fakeFS{rootFS: r, dir: dir, name: name, seed: seed, log: log}
}

// without returns m minus the named keys, to seed older kernels.
func without(m map[string]string, keys ...string) map[string]string {
	m = maps(m)
	for _, k := range keys {
		delete(m, k)
	}
	return m
}

func maps(m map[string]string) map[string]string {
	c := make(map[string]string, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// The control files of a v1 cgroup as Linux 6.x shows them (only those
// corepin touches, plus tasks).
var (
	v1CPUSetFiles = map[string]string{
		"cgroup.procs": "", "tasks": "", "cpuset.cpus": "", "cpuset.mems": "",
		"cpuset.effective_cpus": "", "cpuset.effective_mems": "",
	}
	v1CPUFiles = map[string]string{
		"cgroup.procs": "", "tasks": "", "cpu.cfs_period_us": "100000", "cpu.cfs_quota_us": "-1",
		"cpu.cfs_burst_us": "0", "cpu.shares": "1024", "cpu.idle": "0",
		"cpu.stat": "nr_periods 0\nnr_throttled 0\nthrottled_time 0\nnr_bursts 0\nburst_time 0\n",
	}
	v1CPUAcctFiles = map[string]string{
		"cgroup.procs": "", "tasks": "", "cpuacct.usage": "0", "cpuacct.usage_user": "0", "cpuacct.usage_sys": "0",
	}
)

// fakeV1 is this fleet's layout: separate cpuset, cpu and cpuacct
// hierarchies, a 4-CPU, 1-node machine. cpuFiles seeds the cpu hierarchy's
// cgroups (v1CPUFiles, or fewer for an older kernel).
type fakeV1 struct {
	cpuset, cpu, cpuacct *fakeFS
	log                  []string
}

func newFakeV1(t *testing.T, cpuFiles map[string]string) *fakeV1 {
	f := &fakeV1{}
	top := func(m map[string]string, extra map[string]string) map[string]string {
		m = maps(m)
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	fixed := func(m map[string]string) func(*fakeFS, string) map[string]string {
		return func(*fakeFS, string) map[string]string { return m }
	}
	f.cpuset = newFake(t, "cpuset", &f.log,
		top(v1CPUSetFiles, map[string]string{"cpuset.cpus": "0-3\n", "cpuset.mems": "0\n", "cgroup.procs": "1\n"}),
		fixed(v1CPUSetFiles))
	f.cpu = newFake(t, "cpu", &f.log, top(cpuFiles, nil), fixed(cpuFiles))
	f.cpuacct = newFake(t, "cpuacct", &f.log, v1CPUAcctFiles, fixed(v1CPUAcctFiles))
	return f
}

func (f *fakeV1) hierarchies() v1Hierarchies {
	return v1Hierarchies{cpuset: f.cpuset, cpu: f.cpu, cpuacct: f.cpuacct}
}

// testConfig is a config whose owner is pid 100 (start 5), and in which
// that owner and pid 101 (start 9) are alive.
func testConfig(root string) config {
	c := newConfig([]Option{WithRoot(root)})
	c.self = &owner{PID: 100, Start: 5}
	c.alive = func(o owner) bool { return o == owner{PID: 100, Start: 5} || o == owner{PID: 101, Start: 9} }
	return c
}

// fakeV2 is a unified host (/sys/fs/cgroup) with 4 CPUs, 1 node.
// cpuFiles seeds the cpu controller's files of new cgroups.
func newFakeV2(t *testing.T, log *[]string, cpuFiles map[string]string) *fakeFS {
	seed := func(f *fakeFS, parent string) map[string]string {
		ctl := f.readBack(t, path.Join(parent, v2Subtree))
		m := map[string]string{
			"cgroup.procs": "", "cgroup.subtree_control": "", "cgroup.controllers": ctl,
			"cpu.stat": "usage_usec 0\nuser_usec 0\nsystem_usec 0\n",
		}
		if strings.Contains(" "+ctl+" ", " cpuset ") {
			m["cpuset.cpus"] = ""
			m["cpuset.mems"] = ""
			m["cpuset.cpus.effective"] = f.readBack(t, path.Join(parent, v2EffCPUs))
			m["cpuset.mems.effective"] = f.readBack(t, path.Join(parent, v2EffMems))
		}
		if strings.Contains(" "+ctl+" ", " cpu ") {
			for k, v := range cpuFiles {
				m[k] = v
			}
			m["cpu.stat"] += "nr_periods 0\nnr_throttled 0\nthrottled_usec 0\nnr_bursts 0\nburst_usec 0\n"
		}
		return m
	}
	return newFake(t, "v2", log, map[string]string{
		"cgroup.controllers": "cpuset cpu io memory hugetlb pids rdma misc\n", "cgroup.subtree_control": "memory pids\n",
		"cgroup.procs": "1\n", "cpuset.cpus.effective": "0-3\n", "cpuset.mems.effective": "0\n",
		"cpu.stat": "usage_usec 0\n",
	}, seed)
}

var v2CPUFiles = map[string]string{
	"cpu.max": "max 100000", "cpu.max.burst": "0", "cpu.weight": "100", "cpu.idle": "0", "cpu.weight.nice": "0",
}
