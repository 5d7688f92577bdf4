package e2evm

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var getenv = os.Getenv

// agentRun is the shell of the machines that run corepin agent: its
// token and socket; agent starts it on /etc/agent.yaml (state in
// /var/lib/corepin/agent.db, log in /tmp/agent.log) and waits until its
// API answers (AGENT is its pid); metrics PREFIX prints the lines of its
// metrics that start with PREFIX.
const agentRun = `echo e2evm-token-0123456789 > /etc/agent.token
export COREPIN_SOCKET=/run/corepin.sock
agent() {
  corepin agent --socket $COREPIN_SOCKET --state /var/lib/corepin/agent.db --config /etc/agent.yaml >>/tmp/agent.log 2>&1 &
  AGENT=$!
  i=0; until corepin ctl list >/dev/null 2>&1; do
    if ! kill -0 $AGENT 2>/dev/null || [ $i -gt 240 ]; then tail -n 5 /tmp/agent.log >&2; return 1; fi
    i=$((i+1)); sleep 0.5
  done
}
metrics() {
  wget -q -O - --header "Authorization: Bearer $(cat /etc/agent.token)" http://127.0.0.1:9100/metrics | grep "^$1"
  true
}
`

// agentScript runs corepin agent on cgroup v2: admissions, a SIGKILL
// mid-churn and a restart, the adoption of a running process, the QoS
// loop's CFS burst on a throttled LS workload, and an LSE workload's CPU
// taken offline and brought back.
const agentScript = `
cat > /etc/agent.yaml <<'EOF'
reconcile_interval: 1s
listen: 127.0.0.1:9100
token_file: /etc/agent.token
qos:
  enabled: true
  burst: true
EOF
` + agentRun + `live() {
  for d in /sys/fs/cgroup/corepin-agent/*/; do
    [ -d "$d" ] || continue
    echo "$(basename $d) cpus=$(cat $d/cpuset.cpus) eff=$(cat $d/cpuset.cpus.effective) procs=$(wc -l < $d/cgroup.procs)"
  done
}
group() { ls -d /sys/fs/cgroup/corepin-agent/*-$1 | head -n 1; }
# waitfor CMD...: until CMD succeeds, every 0.5 s, for up to 120 s.
waitfor() { _i=0; until "$@"; do [ $_i -ge 240 ] && return 1; _i=$((_i+1)); sleep 0.5; done; }
# offline_cpus CPUS: the agent shows lse1's offline CPUs as CPUS.
offline_cpus() {
  corepin ctl get lse1 -o json >/tmp/lse1.json || return 1
  if [ -n "$1" ]; then tr -d ' \n' </tmp/lse1.json | grep -q "\"offline_cpus\":\"$1\""
  else ! tr -d ' \n' </tmp/lse1.json | grep -q '"offline_cpus":"[0-9]'; fi
}
block agent.start agent
block create.lse1 corepin ctl create lse1 --cpus 2 --qos LSE -o json -- sleep 100000
block create.ls1 corepin ctl create ls1 --cpus 0.5 --qos LS -o json -- sh -c 'while :; do :; done'
block create.be1 corepin ctl create be1 --cpus 1 --qos BE -o json -- sleep 100000
( for i in 1 2 3 4 5 6; do
    corepin ctl create c$i --cpus 1 --qos LSE -- sleep 100000
    [ $i -gt 2 ] && corepin ctl delete c$((i-2))
  done ) >/tmp/churn.log 2>&1 &
CHURN=$!
# SIGKILL once the churn has admitted c2, while it goes on.
i=0; until corepin ctl get c2 >/dev/null 2>&1 || [ $i -gt 120 ]; do i=$((i+1)); sleep 0.5; done
kill -9 $AGENT; wait $CHURN
block agent.restart agent
block churn sh -c 'cat /tmp/churn.log; true'
block restart.list corepin ctl list -o json
block restart.live live
# The churn leaves c1..c6 as far as it got before the kill, which is
# timing (under load it reached c3 and kept all three): delete what is
# left, so that the steps below start from the same free CPUs.
block churn.clean sh -c 'for i in 1 2 3 4 5 6; do corepin ctl delete c$i >/dev/null 2>&1; done; corepin ctl list'

sleep 100000 & P=$!
block adopt corepin ctl create adopted --cpus 1 --qos LSE --pid $P -o json
block adopt.info sh -c "grep Cpus_allowed_list /proc/$P/status; cat /proc/$P/cgroup"

d=$(group ls1)
block ls1.files cgfiles $d cpu.max cpu.max.burst cpu.weight cpu.idle cpuset.cpus.effective
i=0; while [ "$(cat $d/cpu.max.burst)" = 0 ] && [ $i -lt 60 ]; do sleep 1; i=$((i+1)); done
block ls1.burst cgfiles $d cpu.max cpu.max.burst
block be1.files cgfiles $(group be1) cpu.idle cpu.max cpuset.cpus.effective
block lse1.files cgfiles $(group lse1) cpuset.cpus cpuset.cpus.effective cpuset.mems.effective cpu.max cpu.weight cpu.idle

H=$(corepin ctl get lse1 -o json | tr -d ' \n' | sed -n 's/.*"cpuset":"\([^"]*\)".*/\1/p'); C=${H##*[-,]}
block offline.cpu echo $C
echo 0 > /sys/devices/system/cpu/cpu$C/online
waitfor offline_cpus $C
waitfor grep -q 'went offline' /tmp/agent.log
block offline.get corepin ctl get lse1 -o json
block offline.table corepin ctl list
block offline.metrics metrics corepin_workload_offline_cpus
block offline.create corepin ctl create more --cpus 2 --qos LSE -o json -- sleep 100000
block offline.list corepin ctl list -o json
block offline.live live
# Restarted while the CPU is offline, the agent still knows lse1 holds it.
kill -9 $AGENT; wait $AGENT 2>/dev/null
block offline.restart agent
# It reconciles once before its API answers: the first get after the
# start (the next block) already shows the CPU offline, with no wait.
block offline.restart.get corepin ctl get lse1 -o json
echo 1 > /sys/devices/system/cpu/cpu$C/online
waitfor offline_cpus ""
waitfor grep -q 'online again' /tmp/agent.log
block online.get corepin ctl get lse1 -o json
block online.metrics metrics corepin_workload_offline_cpus
block online.live live
block log sh -c "grep -E 'offline|online again' /tmp/agent.log; true"

for n in $(corepin ctl list -o json | tr -d ' ' | sed -n 's/^"name":"\([^"]*\)",*$/\1/p'); do corepin ctl delete $n >/dev/null; done
kill $AGENT; wait $AGENT
block agent.left sh -c 'find /sys/fs/cgroup/corepin-agent -mindepth 1 -type d; kill $0 2>/dev/null; true' $P
`

// workload is one workload of ctl list/get -o json.
type workload struct {
	Name        string `json:"name"`
	QoS         string `json:"qos"`
	Cpuset      string `json:"cpuset"`
	Source      string `json:"source"`
	PID         int    `json:"pid"`
	OfflineCPUs string `json:"offline_cpus"`
}

func workloads(t *testing.T, v *vm, name string) []workload {
	t.Helper()
	var l struct {
		Workloads []workload `json:"workloads"`
	}
	if err := json.Unmarshal([]byte(v.get(t, name)), &l); err != nil {
		t.Fatalf("%s: %v\n%s", name, err, v.get(t, name))
	}
	return l.Workloads
}

func oneWorkload(t *testing.T, v *vm, name string) workload {
	t.Helper()
	var w workload
	if err := json.Unmarshal([]byte(v.get(t, name)), &w); err != nil {
		t.Fatalf("%s: %v\n%s", name, err, v.get(t, name))
	}
	return w
}

// liveGroup is one line of the script's live(): a group of the agent.
type liveGroup struct{ dir, cpus, eff, procs string }

func liveGroups(t *testing.T, v *vm, name string) []liveGroup {
	t.Helper()
	var gs []liveGroup
	for _, l := range strings.Split(strings.TrimSpace(v.get(t, name)), "\n") {
		f := strings.Fields(l)
		if len(f) != 4 {
			continue
		}
		kv := kv(strings.Join(f[1:], "\n"))
		gs = append(gs, liveGroup{f[0], kv["cpus"], kv["eff"], kv["procs"]})
	}
	return gs
}

// checkState asserts that the agent's state (ws) equals its live groups
// and that no CPU is held by two exclusive workloads.
func checkState(t *testing.T, t2 *vm, list, live string) {
	t.Helper()
	ws := workloads(t, t2, list)
	gs := liveGroups(t, t2, live)
	held := map[int]string{}
	for _, w := range ws {
		var g *liveGroup
		for i := range gs {
			if strings.HasSuffix(gs[i].dir, "-"+w.Name) {
				g = &gs[i]
			}
		}
		if g == nil {
			t.Errorf("%s: workload %s has no live group (%v)", list, w.Name, gs)
			continue
		}
		if g.procs == "0" {
			t.Errorf("%s: workload %s's group has no process", list, w.Name)
		}
		if w.QoS != "LSE" && w.QoS != "LSR" {
			continue
		}
		if !sameList(t, g.cpus, w.Cpuset) {
			t.Errorf("%s: workload %s: group cpuset.cpus %s, state %s", list, w.Name, g.cpus, w.Cpuset)
		}
		for _, c := range parseList(t, w.Cpuset) {
			if o, ok := held[c]; ok {
				t.Errorf("%s: cpu %d held by %s and %s", list, c, o, w.Name)
			}
			held[c] = w.Name
		}
	}
	for _, g := range gs {
		if !slices.ContainsFunc(ws, func(w workload) bool { return strings.HasSuffix(g.dir, "-"+w.Name) }) {
			t.Errorf("%s: live group %s without a workload in the agent's state", live, g.dir)
		}
	}
}

func checkAgent(t *testing.T, v *vm) {
	// SIGKILL mid-churn, restart: the state equals the live groups.
	churn := v.blocks["churn"].out
	t.Logf("churn while the agent was killed:\n%s", churn)
	if !strings.Contains(churn, "connection refused") {
		t.Errorf("the churn did not outlive the agent (no refused call):\n%s", churn)
	}
	checkState(t, v, "restart.list", "restart.live")
	names := map[string]bool{}
	for _, w := range workloads(t, v, "restart.list") {
		names[w.Name] = true
	}
	for _, n := range []string{"lse1", "ls1", "be1"} {
		if !names[n] {
			t.Errorf("after the restart the agent lost %s (has %v)", n, names)
		}
	}

	if left := regexp.MustCompile(`(?m)^c[1-6]\s`).FindAllString(v.get(t, "churn.clean"), -1); len(left) > 0 {
		t.Errorf("the churn's workloads %q are left after deleting them:\n%s", left, v.get(t, "churn.clean"))
	}

	// Adoption: the running process moved into the group and onto its CPU.
	a := oneWorkload(t, v, "adopt")
	info := v.get(t, "adopt.info")
	if !strings.Contains(info, "Cpus_allowed_list:\t"+a.Cpuset+"\n") || !strings.Contains(info, "/corepin-agent/") {
		t.Errorf("adopted process (cpuset %s): %s", a.Cpuset, info)
	}

	// Settings read back from the kernel.
	ls := kv(v.get(t, "ls1.files"))
	if ls["cpu.max"] != "50000 100000" || ls["cpu.idle"] != "0" {
		t.Errorf("ls1 (LS, 0.5 CPUs): cpu.max %q cpu.idle %q, want \"50000 100000\" and 0", ls["cpu.max"], ls["cpu.idle"])
	}
	if b := kv(v.get(t, "ls1.burst")); b["cpu.max.burst"] != "50000" {
		t.Errorf("ls1 spinning on 0.5 CPUs under the QoS loop with burst: cpu.max.burst %q, want 50000 (= its quota)", b["cpu.max.burst"])
	}
	if be := kv(v.get(t, "be1.files")); be["cpu.idle"] != "1" {
		t.Errorf("be1: cpu.idle %q, want 1", be["cpu.idle"])
	}
	lse := oneWorkload(t, v, "create.lse1")
	lf := kv(v.get(t, "lse1.files"))
	if !sameList(t, lf["cpuset.cpus"], lse.Cpuset) || !sameList(t, lf["cpuset.cpus.effective"], lse.Cpuset) || lf["cpu.max"] != "max 100000" {
		t.Errorf("lse1 (cpuset %s): %v", lse.Cpuset, lf)
	}

	// An LSE workload's CPU offline and back.
	off := strings.TrimSpace(v.get(t, "offline.cpu"))
	g := oneWorkload(t, v, "offline.get")
	t.Logf("CPU %s of lse1 (%s) offline: ctl list:\n%smetrics: %s", off, g.Cpuset, v.get(t, "offline.table"), v.get(t, "offline.metrics"))
	if g.OfflineCPUs != off || g.Cpuset != lse.Cpuset {
		t.Errorf("ctl get lse1 with cpu %s offline: cpuset %q offline_cpus %q, want %q and %q", off, g.Cpuset, g.OfflineCPUs, lse.Cpuset, off)
	}
	if !strings.Contains(v.get(t, "offline.table"), "(offline: "+off+")") {
		t.Errorf("ctl list does not name lse1's offline cpu %s:\n%s", off, v.get(t, "offline.table"))
	}
	if !strings.Contains(v.get(t, "offline.metrics"), `corepin_workload_offline_cpus{qos="LSE",workload="lse1"} 1`) {
		t.Errorf("metrics with cpu %s offline:\n%s", off, v.get(t, "offline.metrics"))
	}
	more := oneWorkload(t, v, "offline.create")
	if slices.Contains(parseList(t, more.Cpuset), parseList(t, off)[0]) {
		t.Errorf("admitted 'more' on %s, which holds lse1's offline cpu %s", more.Cpuset, off)
	}
	checkState(t, v, "offline.list", "offline.live")
	for _, lg := range liveGroups(t, v, "offline.live") {
		if strings.HasSuffix(lg.dir, "-lse1") && slices.Contains(parseList(t, lg.eff), parseList(t, off)[0]) {
			t.Errorf("lse1's cpuset.cpus.effective %s holds offline cpu %s", lg.eff, off)
		}
	}
	if g := oneWorkload(t, v, "offline.restart.get"); g.OfflineCPUs != off || g.Cpuset != lse.Cpuset {
		t.Errorf("ctl get lse1 after a restart with cpu %s offline: cpuset %q offline_cpus %q, want %q and %q", off, g.Cpuset, g.OfflineCPUs, lse.Cpuset, off)
	}
	if g := oneWorkload(t, v, "online.get"); g.OfflineCPUs != "" {
		t.Errorf("ctl get lse1 after cpu %s came back: offline_cpus %q, want none", off, g.OfflineCPUs)
	}
	if !strings.Contains(v.get(t, "online.metrics"), `corepin_workload_offline_cpus{qos="LSE",workload="lse1"} 0`) {
		t.Errorf("metrics after cpu %s came back:\n%s", off, v.get(t, "online.metrics"))
	}
	for _, lg := range liveGroups(t, v, "online.live") {
		if strings.HasSuffix(lg.dir, "-lse1") && !sameList(t, lg.eff, lse.Cpuset) {
			t.Errorf("lse1's cpuset.cpus.effective %s after cpu %s came back, want %s", lg.eff, off, lse.Cpuset)
		}
	}
	log := v.get(t, "log")
	t.Logf("agent log:\n%s", log)
	if !strings.Contains(log, "went offline") || !strings.Contains(log, "online again") {
		t.Errorf("the agent's log does not report the offline cpu and its return:\n%s", log)
	}
	if left := strings.TrimSpace(v.get(t, "agent.left")); left != "" {
		t.Errorf("left behind after deleting every workload: %s", left)
	}
}
