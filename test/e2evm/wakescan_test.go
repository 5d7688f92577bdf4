package e2evm

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// wakeScanShape shows the node setting wake_scan (issue 28 §2) on a
// real kernel's scheduler features: refused with debugfs unmounted (as on
// a host without it), then, with debugfs mounted, SIS_UTIL turned off
// while BE work runs and the value found restored when the BE work ends,
// when the agent stops, and when the agent starts again after a SIGKILL
// (and after a run's SIGKILL); a run ending beside the agent's BE work
// leaves the switch to the agent (the last BE user restores). A small
// machine: 2 CPUs, no NUMA, the 6.12 kernel. TestVMs does not boot it;
// TestVMWakeScan does.
var wakeScanShape = shape{
	name: "wake-scan", kernel: kernel612, mem: 512, cg: "v2", qemu: []string{"-smp", "2"},
	script: wakeScanScript,
}

const wakeScanScript = `
F=/sys/kernel/debug/sched/features
export COREPIN_STATE=/var/lib/corepin/agent.db COREPIN_SOCKET=/run/corepin.sock
# sis prints SIS_UTIL or NO_SIS_UTIL as the kernel's features say.
sis() { tr ' ' '\n' < $F | grep -x -E 'NO_SIS_UTIL|SIS_UTIL'; }
sis_is() { [ "$(sis)" = "$1" ]; }
waitfor() { _i=0; until "$@"; do [ $_i -ge 240 ] && return 1; _i=$((_i+1)); sleep 0.25; done; }
block refused corepin run --no-db --qos BE --wake-scan full -- echo ran

mount -t debugfs debugfs /sys/kernel/debug
block found sis
block run.during corepin run --no-db --qos BE --wake-scan full -- sh -c "tr ' ' '\n' < $F | grep -x -E 'NO_SIS_UTIL|SIS_UTIL'"
block run.after sis

# A run SIGKILLed while its BE job runs: the record keeps the change.
corepin run --no-db --qos BE --wake-scan full -- sleep 100000 >/tmp/run.log 2>&1 & R=$!
waitfor sis_is NO_SIS_UTIL
J=$(cat $(find /sys/fs/cgroup/corepin-be -name cgroup.procs) 2>/dev/null)
kill -9 $R; kill -9 $J; wait $R
block run.killed sis

printf 'reconcile_interval: 1s\nwake_scan: full\n' > /etc/agent.yaml
# agent starts the agent and returns once its socket answers. The socket
# is made after the agent's start-up sync of wake_scan; corepin ctl list
# alone is no sign of it: with no socket it reads the state file, and a
# SIGKILLed agent leaves its socket behind.
agent() {
  rm -f $COREPIN_SOCKET
  corepin agent --socket $COREPIN_SOCKET --state $COREPIN_STATE --config /etc/agent.yaml >>/tmp/agent.log 2>&1 &
  AGENT=$!
  i=0; until [ -S $COREPIN_SOCKET ] && corepin ctl list >/dev/null 2>&1; do
    if ! kill -0 $AGENT 2>/dev/null || [ $i -gt 240 ]; then tail -n 5 /tmp/agent.log >&2; return 1; fi
    i=$((i+1)); sleep 0.25
  done
}
# The agent starts: the dead run was the last holder, so it restores.
block agent.start agent
block agent.start.sis sis
corepin ctl create be1 --cpus 1 --qos BE -- sleep 100000 >/dev/null
block agent.be sis
corepin ctl delete be1 >/dev/null
block agent.be.ended sis

# A run beside the agent's BE work ends: the agent still holds.
corepin ctl create be2 --cpus 1 --qos BE -- sleep 100000 >/dev/null
block shared.run corepin run --no-db --qos BE --wake-scan full -- true
block shared.after sis

# SIGKILL while BE work runs: the change stays; the BE work ends; the
# restarted agent restores.
B=$(cat /sys/fs/cgroup/corepin-agent/*be2/cgroup.procs | head -n 1)
kill -9 $AGENT; wait $AGENT
block agent.killed sis
kill -9 $B
block agent.restart agent
block agent.restart.sis sis

# The agent stops while BE work runs: it restores.
corepin ctl create be3 --cpus 1 --qos BE -- sleep 100000 >/dev/null
block agent.be3 sis
kill -TERM $AGENT; wait $AGENT
block agent.stopped sis
block agent.log sh -c 'grep -i wake_scan /tmp/agent.log; true'
`

// TestVMWakeScan boots wakeScanShape (with COREPIN_E2E_VM_ONLY set, only
// if it names wake-scan) and checks each step's SIS_UTIL as the kernel's
// features file shows it.
func TestVMWakeScan(t *testing.T) {
	if only := strings.Fields(strings.ReplaceAll(getenv("COREPIN_E2E_VM_ONLY"), ",", " ")); len(only) > 0 && !slices.Contains(only, wakeScanShape.name) {
		t.Skip("COREPIN_E2E_VM_ONLY does not name wake-scan")
	}
	v := boot(t, wakeScanShape)
	if refused := v.get(t, "refused"); !strings.Contains(refused, "ran") {
		t.Errorf("refused: the batch did not run: %q", refused)
	}
	const note = "wake_scan full changes nothing: no scheduler features file (mount debugfs)"
	if n := strings.Count(v.blocks["refused.err"].out, note); n != 1 {
		t.Errorf("refused: stderr says %q %d times, want once:\n%s", note, n, v.blocks["refused.err"].out)
	}
	var steps []string
	for _, step := range []struct{ block, want, why string }{
		{"found", "SIS_UTIL", "the kernel's default"},
		{"run.during", "NO_SIS_UTIL", "the BE batch's job reads it while the batch runs"},
		{"run.after", "SIS_UTIL", "the batch ended"},
		{"run.killed", "NO_SIS_UTIL", "the run was SIGKILLed: the change stays, recorded"},
		{"agent.start.sis", "SIS_UTIL", "the agent started: the killed run was the last holder"},
		{"agent.be", "NO_SIS_UTIL", "a BE workload runs"},
		{"agent.be.ended", "SIS_UTIL", "the BE workload was deleted"},
		{"shared.after", "NO_SIS_UTIL", "a run ended beside the agent's BE workload, which still holds"},
		{"agent.killed", "NO_SIS_UTIL", "the agent was SIGKILLed: the change stays, recorded"},
		{"agent.restart.sis", "SIS_UTIL", "the agent restarted after the SIGKILL and its BE work ended"},
		{"agent.be3", "NO_SIS_UTIL", "a BE workload runs"},
		{"agent.stopped", "SIS_UTIL", "the agent stopped"},
	} {
		// The first line: run.during's job prints it before the run's table.
		got, _, _ := strings.Cut(strings.TrimSpace(v.get(t, step.block)), "\n")
		if got != step.want {
			t.Errorf("%s: SIS_UTIL shows as %q, want %s (%s)", step.block, got, step.want, step.why)
		}
		steps = append(steps, fmt.Sprintf("%-18s %-12s %s", step.block, got, step.why))
	}
	t.Logf("kernel %s, each step's features:\n%s", v.kernel, strings.Join(steps, "\n"))
	v.get(t, "shared.run")
	t.Logf("agent log:\n%s", v.get(t, "agent.log"))
	t.Logf("refused run's stderr:\n%s", v.blocks["refused.err"].out)
}
