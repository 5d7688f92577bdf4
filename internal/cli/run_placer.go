package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corepin/corepin/agent"
	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/enforce"
	"github.com/corepin/corepin/runner"
	"github.com/corepin/corepin/topology"
)

// EnvState names the state file pinned runs share with each other and
// with the agent (default agent.DefaultState).
const EnvState = "COREPIN_STATE"

// placeWait bounds how long a pinned job waits for CPUs that other runs
// or the agent hold.
const placeWait = 10 * time.Minute

// runPlacer returns where this run's pinned jobs take their CPUs from: the
// state file shared with other runs and the agent, so that no CPU is ever
// held by two of them (issue 10 §2) -- $COREPIN_STATE if set, else the
// agent's state file if an agent was ever run here -- or, where there is
// none, this run's own allocator (the behaviour before the agent). close
// releases the state file.
func runPlacer(topo *topology.Topology, driver enforce.Driver, stderr io.Writer) (p runner.Placer, closeFn func() error, err error) {
	path := os.Getenv(EnvState)
	if path == "" {
		if _, err := os.Stat(agent.DefaultState); err != nil {
			p, err := runner.NewAllocPlacer(topo)
			return p, func() error { return nil }, err
		}
		path = agent.DefaultState
	}
	if unix.Access(filepath.Dir(path), unix.W_OK) != nil {
		fmt.Fprintf(stderr, "corepin: note: cannot write %s: pinned CPUs are not shared with other runs or the agent (set %s)\n", filepath.Dir(path), EnvState)
		p, err := runner.NewAllocPlacer(topo)
		return p, func() error { return nil }, err
	}
	lister, _ := driver.(enforce.Lister)
	cfg := alloc.Config{Reserved: topo.Online().Difference(topo.Allowed())}
	sp, err := agent.OpenStatePlacer(path, topo, cfg, placeWait, lister)
	if err != nil {
		return nil, nil, &UsageError{Err: fmt.Errorf("opening the shared state %s: %w", path, err)}
	}
	return sp, sp.Close, nil
}
