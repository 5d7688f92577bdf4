package jobs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/corepin/corepin/internal/testutil"
	"github.com/corepin/corepin/kube/kubeclient/kubeclienttest"
	"github.com/corepin/corepin/topology"
)

// TestPlanFitsTheNode checks that no Job asks a node for more CPU at once
// than it gives, on every real machine's dump and a 2-CPU machine, for
// every sweep, quick and full, with the node's whole CPU and with less
// allocatable: a point whose pods cannot run together would run in
// waves and measure less contention than it names (issue 27: the 2-CPU
// e2e node ran the quick sweep's 4-pod points in waves, and the sweep
// outgrew its budget).
func TestPlanFitsTheNode(t *testing.T) {
	nodes := map[string]*topology.Topology{
		"2cpu": topology.MustSynthetic(topology.Shape{Sockets: 1, NodesPerSocket: 1, L3PerNode: 1, CoresPerL3: 2, ThreadsPerCore: 1}),
	}
	for _, name := range testutil.Fixtures(t) {
		topo, err := topology.Discover(testutil.SysfsFromTarBz2(t, name), topology.WithoutCgroup())
		if err != nil {
			t.Fatalf("fixture %s: %v", name, err)
		}
		nodes[name] = topo
	}
	for name, topo := range nodes {
		n := int64(topo.Allowed().Size()) * 1000
		for _, node := range []int64{0, n - 1000, n / 2, 1500} {
			if node < 0 || node == n {
				continue
			}
			for _, sweep := range catalog.Names() {
				for _, quick := range []bool{true, false} {
					t.Run(fmt.Sprintf("%s/%dm/%s/quick=%t", name, node, sweep, quick), func(t *testing.T) {
						s, err := Plan(Options{Experiments: catalog, Sweep: sweep, Quick: quick, Node: topo, Repeats: 1, NodeMilliCPU: node})
						if err != nil {
							if strings.Contains(err.Error(), "no point that fits") {
								return
							}
							t.Fatal(err)
						}
						give := cmp.Or(node, n)
						for _, j := range s.Jobs {
							if at := int64(j.Parallel) * j.MilliCPU; at > give {
								t.Errorf("point %s: %d pods of %dm ask %dm at once, the node gives %dm", j.Point.Label(), j.Parallel, j.MilliCPU, at, give)
							}
							if j.QoS == "LSE" && (j.JobMilli != 0 || j.MilliCPU%1000 != 0 || j.LimitMilli != j.MilliCPU) {
								t.Errorf("point %s: pinned pods of %dm (limit %dm, job %dm), want whole CPUs unchanged", j.Point.Label(), j.MilliCPU, j.LimitMilli, j.JobMilli)
							}
							if j.JobMilli != 0 && j.JobMilli <= j.MilliCPU {
								t.Errorf("point %s: job sized for %dm on a request of %dm: JobMilli is set only when the request was lowered", j.Point.Label(), j.JobMilli, j.MilliCPU)
							}
						}
					})
				}
			}
		}
	}
}

// TestPlanSharesTheNodeAmongAPointsPods checks what fitting the 2-CPU
// node does to the quick concurrency sweep: the points of 4 one-CPU pods
// keep their limits (the quota, the burst, none) and their jobs' size
// (corepin run --cpus 1), and request half a CPU each, so all four run at
// once; on a node of 1 allocatable CPU the point of 2 pinned pods is left
// out, and the notes say both.
func TestPlanSharesTheNodeAmongAPointsPods(t *testing.T) {
	node := topology.MustSynthetic(topology.Shape{Sockets: 1, NodesPerSocket: 1, L3PerNode: 1, CoresPerL3: 2, ThreadsPerCore: 1})
	type row struct {
		Point             string
		Parallel          int
		Request, Limit    int64
		CPUsArg           string
		PinnedOrOtherwise string
	}
	rows := func(s *Sweep) []row {
		var out []row
		for _, j := range s.Jobs {
			i := slices.Index(j.Argv, "--cpus")
			out = append(out, row{j.Point.Label(), j.Parallel, j.MilliCPU, j.LimitMilli, j.Argv[i+1], j.QoS})
		}
		return out
	}
	s, err := Plan(Options{Experiments: catalog, Sweep: "concurrency", Quick: true, Node: node, Repeats: 1})
	if err != nil {
		t.Fatal(err)
	}
	want := []row{
		{"cpus=1 mode=pinned concurrency=1", 1, 1000, 1000, "1", "LSE"},
		{"cpus=1 mode=pinned concurrency=2", 2, 1000, 1000, "1", "LSE"},
		{"cpus=1 mode=quota concurrency=1", 1, 1000, 1000, "1", "LS"},
		{"cpus=1 mode=quota concurrency=2", 2, 1000, 1000, "1", "LS"},
		{"cpus=1 mode=quota concurrency=4", 4, 500, 1000, "1", "LS"},
		{"cpus=1 mode=burst concurrency=1", 1, 1000, 2000, "1", "LS"},
		{"cpus=1 mode=burst concurrency=2", 2, 1000, 2000, "1", "LS"},
		{"cpus=1 mode=burst concurrency=4", 4, 500, 2000, "1", "LS"},
		{"cpus=1 mode=unbounded concurrency=1", 1, 1000, 0, "1", "LS"},
		{"cpus=1 mode=unbounded concurrency=2", 2, 1000, 0, "1", "LS"},
		{"cpus=1 mode=unbounded concurrency=4", 4, 500, 0, "1", "LS"},
	}
	if diff := gocmp.Diff(want, rows(s)); diff != "" {
		t.Errorf("2-CPU node (-want +got):\n%s", diff)
	}
	if len(s.Notes) != 3 || !strings.Contains(s.Notes[0], "each of its 4 pods requests 0.5 CPUs (limit 1), not 1") {
		t.Errorf("notes = %q, want one per lowered point", s.Notes)
	}

	s, err = Plan(Options{Experiments: catalog, Sweep: "concurrency", Quick: true, Node: node, Repeats: 1, NodeMilliCPU: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for i, j := range s.Jobs {
		if j.Index != i {
			t.Errorf("job %d has index %d: the indexes of the Jobs kept are consecutive", i, j.Index)
		}
		if j.Point.Label() == "cpus=1 mode=pinned concurrency=2" {
			t.Errorf("the point of 2 pinned one-CPU pods was kept on a node of 1 allocatable CPU")
		}
	}
	if !slices.ContainsFunc(s.Notes, func(n string) bool {
		return strings.Contains(n, "cpus=1 mode=pinned concurrency=2: left out: its 2 pinned pods need 2 CPUs at once, a node gives 1")
	}) {
		t.Errorf("notes = %q, want the pinned point's leaving out said", s.Notes)
	}
	if _, err := Plan(Options{Experiments: catalog, Sweep: "concurrency", Quick: true, Node: node, Repeats: 1, NodeMilliCPU: -1}); err == nil {
		t.Error("Plan took a node of -1m")
	}
}

// TestCheckFit: kube run says which points would run in waves on the
// cluster's nodes, and says so once when the nodes cannot be read.
func TestCheckFit(t *testing.T) {
	node := topology.MustSynthetic(topology.Shape{Sockets: 1, NodesPerSocket: 1, L3PerNode: 1, CoresPerL3: 2, ThreadsPerCore: 1})
	s, err := Plan(Options{Experiments: catalog, Sweep: "concurrency", Quick: true, Node: node, Repeats: 2})
	if err != nil {
		t.Fatal(err)
	}
	nodeOf := func(name, cpu string, unschedulable bool) runtime.Object {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{Unschedulable: unschedulable},
			Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}
	}
	for _, tc := range []struct {
		name  string
		nodes []runtime.Object
		want  []string
	}{
		{name: "a node of 2 allocatable CPUs", nodes: []runtime.Object{nodeOf("a", "1", false), nodeOf("b", "2", false)}},
		{name: "1.5 CPUs", nodes: []runtime.Object{nodeOf("a", "1500m", false), nodeOf("big", "64", true)}, want: []string{
			"point cpus=1 mode=pinned concurrency=2: its 2 pods request 2 CPUs at once, the largest node has 1.5 allocatable: they will run in waves, with less contention than the point names (pass --node-cpus 1.5 to fit them)",
			"point cpus=1 mode=quota concurrency=2: its 2 pods request 2 CPUs at once, the largest node has 1.5 allocatable: they will run in waves, with less contention than the point names (pass --node-cpus 1.5 to fit them)",
			"point cpus=1 mode=quota concurrency=4: its 4 pods request 2 CPUs at once, the largest node has 1.5 allocatable: they will run in waves, with less contention than the point names (pass --node-cpus 1.5 to fit them)",
			"point cpus=1 mode=burst concurrency=2: its 2 pods request 2 CPUs at once, the largest node has 1.5 allocatable: they will run in waves, with less contention than the point names (pass --node-cpus 1.5 to fit them)",
			"point cpus=1 mode=burst concurrency=4: its 4 pods request 2 CPUs at once, the largest node has 1.5 allocatable: they will run in waves, with less contention than the point names (pass --node-cpus 1.5 to fit them)",
			"point cpus=1 mode=unbounded concurrency=2: its 2 pods request 2 CPUs at once, the largest node has 1.5 allocatable: they will run in waves, with less contention than the point names (pass --node-cpus 1.5 to fit them)",
			"point cpus=1 mode=unbounded concurrency=4: its 4 pods request 2 CPUs at once, the largest node has 1.5 allocatable: they will run in waves, with less contention than the point names (pass --node-cpus 1.5 to fit them)",
		}},
		{name: "no node", want: []string{"not checked that the Jobs fit a node: no schedulable node reports allocatable cpu"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset(tc.nodes...)
			got, err := CheckFit(context.Background(), kubeclienttest.Reader{Interface: cs}, s)
			if err != nil {
				t.Fatal(err)
			}
			if diff := gocmp.Diff(tc.want, got); diff != "" {
				t.Errorf("CheckFit (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCheckFitRefusesAPodNoNodeHolds: a pod that requests more CPU than
// any schedulable node's allocatable would wait until its Job's timeout;
// kube run refuses the sweep before creating anything.
func TestCheckFitRefusesAPodNoNodeHolds(t *testing.T) {
	node := topology.MustSynthetic(topology.Shape{Sockets: 1, NodesPerSocket: 1, L3PerNode: 1, CoresPerL3: 2, ThreadsPerCore: 1})
	s, err := Plan(Options{Experiments: catalog, Sweep: "concurrency", Quick: true, Node: node, Repeats: 1})
	if err != nil {
		t.Fatal(err)
	}
	cs := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "small"},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("900m")}}})
	notes, err := CheckFit(context.Background(), kubeclienttest.Reader{Interface: cs}, s)
	const want = "point cpus=1 mode=pinned concurrency=1: each pod requests 1 CPUs, the largest schedulable node has 0.9 allocatable, so no node can run it"
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), want) {
		t.Errorf("CheckFit() = %q, %v; want ErrInvalid saying %q", notes, err, want)
	}
}
