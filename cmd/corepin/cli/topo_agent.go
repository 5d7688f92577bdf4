package cli

import (
	"os"
	"time"

	"github.com/corepin/corepin/agent"
	"github.com/corepin/corepin/topology"
)

// topoWithAgent is `corepin topo -o json`: the topo document, on the live
// machine extended with its scheduler section and, while an agent runs,
// the agent's workloads and pools (keys added, none changed).
type topoWithAgent struct {
	topology.Doc
	Scheduler *topology.Scheduler `json:"scheduler,omitempty"`
	Pools     *agent.PoolsView    `json:"pools,omitempty"`
	Workloads []agent.Workload    `json:"workloads,omitempty"`
}

// agentView asks the agent on socket for its assignments, for drawing the
// live machine. It returns nil when no socket is there or nobody answers
// within a second: topo then shows the bare machine.
func agentView(socket string) *agent.TopologyView {
	if fi, err := os.Stat(socket); err != nil || fi.Mode()&os.ModeSocket == 0 {
		return nil
	}
	c := agent.NewClient(socket, "")
	c.SetTimeout(time.Second)
	v, err := c.Topology()
	if err != nil {
		return nil
	}
	return &v
}

// markHolders tags each CPU of an exclusive workload with its name.
func markHolders(v *agent.TopologyView) func(int) string {
	h := agent.Holders(v.Workloads)
	return func(cpu int) string { return h[cpu] }
}
