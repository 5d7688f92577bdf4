package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/corepin/corepin/agent"
	"github.com/corepin/corepin/nodecore"
)

// stateToRead is the state file ctl list and get read instead of asking an
// agent: --state when given; else, when no agent's socket is there, the
// node's state file ($COREPIN_STATE, else nodecore.DefaultState) if it
// exists — a Kubernetes node runs the NRI plugin and no agent, and its
// containers are in that file. "" means ask the agent.
func (f *ctlFlags) stateToRead(e *env) string {
	if f.state != "" {
		return f.state
	}
	if strings.Contains(f.socket, "://") {
		return ""
	}
	if _, err := os.Stat(f.socket); !errors.Is(err, fs.ErrNotExist) {
		return ""
	}
	path := os.Getenv(nodecore.EnvState)
	if path == "" {
		path = nodecore.DefaultState
	}
	if _, err := os.Stat(path); err != nil {
		return ""
	}
	fmt.Fprintf(e.stderr, "corepin: no agent at %s; showing what the state file %s holds (read-only)\n", f.socket, path)
	return path
}

// workloads lists the node's workloads: read from the state file (see
// stateToRead), or asked of the agent.
func (f *ctlFlags) workloads(e *env) ([]agent.Workload, error) {
	if path := f.stateToRead(e); path != "" {
		return f.readState(path)
	}
	c, err := f.client()
	if err != nil {
		return nil, err
	}
	ws, err := c.List()
	return ws, ctlErr(err)
}

// workload is workload name: read from the state file (see stateToRead),
// or asked of the agent.
func (f *ctlFlags) workload(e *env, name string) (agent.Workload, error) {
	if path := f.stateToRead(e); path != "" {
		ws, err := f.readState(path)
		if err != nil {
			return agent.Workload{}, err
		}
		for _, w := range ws {
			if w.Name == name {
				return w, nil
			}
		}
		return agent.Workload{}, Usagef("no workload %q in %s: corepin ctl list shows them", name, path)
	}
	c, err := f.client()
	if err != nil {
		return agent.Workload{}, err
	}
	w, err := c.Get(name)
	return w, ctlErr(err)
}

// readState is what the state file at path holds, on this machine.
func (f *ctlFlags) readState(path string) ([]agent.Workload, error) {
	t, err := openTopology("", "/")
	if err != nil {
		return nil, err
	}
	ws, err := agent.ReadState(path, t)
	if err != nil {
		return nil, fmt.Errorf("reading the state file %s: %w", path, err)
	}
	return ws, nil
}
