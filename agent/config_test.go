package agent

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseConfigShippedExample(t *testing.T) {
	f, err := os.Open("../deploy/agent.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c, err := ParseConfig(f)
	if err != nil {
		t.Fatalf("ParseConfig(deploy/agent.yaml) = %v", err)
	}
	want := Config{Socket: DefaultSocket, State: DefaultState, ReservedCPUs: "0", Policy: "corepin",
		PolicyOptions: []string{"full-pcpus-only"}, TopologyPolicy: "best-effort", CgroupRoot: DefaultCgroupRoot,
		ReconcileInterval: 10 * time.Second, LogFormat: "text", WakeScan: "default"}
	if d := cmp.Diff(want, c); d != "" {
		t.Errorf("config (-want +got):\n%s", d)
	}
}

func TestParseConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, wantIn string
	}{
		{name: "unknown key", yaml: "reserved_cpu: 0\n", wantIn: "reserved_cpu"},
		{name: "tcp without token", yaml: "listen: 0.0.0.0:7411\n", wantIn: "token_file"},
		{name: "bad reserved", yaml: "reserved_cpus: 3-0\n", wantIn: "reserved_cpus"},
		{name: "bad policy", yaml: "policy: static\n", wantIn: "policy"},
		{name: "bad topology policy", yaml: "topology_policy: strict\n", wantIn: "topology_policy"},
		{name: "traversal root", yaml: "cgroup_root: ../x\n", wantIn: "cgroup_root"},
		{name: "two documents", yaml: "policy: corepin\n---\npolicy: kubelet\n", wantIn: "more than one"},
		{name: "tiny interval", yaml: "reconcile_interval: 1ms\n", wantIn: "reconcile_interval"},
		{name: "bad wake_scan", yaml: "wake_scan: on\n", wantIn: "want default or full"},
		{name: "bad sched_ext mode", yaml: "sched_ext:\n  mode: rusty\n", wantIn: "want off or layered"},
		{name: "sched_ext relative binary", yaml: "sched_ext:\n  mode: layered\n  binary: scx_layered\n", wantIn: "absolute path"},
		{name: "sched_ext binary not a file", yaml: "sched_ext:\n  mode: layered\n  binary: /\n", wantIn: "not a regular file"},
		{name: "sched_ext unknown key", yaml: "sched_ext:\n  mod: layered\n", wantIn: "mod"},
		{name: "huge", yaml: strings.Repeat("#", MaxConfig+1), wantIn: "larger"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig(strings.NewReader(tc.yaml))
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.wantIn) {
				t.Errorf("ParseConfig = %v, want ErrInvalid mentioning %q", err, tc.wantIn)
			}
		})
	}
}
