package e2evm

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// partitionEnv is COREPIN_E2E_PARTITION: unset skips TestVMPartition
// (make e2e-vm-partition sets it; make e2e-vm leaves it out).
const partitionEnv = "COREPIN_E2E_PARTITION"

// partJob is the job of the partition machines: it writes what the kernel
// says of its own group while it runs (its partition state, exclusive and
// effective CPUs, corepin root's exclusive CPUs, the root cgroup's
// isolated CPUs) and its affinity, as key=value lines.
const partJob = `cg=$(sed -n "s/^0:://p" /proc/self/cgroup); d=/sys/fs/cgroup$cg
{ echo "partition=$(cat $d/cpuset.cpus.partition)"
  echo "exclusive=$(cat $d/cpuset.cpus.exclusive 2>/dev/null)"
  echo "effective=$(cat $d/cpuset.cpus.effective)"
  echo "corepin.exclusive=$(cat $(dirname $d)/cpuset.cpus.exclusive 2>/dev/null)"
  echo "root.isolated=$(cat /sys/fs/cgroup/cpuset.cpus.isolated 2>/dev/null)"
  grep Cpus_allowed_list /proc/self/status | sed "s/:[[:space:]]*/=/"; } > /tmp/part.job`

// partAfter prints, after a run, what stays of its partitions: the root
// cgroup's isolated CPUs, corepin root's exclusive CPUs, and its groups.
const partAfter = `sh -c 'echo "root.isolated=$(cat /sys/fs/cgroup/cpuset.cpus.isolated 2>/dev/null)"
echo "corepin.exclusive=$(cat /sys/fs/cgroup/corepin/cpuset.cpus.exclusive 2>/dev/null)"
echo "groups=$(cd /sys/fs/cgroup/corepin && ls -d run-* 2>/dev/null | wc -l)"'`

// partAgent runs the agent with two load_balance false workloads, kills
// it (SIGKILL), kills one workload's process while it is down, starts it
// again, then deletes the other: agent.N blocks print each workload's
// partition state and exclusive CPUs, corepin-agent's exclusive CPUs and
// the root's isolated CPUs.
const partAgent = `
export COREPIN_SOCKET=/run/corepin.sock
agent() {
  corepin agent --socket $COREPIN_SOCKET --state /var/lib/corepin/agent.db >>/tmp/agent.log 2>&1 &
  AGENT=$!
  # ctl list reads the state file while no socket is there: wait for it.
  i=0; until [ -S $COREPIN_SOCKET ] && corepin ctl list >/dev/null 2>&1; do
    if ! kill -0 $AGENT 2>/dev/null || [ $i -gt 120 ]; then tail -n 5 /tmp/agent.log >&2; return 1; fi
    i=$((i+1)); sleep 0.5
  done
}
parts() {
  for w in lat gone; do
    d=$(ls -d /sys/fs/cgroup/corepin-agent/*-$w 2>/dev/null | head -n 1)
    if [ -n "$d" ]; then echo "$w=$(cat $d/cpuset.cpus.partition) $(cat $d/cpuset.cpus.exclusive)"; else echo "$w=none"; fi
  done
  echo "agent.exclusive=$(cat /sys/fs/cgroup/corepin-agent/cpuset.cpus.exclusive)"
  echo "root.isolated=$(cat /sys/fs/cgroup/cpuset.cpus.isolated)"
}
block agent.start agent
block agent.lat corepin ctl create lat --cpus 2 --qos LSE --no-load-balance -o json -- sleep 100000
block agent.gone corepin ctl create gone --cpus 1 --qos LSE --no-load-balance -o json -- sleep 100000
block agent.held parts
kill -9 $AGENT; wait $AGENT 2>/dev/null
kill -9 $(cat $(ls -d /sys/fs/cgroup/corepin-agent/*-gone)/cgroup.procs)
block agent.restart agent
block agent.reconciled parts
block agent.delete corepin ctl delete lat
block agent.deleted parts
block agent.topo corepin topo -o json
block agent.log cat /tmp/agent.log
`

// partitionShapes are two machines of 4 CPUs under cgroup v2. On 6.12
// (cpuset.cpus.exclusive, cpuset.cpus.isolated) a `corepin run --qos LSE
// --no-load-balance` job runs in an isolated partition that is gone when
// it ends, and a job asking for every CPU is refused with the kernel's
// reason, then the agent's workloads go through a SIGKILL and restart
// (partAgent); on 6.1 (no cpuset.cpus.exclusive) the partition cannot form
// below corepin's root and the job is refused with the kernel's reason.
var partitionShapes = []shape{{
	name: "part-6.12", kernel: kernel612, mem: 512, cg: "v2", qemu: []string{"-smp", "4"},
	script: `
echo "+cpuset +cpu" > /sys/fs/cgroup/cgroup.subtree_control
block part.run corepin run --no-db -o json --qos LSE --cpus 2 --no-load-balance --no-cpu-quota -- sh -c '` + partJob + `'
block part.job cat /tmp/part.job
block part.after ` + partAfter + `
block part.all corepin run --no-db -o json --qos LSE --cpus 4 --no-load-balance -- true
block part.all.after ` + partAfter + `
` + partAgent,
}, {
	name: "part-6.1", kernel: kernel61, mem: 512, cg: "v2", qemu: []string{"-smp", "4"},
	script: `
echo "+cpuset +cpu" > /sys/fs/cgroup/cgroup.subtree_control
block part.refused corepin run --no-db -o json --qos LSE --cpus 2 --no-load-balance -- true
block part.after ` + partAfter + `
`,
}}

// TestVMPartition (make e2e-vm-partition): issue 31 §3's "isolated
// partition created and removed with the workload; a refusal where the
// CPUs cannot form one, with its reason", read from the kernel's own
// files in the machine. State only, never timing.
func TestVMPartition(t *testing.T) {
	if os.Getenv(partitionEnv) == "" {
		t.Skipf("%s is unset: make e2e-vm-partition runs this test", partitionEnv)
	}
	bin, busybox := initrdParts(t)
	ird, err := buildInitrd(bin, busybox, partitionShapes, nil)
	if err != nil {
		t.Fatalf("building the initramfs: %v", err)
	}
	type row struct {
		Cpuset   string `json:"cpuset"`
		ExitCode int    `json:"exit_code"`
		Error    string `json:"error"`
	}
	rowOf := func(t *testing.T, v *vm, name string) row {
		t.Helper()
		b, ok := v.blocks[name]
		if !ok {
			t.Fatalf("no block %q; blocks %v", name, v.order)
		}
		var r row
		line, _, _ := strings.Cut(b.out, "\n")
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%s: %q: %v; stderr:\n%s", name, b.out, err, v.blocks[name+".err"].out)
		}
		return r
	}
	// nothingLeft: no isolated CPU, nothing exclusive on corepin's root,
	// no group.
	nothingLeft := func(t *testing.T, v *vm, name string) {
		t.Helper()
		after := kv(v.get(t, name))
		for k, want := range map[string]string{"root.isolated": "", "corepin.exclusive": "", "groups": "0"} {
			if after[k] != want {
				t.Errorf("%s: %s = %q, want %q (all of it: %v)", name, k, after[k], want, after)
			}
		}
	}
	t.Run("6.12", func(t *testing.T) {
		s := partitionShapes[0]
		s.initrd = ird
		v := boot(t, s)
		run := rowOf(t, v, "part.run")
		if run.ExitCode != 0 || run.Error != "" {
			t.Fatalf("the --no-load-balance job: exit %d, error %q; stderr:\n%s", run.ExitCode, run.Error, v.blocks["part.run.err"].out)
		}
		job := kv(v.get(t, "part.job"))
		t.Logf("while the job ran: %v", job)
		for k, want := range map[string]string{"partition": "isolated", "exclusive": run.Cpuset, "effective": run.Cpuset,
			"corepin.exclusive": run.Cpuset, "root.isolated": run.Cpuset, "Cpus_allowed_list": run.Cpuset} {
			if job[k] != want {
				t.Errorf("while the job ran on %s: %s = %q, want %q", run.Cpuset, k, job[k], want)
			}
		}
		nothingLeft(t, v, "part.after")
		all := rowOf(t, v, "part.all")
		t.Logf("a job on every CPU: exit %d, error %q", all.ExitCode, all.Error)
		if all.ExitCode == 0 || !strings.Contains(all.Error, "cannot take the CPUs out of load balancing") ||
			!strings.Contains(all.Error, `cpuset.cpus.partition "isolated invalid (`) {
			t.Errorf("a job on every CPU: exit %d, error %q, want it refused with the kernel's reason (isolated invalid (...))", all.ExitCode, all.Error)
		}
		nothingLeft(t, v, "part.all.after")
		checkAgentPartitions(t, v)
	})
	t.Run("6.1", func(t *testing.T) {
		s := partitionShapes[1]
		s.initrd = ird
		v := boot(t, s)
		r := rowOf(t, v, "part.refused")
		t.Logf("refused: exit %d, error %q", r.ExitCode, r.Error)
		want := `the kernel left cpuset.cpus.partition "isolated invalid (`
		if r.ExitCode == 0 || !strings.Contains(r.Error, want) || !strings.Contains(r.Error, "no cpuset.cpus.exclusive (Linux 6.7)") {
			t.Errorf("on 6.1: exit %d, error %q, want it refused saying %q and that the kernel lacks cpuset.cpus.exclusive", r.ExitCode, r.Error, want)
		}
		nothingLeft(t, v, "part.after")
	})
}

// checkAgentPartitions: the agent's load_balance false workloads are
// isolated partitions; a SIGKILLed agent's restart keeps the one still
// running and gives back the one whose process died meanwhile; a delete
// gives back the last.
func checkAgentPartitions(t *testing.T, v *vm) {
	t.Helper()
	cpus := func(name string) string {
		var w struct {
			Cpuset      string `json:"cpuset"`
			LoadBalance *bool  `json:"load_balance"`
		}
		if err := json.Unmarshal([]byte(v.get(t, name)), &w); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if w.LoadBalance == nil || *w.LoadBalance {
			t.Errorf("%s shows load_balance %v, want false", name, w.LoadBalance)
		}
		return w.Cpuset
	}
	lat, gone := cpus("agent.lat"), cpus("agent.gone")
	both := v.get(t, "agent.held")
	t.Logf("agent workloads lat on %s, gone on %s; held:\n%s", lat, gone, both)
	for _, step := range []struct {
		block string
		want  map[string]string
	}{
		{"agent.held", map[string]string{"lat": "isolated " + lat, "gone": "isolated " + gone}},
		{"agent.reconciled", map[string]string{"lat": "isolated " + lat, "gone": "none", "agent.exclusive": lat, "root.isolated": lat}},
		{"agent.deleted", map[string]string{"lat": "none", "gone": "none", "agent.exclusive": "", "root.isolated": ""}},
	} {
		got := kv(v.get(t, step.block))
		for k, want := range step.want {
			if got[k] != want {
				t.Errorf("%s: %s = %q, want %q (all: %v)", step.block, k, got[k], want, got)
			}
		}
	}
	var topo struct {
		Pools    struct{ LS, BE string } `json:"pools"`
		Isolated string                  `json:"isolated"`
	}
	if err := json.Unmarshal([]byte(v.get(t, "agent.topo")), &topo); err != nil {
		t.Fatalf("agent.topo: %v", err)
	}
	t.Logf("after the delete: isolated %q, pools %+v", topo.Isolated, topo.Pools)
	// The agent was started again while lat and gone held partitions:
	// their CPUs are the shared pools' again once both are gone.
	if topo.Pools.LS != "0-3" || topo.Pools.BE != "0-3" {
		t.Errorf("after the delete the agent's pools are LS %q, BE %q; want 0-3 (no CPU of its own partitions kept out)", topo.Pools.LS, topo.Pools.BE)
	}
	if t.Failed() {
		t.Logf("agent log:\n%s", v.blocks["agent.log"].out)
	}
}
