package nodecore

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/store"
	"github.com/corepin/corepin/topology"
)

func f64(v float64) *float64 { return &v }

// twoNodes is 2 sockets of one NUMA node each, 4 cores of 2 threads per
// node: CPUs 0-7 and 8-15 (topology.Synthetic numbers them per node).
var twoNodes = topology.Shape{Sockets: 2, NodesPerSocket: 1, L3PerNode: 1, CoresPerL3: 4, ThreadsPerCore: 2}

func openDB(t *testing.T) *store.DB {
	t.Helper()
	db, err := OpenState(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func spec(name, qos string, cpus float64) Spec {
	return Spec{Name: name, QoS: qos, CPUs: f64(cpus), Command: "x"}
}

// Admit answers what it committed, typed: the record and cpuset the state
// file holds are those of the placement, and read back they are equal.
func TestAdmitAnswersWhatItCommitted(t *testing.T) {
	topo := topology.MustSynthetic(twoNodes)
	db := openDB(t)
	ad, err := Admit(db, topo, alloc.NodeSettings{}, Record{Spec: spec("a", "LSE", 4)}, cpuset.CPUSet{})
	if err != nil {
		t.Fatalf("Admit: %v", err)
	}
	if ad.Placement.CPUs.Size() != 4 || ad.Assignment.Cpuset != ad.Placement.CPUs.String() {
		t.Errorf("Admit = cpuset %q for placement %v, want 4 CPUs, the same in both", ad.Assignment.Cpuset, ad.Placement.CPUs)
	}
	want := Record{Spec: spec("a", "LSE", 4), Excl: string(alloc.ExclusiveNone), NUMANodes: ad.Placement.NUMANodes.String(), Threads: 4}
	if diff := cmp.Diff(want, ad.Record); diff != "" {
		t.Errorf("Admit record (-want +got):\n%s", diff)
	}
	as, err := db.Assignments()
	if err != nil || len(as) != 1 {
		t.Fatalf("Assignments = %v (%v), want one", as, err)
	}
	rec, aa, err := DecodeAssignment(as[0])
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(ad.Record, rec); diff != "" {
		t.Errorf("stored record differs from the answer (-answer +stored):\n%s", diff)
	}
	if !aa.CPUs.Equals(ad.Placement.CPUs) || !ad.State.Pools().LSE.Equals(ad.Placement.CPUs) {
		t.Errorf("stored %v, state's LSE pool %v, want both %v", aa.CPUs, ad.State.Pools().LSE, ad.Placement.CPUs)
	}
	if _, err := Admit(db, topo, alloc.NodeSettings{}, Record{Spec: spec("a", "LSE", 1)}, cpuset.CPUSet{}); !errors.Is(err, ErrExists) {
		t.Errorf("second Admit of a = %v, want ErrExists", err)
	}
}

// The node's settings go on every request through NodeSettings.Apply,
// the pool guard refuses a starved LS pool, and prefer is kept.
func TestAdmitUnderTheNodesSettings(t *testing.T) {
	topo := topology.MustSynthetic(twoNodes)
	singleNUMA := alloc.NodeSettings{TopologyPolicy: alloc.TopologySingleNUMANode}
	kubelet := alloc.NodeSettings{Policy: alloc.PolicyKubelet}
	tests := []struct {
		name    string
		cfg     alloc.NodeSettings
		before  []Spec
		spec    Spec
		prefer  cpuset.CPUSet
		wantErr error
		want    cpuset.CPUSet // when not empty, the CPUs placed
	}{
		{name: "no default: 12 CPUs span both nodes", spec: spec("w", "LSE", 12)},
		{name: "the node's single-numa-node default refuses 12 CPUs", cfg: singleNUMA, spec: spec("w", "LSE", 12), wantErr: ErrRejected},
		{name: "a request's own policy wins over the node's", cfg: singleNUMA,
			spec: Spec{Name: "w", QoS: "LSE", CPUs: f64(12), TopologyPolicy: "none", Command: "x"}},
		{name: "the kubelet engine refuses a bind policy, as alloc did", cfg: kubelet,
			spec: Spec{Name: "w", QoS: "LSE", CPUs: f64(2), Bind: "FullPCPUs", Command: "x"}, wantErr: ErrInvalid},
		{name: "the kubelet engine admits a plain request", cfg: kubelet, spec: spec("w", "LSE", 2)},
		{name: "the pool guard keeps the LS quotas' CPUs", before: []Spec{spec("ls", "LS", 8)}, spec: spec("w", "LSE", 12), wantErr: ErrRejected},
		{name: "prefer is kept when free and the right size", spec: spec("w", "LSE", 2), prefer: cpuset.New(9, 14), want: cpuset.New(9, 14)},
		{name: "prefer of another size is not", spec: spec("w", "LSE", 2), prefer: cpuset.New(9)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			db := openDB(t)
			for _, s := range tc.before {
				if _, err := Admit(db, topo, tc.cfg, Record{Spec: s}, cpuset.CPUSet{}); err != nil {
					t.Fatalf("admitting %s: %v", s.Name, err)
				}
			}
			ad, err := Admit(db, topo, tc.cfg, Record{Spec: tc.spec}, tc.prefer)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("Admit = %v, want %v", err, tc.wantErr)
				}
				if as, _ := db.Assignments(); len(as) != len(tc.before) {
					t.Errorf("a refused admission left %d assignments, want %d", len(as), len(tc.before))
				}
				return
			}
			if err != nil {
				t.Fatalf("Admit = %v, want it admitted", err)
			}
			if got := ad.Placement.CPUs; got.Size() != int(*tc.spec.CPUs) || (!tc.want.IsEmpty() && !got.Equals(tc.want)) {
				t.Errorf("placed on %v, want %v CPUs %v", got, *tc.spec.CPUs, tc.want)
			}
		})
	}
}
