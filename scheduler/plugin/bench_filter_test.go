package plugin

import (
	"context"
	"math/rand/v2"
	"testing"

	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/corepin/corepin/kube/nodestate/nodestatetest"
)

// BenchmarkFilterKept5000Nodes is the Filter of a scheduling cycle on
// 5000 fixture nodes whose verdicts for the pod's shape are kept already
// (the pods before it asked the same): what each node costs the plugin
// when its state has not changed. One op is one Filter call.
func BenchmarkFilterKept5000Nodes(b *testing.B) {
	benchmarkKept(b, func(ctx context.Context, p *Plugin, state fwk.CycleState, ni fwk.NodeInfo) {
		p.Filter(ctx, state, nil, ni)
	})
}

// BenchmarkScoreKept5000Nodes is BenchmarkFilterKept5000Nodes's Score.
// One op is one Score call.
func BenchmarkScoreKept5000Nodes(b *testing.B) {
	benchmarkKept(b, func(ctx context.Context, p *Plugin, state fwk.CycleState, ni fwk.NodeInfo) {
		p.Score(ctx, state, nil, ni)
	})
}

func benchmarkKept(b *testing.B, call func(context.Context, *Plugin, fwk.CycleState, fwk.NodeInfo)) {
	nodes := benchNodes(b, 5000, nodestatetest.FixtureMachines(b)...)
	p, infos := cached(nodes)
	ctx := context.Background()
	pod := burstPod(0, rand.New(rand.NewPCG(3, 4)))
	state := framework.NewCycleState()
	if _, s := p.PreFilter(ctx, state, pod, nil); !s.IsSuccess() {
		b.Fatal(s)
	}
	for _, ni := range infos {
		p.Filter(ctx, state, pod, ni)
	}
	b.ResetTimer()
	cpu0, i := cpuTime(b), 0
	for ; b.Loop(); i++ {
		call(ctx, p, state, infos[i%len(infos)])
	}
	// The CPU time tells more than the wall clock on a loaded machine.
	b.ReportMetric(float64((cpuTime(b)-cpu0).Nanoseconds())/float64(i), "cpu-ns/op")
}
