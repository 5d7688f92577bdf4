package cli

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/corepin/corepin/agent"
	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/nodecore"
	"github.com/corepin/corepin/topology"
)

// TestCtlReadsTheStateFile: on a Kubernetes node no agent runs, and the
// NRI plugin's containers are in the state file; ctl list and get show
// them from the file (--state, or by default when no agent's socket is
// there), read-only.
func TestCtlReadsTheStateFile(t *testing.T) {
	topo, err := topology.Open("/")
	if err != nil {
		t.Skipf("this machine's topology: %v", err)
	}
	state := filepath.Join(t.TempDir(), "agent.db")
	c, err := nodecore.OpenContainers(state, topo, alloc.NodeSettings{})
	if err != nil {
		t.Fatal(err)
	}
	half := 0.5
	ca, err := c.Admit(nodecore.ContainerRef{ID: "c0ffee", Pod: "default/web", PodUID: "u-1", Name: "app"},
		nodecore.Spec{QoS: "LS", CPUs: &half}, topo.Allowed())
	if err != nil {
		t.Fatalf("admitting a container as the NRI plugin does: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	check := func(name, stdout, stderr string, code int) {
		t.Helper()
		var doc struct{ Workloads []agent.Workload }
		if code != 0 || json.Unmarshal([]byte(stdout), &doc) != nil || len(doc.Workloads) != 1 {
			t.Fatalf("%s: exit %d, stdout %q, stderr %q; want the one container as JSON", name, code, stdout, stderr)
		}
		w := doc.Workloads[0]
		if w.Source != "container" || w.QoS != "LS" || w.Cpuset != ca.CPUs.String() || w.CPUs != 0.5 || w.Pod != "default/web" || w.Container != "app" {
			t.Errorf("%s: %+v, want the container app of pod default/web (LS, 0.5 CPUs) on the shared pool %s", name, w, ca.CPUs)
		}
	}
	stdout, stderr, code := runCLI(t, "ctl", "list", "--state", state, "-o", "json")
	check("--state", stdout, stderr, code)

	t.Setenv(nodecore.EnvState, state)
	stdout, stderr, code = runCLI(t, "ctl", "--socket", filepath.Join(t.TempDir(), "none.sock"), "list", "-o", "json")
	check("no agent's socket", stdout, stderr, code)
	if !strings.Contains(stderr, "no agent at") || !strings.Contains(stderr, state) {
		t.Errorf("no agent's socket: stderr %q, want a note naming the file read", stderr)
	}

	if stdout, _, code := runCLI(t, "ctl", "list", "--state", state); code != 0 || !strings.Contains(stdout, "POD") ||
		!regexp.MustCompile(`container\s+\S+\s+default/web\s+app\n`).MatchString(stdout) {
		t.Errorf("ctl list --state as text: exit %d, %q; want the pod and container named in columns of their own", code, stdout)
	}

	var doc struct{ Workloads []agent.Workload }
	json.Unmarshal([]byte(stdout), &doc)
	name := doc.Workloads[0].Name
	if stdout, _, code := runCLI(t, "ctl", "get", name, "--state", state); code != 0 || !strings.Contains(stdout, name) {
		t.Errorf("ctl get %s --state: exit %d, %q", name, code, stdout)
	}
	if _, stderr, code := runCLI(t, "ctl", "get", "nope", "--state", state); code != 2 || !strings.Contains(stderr, `no workload "nope"`) {
		t.Errorf("ctl get of an unknown name: exit %d, %q; want 2 and what to do", code, stderr)
	}
	if _, stderr, code := runCLI(t, "ctl", "list", "--state", filepath.Join(t.TempDir(), "missing.db")); code == 0 || !strings.Contains(stderr, "missing.db") {
		t.Errorf("a missing --state file: exit %d, %q; want an error naming it", code, stderr)
	}
}
