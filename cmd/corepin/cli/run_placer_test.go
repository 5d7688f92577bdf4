package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/corepin/corepin/agent"
	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/enforce/enforcetest"
	"github.com/corepin/corepin/nodecore"
	"github.com/corepin/corepin/topology"
)

// Issue 10, left for later (1): with an agent configured reserved_cpus
// "0", `corepin run --mode pinned` placed jobs on CPU 0, since it built
// its own allocator configuration. It now places with the one the agent
// recorded in the shared state file: all the CPUs the agent does not
// reserve are given, and one more is refused at once.
func TestPinnedRunAvoidsTheAgentsReservedCPUs(t *testing.T) {
	topo, err := topology.Discover(os.DirFS("/"))
	if err != nil {
		t.Fatal(err)
	}
	allowed := topo.Allowed()
	if allowed.Size() < 2 {
		t.Skipf("skipping: needs 2 allowed CPUs, have %s", allowed)
	}
	reserved := cpuset.New(allowed.Min()) // CPU 0 on most machines
	free := allowed.Difference(reserved)
	state := filepath.Join(t.TempDir(), "state.db")
	n, err := agent.Open(agent.Options{StatePath: state, Topology: topo, Driver: enforcetest.NoGroups{}, Alloc: alloc.NodeSettings{Reserved: reserved}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	t.Setenv(nodecore.EnvState, state)

	run := func(cpus int) (stdout, stderr string, code int) {
		return resultsCLI(t, "run", "--no-db", "--driver", "affinity", "--mode", "pinned", "--cpus", strconv.Itoa(cpus), "-o", "json",
			"--", "grep", "Cpus_allowed_list", "/proc/self/status")
	}
	out, stderr, code := run(free.Size())
	var job struct {
		Cpuset     string `json:"cpuset"`
		StdoutTail string `json:"stdout_tail"`
		ExitCode   int    `json:"exit_code"`
	}
	if err := json.Unmarshal([]byte(out), &job); err != nil || code != 0 {
		t.Fatalf("run --cpus %d: exit %d, stdout %q (%v), stderr %q", free.Size(), code, out, err, stderr)
	}
	got, err := cpuset.Parse(job.Cpuset)
	if err != nil || !got.Equals(free) {
		t.Errorf("job placed on %q, want %s: every allowed CPU but the agent's reserved %s", job.Cpuset, free, reserved)
	}
	if !strings.Contains(job.StdoutTail, "Cpus_allowed_list:\t"+free.String()+"\n") {
		t.Errorf("job ran with %q, want Cpus_allowed_list %s", job.StdoutTail, free)
	}
	// One more CPU than the agent leaves: refused with the allocator's
	// reason, at once (the run would otherwise wait 10 minutes for CPUs
	// that can never come free).
	out, stderr, code = run(free.Size() + 1)
	var refused struct {
		ExitCode int    `json:"exit_code"`
		Error    string `json:"error"`
	}
	if err := json.Unmarshal([]byte(out), &refused); err != nil || code != 1 || refused.ExitCode != -1 ||
		!strings.HasPrefix(refused.Error, "placing job 0: rejected: ") {
		t.Errorf("run --cpus %d: exit %d, stdout %q (%v), stderr %q; want exit 1 and job 0 refused: \"placing job 0: rejected: ...\"",
			free.Size()+1, code, out, err, stderr)
	}
}
