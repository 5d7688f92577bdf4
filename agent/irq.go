package agent

import (
	"log/slog"

	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/irq"
	"github.com/corepin/corepin/nodecore"
)

// irqFollower keeps the CPUs of the agent's irq_isolate workloads clear
// of movable device interrupts (nodecore.IRQFollower, holder "agent",
// one id per workload). The NRI plugin's containers are not the agent's
// to hold: `corepin irq sync` holds them (holder "nri").
type irqFollower struct{ *nodecore.IRQFollower }

// openIRQs opens the agent's irq follower on the state file at state for
// the machine whose "/" is root.
func openIRQs(state, root string, log *slog.Logger) (*irqFollower, error) {
	f, err := nodecore.OpenIRQFollower(state, irq.Options{Root: root, Name: "agent", BannedFile: nodecore.BannedFile(root)}, log)
	if err != nil {
		return nil, err
	}
	return &irqFollower{f}, nil
}

// Sync keeps the CPUs of ws's irq_isolate workloads clear, and only
// those (never a container's: the plugin's side holds those).
func (f *irqFollower) Sync(ws []Workload) {
	held := map[string]cpuset.CPUSet{}
	for _, w := range ws {
		if !w.IRQIsolate || w.Deleting || w.Source == "container" {
			continue
		}
		if c, err := cpuset.Parse(w.Cpuset); err == nil && !c.IsEmpty() {
			held[w.Name] = c
		}
	}
	f.IRQFollower.Sync(held)
}
