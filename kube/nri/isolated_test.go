package nri

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/internal/testutil"
	"github.com/corepin/corepin/topology"
)

// TestIsolatedCPUsAnnotationOnVMDump runs pods through the plugin's
// CreateContainer on a real kernel's machine with isolcpus=6,7
// nohz_full=6,7 (topology/testdata/vm): a plain LSE pod keeps off the
// isolated CPUs while others suffice, one annotated corepin.io/isolated-cpus
// require gets them, a second one is refused with the reason (and holds
// nothing), prefer on a shared pod is ignored, require on one is refused,
// and no shared container's cpuset ever holds an isolated CPU.
func TestIsolatedCPUsAnnotationOnVMDump(t *testing.T) {
	topo, err := topology.Discover(testutil.VMDump(t, "qemu-2s2c2t-isolcpus6-7"))
	if err != nil {
		t.Fatal(err)
	}
	f := newRuntime(t, socketDir(t))
	t.Cleanup(f.r.Stop)
	p, err := New(Options{State: filepath.Join(t.TempDir(), "state.db"), Topology: topo})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	f.connect(p)

	iso := cpuset.New(6, 7)
	pinned := func(name, isolated string) podSpec {
		ps := podSpec{name: name, shares: 2048, quota: 200000}
		if isolated != "" {
			ps.annotations = map[string]string{AnnotationIsolatedCPUs: isolated}
		}
		return ps
	}
	cpusOf := func(ps podSpec) cpuset.CPUSet {
		t.Helper()
		return cpuset.MustParse(f.mustCreate(ps).Linux.Resources.Cpu.Cpus)
	}
	if got := cpusOf(pinned("plain", "")); got.Size() != 2 || got.Intersects(iso) {
		t.Errorf("LSE pod without the annotation got %s, want 2 CPUs off the isolated %s", got, iso)
	}
	if got := cpusOf(pinned("iso", "require")); !got.Equals(iso) {
		t.Errorf("LSE pod requiring isolated CPUs got %s, want %s", got, iso)
	}
	for _, tc := range []struct {
		ps   podSpec
		want string
	}{
		{pinned("more", "require"), `requires 2 isolated CPUs; 0 of the isolated CPUs 6-7 are free`},
		{podSpec{name: "ls-require", annotations: map[string]string{AnnotationIsolatedCPUs: "require"}, shares: 1024, quota: 150000},
			"annotation corepin.io/isolated-cpus require is for LSE and LSR pods"},
		{pinned("typo", "yes"), `annotation corepin.io/isolated-cpus "yes" is not one of prefer, require`},
	} {
		if _, _, err := f.create(tc.ps); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("CreateContainer %s = %v, want an error containing %q", tc.ps.name, err, tc.want)
		}
	}
	if got, err := p.Containers().List(); err != nil || len(got) != 2 {
		t.Errorf("assignments after the refusals = %v (%v), want the two pinned pods only", got, err)
	}
	f.mustCreate(podSpec{name: "ls-prefer", annotations: map[string]string{AnnotationIsolatedCPUs: "prefer"}, shares: 1024, quota: 150000})
	f.mustCreate(be)
	for id, set := range f.cpusets() {
		if id != "ctr-iso" && cpuset.MustParse(set).Intersects(iso) {
			t.Errorf("container %s runs on %s, which holds isolated CPUs %s", id, set, iso)
		}
	}
}
