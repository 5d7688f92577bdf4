package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/enforce"
	"github.com/corepin/corepin/nodecore"
	"github.com/corepin/corepin/runner"
	"github.com/corepin/corepin/topology"
)

// EnvState names the state file pinned runs share with each other and
// with the agent (default nodecore.DefaultState).
const EnvState = "COREPIN_STATE"

// placeWait bounds how long a pinned job waits for CPUs that other runs
// or the agent hold.
const placeWait = 10 * time.Minute

// sharedState returns the state file pinned runs share with each other
// and the agent: env ($COREPIN_STATE) if set; else system (the agent's
// state file), creating its directory if this user may; else user (a
// file under the user's own state directory, for runs without root),
// creating its directory. Only these default directories are ever
// created. It returns "" where none can be written.
func sharedState(env, system, user string) string {
	if env != "" {
		return env
	}
	for _, p := range []string{system, user} {
		if p == "" {
			continue
		}
		dir := filepath.Dir(p)
		if os.MkdirAll(dir, 0o755) == nil && unix.Access(dir, unix.W_OK) == nil {
			return p
		}
	}
	return ""
}

// userState is the shared state file of a user who cannot write the
// agent's: $XDG_STATE_HOME/corepin/state.db (an absolute XDG_STATE_HOME
// only), else ~/.local/state/corepin/state.db.
func userState() string {
	if d := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "corepin", "state.db")
	}
	home, err := os.UserHomeDir()
	if err != nil || !filepath.IsAbs(home) {
		return ""
	}
	return filepath.Join(home, ".local", "state", "corepin", "state.db")
}

// runPlacer returns where this run's pinned jobs take their CPUs from: the
// state file shared with other runs and the agent (sharedState), so that
// no CPU is ever held by two of them even with no agent running (issue 10
// §2), or, only where no state file can be written at all, this run's own
// allocator, said in notes. close releases the state file.
func runPlacer(topo *topology.Topology, driver enforce.Driver, notes *runNotes) (p runner.Placer, closeFn func() error, err error) {
	path := sharedState(os.Getenv(EnvState), nodecore.DefaultState, userState())
	if path == "" || unix.Access(filepath.Dir(path), unix.W_OK) != nil {
		notes.add("CPUs not shared with other runs (set "+EnvState+")",
			fmt.Sprintf("no writable state file (%q): pinned CPUs are not shared with other runs or the agent (set %s)", path, EnvState))
		p, err := runner.NewAllocPlacer(topo)
		return p, func() error { return nil }, err
	}
	lister, _ := driver.(enforce.Lister)
	// The run's own view: the CPUs outside its cpuset cgroup are not its
	// to give. Where the agent or the NRI plugin opened the file, the
	// placer adds their reserved CPUs, policy and options (the
	// configuration they recorded in it), so jobs never land on CPUs the
	// agent keeps for the system.
	cfg := alloc.NodeSettings{Reserved: topo.Online().Difference(topo.Allowed())}
	sp, err := nodecore.OpenStatePlacer(path, topo, cfg, placeWait, lister)
	if err != nil {
		err = fmt.Errorf("opening the shared state %s: %w", path, err)
		if badStoreFile(err) || errors.Is(err, nodecore.ErrInvalid) {
			return nil, nil, &UsageError{Err: err}
		}
		return nil, nil, err
	}
	return sp, sp.Close, nil
}
