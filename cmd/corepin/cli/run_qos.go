package cli

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/corepin/corepin/agent"
	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/enforce"
	"github.com/corepin/corepin/qos"
	"github.com/corepin/corepin/runner"
)

// runQoS is the QoS loop `corepin run --qos BE --suppress` runs over its own batch
// when no agent does: usage-driven suppression (Koordinator's budget) of
// the batch's groups on pool, against whatever else the machine runs. It
// knows no LS groups, so the interference signals (which need the LS
// threads) stay off; the agent runs the full controller. Pinned BE jobs
// keep their own CPUs: the loop runs only over jobs on the shared pool.
type runQoS struct {
	loop *qos.Loop
	mu   sync.Mutex
	live map[int]enforce.Group
	acts map[string]int
	last qos.Report
}

// agentRunning reports whether an agent answers on its default socket.
func agentRunning() bool {
	c := agent.NewClient(agent.DefaultSocket, "")
	c.SetTimeout(500 * time.Millisecond)
	return c.Healthy() == nil
}

// startRunQoS starts the loop over pool until ctx ends, and hooks it into
// r's groups. It returns nil when an agent runs (the agent controls BE).
func startRunQoS(ctx context.Context, r *runner.Runner, pool cpuset.CPUSet, stderr io.Writer) *runQoS {
	if agentRunning() {
		fmt.Fprintf(stderr, "corepin: qos: an agent runs on %s; it controls BE work, this run does not\n", agent.DefaultSocket)
		return nil
	}
	q := &runQoS{live: map[int]enforce.Group{}, acts: map[string]int{}}
	base := qos.ClassResources(alloc.BE, 0, cpuset.CPUSet{}, cpuset.CPUSet{})
	q.loop = &qos.Loop{Config: qos.Config{UsageOnly: true},
		Pools: func() alloc.Pools { return alloc.Pools{LS: pool} },
		BE: func() ([]enforce.Group, enforce.Resources) {
			q.mu.Lock()
			defer q.mu.Unlock()
			return slices.Collect(maps.Values(q.live)), base
		},
		LS: func() []qos.Member { return nil },
		Report: func(rep qos.Report) {
			q.mu.Lock()
			defer q.mu.Unlock()
			q.last = rep
			for _, a := range rep.Plan.Actions {
				q.acts[a]++
			}
		},
	}
	r.OnGroup = func(job int, g enforce.Group, live bool) {
		q.mu.Lock()
		defer q.mu.Unlock()
		if live {
			q.live[job] = g
		} else {
			delete(q.live, job)
		}
	}
	fmt.Fprintf(stderr, "corepin: qos: no agent runs: suppressing this BE batch on %s as the rest of the machine's load grows (threshold %.2f)\n",
		pool, qos.DefaultConfig().Threshold)
	go func() { _ = q.loop.Run(ctx) }()
	return q
}

// summary is one line of what the loop did.
func (q *runQoS) summary() string {
	q.mu.Lock()
	defer q.mu.Unlock()
	var acts []string
	for _, k := range slices.Sorted(maps.Keys(q.acts)) {
		acts = append(acts, fmt.Sprintf("%s=%d", k, q.acts[k]))
	}
	return fmt.Sprintf("corepin: qos: last BE cpuset %s (suppression %.0f%%); actions %s\n",
		q.last.Plan.CPUs, 100*q.last.Plan.Suppression, strings.Join(acts, " "))
}
