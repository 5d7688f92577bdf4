package plugin

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"sigs.k8s.io/yaml"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/kube/nodestate/nodestatetest"
	"github.com/corepin/corepin/kube/nodeview"
	"github.com/corepin/corepin/kube/podmeta"
	"github.com/corepin/corepin/topology"
)

// benchNodes are n nodes cycling through the machines topos at random
// occupancy (nodestatetest.BusyNodes), the same for every benchmark.
func benchNodes(b *testing.B, n int, topos ...*topology.Topology) []*corev1.Node {
	return nodestatetest.BusyNodes(b, n, rand.New(rand.NewPCG(1, 2)), topos...)
}

// benchPod is pod i of a burst: whole-core LSE, single-numa-node, LS or BE.
func benchPod(i int, rng *rand.Rand) *corev1.Pod {
	ann := map[string]string{}
	var rl corev1.ResourceList
	switch d := rng.IntN(10); {
	case d < 4:
		ann[podmeta.AnnotationResourceSpec] = `{"preferredCPUBindPolicy":"FullPCPUs"}`
		rl = corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(int64(2<<rng.IntN(3)), resource.DecimalSI)}
	case d < 8:
		ann[podmeta.AnnotationNUMAPolicy] = string(alloc.TopologySingleNUMANode)
		rl = corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(int64(2+rng.IntN(11)), resource.DecimalSI)}
	case d < 9:
		rl = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}
	}
	rl2 := rl
	if d := rl[corev1.ResourceCPU]; d.MilliValue()%1000 != 0 {
		rl2 = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("p%d", i), UID: types.UID(fmt.Sprintf("uid-p%d", i)), Annotations: ann},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: rl, Limits: rl2}}}},
	}
}

// cached is a plugin whose view holds nodes, and the nodes as the
// scheduler's snapshot hands them to it.
func cached(nodes []*corev1.Node) (*Plugin, []fwk.NodeInfo) {
	p := NewWithView(nodeview.New())
	infos := make([]fwk.NodeInfo, len(nodes))
	for i, node := range nodes {
		p.view.SetNode(node)
		ni := framework.NewNodeInfo()
		ni.SetNode(node)
		infos[i] = ni
	}
	return p, infos
}

// bindBest scores the feasible nodes (unless PreScore skips Score: the
// first then), then reserves the pod on the best
// and notes it bound there, as kube-scheduler does; false when none is.
func bindBest(b *testing.B, p *Plugin, state fwk.CycleState, pod *corev1.Pod, feasible []fwk.NodeInfo) bool {
	ctx := context.Background()
	best, bestScore := "", int64(-1)
	if s := p.PreScore(ctx, state, pod, feasible); s.IsSkip() && len(feasible) > 0 {
		best = feasible[0].Node().Name // every score the same
		feasible = nil
	} else if !s.IsSuccess() {
		b.Fatal(s)
	}
	for _, ni := range feasible {
		sc, s := p.Score(ctx, state, pod, ni)
		if !s.IsSuccess() {
			b.Fatal(s)
		}
		if sc > bestScore {
			best, bestScore = ni.Node().Name, sc
		}
	}
	if best == "" {
		return false
	}
	if s := p.Reserve(ctx, state, pod, best); !s.IsSuccess() {
		b.Fatal(s)
	}
	p.PostBind(ctx, state, pod, best)
	return true
}

// BenchmarkBurst1000Nodes schedules the pods of a burst one after the
// other on 1000 cached nodes as kube-scheduler calls the plugin: PreFilter,
// Filter on every node, Score on those kept, Reserve and PostBind on the
// best. One op is one pod.
func BenchmarkBurst1000Nodes(b *testing.B) {
	topo, err := topology.Synthetic(topology.Shape{Sockets: 2, NodesPerSocket: 2, L3PerNode: 2, CoresPerL3: 8, ThreadsPerCore: 2})
	if err != nil {
		b.Fatal(err)
	}
	nodes := benchNodes(b, 1000, topo)
	p, infos := cached(nodes)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(3, 4))
	runs, _ := nodeview.Runs()
	b.ResetTimer()
	for i := range b.N {
		pod := benchPod(i, rng)
		state := framework.NewCycleState()
		if _, s := p.PreFilter(ctx, state, pod, nil); !s.IsSuccess() {
			b.Fatal(s)
		}
		var feasible []fwk.NodeInfo
		for _, ni := range infos {
			if s := p.Filter(ctx, state, pod, ni); s.IsSuccess() {
				feasible = append(feasible, ni)
			}
		}
		bindBest(b, p, state, pod, feasible)
	}
	judged, _ := nodeview.Runs()
	b.ReportMetric(float64(judged-runs)/float64(b.N), "judgements/op")
}

// burstPod is pod i of make bench-sched's burst: 35% LSE whole cores (2,
// 4 or 8 CPUs), 35% single-numa-node (2 to 12), 20% LS (0.5 to 2 CPUs
// requested, limit 4), 10% BE.
func burstPod(i int, rng *rand.Rand) *corev1.Pod {
	ann := map[string]string{}
	var rl, lim corev1.ResourceList
	switch d := rng.IntN(100); {
	case d < 35:
		ann[podmeta.AnnotationResourceSpec] = `{"preferredCPUBindPolicy":"FullPCPUs"}`
		rl = cpuMemory(int64([]int{2, 4, 8}[rng.IntN(3)]))
		lim = rl
	case d < 70:
		ann[podmeta.AnnotationNUMAPolicy] = string(alloc.TopologySingleNUMANode)
		rl = cpuMemory(int64(2 + rng.IntN(11)))
		lim = rl
	case d < 90:
		rl = corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(int64(500*(1+rng.IntN(4))), resource.DecimalSI)}
		lim = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("p%d", i), UID: types.UID(fmt.Sprintf("uid-p%d", i)), Annotations: ann},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: rl, Limits: lim}}}},
	}
}

// cpuMemory is the requests (and limits) of a Guaranteed pod of cpus
// whole CPUs: memory too, as make bench-sched's pods (a pod that names no
// memory is Burstable, LS).
func cpuMemory(cpus int64) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(cpus, resource.DecimalSI), corev1.ResourceMemory: resource.MustParse("1Gi")}
}

// benchmarkScheduler schedules make bench-sched's burst on n fixture
// nodes as kube-scheduler calls the plugin: each pod's Filter runs over
// the nodes PreFilter names (all when it names none), starts at the node
// after the last one the previous pod's filtered and stops at
// feasibleToFind nodes of that list (under the chart's
// scheduler.percentageOfNodesToScore, as PreFilter counts), Score rates
// those, Reserve and PostBind the best. One op is one pod; feasible/op is
// the nodes scored per pod, narrowed/op the share of pods PreFilter
// named nodes for.
func benchmarkScheduler(b *testing.B, n int) {
	nodes := benchNodes(b, n, nodestatetest.FixtureMachines(b)...)
	p, infos := cached(nodes)
	pct := chartPercentage(b)
	p.narrowing.pct = &pct
	byName := make(map[string]fwk.NodeInfo, n)
	for _, ni := range infos {
		byName[ni.Node().Name] = ni
	}
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(3, 4))
	runs, allocs := nodeview.Runs()
	start, i, bound := 0, 0, 0
	filtered, scored, narrowed := 0, 0, 0
	var feasible, named []fwk.NodeInfo
	cpu0 := cpuTime(b)
	for b.Loop() {
		pod := burstPod(i, rng)
		i++
		state := framework.NewCycleState()
		res, s := p.PreFilter(ctx, state, pod, infos)
		if !s.IsSuccess() {
			b.Fatal(s)
		}
		list := infos
		if !res.AllNodes() {
			// As findNodesThatFitPod: the framework's copy of the set
			// (PreFilterResult.Merge), each name looked up.
			named = named[:0]
			for name := range res.NodeNames.Clone() {
				named = append(named, byName[name])
			}
			list = named
			narrowed++
		}
		want := feasibleToFind(&pct, len(list))
		feasible = feasible[:0]
		k := 0
		for ; k < len(list) && len(feasible) < want; k++ {
			ni := list[(start+k)%len(list)]
			if s := p.Filter(ctx, state, pod, ni); s.IsSuccess() {
				feasible = append(feasible, ni)
			}
		}
		start = (start + k) % n
		filtered += k
		scored += len(feasible)
		if bindBest(b, p, state, pod, feasible) {
			bound++
		}
	}
	judged, byAllocator := nodeview.Runs()
	b.ReportMetric(float64(judged-runs)/float64(i), "judgements/op")
	b.ReportMetric(float64(byAllocator-allocs)/float64(i), "allocator/op")
	b.ReportMetric(float64(bound)/float64(i), "bound/op")
	b.ReportMetric(float64(filtered)/float64(i), "filtered/op")
	b.ReportMetric(float64(scored)/float64(i), "feasible/op")
	b.ReportMetric(float64(narrowed)/float64(i), "narrowed/op")
	// The process's CPU time (GC included) tells more than the wall
	// clock on a machine others load.
	b.ReportMetric(float64((cpuTime(b)-cpu0).Microseconds())/float64(i), "cpu-µs/op")
}

// chartPercentage is the chart's scheduler.percentageOfNodesToScore
// (deploy/helm/corepin/values.yaml), the share of the nodes that can take
// a pod mode plugin's profile has kube-scheduler score.
func chartPercentage(b *testing.B) int32 {
	raw, err := os.ReadFile("../../deploy/helm/corepin/values.yaml")
	if err != nil {
		b.Fatal(err)
	}
	var v struct {
		Scheduler struct {
			Pct *int32 `json:"percentageOfNodesToScore"`
		} `json:"scheduler"`
	}
	if err := yaml.Unmarshal(raw, &v); err != nil || v.Scheduler.Pct == nil {
		b.Fatalf("the chart's values.yaml has no scheduler.percentageOfNodesToScore (%v)", err)
	}
	return *v.Scheduler.Pct
}

// cpuTime is the process's CPU time so far, user and system.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkScheduler1000Nodes(b *testing.B) { benchmarkScheduler(b, 1000) }
func BenchmarkScheduler5000Nodes(b *testing.B) { benchmarkScheduler(b, 5000) }

// BenchmarkScheduler10000Nodes is make bench-sched's largest fleet: with
// 300 pods (-benchtime 300x, one burst) most nodes meet each request
// shape for the first time, so it shows how the per-pod cost grows with
// the fleet where kube-scheduler's own filtering stops growing (it
// samples 5% of the nodes from 5000 on).
func BenchmarkScheduler10000Nodes(b *testing.B) { benchmarkScheduler(b, 10000) }

// BenchmarkCache5000Nodes fills a plugin's view with
// BenchmarkScheduler5000Nodes's nodes, as the informers' first list
// does, and reports the CPU µs per node decoded and the heap the filled
// view keeps (MiB, after a GC). One op is one fill.
func BenchmarkCache5000Nodes(b *testing.B) {
	nodes := benchNodes(b, 5000, nodestatetest.FixtureMachines(b)...)
	cpu0, fills := cpuTime(b), 0
	var kept uint64
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		p, infos := cached(nodes)
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(p)
		runtime.KeepAlive(infos)
		kept += after.HeapAlloc - min(before.HeapAlloc, after.HeapAlloc)
		fills++
	}
	b.ReportMetric(float64((cpuTime(b)-cpu0).Microseconds())/float64(fills*len(nodes)), "cpu-µs/node")
	b.ReportMetric(float64(kept)/float64(fills)/(1<<20), "kept-MiB")
}
