package nodecore

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/topology"
)

// TestResizeRefusesEmptySizes (issue 27 §3.1): a resize of a BE workload
// to 0 or to a size that rounds to 0 was committed (an LS one was
// refused); an LS refusal of 1e-9 said the quota must be "above 0". Each
// is ErrInvalid naming the smallest size, and nothing changes.
func TestResizeRefusesEmptySizes(t *testing.T) {
	topo := topology.MustSynthetic(twoNodes)
	db := openDB(t)
	for _, s := range []Spec{spec("be", "BE", 0.5), spec("ls", "LS", 0.5)} {
		if _, err := Admit(db, topo, alloc.NodeSettings{}, Record{Spec: s}, cpuset.CPUSet{}); err != nil {
			t.Fatalf("Admit %s: %v", s.Name, err)
		}
	}
	before, err := db.Assignments()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, workload string
		cpus           float64
		wantIn         string
	}{
		{name: "BE to 0", workload: "be", cpus: 0, wantIn: `workload "be": a BE workload can not be resized to 0 CPUs; ask for at least 0.001 (delete it to stop it)`},
		{name: "BE to 1e-9", workload: "be", cpus: 1e-9, wantIn: `cpus 1e-09 is above 0 but below 0.001, the smallest size (sizes count thousandths of a CPU); ask for 0.001 or more`},
		{name: "BE to 0.0004", workload: "be", cpus: 0.0004, wantIn: "below 0.001, the smallest size"},
		{name: "LS to 0", workload: "ls", cpus: 0, wantIn: `an LS quota of 0 CPUs is below the minimum, 0.01 CPUs (the kernel's shortest quota, 1ms per 100ms period); ask for at least 0.01`},
		{name: "LS to 1e-9", workload: "ls", cpus: 1e-9, wantIn: `an LS quota of 1e-09 CPUs is below the minimum, 0.01 CPUs (the kernel's shortest quota, 1ms per 100ms period)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := AdmitResize(db, topo, alloc.NodeSettings{}, tc.workload, tc.cpus)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.wantIn) {
				t.Fatalf("AdmitResize(%s, %v) = %v, want ErrInvalid saying %q", tc.workload, tc.cpus, err, tc.wantIn)
			}
			after, err := db.Assignments()
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(before, after); d != "" {
				t.Errorf("a refused resize changed the state (-before +after):\n%s", d)
			}
		})
	}
	// The smallest sizes are taken.
	for name, cpus := range map[string]float64{"be": 0.001, "ls": 0.01} {
		if _, err := AdmitResize(db, topo, alloc.NodeSettings{}, name, cpus); err != nil {
			t.Errorf("AdmitResize(%s, %v) = %v, want it resized", name, cpus, err)
		}
	}
}
