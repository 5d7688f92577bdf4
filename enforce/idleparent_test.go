package enforce

import (
	"errors"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// idleMount is a cgroup mount in a temp dir seeded with top, whose new
// cgroups get the control files a kernel shows in their hierarchy (the
// first element of their path on v1; cpuFiles for the cpu controller's,
// fewer for an older kernel), its idle parents named corepin-be, and the
// log of its mkdirs, rmdirs and writes.
func idleMount(t *testing.T, top, cpuFiles map[string]string) (*IdleParents, *fakeFS) {
	t.Helper()
	var log []string
	v2 := top[v2Controllers] != ""
	f := newFake(t, "mount", &log, top, func(_ *fakeFS, parent string) map[string]string {
		switch h, _, _ := strings.Cut(parent, "/"); {
		case v2:
			return cpuFiles
		case h == "cpuset":
			return v1CPUSetFiles
		case h == "cpu":
			return cpuFiles
		case h == "cpuacct":
			return v1CPUAcctFiles
		}
		return nil
	})
	ip, err := openIdleParents(f, "corepin-be")
	if err != nil {
		t.Fatal(err)
	}
	return ip, f
}

// writes are the writes of the log since it was last cleared.
func writes(f *fakeFS) []string {
	var w []string
	for _, l := range *f.log {
		if strings.HasPrefix(l, "write ") {
			w = append(w, strings.TrimPrefix(l, "write mount "))
		}
	}
	*f.log = nil
	return w
}

// v1Node is the e2e node's layout: cgroup v1, cpu and cpuacct mounted
// apart, the kubelet's kubepods under a --cgroup-root.
var v1Node = map[string]string{
	"cpu/r/kubepods/cpu.shares":               "1024",
	"cpuacct/r/kubepods/cgroup.procs":         "",
	"cpuset/r/kubepods/cpuset.cpus":           "0-15",
	"cpuset/r/kubepods/cpuset.mems":           "0-1",
	"memory/r/kubepods/memory.limit_in_bytes": "1000",
	"unified/cgroup.procs":                    "",
}

func TestIdleParentsEnsureMakesAndRepairsTheIdleParent(t *testing.T) {
	t.Run("cgroup v1", func(t *testing.T) {
		ip, f := idleMount(t, v1Node, v1CPUFiles)
		if err := ip.Ensure("/r/kubepods/corepin-be"); err != nil {
			t.Fatalf("Ensure: %v", err)
		}
		want := []string{"cpuset/r/kubepods/corepin-be/cpuset.cpus=0-15", "cpuset/r/kubepods/corepin-be/cpuset.mems=0-1",
			"cpu/r/kubepods/corepin-be/cpu.idle=1"}
		if got := writes(f); !slices.Equal(got, want) {
			t.Errorf("Ensure wrote %q, want %q (the cpuset before the cpu group, nothing else)", got, want)
		}
		if got := f.readBack(t, "cpu/r/kubepods/cpu.shares"); got != "1024" {
			t.Errorf("kubepods' cpu.shares = %q, want 1024 untouched", got)
		}
		err := ip.Ensure("/r/kubepods/corepin-be")
		if w := writes(f); err != nil || len(w) > 0 {
			t.Errorf("Ensure of an idle parent that holds: %v, wrote %q; want nothing written", err, w)
		}
		// Repair: someone reset it.
		os.WriteFile(filepath.Join(f.dir, "cpu/r/kubepods/corepin-be/cpu.idle"), []byte("0"), 0o644)
		if err := ip.Holds("/r/kubepods/corepin-be"); err == nil {
			t.Errorf("Holds with cpu.idle 0 = nil, want an error")
		}
		if err := ip.Ensure("/r/kubepods/corepin-be"); err != nil || f.readBack(t, "cpu/r/kubepods/corepin-be/cpu.idle") != "1" {
			t.Errorf("Ensure after a reset: %v, cpu.idle %s; want 1", err, f.readBack(t, "cpu/r/kubepods/corepin-be/cpu.idle"))
		}
		if got, want := ip.V1CPUMount(), filepath.Join(f.dir, "cpu"); got != want {
			t.Errorf("V1CPUMount = %q, want %q", got, want)
		}
	})
	t.Run("cgroup v1, a cpuset set already is kept", func(t *testing.T) {
		top := maps(v1Node)
		top["cpuset/r/kubepods/corepin-be/cpuset.cpus"] = "2-3"
		top["cpuset/r/kubepods/corepin-be/cpuset.mems"] = ""
		ip, f := idleMount(t, top, v1CPUFiles)
		if err := ip.Ensure("/r/kubepods/corepin-be"); err != nil {
			t.Fatalf("Ensure: %v", err)
		}
		want := []string{"cpuset/r/kubepods/corepin-be/cpuset.mems=0-1", "cpu/r/kubepods/corepin-be/cpu.idle=1"}
		if got := writes(f); !slices.Equal(got, want) {
			t.Errorf("Ensure wrote %q, want %q", got, want)
		}
	})
	t.Run("cgroup v2", func(t *testing.T) {
		ip, f := idleMount(t, map[string]string{v2Controllers: "cpuset cpu memory", "r/kubepods/cpu.weight": "100"}, v2CPUFiles)
		if err := ip.Ensure("/r/kubepods/corepin-be"); err != nil {
			t.Fatalf("Ensure: %v", err)
		}
		if got, want := writes(f), []string{"r/kubepods/corepin-be/cpu.idle=1"}; !slices.Equal(got, want) {
			t.Errorf("Ensure wrote %q, want %q", got, want)
		}
		if got := ip.V1CPUMount(); got != "" {
			t.Errorf("V1CPUMount on cgroup v2 = %q, want none", got)
		}
	})
	t.Run("kernel without cpu.idle", func(t *testing.T) {
		ip, f := idleMount(t, v1Node, without(v1CPUFiles, v1Idle))
		if err := ip.Ensure("/r/kubepods/corepin-be"); !errors.Is(err, ErrNoCPUIdle) {
			t.Errorf("Ensure = %v, want ErrNoCPUIdle", err)
		}
		if got := writes(f); slices.ContainsFunc(got, func(w string) bool { return strings.Contains(w, v1Idle) }) {
			t.Errorf("Ensure without cpu.idle wrote %q", got)
		}
	})
	t.Run("no kubepods: nothing made", func(t *testing.T) {
		ip, f := idleMount(t, map[string]string{"cpu/cpu.shares": "1024"}, v1CPUFiles)
		if err := ip.Ensure("/r/kubepods/corepin-be"); err == nil {
			t.Errorf("Ensure without kubepods = nil, want an error")
		}
		if _, err := os.Stat(filepath.Join(f.dir, "cpu/r")); err == nil {
			t.Errorf("Ensure without kubepods made %s", filepath.Join(f.dir, "cpu/r"))
		}
	})
	t.Run("not an idle parent", func(t *testing.T) {
		ip, f := idleMount(t, v1Node, v1CPUFiles)
		for _, p := range []string{"/r/kubepods/besteffort", "r/kubepods/corepin-be", "/r/kubepods/../corepin-be"} {
			if err := ip.Ensure(p); err == nil {
				t.Errorf("Ensure(%q) = nil, want an error", p)
			}
		}
		if len(*f.log) > 0 {
			t.Errorf("Ensure of paths that are not idle parents did %q, want nothing", *f.log)
		}
	})
	t.Run("not a cgroup mount", func(t *testing.T) {
		dir := t.TempDir()
		os.MkdirAll(filepath.Join(dir, "memory/x"), 0o755)
		if _, err := OpenIdleParents(dir, "corepin-be"); err == nil {
			t.Errorf("OpenIdleParents of a mount without cpu = nil, want an error")
		}
		if _, err := OpenIdleParents(filepath.Join(dir, "none"), "corepin-be"); err == nil {
			t.Errorf("OpenIdleParents of no directory = nil, want an error")
		}
	})
	t.Run("idle parents named as no group may be", func(t *testing.T) {
		for _, name := range []string{"", "..", "a/b", strings.Repeat("x", MaxNameLen+1)} {
			if _, err := OpenIdleParents(t.TempDir(), name); !errors.Is(err, ErrInvalidName) {
				t.Errorf("OpenIdleParents(%q) = %v, want ErrInvalidName", name, err)
			}
		}
	})
}

func TestIdleParentsRemovePodRemovesItsGroupsEverywhereAndNothingElse(t *testing.T) {
	ip, f := idleMount(t, v1Node, v1CPUFiles)
	for _, h := range []string{"cpu", "cpuacct", "cpuset", "memory"} {
		for _, pod := range []string{"poda", "podb"} {
			os.MkdirAll(filepath.Join(f.dir, h, "r/kubepods/corepin-be", pod), 0o755)
		}
	}
	os.MkdirAll(filepath.Join(f.dir, "memory/r/kubepods/corepin-be/podb/ctr"), 0o755) // a container still there
	if got, err := ip.Pods("/r/kubepods/corepin-be"); err != nil || strings.Join(got, ",") != "poda,podb" {
		t.Errorf("Pods = %v, %v; want poda, podb", got, err)
	}
	if err := ip.RemovePod("/r/kubepods/corepin-be", "poda"); err != nil {
		t.Errorf("RemovePod(poda): %v", err)
	}
	if err := ip.RemovePod("/r/kubepods/corepin-be", "podb"); err == nil || !strings.Contains(err.Error(), "memory") {
		t.Errorf("RemovePod(podb) with a container left = %v, want an error naming the memory group", err)
	}
	for _, h := range []string{"cpu", "cpuacct", "cpuset", "memory"} {
		if _, err := os.Stat(filepath.Join(f.dir, h, "r/kubepods/corepin-be/poda")); err == nil {
			t.Errorf("%s: poda's group is still there", h)
		}
	}
	if _, err := os.Stat(filepath.Join(f.dir, "memory/r/kubepods/corepin-be/podb/ctr")); err != nil {
		t.Errorf("the container left in podb is gone: %v", err)
	}
	*f.log = nil
	for _, bad := range []string{"../kubepods", "pod/x", "besteffort"} {
		if err := ip.RemovePod("/r/kubepods/corepin-be", bad); err == nil {
			t.Errorf("RemovePod(%q) = nil, want an error", bad)
		}
	}
	if len(*f.log) > 0 {
		t.Errorf("RemovePod of names not pod<uid> did %q, want nothing", *f.log)
	}
	if got, err := ip.Pods("/r/kubepods/none"); err != nil || len(got) > 0 {
		t.Errorf("Pods of an idle parent not made yet = %v, %v; want none", got, err)
	}
}

func TestIdleParentsContainsTheContainersGroupUnderAnIdleParentThatHolds(t *testing.T) {
	ip, f := idleMount(t, v1Node, v1CPUFiles)
	const moved = "/r/kubepods/corepin-be/poda/ctr"
	if err := ip.Contains(moved); err == nil {
		t.Errorf("Contains before the idle parent is made = nil, want an error")
	}
	if err := ip.Ensure(path.Dir(path.Dir(moved))); err != nil {
		t.Fatal(err)
	}
	if err := ip.Contains(moved); err == nil {
		t.Errorf("Contains before the runtime made the container's group = nil, want an error")
	}
	os.MkdirAll(filepath.Join(f.dir, "cpu", moved), 0o755)
	if err := ip.Contains(moved); err != nil {
		t.Errorf("Contains: %v", err)
	}
	os.WriteFile(filepath.Join(f.dir, "cpu/r/kubepods/corepin-be/cpu.idle"), []byte("0"), 0o644)
	if err := ip.Contains(moved); err == nil {
		t.Errorf("Contains under an idle parent with cpu.idle 0 = nil, want an error")
	}
}
