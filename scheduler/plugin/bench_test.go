package plugin

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/kube/podmeta"
	"github.com/corepin/corepin/topology"
)

// benchNodes are n nodes of a 2-socket, 4-NUMA-node, 64-core, 128-thread
// machine, each holding exclusive workloads up to a random share (0 to
// 75%) of its CPUs, published as a corepin node publishes them.
func benchNodes(b *testing.B, n int) []*corev1.Node {
	topo, err := topology.Synthetic(topology.Shape{Sockets: 2, NodesPerSocket: 2, L3PerNode: 2, CoresPerL3: 8, ThreadsPerCore: 2})
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	out := make([]*corev1.Node, n)
	for i := range out {
		st, err := alloc.NewState(topo, alloc.NodeSettings{})
		if err != nil {
			b.Fatal(err)
		}
		target := int(0.75 * rng.Float64() * float64(topo.Allowed().Size()))
		pods := map[string]string{}
		for k := 0; topo.Allowed().Size()-st.Pools().LS.Size() < target && k < 100; k++ {
			id := fmt.Sprintf("held/w%d", k)
			if _, err := st.Admit(alloc.Request{ID: id, QoS: alloc.LSE, CPUs: 1 + rng.IntN(8)}); err == nil {
				pods[id] = fmt.Sprintf("uid-%d-%d", i, k)
			}
		}
		out[i] = publishB(b, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%04d", i)}}, st, pods)
	}
	return out
}

// publishB is publish for a benchmark.
func publishB(b *testing.B, node *corev1.Node, st *alloc.State, pods map[string]string) *corev1.Node {
	t := &testing.T{}
	n := publish(t, node, st, "", pods)
	if t.Failed() {
		b.Fatal("publishing a node failed")
	}
	return n
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

// BenchmarkBurst1000Nodes schedules the pods of a burst one after the
// other on 1000 cached nodes as kube-scheduler calls the plugin: PreFilter,
// Filter on every node, Score on those kept, Reserve and PostBind on the
// best. One op is one pod.
func BenchmarkBurst1000Nodes(b *testing.B) {
	nodes := benchNodes(b, 1000)
	p := NewWithCache(NewCache())
	infos := make([]fwk.NodeInfo, len(nodes))
	for i, n := range nodes {
		p.cache.SetNode(n)
		ni := framework.NewNodeInfo()
		ni.SetNode(n)
		infos[i] = ni
	}
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(3, 4))
	runs := judgeRuns.Load()
	b.ResetTimer()
	for i := range b.N {
		pod := benchPod(i, rng)
		state := framework.NewCycleState()
		if _, s := p.PreFilter(ctx, state, pod, nil); !s.IsSuccess() {
			b.Fatal(s)
		}
		best, bestScore := "", int64(-1)
		for _, ni := range infos {
			if s := p.Filter(ctx, state, pod, ni); !s.IsSuccess() {
				continue
			}
			sc, s := p.Score(ctx, state, pod, ni)
			if !s.IsSuccess() {
				b.Fatal(s)
			}
			if sc > bestScore {
				best, bestScore = ni.Node().Name, sc
			}
		}
		if best == "" {
			continue
		}
		if s := p.Reserve(ctx, state, pod, best); !s.IsSuccess() {
			b.Fatal(s)
		}
		p.PostBind(ctx, state, pod, best)
	}
	b.ReportMetric(float64(judgeRuns.Load()-runs)/float64(b.N), "judgements/op")
}
