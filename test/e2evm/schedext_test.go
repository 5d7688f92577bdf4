package e2evm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// scxMachine is one machine of the sched_ext tests: its qemu topology
// and what it runs beyond the placement table.
type scxMachine struct {
	name, desc string
	qemu       []string
	cores      int // physical cores corepin topo must see
	threads    int // threads per core
	// batches are the probe's batch sizes ("cpus": one per CPU); the
	// target is asserted at "cpus".
	batches []string
	// full adds the detection checks, the SIGKILL fallback and the
	// refused config to the table.
	full bool
}

// scxRounds are the probe's rounds per point: a stacked round is 1%.
const scxRounds = 100

// Issue 30's target for the layered route beside a batch on every CPU.
const (
	scxMaxStackedPct = 5.0
	scxMinBEShare    = 0.90
)

var (
	scx2c = scxMachine{name: "scx-2c", desc: "2 cores, no SMT", qemu: []string{"-smp", "2,sockets=1,cores=2,threads=1"},
		cores: 2, threads: 1, batches: []string{"cpus"}, full: true}
	scxSMT2 = scxMachine{name: "scx-2c-smt2", desc: "1 socket x 2 cores x SMT2", qemu: []string{"-smp", "4,sockets=1,cores=2,threads=2"},
		cores: 2, threads: 2, batches: []string{"cpus"}}
)

// scxSetup mounts what scx_layered needs and puts the kernel's config
// where libbpf reads it (scxScript says why).
const scxSetup = `mount -t debugfs debugfs /sys/kernel/debug
mount -t tracefs tracefs /sys/kernel/tracing
mount -t bpf bpf /sys/fs/bpf
cp /boot/config.gz /boot/config-$(uname -r)
`

// scxScript is the machine's script. It mounts debugfs, tracefs and
// bpffs as a system has them (scx_layered needs the BPF file system and
// the function tracer's files) and puts the kernel's config at
// /boot/config-$(uname -r), as a Debian system has it: libbpf reads it
// there (or from /proc/config.gz, which Debian's kernels do not have) for
// the program's __kconfig externs (scx_layered declares CONFIG_HZ), and
// without it the load fails with EINVAL ("libbpf: failed to open system
// Kconfig"). Then, all with `corepin bench wakeup`'s layered route (the
// batch under corepin's idle BE parent, the probe's LS threads in a group
// under corepin's root: the groups `corepin sched-ext config` puts in
// the layers "be" and "ls"):
//
//  1. the probe on the fair class (wakeup.fair; block placed: the
//     groups the probe and the batch ran in while it ran);
//  2. scx_layered attached on corepin's config (state.attached,
//     topo.attached; with full, corepin run's LS and BE jobs and
//     scx_layered --monitor's count of them per layer), and the probe
//     under it (wakeup.layered);
//  3. with full: the probe again, and scx_layered SIGKILLed while its
//     probe runs under it (wakeup.killed); block follow reads the
//     kernel's state and corepin topo one after the other until the
//     kernel says disabled; then the probe on the fair class
//     (wakeup.after); then scx_layered on a config it must refuse (the
//     last layer matches something): its exit, its log, the state
//     after (broken.*); without full, scx_layered is stopped with
//     SIGINT.
func scxScript(m scxMachine) string {
	var b strings.Builder
	fmt.Fprintf(&b, scxSetup+`# at says on the console where the script is, and when (uptime): a
# machine that does not power off in time shows its last step there.
at() { { echo "@@at $* ($(cut -d' ' -f1 /proc/uptime) s)"; } 2>/dev/null >/dev/console || true; }
waitfor() { at waitfor "$@"; _i=0; until "$@"; do [ $_i -ge 1200 ] && { at gave up waiting for "$@"; return 1; }; _i=$((_i+1)); sleep 0.25; done; }
state() { echo "state=$(cat /sys/kernel/sched_ext/state) ops=$(cat /sys/kernel/sched_ext/root/ops 2>/dev/null)"; }
# start NAME CMD... runs CMD in the background (BG); fin NAME waits for
# it and prints its output, stderr and exit code as the block NAME.
start() { at start "$1"; _n=$1; shift; ( "$@" >/tmp/$_n.out 2>/tmp/$_n.err; echo $? >/tmp/$_n.rc ) & BG=$!; }
fin() { at fin "$1"; wait $BG; block $1 sh -c 'cat /tmp/$0.out; cat /tmp/$0.err >&2; exit $(cat /tmp/$0.rc)' $1; }
cat > /tmp/wake.yaml <<'SPEC'
wakeup:
  routes: [layered]
  classes: [normal]
  batch_threads: %s
  ls_threads: ["2"]
  period: 10ms
  burn: 2ms
  rounds: %d
SPEC
probe() { corepin bench wakeup -o json --repeats 1 --seed 1 --spec /tmp/wake.yaml --report-dir /tmp/report --db /tmp/results.db; }
# probing: the probe's LS threads run in corepin's wake-ls group (or
# bench, $BG, has ended).
probing() { [ -n "$(cat /sys/fs/cgroup/corepin/*-wake-ls/cgroup.procs 2>/dev/null)" ] || ! kill -0 $BG 2>/dev/null; }
# placed writes to /tmp/placed the command line of every process in the
# probe's and the batch's groups; it holds once both have one (or bench
# has ended).
placed() {
  for g in /sys/fs/cgroup/corepin/*-wake-ls /sys/fs/cgroup/corepin-be/*-wake-batch; do
    for p in $(cat $g/cgroup.procs 2>/dev/null); do echo "${g#/sys/fs/cgroup/} $(tr '\0' ' ' </proc/$p/cmdline)"; done
  done > /tmp/placed
  grep -q wake-ls /tmp/placed && grep -q wake-batch /tmp/placed || ! kill -0 $BG 2>/dev/null
}
block topo.before corepin topo -o json
corepin sched-ext config > /etc/layered.json
block config cat /etc/layered.json
start wakeup.fair probe
waitfor placed
block placed cat /tmp/placed
fin wakeup.fair
scx_layered f:/etc/layered.json >/tmp/scx.log 2>&1 & SCX=$!
# Attached, or scx_layered has ended (it failed to load or attach).
up() { [ "$(cat /sys/kernel/sched_ext/state)" = enabled ] || ! kill -0 $SCX 2>/dev/null; }
waitfor up
block state.attached state
block topo.attached corepin topo -o json
`, yamlList(quotedAll(m.batches)), scxRounds)
	if m.full {
		b.WriteString(`block run.ls corepin run --no-db --qos LS -- cat /proc/self/cgroup
block run.be corepin run --no-db --qos BE -- cat /proc/self/cgroup
# A BE batch and an LS job spinning: scx_layered's own statistics must
# count their tasks in the layers "be" and "ls".
corepin run --no-db --qos BE -- corepin workload spin --threads 1 --seconds 15 >/dev/null 2>&1 & BE=$!
corepin run --no-db --qos LS -- corepin workload spin --threads 1 --seconds 15 >/dev/null 2>&1 & LS=$!
jobs_up() { [ -n "$(cat /sys/fs/cgroup/corepin-be/*/cgroup.procs 2>/dev/null)" ] && [ -n "$(cat /sys/fs/cgroup/corepin/*/cgroup.procs 2>/dev/null)" ]; }
waitfor jobs_up
block layers sh -c 'timeout 8 scx_layered --monitor 1; true'
wait $BE $LS
`)
	}
	b.WriteString(`start wakeup.layered probe
# scx_layered's own statistics while its probe runs (block monitor): the
# ls layer's preemptions and failed preemptions.
waitfor probing
scx_layered --monitor 1 >/tmp/monitor.out 2>&1 & MON=$!
fin wakeup.layered
kill $MON 2>/dev/null; wait $MON 2>/dev/null
block monitor sh -c 'cat /tmp/monitor.out; true'
`)
	if !m.full {
		b.WriteString(`kill -INT $SCX 2>/dev/null; wait $SCX; echo "exit=$?" > /tmp/scx.exit
down() { [ "$(cat /sys/kernel/sched_ext/state)" = disabled ]; }
waitfor down
block state.after state
block scx.exit cat /tmp/scx.exit
block scx.log cat /tmp/scx.log
`)
		return b.String()
	}
	b.WriteString(`# The fall-back: scx_layered SIGKILLed while its probe runs under it.
start wakeup.killed probe
waitfor probing
kill -KILL $SCX 2>/dev/null; wait $SCX; echo "exit=$?" > /tmp/scx.exit
# follow: the kernel's state, then corepin topo's (one line), until the
# kernel says disabled.
follow() {
  _i=0
  while :; do
    _s=$(cat /sys/kernel/sched_ext/state)
    echo "kernel=$_s"; corepin topo -o json | tr -d '\n'; echo
    [ "$_s" = disabled ] && return 0
    _i=$((_i+1)); [ $_i -ge 400 ] && return 1
  done
}
block follow follow
block state.after state
fin wakeup.killed
block topo.after corepin topo -o json
start wakeup.after probe
fin wakeup.after
block scx.exit cat /tmp/scx.exit
block scx.log cat /tmp/scx.log
# A config scx_layered refuses: its last layer matches something (a
# layer config must end in one that matches everything).
cat > /etc/broken.json <<'LAYERS'
[{"name": "ls", "matches": [[{"CgroupPrefix": "corepin/"}]], "kind": {"Open": {"preempt": true}}}]
LAYERS
scx_layered f:/etc/broken.json >/tmp/broken.log 2>&1; echo "exit=$?" > /tmp/broken.exit
block broken.exit cat /tmp/broken.exit
block broken.log cat /tmp/broken.log
block broken.state state
block broken.topo corepin topo -o json
block dmesg sh -c 'dmesg | grep -i sched_ext; true'
`)
	return b.String()
}

// scxEmulation names the qemu arguments COREPIN_E2E_SCX_QEMU added, for
// a report's title ("" without).
func scxEmulation() string {
	if q := strings.Join(strings.Fields(os.Getenv(scxQemuEnv)), " "); q != "" {
		return ", qemu " + q
	}
	return ""
}

func quotedAll(xs []string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = strconv.Quote(x)
	}
	return out
}

// scxShape is the machine m on the sched_ext kernel.
func scxShape(m scxMachine) shape {
	return shape{name: m.name, mem: 1024, cg: "v2", qemu: m.qemu, script: scxScript(m)}
}

// schedExtEnv is COREPIN_E2E_SCX: unset skips the sched_ext tests; "1"
// builds the kernel and scx_layered when their caches are cold (make
// e2e-vm-scx: 20-40 and 8-27 minutes); "cached" never builds and skips
// with one loud line when a cache is cold.
const schedExtEnv = "COREPIN_E2E_SCX"

// scxQemuEnv is COREPIN_E2E_SCX_QEMU: more qemu arguments for the
// sched_ext machines, for trying how the emulation bears on the
// placement table (docs/reference/sched-ext.md, "Measured"), such as
// "-icount shift=auto" or "-accel tcg,thread=multi" (an -accel replaces
// the default single-threaded TCG).
const scxQemuEnv = "COREPIN_E2E_SCX_QEMU"

// bootSchedExt boots s on the sched_ext kernel (scripts/vm-scx-kernel.sh)
// with scx_layered at /bin/scx_layered (scripts/vm-scx-layered.sh), the
// libraries it links and the kernel's config in the initramfs.
func bootSchedExt(t *testing.T, s shape) *vm {
	t.Helper()
	mode := os.Getenv(schedExtEnv)
	if mode == "" {
		t.Skipf("%s is unset: make e2e-vm-scx runs this test", schedExtEnv)
	}
	cachedOnly := mode == "cached"
	kernelImg := scxArtifact(t, "vm-scx-kernel.sh", cachedOnly)
	layered := scxArtifact(t, "vm-scx-layered.sh", cachedOnly)
	bin, busybox := initrdParts(t)
	extra, err := withLibraries(layered, "bin/scx_layered")
	if err != nil {
		t.Fatalf("listing scx_layered's libraries: %v", err)
	}
	config := filepath.Join(filepath.Dir(kernelImg), "config.gz")
	if _, err := os.Stat(config); err != nil {
		t.Fatalf("the kernel's config beside it (scripts/vm-scx-kernel.sh writes it): %v", err)
	}
	extra[config] = "boot/config.gz"
	if q := strings.Fields(os.Getenv(scxQemuEnv)); len(q) > 0 {
		s.qemu = append(slices.Clone(s.qemu), q...)
		t.Logf("%s: qemu %s", s.name, strings.Join(q, " "))
	}
	s.initrd, err = buildInitrd(bin, busybox, []shape{s}, extra)
	if err != nil {
		t.Fatalf("building the initramfs: %v", err)
	}
	s.vmlinuz = kernelImg
	s.kernel = filepath.Base(filepath.Dir(kernelImg)) // linux-<version>-cloud-scx
	v := boot(t, s)
	t.Logf("scx_layered's log:\n%s", ansi.ReplaceAllString(v.blocks["scx.log"].out, ""))
	return v
}

// TestVMSchedExt boots the 2-core machine (scx2c): sched_ext is
// available and no scheduler attached at boot (state disabled, no ops,
// every BE route acts); with scx_layered attached on corepin's layer
// config, corepin topo names it (state enabled, ops layered...) and lists
// the BE routes it leaves inert (cpu_idle, idle_parent, weight);
// corepin's LS and BE runs still run, and scx_layered --monitor counts
// their tasks in layers "ls" and "be" (the config's cgroup matches are
// the ones the scheduler applies). The probe's layered route places its
// threads in those groups and is measured on the fair class and under
// scx_layered beside a batch on every CPU; issue 30's target for it (at
// most 5% of rounds stacked, at least 90% of the idle CPU to the batch)
// is reported, and asserted with COREPIN_E2E_SCX_TARGET=1 (checkTarget).
// SIGKILLed mid-probe, scx_layered
// leaves the kernel on the fair class: corepin topo says so at the first
// read after the kernel does, the probe ran to its end, and the probe
// after it measures the fair class with no route inert. A config
// scx_layered refuses ends it with an error and leaves the kernel on the
// fair class.
func TestVMSchedExt(t *testing.T) {
	v := bootSchedExt(t, scxShape(scx2c))
	scxLog := ansi.ReplaceAllString(v.blocks["scx.log"].out, "")

	before := topoScheduler(t, v, "topo.before")
	if before.SchedExt.State == nil || *before.SchedExt.State != "disabled" || before.SchedExt.Ops == nil || *before.SchedExt.Ops != "" {
		t.Fatalf("before scx_layered: sched_ext = %s, want state disabled, ops \"\" (available, none attached)", before.SchedExt)
	}
	if len(before.InertRoutes) != 0 {
		t.Errorf("before scx_layered: inert_routes = %v, want none", before.InertRoutes)
	}
	checkPlaced(t, v)

	attached := strings.TrimSpace(v.get(t, "state.attached"))
	if !strings.HasPrefix(attached, "state=enabled ops=layered") {
		t.Fatalf("scx_layered did not attach: %s (its exit: %s); its log:\n%s", attached,
			strings.TrimSpace(v.blocks["scx.exit"].out), tail(scxLog, 40))
	}
	during := topoScheduler(t, v, "topo.attached")
	if during.SchedExt.State == nil || *during.SchedExt.State != "enabled" || during.SchedExt.Ops == nil || !strings.HasPrefix(*during.SchedExt.Ops, "layered") {
		t.Errorf("with scx_layered attached (%s): corepin topo says sched_ext = %s, want state enabled, ops layered...", attached, during.SchedExt)
	}
	if want := []string{"cpu_idle", "idle_parent", "weight"}; !slices.Equal(during.InertRoutes, want) {
		t.Errorf("with scx_layered attached: inert_routes = %v, want %v", during.InertRoutes, want)
	}
	for name, group := range map[string]string{"run.ls": "0::/corepin/", "run.be": "0::/corepin-be/"} {
		if out := v.get(t, name); !strings.HasPrefix(out, group) {
			t.Errorf("%s under scx_layered ran in %q, want a group below %s", name, strings.TrimSpace(out), group)
		}
	}
	tasks := layerTasks(ansi.ReplaceAllString(v.get(t, "layers"), ""))
	for _, layer := range []string{"be", "ls"} {
		if tasks[layer] == 0 {
			t.Errorf("scx_layered --monitor counted no task in layer %q while a corepin %s job ran (tasks by layer: %v):\n%s",
				layer, strings.ToUpper(layer), tasks, tail(v.get(t, "layers"), 30))
		}
	}

	fair, layered := scxRows(t, v, "wakeup.fair"), scxRows(t, v, "wakeup.layered")
	verdict := checkTarget(t, v, scx2c, layered) + "\n" + lsPreempts(v)

	// The fall-back.
	if exit := strings.TrimSpace(v.get(t, "scx.exit")); exit != "exit=137" {
		t.Errorf("scx_layered SIGKILLed: %s, want exit=137 (killed by SIGKILL)", exit)
	}
	reads := checkFollow(t, v)
	after := topoScheduler(t, v, "topo.after")
	if after.SchedExt.State == nil || *after.SchedExt.State != "disabled" || len(after.InertRoutes) != 0 {
		t.Errorf("after scx_layered was killed: sched_ext = %s, inert_routes %v; want state disabled, none inert", after.SchedExt, after.InertRoutes)
	}
	killed, fairAgain := scxRows(t, v, "wakeup.killed"), scxRows(t, v, "wakeup.after")
	if n := wakeAnalysisOf(t, v, "wakeup.after").Notice; strings.Contains(n, "sched_ext") {
		t.Errorf("the probe after the kill still says a sched_ext scheduler is attached: %q", n)
	}

	// The refused config.
	brokenLog := ansi.ReplaceAllString(v.blocks["broken.log"].out, "")
	if exit := strings.TrimSpace(v.get(t, "broken.exit")); exit == "exit=0" || !strings.Contains(brokenLog, `Terminal spec "ls" must have an empty match`) {
		t.Errorf("scx_layered on a config whose last layer matches something: %s, log:\n%s\nwant a non-zero exit and its refusal", exit, tail(brokenLog, 20))
	}
	if st := strings.TrimSpace(v.get(t, "broken.state")); st != "state=disabled ops=" {
		t.Errorf("after scx_layered refused its config the kernel says %s, want state=disabled ops= (the fair class)", st)
	}
	broken := topoScheduler(t, v, "broken.topo")
	if broken.SchedExt.State == nil || *broken.SchedExt.State != "disabled" || len(broken.InertRoutes) != 0 {
		t.Errorf("after scx_layered refused its config: corepin topo says sched_ext = %s, inert_routes %v; want disabled, none inert", broken.SchedExt, broken.InertRoutes)
	}

	tab := scxTable(scx2c, []scxRun{{"fair class", fair}, {"scx_layered", layered}, {"scx_layered SIGKILLed mid-run", killed}, {"fair class, after the kill", fairAgain}})
	logSection(t, "sched_ext placement (issue 30 §3)"+scxEmulation(), fmt.Sprintf("%s%s\n\nfall-back: scx_layered %s; the kernel said disabled at read %d after it ended, and corepin topo with it; refused config: %s, %q; the kernel then %s\nkernel log:\n%s",
		tab, verdict, strings.TrimSpace(v.get(t, "scx.exit")), reads, strings.TrimSpace(v.get(t, "broken.exit")), refusal(brokenLog),
		strings.TrimSpace(v.get(t, "broken.state")), strings.TrimSpace(v.blocks["dmesg"].out)))
	t.Logf("sched_ext: before %s; attached %s (inert %v); after the kill %s; most tasks seen per layer: %v",
		before.SchedExt, during.SchedExt, during.InertRoutes, after.SchedExt, tasks)
}

// TestVMSchedExtSMT2 boots the 2-core SMT2 machine (scxSMT2): corepin
// topo sees 2 cores of 2 threads, scx_layered attaches and detaches, and
// the layered route is measured on the fair class and under scx_layered
// beside a batch on every CPU, against issue 30's target as in
// TestVMSchedExt. make e2e-vm-scx-table runs it.
func TestVMSchedExtSMT2(t *testing.T) {
	m := scxSMT2
	v := bootSchedExt(t, scxShape(m))
	var topo topoJSON
	if err := json.Unmarshal([]byte(v.get(t, "topo.before")), &topo); err != nil {
		t.Fatalf("corepin topo -o json: %v", err)
	}
	perCore := map[int]int{}
	for _, c := range topo.CPUs {
		perCore[c.Core]++
	}
	if len(perCore) != m.cores || len(topo.CPUs) != m.cores*m.threads || slices.ContainsFunc(slices.Collect(maps.Values(perCore)), func(n int) bool { return n != m.threads }) {
		t.Fatalf("corepin topo in %s: CPUs per core %v, want %d cores of %d threads", m.desc, perCore, m.cores, m.threads)
	}
	checkPlaced(t, v)
	if attached := strings.TrimSpace(v.get(t, "state.attached")); !strings.HasPrefix(attached, "state=enabled ops=layered") {
		t.Fatalf("scx_layered did not attach: %s; its log:\n%s", attached, tail(ansi.ReplaceAllString(v.blocks["scx.log"].out, ""), 40))
	}
	fair, layered := scxRows(t, v, "wakeup.fair"), scxRows(t, v, "wakeup.layered")
	verdict := checkTarget(t, v, m, layered) + "\n" + lsPreempts(v)
	if st := strings.TrimSpace(v.get(t, "state.after")); st != "state=disabled ops=" {
		t.Errorf("after scx_layered ended: %s, want state=disabled ops=", st)
	}
	logSection(t, "sched_ext placement (issue 30 §3)"+scxEmulation(), scxTable(m, []scxRun{{"fair class", fair}, {"scx_layered", layered}})+verdict)
}

// checkPlaced: while the probe of the layered route ran, its LS threads
// were in a group under corepin's root (layer "ls") and its batch under
// corepin's idle BE parent (layer "be"), and nothing else was.
func checkPlaced(t *testing.T, v *vm) {
	t.Helper()
	placed := strings.TrimSpace(v.get(t, "placed"))
	var ls, be int
	for _, l := range strings.Split(placed, "\n") {
		group, cmd, _ := strings.Cut(l, " ")
		switch {
		case l == "":
		case strings.HasPrefix(group, "corepin/") && strings.HasSuffix(group, "-wake-ls") && strings.Contains(cmd, "workload wakeup"):
			ls++
		case strings.HasPrefix(group, "corepin-be/") && strings.HasSuffix(group, "-wake-batch") && strings.Contains(cmd, "workload spin"):
			be++
		default:
			t.Errorf("the layered route's probe: %q in group %s", cmd, group)
		}
	}
	if ls == 0 || be == 0 {
		t.Errorf("the layered route's probe: %d probe and %d batch processes in their groups, want both:\n%s", ls, be, placed)
	}
}

// scxTargetEnv is COREPIN_E2E_SCX_TARGET: "1" (make e2e-vm-scx-table)
// makes issue 30's target an assertion; otherwise the tests only report
// whether the layered route met it. Under qemu's software emulation it
// does not (docs/reference/sched-ext.md, "Measured"), so the CI target
// make e2e-vm-scx reports it.
const scxTargetEnv = "COREPIN_E2E_SCX_TARGET"

// checkTarget checks issue 30's target on the layered route's rows under
// scx_layered beside a batch on every CPU, as counts of rounds: at most
// 5% of rounds stacked and at least 90% of the idle CPU to the batch. It
// returns the verdict, one line; it fails t when the route was not
// measured, and when the target is missed with COREPIN_E2E_SCX_TARGET=1.
func checkTarget(t *testing.T, v *vm, m scxMachine, rows []wakeRow) string {
	t.Helper()
	var topo topoJSON
	if err := json.Unmarshal([]byte(v.get(t, "topo.before")), &topo); err != nil {
		t.Fatalf("corepin topo -o json: %v", err)
	}
	cpus, most := len(topo.CPUs), scxMaxStackedPct*scxRounds/100
	i := slices.IndexFunc(rows, func(r wakeRow) bool { return r.Route == "layered" && r.Batch == cpus })
	if i < 0 || rows[i].Stacked == nil || rows[i].BEShare == nil {
		t.Errorf("%s: the layered route with a batch on all %d CPUs was not measured: %+v", m.name, cpus, rows)
		return "not measured"
	}
	stacked, share := math.Round(*rows[i].Stacked*scxRounds/100), *rows[i].BEShare
	verdict := fmt.Sprintf("target (at most %.0f of %d rounds stacked, at least %.2f of the idle CPU to the batch): %.0f stacked, %.2f: ",
		most, scxRounds, scxMinBEShare, stacked, share)
	if stacked <= most && share >= scxMinBEShare {
		return verdict + "met"
	}
	verdict += "missed"
	if os.Getenv(scxTargetEnv) == "1" {
		t.Errorf("%s (%s), scx_layered, batch on all %d CPUs: %s", m.name, m.desc, cpus, verdict)
	}
	return verdict
}

// checkFollow reads block follow (the kernel's state, then corepin
// topo's, after scx_layered was killed, until the kernel said disabled):
// corepin topo said what the kernel had just said or a later state, and
// disabled with no inert route at the read the kernel did. It returns how
// many reads that took.
func checkFollow(t *testing.T, v *vm) int {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(v.get(t, "follow")), "\n")
	if len(lines)%2 != 0 {
		t.Fatalf("follow: %d lines, want pairs of the kernel's state and corepin topo's:\n%s", len(lines), tail(strings.Join(lines, "\n"), 10))
	}
	later := map[string][]string{"enabled": {"enabled", "disabling", "disabled"}, "disabling": {"disabling", "disabled"}, "disabled": {"disabled"}}
	for i := 0; i < len(lines); i += 2 {
		kernel := strings.TrimPrefix(lines[i], "kernel=")
		var doc struct {
			Scheduler *scheduler `json:"scheduler"`
		}
		if err := json.Unmarshal([]byte(lines[i+1]), &doc); err != nil || doc.Scheduler == nil || doc.Scheduler.SchedExt.State == nil {
			t.Fatalf("follow, read %d: corepin topo -o json: %v:\n%s", i/2+1, err, tail(lines[i+1], 5))
		}
		got := *doc.Scheduler.SchedExt.State
		if !slices.Contains(later[kernel], got) {
			t.Errorf("follow, read %d: the kernel said %s, corepin topo then %s", i/2+1, kernel, got)
		}
		if kernel == "disabled" && len(doc.Scheduler.InertRoutes) != 0 {
			t.Errorf("follow, read %d: the kernel is back on the fair class, corepin topo lists inert routes %v", i/2+1, doc.Scheduler.InertRoutes)
		}
	}
	if last := lines[len(lines)-2]; last != "kernel=disabled" {
		t.Errorf("follow: the kernel never said disabled after scx_layered was killed (last: %s)", last)
	}
	return len(lines) / 2
}

// scxRows are the rows of the probe's run name: none skipped, each
// measured.
func scxRows(t *testing.T, v *vm, name string) []wakeRow {
	t.Helper()
	a := wakeAnalysisOf(t, v, name)
	if len(a.Skipped) > 0 || len(a.Rows) == 0 {
		t.Errorf("%s: skipped %v, %d rows: want every point measured (root, cgroup v2)", name, a.Skipped, len(a.Rows))
	}
	for _, r := range a.Rows {
		if r.Stacked == nil {
			t.Errorf("%s: %+v: no stacked %% measured", name, r)
		}
	}
	return a.Rows
}

// scxRun is one probe run of a machine: what scheduled it, and its rows.
type scxRun struct {
	scheduler string
	rows      []wakeRow
}

// scxTable is a machine's placement table, as markdown.
func scxTable(m scxMachine, runs []scxRun) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s), route layered: %d rounds per point\n\n| scheduler | batch threads | LS threads | stacked rounds | BE share of idle |\n|---|---|---|---|---|\n",
		m.name, m.desc, scxRounds)
	for _, r := range runs {
		for _, row := range r.rows {
			stacked, share := "-", "-"
			if row.Stacked != nil {
				stacked = fmt.Sprintf("%.0f of %d", math.Round(*row.Stacked*scxRounds/100), scxRounds)
			}
			if row.BEShare != nil {
				share = fmt.Sprintf("%.2f", *row.BEShare)
			}
			fmt.Fprintf(&b, "| %s | %d | %d | %s | %s |\n", r.scheduler, row.Batch, row.LS, stacked, share)
		}
	}
	return b.String()
}

// preemptLine is the preemption line of a layer in scx_layered
// --monitor: "  preempt preempt/first/xllc/xnuma/idle/fail=64.2/.../29.1".
var preemptLine = regexp.MustCompile(`preempt/first/xllc/xnuma/idle/fail=\s*([0-9.]+)/.*/\s*([0-9.]+)\s*$`)

// lsPreempts summarises block monitor (scx_layered --monitor 1 while the
// probe ran under it): for the ls layer, the share of its enqueues that
// preempted another task and that tried and failed, in each interval in
// which it preempted or failed at all.
func lsPreempts(v *vm) string {
	var layer string
	var pre, fail []string
	for _, l := range strings.Split(ansi.ReplaceAllString(v.blocks["monitor"].out, ""), "\n") {
		if m := layerLine.FindStringSubmatch(l); m != nil {
			layer = m[1]
			continue
		}
		if m := preemptLine.FindStringSubmatch(strings.TrimSpace(l)); m != nil && layer == "ls" && (m[1] != "0.00" || m[2] != "0.00") {
			pre, fail = append(pre, m[1]), append(fail, m[2])
		}
	}
	if len(pre) == 0 {
		return "scx_layered --monitor during the probe: no interval with a preemption of layer ls"
	}
	return fmt.Sprintf("scx_layered --monitor during the probe, layer ls, %d intervals: %% of enqueues that preempted %s; that failed to preempt %s",
		len(pre), strings.Join(pre, " "), strings.Join(fail, " "))
}

// refusal is the line of scx_layered's log that says why it stopped.
func refusal(log string) string {
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "Terminal spec") || strings.Contains(l, "Error") {
			return strings.TrimSpace(l)
		}
	}
	return tail(log, 1)
}

// layerLine is a layer's summary line of scx_layered --monitor:
// "▶ NAME ─ util/open/frac=... tasks=     8".
var layerLine = regexp.MustCompile(`(?m)^\x{25B6} (\S+) .*tasks=\s*(\d+)`)

// layerTasks returns the most tasks each layer had in any interval.
func layerTasks(monitor string) map[string]int {
	out := map[string]int{}
	for _, m := range layerLine.FindAllStringSubmatch(monitor, -1) {
		n, _ := strconv.Atoi(m[2])
		out[m[1]] = max(out[m[1]], n)
	}
	return out
}

// ansi matches the colour escapes scx_layered's log has even in a file.
var ansi = regexp.MustCompile("\x1b\\[[0-9;]*m")

// scheduler is the part of corepin topo -o json's "scheduler" section
// this test reads.
type scheduler struct {
	SchedExt    schedExt `json:"sched_ext"`
	InertRoutes []string `json:"inert_routes"`
}

type schedExt struct {
	State *string `json:"state"`
	Ops   *string `json:"ops"`
}

func (s schedExt) String() string {
	str := func(p *string) string {
		if p == nil {
			return "null"
		}
		return fmt.Sprintf("%q", *p)
	}
	return fmt.Sprintf("{state %s, ops %s}", str(s.State), str(s.Ops))
}

func topoScheduler(t *testing.T, v *vm, name string) scheduler {
	t.Helper()
	var doc struct {
		Scheduler *scheduler `json:"scheduler"`
	}
	out := v.get(t, name)
	if err := json.Unmarshal([]byte(out), &doc); err != nil || doc.Scheduler == nil {
		t.Fatalf("%s: no scheduler section in corepin topo -o json (%v):\n%s", name, err, tail(out, 20))
	}
	return *doc.Scheduler
}

// scxSkipOnce prints the loud SKIP line once for every test it skips.
var scxSkipOnce sync.Once

// scxArtifact runs scripts/NAME (--cached-only when cachedOnly) and
// returns the path it prints. A cold cache in cached-only mode (exit 3)
// skips with one loud line on stdout, for a CI log; any other failure is
// a missing prerequisite.
func scxArtifact(t *testing.T, name string, cachedOnly bool) string {
	t.Helper()
	script, err := filepath.Abs(filepath.Join("..", "..", "scripts", name))
	if err != nil {
		t.Fatal(err)
	}
	var args []string
	if cachedOnly {
		args = append(args, "--cached-only")
	}
	cmd := exec.Command(script, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) && ee.ExitCode() == 3 {
		msg := strings.TrimSpace(stderr.String())
		scxSkipOnce.Do(func() { fmt.Printf("SKIP e2e-vm-scx ######## %s ########\n", msg) })
		t.Skip("a cache is cold (the SKIP e2e-vm-scx line says which)")
	}
	if err != nil {
		need(t, "scripts/%s: %v\n%s", name, err, tail(stderr.String(), 30))
	}
	if s := strings.TrimSpace(stderr.String()); s != "" {
		t.Logf("scripts/%s: %s", name, tail(s, 10))
	}
	path := strings.TrimSpace(string(out))
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("scripts/%s printed %q: %v", name, path, err)
	}
	return path
}

// withLibraries returns bin (to be at dst in the machine) and the shared
// libraries and loader ldd lists for it, each at its own path.
func withLibraries(bin, dst string) (map[string]string, error) {
	out, err := exec.Command("ldd", bin).Output()
	if err != nil {
		return nil, fmt.Errorf("ldd %s: %w", bin, err)
	}
	files := map[string]string{bin: dst}
	for _, p := range regexp.MustCompile(`(?m)(/\S+) \(0x`).FindAllStringSubmatch(string(out), -1) {
		real, err := filepath.EvalSymlinks(p[1])
		if err != nil {
			return nil, err
		}
		files[real] = strings.TrimPrefix(p[1], "/")
	}
	return files, nil
}
