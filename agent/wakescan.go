package agent

import (
	"log/slog"
	"slices"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/nodecore"
	"github.com/corepin/corepin/wakescan"
)

// openWakeScan opens the agent's wake_scan follower
// (nodecore.OpenWakeFollower): it holds the switch while the node has a
// BE workload (with full), releases it when the last one ends and when
// the agent stops, and undoes what a crashed holder left.
func openWakeScan(mode wakescan.Mode, state, root string, log *slog.Logger) (*wakescan.Follower, error) {
	return nodecore.OpenWakeFollower(state, mode, root, "agent", log)
}

// hasBE reports whether ws holds a BE workload (a command, adopted
// process or cgroup, or a container of the NRI plugin).
func hasBE(ws []Workload) bool {
	return slices.ContainsFunc(ws, func(w Workload) bool { return w.QoS == string(alloc.BE) })
}
