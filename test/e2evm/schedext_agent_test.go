package e2evm

import (
	"bufio"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// scxAgentShape is the 2-core sched_ext machine running corepin agent
// with its node setting sched_ext: {mode: layered}: corepin, not the
// test, starts and supervises scx_layered (package schedext), and every
// step is read back from corepin's own reports.
//
// scx_layered takes 30 s to over a minute of emulated time to load and
// attach, and the machine attaches it five times: it gets 25 minutes.
var scxAgentShape = shape{name: "scx-agent", mem: 1024, cg: "v2", qemu: []string{"-smp", "2,sockets=1,cores=2,threads=1"},
	script: scxSetup + scxAgentScript, timeout: 25 * time.Minute}

// scxAgentScript: the agent with sched_ext layered, then, each watched
// through corepin ctl top -o json (block watch):
//
//  1. start: the agent starts scx_layered; the route reaches attached;
//  2. kill: scx_layered SIGKILLed; the route leaves attached with the
//     fair class deciding; then the agent starts it again (kill.back);
//  3. sysrq: SysRq-S (the kernel's reset of sched_ext, kernel/sched/ext.c
//     sysrq_sched_ext_reset_op) ejects the BPF scheduler; the same;
//  4. refuse: the layer config the agent passes scx_layered replaced by
//     one scx_layered refuses (its last layer matches something) and
//     scx_layered SIGKILLed: the agent's restart is refused; the config
//     put back, the next restart attaches (refuse.back);
//  5. restart: the agent SIGKILLed and started again: it adopts the
//     scx_layered the first one started (same pid), which stayed
//     attached.
//
// Metrics (corepin_sched_ext_*) are read after each step, corepin topo
// with the kernel's state after each fall-back, the agent's log and
// scx_layered's output at the end.
const scxAgentScript = `
cat > /etc/agent.yaml <<'EOF'
listen: 127.0.0.1:9100
token_file: /etc/agent.token
sched_ext:
  mode: layered
  binary: /bin/scx_layered
EOF
` + agentRun + `# watch PATTERN reads the kernel's sched_ext state, then corepin ctl top
# -o json, back to back, until ctl top's JSON with spaces and newlines
# taken out matches the extended regular expression PATTERN (at most 900
# reads). Each read is two lines: "read=N uptime=SECONDS kernel=STATE",
# then ctl top's JSON on one line ({} when ctl top failed).
watch() {
  _i=0
  while [ $_i -lt 900 ]; do
    _i=$((_i+1))
    echo "read=$_i uptime=$(cut -d' ' -f1 /proc/uptime) kernel=$(cat /sys/kernel/sched_ext/state)"
    if ! corepin ctl top -o json --interval 100ms >/tmp/top.json 2>/tmp/top.err; then
      cat /tmp/top.err >&2; echo '{}'; continue
    fi
    sed 's/^ *//' /tmp/top.json | tr -d '\n'; echo
    tr -d ' \n' </tmp/top.json | grep -qE "$1" && return 0
  done
  return 1
}
# rpid is the scx_layered pid of the last read.
rpid() { tr -d ' \n' </tmp/top.json | sed -n 's/.*"sched_ext_route":{[^}]*"pid":\([0-9]*\).*/\1/p'; }
# fallback: the kernel's state, then corepin topo -o json on one line.
fallback() { echo "kernel=$(cat /sys/kernel/sched_ext/state)"; corepin topo -o json | sed 's/^ *//' | tr -d '\n'; echo; }
# ATT: attached, or foreign (a scheduler the agent did not start: it
# then starts none, so waiting on would be in vain).
ATT='"sched_ext_route":\{"mode":"layered","state":"(attached|foreign)"'
FAIR='"sched_ext_route":\{"mode":"layered","state":"(down|starting|ejected)","decides":"fair"'

block agent.start agent
block start.watch watch "$ATT"
block start.topo corepin topo -o json
block start.text corepin ctl top --interval 100ms
block start.metrics metrics corepin_sched_ext
block start.pidof pidof scx_layered

kill -KILL $(rpid)
block kill.watch watch "$FAIR"
block kill.fallback fallback
block kill.metrics metrics corepin_sched_ext
block kill.back watch "$ATT"

echo S > /proc/sysrq-trigger
block sysrq.watch watch "$FAIR"
block sysrq.fallback fallback
block sysrq.metrics metrics corepin_sched_ext
block sysrq.back watch "$ATT"

cp /var/lib/corepin/scx_layered.json /tmp/layered.good
cat > /var/lib/corepin/scx_layered.json <<'LAYERS'
[{"name": "ls", "matches": [[{"CgroupPrefix": "corepin/"}]], "kind": {"Open": {"preempt": true}}}]
LAYERS
kill -KILL $(rpid)
block refuse.watch watch '"to":"down","reason":"refused"'
block refuse.fallback fallback
block refuse.metrics metrics corepin_sched_ext
block refuse.text corepin ctl top --interval 100ms
cp /tmp/layered.good /var/lib/corepin/scx_layered.json
block refuse.back watch "$ATT"
block refuse.pidof pidof scx_layered

kill -KILL $AGENT; wait $AGENT 2>/dev/null
block restart.kernel sh -c 'echo "state=$(cat /sys/kernel/sched_ext/state) ops=$(cat /sys/kernel/sched_ext/root/ops)"; pidof scx_layered'
block agent.restart agent
block restart.watch watch "$ATT"
block restart.metrics metrics corepin_sched_ext
block restart.pidof pidof scx_layered
block restart.text corepin ctl top --interval 100ms
block agent.log sh -c 'grep sched_ext /tmp/agent.log; true'
block scx.log cat /var/lib/corepin/scx_layered.log
block dmesg sh -c 'dmesg | grep -i -E "sched_ext|sysrq"; true'
kill $AGENT; wait $AGENT
`

// routeStatus is the agent's sched_ext_route (schedext.Status) as ctl top
// -o json prints it.
type routeStatus struct {
	Mode        string   `json:"mode"`
	State       string   `json:"state"`
	Decides     string   `json:"decides"`
	InertRoutes []string `json:"inert_routes"`
	PID         int      `json:"pid"`
	Adopted     bool     `json:"adopted"`
	Restarts    int      `json:"restarts"`
	Failures    int      `json:"failures"`
	Last        *struct {
		From   string `json:"from"`
		To     string `json:"to"`
		Reason string `json:"reason"`
		Detail string `json:"detail"`
	} `json:"last_transition"`
}

func (r *routeStatus) String() string {
	if r == nil {
		return "no sched_ext_route"
	}
	s := fmt.Sprintf("%s, decides %s, inert %v, pid %d, adopted %v, restarts %d, failures %d", r.State, r.Decides, r.InertRoutes,
		r.PID, r.Adopted, r.Restarts, r.Failures)
	if r.Last != nil {
		s += fmt.Sprintf("; last %s -> %s, %s: %s", r.Last.From, r.Last.To, r.Last.Reason, r.Last.Detail)
	}
	return s
}

// topRead is one read of block watch: the kernel's state just before,
// and what ctl top -o json said.
type topRead struct {
	n         int
	uptime    float64
	kernel    string
	Scheduler *scheduler   `json:"scheduler"`
	Route     *routeStatus `json:"sched_ext_route"`
}

// watchReads parses block name (the script's watch): every read, the
// last one the one that matched.
func watchReads(t *testing.T, v *vm, name string) []topRead {
	t.Helper()
	var reads []topRead
	sc := bufio.NewScanner(strings.NewReader(v.get(t, name)))
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		head := sc.Text()
		if !strings.HasPrefix(head, "read=") || !sc.Scan() {
			t.Fatalf("%s: %q: want a read= line and ctl top's JSON after it", name, head)
		}
		var r topRead
		f := kv(strings.ReplaceAll(head, " ", "\n"))
		r.n, _ = strconv.Atoi(f["read"])
		r.uptime, _ = strconv.ParseFloat(f["uptime"], 64)
		r.kernel = f["kernel"]
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s, read %d: ctl top -o json: %v:\n%s", name, r.n, err, sc.Text())
		}
		reads = append(reads, r)
	}
	if len(reads) == 0 {
		t.Fatalf("%s: no read", name)
	}
	return reads
}

// metric returns the value of series (name{labels} as the agent prints
// it, labels sorted by name) in block name's metrics, -1 when absent.
func metric(t *testing.T, v *vm, name, series string) float64 {
	t.Helper()
	for _, l := range strings.Split(v.get(t, name), "\n") {
		if s, val, ok := strings.Cut(l, " "); ok && s == series {
			f, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
			if err != nil {
				t.Fatalf("%s: %q: %v", name, l, err)
			}
			return f
		}
	}
	return -1
}

func transitions(to, reason string) string {
	return fmt.Sprintf(`corepin_sched_ext_route_transitions_total{reason=%q,to=%q}`, reason, to)
}

// checkAttached: the last read of block name says scx_layered attached,
// its scheduler deciding, the three BE routes inert, in the route and in
// the agent's scheduler section; it returns the route.
func checkAttached(t *testing.T, v *vm, name string) (*routeStatus, []topRead) {
	t.Helper()
	reads := watchReads(t, v, name)
	r := reads[len(reads)-1]
	inert := []string{"cpu_idle", "idle_parent", "weight"}
	if r.Route == nil || r.Route.State != "attached" || !strings.HasPrefix(r.Route.Decides, "layered") || r.Route.PID <= 0 ||
		!slices.Equal(r.Route.InertRoutes, inert) {
		t.Fatalf("%s: after %d reads the route is %s; want attached, decides layered..., a pid, inert %v (kernel %s)",
			name, len(reads), r.Route, inert, r.kernel)
	}
	if r.Scheduler == nil || r.Scheduler.SchedExt.State == nil || *r.Scheduler.SchedExt.State != "enabled" ||
		!slices.Equal(r.Scheduler.InertRoutes, inert) {
		t.Errorf("%s: the route attached, ctl top's scheduler section says %+v", name, r.Scheduler)
	}
	return r.Route, reads
}

// checkFallback: block name watched until the route left attached with
// the fair class deciding; at that read corepin's scheduler section
// lists no inert route, and corepin topo after it says disabled with no
// inert route when the kernel just said disabled. It returns the reads.
func checkFallback(t *testing.T, v *vm, name string) []topRead {
	t.Helper()
	reads := watchReads(t, v, name)
	r := reads[len(reads)-1]
	if r.Route == nil || r.Route.Last == nil || r.Route.State == "attached" || r.Route.Decides != "fair" || len(r.Route.InertRoutes) != 0 {
		t.Fatalf("%s: after %d reads the route is %s; want not attached, the fair class deciding, no inert route", name, len(reads), r.Route)
	}
	if r.Scheduler == nil || len(r.Scheduler.InertRoutes) != 0 {
		t.Errorf("%s: with the fair class deciding ctl top's scheduler section says %+v, want no inert route", name, r.Scheduler)
	}
	fb := strings.SplitN(strings.TrimSpace(v.get(t, strings.TrimSuffix(name, ".watch")+".fallback")), "\n", 2)
	var doc struct {
		Scheduler *scheduler `json:"scheduler"`
	}
	if len(fb) != 2 || json.Unmarshal([]byte(fb[1]), &doc) != nil || doc.Scheduler == nil {
		t.Fatalf("%s: the fall-back's corepin topo -o json: %q", name, fb)
	}
	if fb[0] == "kernel=disabled" && (doc.Scheduler.SchedExt.State == nil || *doc.Scheduler.SchedExt.State != "disabled" ||
		len(doc.Scheduler.InertRoutes) != 0) {
		t.Errorf("%s: the kernel said disabled, corepin topo then sched_ext %s, inert %v", name, doc.Scheduler.SchedExt, doc.Scheduler.InertRoutes)
	}
	return reads
}

// span says how a watch went: reads, and the guest's seconds from the
// first read to the last (emulated time: no measure of the agent).
func span(reads []topRead) string {
	return fmt.Sprintf("%d reads, %.1f s of guest time", len(reads), reads[len(reads)-1].uptime-reads[0].uptime)
}

// TestVMSchedExtAgent boots the 2-core sched_ext machine with corepin
// agent's sched_ext setting on (scxAgentScript) and reads each of issue
// 30's fall-backs from corepin's own reports: the agent starts
// scx_layered and says it attached; SIGKILLed, ejected by SysRq-S, or
// refusing its layer config, the route leaves attached with the fair
// class deciding and no BE route inert (ctl top, corepin topo), the
// transition and its reason are counted in the metrics (a refusal's
// detail quoting scx_layered's own error), and the agent starts it
// again after its back-off; the agent SIGKILLed and started again adopts
// the same scx_layered, which stayed attached meanwhile.
func TestVMSchedExtAgent(t *testing.T) {
	v := bootSchedExt(t, scxAgentShape)
	agentLog := v.blocks["agent.log"].out
	t.Logf("the agent's sched_ext log:\n%s", agentLog)
	if strings.Contains(agentLog, "?[") {
		t.Errorf("the agent's log quotes scx_layered's output with its colour sequences (?[...m) left in")
	}
	var lines []string

	// 1. The agent starts scx_layered.
	start, reads := checkAttached(t, v, "start.watch")
	lines = append(lines, fmt.Sprintf("start: the agent started scx_layered (pid %d), attached after %s", start.PID, span(reads)))
	if start.Adopted || start.Last == nil || start.Last.Reason != "attached" {
		t.Errorf("start.watch: %s; want started by this agent, last transition attached", start)
	}
	if pid := strings.TrimSpace(v.get(t, "start.pidof")); pid != strconv.Itoa(start.PID) {
		t.Errorf("pidof scx_layered = %q, the agent says pid %d", pid, start.PID)
	}
	topo := topoScheduler(t, v, "start.topo")
	if want := []string{"cpu_idle", "idle_parent", "weight"}; !slices.Equal(topo.InertRoutes, want) {
		t.Errorf("corepin topo with the agent's scx_layered attached: inert_routes %v, want %v", topo.InertRoutes, want)
	}
	if text := v.get(t, "start.text"); !strings.Contains(text, fmt.Sprintf("sched_ext layered route: scx_layered (pid %d) attached: layered", start.PID)) {
		t.Errorf("ctl top's text does not say scx_layered attached:\n%s", text)
	}
	for _, s := range []string{transitions("starting", "started"), transitions("attached", "attached"),
		fmt.Sprintf(`corepin_sched_ext_route_state{decides=%q,state="attached"}`, start.Decides)} {
		if got := metric(t, v, "start.metrics", s); got != 1 {
			t.Errorf("start.metrics: %s = %v, want 1:\n%s", s, got, v.get(t, "start.metrics"))
		}
	}

	// 2. SIGKILL.
	reads = checkFallback(t, v, "kill.watch")
	lines = append(lines, fmt.Sprintf("SIGKILL: the agent said %s (%s) after %s", reads[len(reads)-1].Route.State,
		reads[len(reads)-1].Route.Last.Reason, span(reads)))
	if got := metric(t, v, "kill.metrics", transitions("down", "killed")); got != 1 {
		t.Errorf("kill.metrics: %s = %v, want 1:\n%s", transitions("down", "killed"), got, v.get(t, "kill.metrics"))
	}
	back, reads := checkAttached(t, v, "kill.back")
	lines = append(lines, fmt.Sprintf("  started again (pid %d, restarts %d), attached after %s", back.PID, back.Restarts, span(reads)))
	// Restarts counts from the start's (an attach_timeout before the first
	// attach, as on a loaded host, is one).
	if back.PID == start.PID || back.Restarts != start.Restarts+1 {
		t.Errorf("kill.back: %s; want a new pid (was %d), restarts %d", back, start.PID, start.Restarts+1)
	}
	killed := back

	// 3. SysRq-S.
	reads = checkFallback(t, v, "sysrq.watch")
	r := reads[len(reads)-1].Route
	lines = append(lines, fmt.Sprintf("SysRq-S: the agent said %s (%s) after %s", r.State, r.Last.Reason, span(reads)))
	ejected, exited := metric(t, v, "sysrq.metrics", transitions("ejected", "ejected")), metric(t, v, "sysrq.metrics", transitions("down", "exited"))
	if ejected < 1 && exited < 1 {
		t.Errorf("sysrq.metrics: neither %s nor %s counted after SysRq-S:\n%s", transitions("ejected", "ejected"),
			transitions("down", "exited"), v.get(t, "sysrq.metrics"))
	}
	if !strings.Contains(agentLog, "disabled by sysrq-S") {
		t.Errorf("the agent's log does not quote the kernel's reason (disabled by sysrq-S) of the ejection:\n%s", agentLog)
	}
	back, reads = checkAttached(t, v, "sysrq.back")
	lines = append(lines, fmt.Sprintf("  ejected %v, exited %v; started again (pid %d, restarts %d), attached after %s", ejected, exited,
		back.PID, back.Restarts, span(reads)))
	if back.PID == killed.PID || back.Restarts != killed.Restarts+1 {
		t.Errorf("sysrq.back: %s; want a new pid (was %d), restarts %d", back, killed.PID, killed.Restarts+1)
	}

	// 4. A layer config scx_layered refuses.
	reads = checkFallback(t, v, "refuse.watch")
	r = reads[len(reads)-1].Route
	const refusal = `Terminal spec "ls" must have an empty match`
	if r.Last == nil || r.Last.Reason != "refused" || !strings.Contains(r.Last.Detail, refusal) {
		t.Errorf("refuse.watch: %s; want the last transition down, refused, quoting scx_layered's %q", r, refusal)
	}
	if k := reads[len(reads)-1].kernel; k != "disabled" {
		t.Errorf("refuse.watch: the kernel said %s at the refusal's read, want disabled", k)
	}
	if got := metric(t, v, "refuse.metrics", transitions("down", "refused")); got < 1 {
		t.Errorf("refuse.metrics: %s = %v, want 1 or more", transitions("down", "refused"), got)
	}
	if text := v.get(t, "refuse.text"); !strings.Contains(text, "scx_layered down: the fair class decides") || !strings.Contains(text, refusal) {
		t.Errorf("ctl top's text after the refusal:\n%s", text)
	}
	lines = append(lines, fmt.Sprintf("refused config: the agent said %s (%s: %q) after %s", r.State, r.Last.Reason, refusal, span(reads)))
	back, reads = checkAttached(t, v, "refuse.back")
	lines = append(lines, fmt.Sprintf("  config put back: started again (pid %d, restarts %d), attached after %s", back.PID, back.Restarts, span(reads)))

	// 5. The agent SIGKILLed and started again.
	kernel := strings.Split(strings.TrimSpace(v.get(t, "restart.kernel")), "\n")
	if len(kernel) != 2 || !strings.HasPrefix(kernel[0], "state=enabled ops=layered") || kernel[1] != strconv.Itoa(back.PID) {
		t.Errorf("with the agent SIGKILLed: %q; want the kernel enabled on layered... and scx_layered pid %d running", kernel, back.PID)
	}
	adopted, reads := checkAttached(t, v, "restart.watch")
	if adopted.PID != back.PID || !adopted.Adopted || adopted.Last == nil || adopted.Last.Reason != "adopted" {
		t.Errorf("restart.watch: %s; want pid %d adopted (the last transition's reason adopted)", adopted, back.PID)
	}
	if pid := strings.TrimSpace(v.get(t, "restart.pidof")); pid != strconv.Itoa(back.PID) {
		t.Errorf("after the agent's restart pidof scx_layered = %q, want %d alone", pid, back.PID)
	}
	if got := metric(t, v, "restart.metrics", transitions("attached", "adopted")); got != 1 {
		t.Errorf("restart.metrics: %s = %v, want 1:\n%s", transitions("attached", "adopted"), got, v.get(t, "restart.metrics"))
	}
	if got := metric(t, v, "restart.metrics", transitions("starting", "started")); got != -1 {
		t.Errorf("restart.metrics: the restarted agent started a scx_layered (%s = %v)", transitions("starting", "started"), got)
	}
	if text := v.get(t, "restart.text"); !strings.Contains(text, fmt.Sprintf("scx_layered (pid %d, adopted) attached", back.PID)) {
		t.Errorf("ctl top's text after the agent's restart:\n%s", text)
	}
	lines = append(lines, fmt.Sprintf("agent SIGKILLed and started again: the kernel stayed %s; scx_layered pid %d adopted after %s",
		strings.TrimPrefix(kernel[0], "state="), adopted.PID, span(reads)))

	logSection(t, "sched_ext: the agent supervising scx_layered (issue 30 §2)", fmt.Sprintf(
		"scx-agent (2 cores); the agent reads the kernel's sched_ext state every 1 s (schedext.DefaultPoll) and learns of its child's exit at once; "+
			"each step read back to back through corepin ctl top -o json until the agent said it\n%s\n\nctl top after the refusal:\n%s\nctl top after the agent's restart:\n%s",
		strings.Join(lines, "\n"), strings.TrimSpace(v.get(t, "refuse.text")), strings.TrimSpace(v.get(t, "restart.text"))))
}
