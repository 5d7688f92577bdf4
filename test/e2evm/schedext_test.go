package e2evm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// schedExtShape boots a kernel with sched_ext (Debian's 6.12 source and
// cloud config plus CONFIG_SCHED_CLASS_EXT=y, scripts/vm-scx-kernel.sh)
// and attaches scx_layered (scripts/vm-scx-layered.sh) with the layer
// config corepin generates from its classes (corepin sched-ext config).
// corepin topo reads sched_ext before, while and after scx_layered is
// attached; a corepin LS run and a BE run go on under it, and
// scx_layered's own statistics count their tasks in the layers "ls" and
// "be". Debugfs,
// tracefs and bpffs are mounted as a system has them: scx_layered needs
// the BPF file system and the function tracer's files. The kernel's
// config is at /boot/config-$(uname -r), as a Debian system has it:
// libbpf reads it there (or from /proc/config.gz, which Debian's
// kernels do not have) for the program's __kconfig externs (scx_layered
// declares CONFIG_HZ), and without it the load fails with EINVAL
// ("libbpf: failed to open system Kconfig"). TestVMs does not boot it;
// TestVMSchedExt does, under make e2e-vm-scx.
var schedExtShape = shape{
	name: "sched-ext", mem: 1024, cg: "v2", qemu: []string{"-smp", "2"},
	script: `
mount -t debugfs debugfs /sys/kernel/debug
mount -t tracefs tracefs /sys/kernel/tracing
mount -t bpf bpf /sys/fs/bpf
cp /boot/config.gz /boot/config-$(uname -r)
waitfor() { _i=0; until "$@"; do [ $_i -ge 1200 ] && return 1; _i=$((_i+1)); sleep 0.25; done; }
state() { echo "state=$(cat /sys/kernel/sched_ext/state) ops=$(cat /sys/kernel/sched_ext/root/ops 2>/dev/null)"; }
block topo.before corepin topo -o json
corepin sched-ext config > /etc/layered.json
block config cat /etc/layered.json
scx_layered f:/etc/layered.json >/tmp/scx.log 2>&1 & SCX=$!
# Attached, or scx_layered has ended (it failed to load or attach).
up() { [ "$(cat /sys/kernel/sched_ext/state)" = enabled ] || ! kill -0 $SCX 2>/dev/null; }
waitfor up
block state.attached state
block topo.attached corepin topo -o json
block run.ls corepin run --no-db --qos LS -- cat /proc/self/cgroup
block run.be corepin run --no-db --qos BE -- cat /proc/self/cgroup
# A BE batch and an LS job spinning: scx_layered's own statistics must
# count their tasks in the layers "be" and "ls".
corepin run --no-db --qos BE -- corepin workload spin --threads 1 --seconds 15 >/dev/null 2>&1 & BE=$!
corepin run --no-db --qos LS -- corepin workload spin --threads 1 --seconds 15 >/dev/null 2>&1 & LS=$!
jobs_up() { [ -n "$(cat /sys/fs/cgroup/corepin-be/*/cgroup.procs 2>/dev/null)" ] && [ -n "$(cat /sys/fs/cgroup/corepin/*/cgroup.procs 2>/dev/null)" ]; }
waitfor jobs_up
block layers sh -c 'timeout 8 scx_layered --monitor 1; true'
wait $BE $LS
kill -INT $SCX 2>/dev/null; wait $SCX; echo "exit=$?" > /tmp/scx.exit
down() { [ "$(cat /sys/kernel/sched_ext/state)" = disabled ]; }
waitfor down
block state.after state
block topo.after corepin topo -o json
block scx.exit cat /tmp/scx.exit
block scx.log cat /tmp/scx.log
`,
}

// schedExtEnv is COREPIN_E2E_SCX: unset skips TestVMSchedExt; "1" builds
// the kernel and scx_layered when their caches are cold (make
// e2e-vm-scx: 20-40 and 8-27 minutes); "cached" never builds and skips
// with one loud line when a cache is cold.
const schedExtEnv = "COREPIN_E2E_SCX"

// TestVMSchedExt: sched_ext is available and no scheduler attached at
// boot (state disabled, no ops, every BE route acts); with scx_layered
// attached on corepin's layer config, corepin topo names it (state
// enabled, ops layered...) and lists the BE routes it leaves inert
// (cpu_idle, idle_parent, weight); corepin's LS and BE runs still run,
// and scx_layered --monitor counts their tasks in layers "ls" and "be"
// (the config's cgroup matches are the ones the scheduler applies);
// when scx_layered ends, the kernel is back on the fair class and corepin
// topo says so.
func TestVMSchedExt(t *testing.T) {
	mode := os.Getenv(schedExtEnv)
	if mode == "" {
		t.Skipf("%s is unset: make e2e-vm-scx runs this test", schedExtEnv)
	}
	cachedOnly := mode == "cached"
	kernelImg := scxArtifact(t, "vm-scx-kernel.sh", cachedOnly)
	layered := scxArtifact(t, "vm-scx-layered.sh", cachedOnly)
	bin := os.Getenv("COREPIN_BIN")
	if bin == "" {
		need(t, "COREPIN_BIN, a static corepin binary (make build)")
	}
	busybox, err := exec.LookPath("busybox")
	if err != nil {
		need(t, "busybox (apt-get install busybox-static)")
	}
	extra, err := withLibraries(layered, "bin/scx_layered")
	if err != nil {
		t.Fatalf("listing scx_layered's libraries: %v", err)
	}
	config := filepath.Join(filepath.Dir(kernelImg), "config.gz")
	if _, err := os.Stat(config); err != nil {
		t.Fatalf("the kernel's config beside it (scripts/vm-scx-kernel.sh writes it): %v", err)
	}
	extra[config] = "boot/config.gz"
	s := schedExtShape
	s.initrd, err = buildInitrd(bin, busybox, []shape{s}, extra)
	if err != nil {
		t.Fatalf("building the initramfs: %v", err)
	}
	s.vmlinuz = kernelImg
	s.kernel = filepath.Base(filepath.Dir(kernelImg)) // linux-<version>-cloud-scx
	v := boot(t, s)
	scxLog := ansi.ReplaceAllString(v.blocks["scx.log"].out, "")
	t.Logf("scx_layered's log:\n%s", scxLog)

	before := topoScheduler(t, v, "topo.before")
	if before.SchedExt.State == nil || *before.SchedExt.State != "disabled" || before.SchedExt.Ops == nil || *before.SchedExt.Ops != "" {
		t.Fatalf("before scx_layered: sched_ext = %s, want state disabled, ops \"\" (available, none attached)", before.SchedExt)
	}
	if len(before.InertRoutes) != 0 {
		t.Errorf("before scx_layered: inert_routes = %v, want none", before.InertRoutes)
	}

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
	after := topoScheduler(t, v, "topo.after")
	if after.SchedExt.State == nil || *after.SchedExt.State != "disabled" || len(after.InertRoutes) != 0 {
		t.Errorf("after scx_layered ended: sched_ext = %s, inert_routes %v; want state disabled, none inert", after.SchedExt, after.InertRoutes)
	}
	t.Logf("sched_ext: before %s; attached %s (inert %v); after %s; most tasks seen per layer: %v",
		before.SchedExt, during.SchedExt, during.InertRoutes, after.SchedExt, tasks)
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
		fmt.Printf("SKIP e2e-vm-scx ######## %s ########\n", msg)
		t.Skip("a cache is cold (the line above says which)")
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
