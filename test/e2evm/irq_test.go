package e2evm

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// irqEnv is COREPIN_E2E_IRQ: make e2e-vm and make e2e-vm-irq set it; unset skips
// TestVMIRQ (it downloads irqbalance and the kernel's virtio modules).
const irqEnv = "COREPIN_E2E_IRQ"

// irqModules are the modules of the machine's virtio devices, in load
// order: virtio, its PCI transport, virtio_blk and virtio_net are modules
// in Debian's 6.1 cloud kernel.
var irqModules = []string{"virtio_ring", "virtio", "virtio_pci_modern_dev", "virtio_pci_legacy_dev", "virtio_pci",
	"virtio_blk", "failover", "net_failover", "virtio_net"}

// irqShape is issue 31 §2's machine: 4 CPUs (CPU 0 reserved, an LSE
// workload of 3 CPUs takes 1-3), two virtio-blk disks (vda with MSI-X:
// its request queues' interrupts are managed, the kernel refuses their
// affinity writes; vdb with vectors=0: one legacy INTx line, movable) and
// a virtio-net card on qemu's user network (MSI-X, not managed: movable).
// Under load (dd iflag=direct from both disks, wget from an HTTP server
// the test runs on the host's loopback, 10.0.2.2 to the guest), it counts
// each interrupt per CPU from /proc/interrupts while an LSE workload of
// the agent runs without irq_isolate and then with it; then the agent is
// SIGKILLed and restarted with the workload alive (the CPUs stay clear),
// the workload deleted (the affinities found come back), the agent
// SIGKILLed again while a workload holds and the workload killed (the
// restarted agent gives back); and last irqbalance (Debian's, with its
// libraries) runs beside an irq_isolate workload with corepin's
// irqbalance.env in its environment. TestVMs does not boot it.
var irqShape = shape{
	name: "irq", kernel: kernel61, mem: 512, cg: "v2",
	qemu: []string{"-smp", "4"},
}

const irqScript = `
for a in $(cat /proc/cmdline); do case $a in corepin.http=*) PORT=${a#*=};; esac; done
waitfor() { _i=0; until "$@"; do [ $_i -ge 480 ] && return 1; _i=$((_i+1)); sleep 0.25; done; }
mods() { for m in ` + "$MODS" + `; do insmod /lib/irq-modules/$m.ko || return 1; done; }
block modules mods
devs() { [ -b /dev/vda ] && [ -b /dev/vdb ] && [ -d /sys/class/net/eth0 ]; }
waitfor devs
ip link set eth0 up; ip addr add 10.0.2.15/24 dev eth0
block virtio sh -c 'for d in /sys/bus/virtio/devices/*; do echo "$(basename $d) $(cat $d/device)"; done'
# irqs prints each interrupt: number, affinity, effective affinity, name.
irqs() {
  for d in /proc/irq/[0-9]*; do
    n=${d##*/}; [ -f $d/smp_affinity_list ] || continue
    echo "$n $(cat $d/smp_affinity_list) $(cat $d/effective_affinity_list 2>/dev/null || echo -) $(awk -v n="$n:" '$1==n {print $NF}' /proc/interrupts)"
  done
}
# movable names the interrupts whose affinity the kernel lets a user
# write (the same value written back: managed and per-CPU ones refuse).
movable() { for d in /proc/irq/[0-9]*; do if cat $d/smp_affinity_list > $d/smp_affinity_list 2>/dev/null; then echo ${d##*/}; fi; done; }
load() {
  _r=0; while [ $_r -lt $1 ]; do
    dd if=/dev/vda of=/dev/null bs=4k count=256 iflag=direct 2>/dev/null || return 1
    dd if=/dev/vdb of=/dev/null bs=4k count=256 iflag=direct 2>/dev/null || return 1
    wget -q -O /dev/null http://10.0.2.2:$PORT/blob || return 1
    _r=$((_r+1))
  done
}
block movable movable
block found irqs
block http wget -q -O - http://10.0.2.2:$PORT/ping

printf 'reserved_cpus: "0"\nreconcile_interval: 1s\n' > /etc/agent.yaml
export COREPIN_SOCKET=/run/corepin.sock COREPIN_STATE=/var/lib/corepin/agent.db
agent() {
  rm -f $COREPIN_SOCKET
  corepin agent --socket $COREPIN_SOCKET --state $COREPIN_STATE --config /etc/agent.yaml >>/tmp/agent.log 2>&1 &
  AGENT=$!
  i=0; until [ -S $COREPIN_SOCKET ] && corepin ctl list >/dev/null 2>&1; do
    if ! kill -0 $AGENT 2>/dev/null || [ $i -gt 480 ]; then tail -n 5 /tmp/agent.log >&2; return 1; fi
    i=$((i+1)); sleep 0.25
  done
}
pidof_w() { head -n 1 $(ls -d /sys/fs/cgroup/corepin-agent/*-$1)/cgroup.procs; }
block agent.start agent

# Without irq_isolate: a warm-up round moves nothing (no one steers), then the counted rounds.
block plain.create corepin ctl create plain --cpus 3 --qos LSE -o json -- sleep 100000
block plain.warm load 1
block plain.before cat /proc/interrupts
block plain.load load $ROUNDS
block plain.after cat /proc/interrupts
corepin ctl delete plain >/dev/null

# With irq_isolate: the warm-up round lets each interrupt reach the CPU
# its new affinity names (an IO-APIC line moves at its next interrupt).
block lse.create corepin ctl create lse --cpus 3 --qos LSE --irq-isolate -o json -- sleep 100000
block lse.held irqs
block lse.warm load 1
block lse.before cat /proc/interrupts
block lse.load load $ROUNDS
block lse.after cat /proc/interrupts
block lse.effective irqs

# SIGKILL with the workload alive: nothing restores; the restarted agent
# keeps its CPUs clear.
kill -9 $AGENT; wait $AGENT 2>/dev/null
block killed irqs
block restart agent
block restarted irqs
corepin ctl delete lse >/dev/null
block released irqs

# SIGKILL while a workload holds, and the workload ends while the agent is
# away: the restarted agent gives the interrupts back.
block lse2.create corepin ctl create lse2 --cpus 2 --qos LSE --irq-isolate -o json -- sleep 100000
block lse2.held irqs
P=$(pidof_w lse2)
kill -9 $AGENT; wait $AGENT 2>/dev/null; kill -9 $P
block dead irqs
block recover agent
block recovered irqs

# irqbalance beside an irq_isolate workload, given corepin's file.
block lse3.create corepin ctl create lse3 --cpus 2 --qos LSE --irq-isolate -o json -- sleep 100000
block lse3.held irqs
block ib.env cat /run/corepin/irqbalance.env
mkdir -p /run/irqbalance
( set -a; . /run/corepin/irqbalance.env; set +a; exec irqbalance --foreground --debug --interval=1 ) >/tmp/irqbalance.log 2>&1 &
IB=$!
# passes N: irqbalance printed its tree N times (once a pass), or ended.
passes() { [ "$(grep -c '^Package ' /tmp/irqbalance.log)" -ge $1 ] || ! kill -0 $IB 2>/dev/null; }
waitfor passes 4
( load 1 ) >/dev/null 2>&1
waitfor passes 6
block ib.alive sh -c "kill -0 $IB && echo running"
# The agent's sync runs at every change: make two.
corepin ctl create tick --cpus 1 --qos LS -- sleep 100000 >/dev/null; corepin ctl delete tick >/dev/null
block ib.first irqs
waitfor passes 10
corepin ctl create tick --cpus 1 --qos LS -- sleep 100000 >/dev/null; corepin ctl delete tick >/dev/null
block ib.second irqs
corepin ctl delete lse3 >/dev/null
waitfor passes 12
block ib.released irqs
kill $IB; wait $IB 2>/dev/null
block ib.log sh -c 'grep -v -e "^ " -e "^Package" -e "^-" /tmp/irqbalance.log | sort | uniq -c | sort -rn | head -n 20; true'
block agent.log sh -c 'grep -i irq /tmp/agent.log; true'
kill $AGENT; wait $AGENT
`

// TestVMIRQ boots irqShape (make e2e-vm-irq) and checks, from the
// kernel's own /proc/interrupts and /proc/irq: without irq_isolate the
// devices' movable interrupts reach the LSE workload's CPUs under load,
// with it none does (per-CPU counts, never timings); the affinities stay
// steered across a SIGKILL and restart of the agent, come back as found
// at release and after a crash whose workload ended; irqbalance given
// corepin's banned CPUs leaves them clear while corepin leaves
// irqbalance's own moves alone. It logs the counts table.
func TestVMIRQ(t *testing.T) {
	if os.Getenv(irqEnv) == "" {
		t.Skipf("%s is unset: make e2e-vm and make e2e-vm-irq run this test", irqEnv)
	}
	bin, busybox := initrdParts(t)
	pkg, vmlinuz := kernel(t, irqShape.kernel)
	mods := kernelModules(t, pkg, irqModules)
	ib := irqbalanceBinary(t)
	extra, err := withLibraries(ib, "bin/irqbalance")
	if err != nil {
		t.Fatalf("listing irqbalance's libraries: %v", err)
	}
	for _, m := range irqModules {
		extra[filepath.Join(mods, m+".ko")] = "lib/irq-modules/" + m + ".ko"
	}

	// The host's side of the network load: qemu's user network takes the
	// guest's 10.0.2.2:PORT to the host's 127.0.0.1:PORT.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	blob := make([]byte, 1<<20)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ping" {
			fmt.Fprintln(w, "pong")
			return
		}
		w.Write(blob)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	port := ln.Addr().(*net.TCPAddr).Port

	dir := t.TempDir()
	var drives []string
	for i, dev := range []string{"virtio-blk-pci,drive=d0", "virtio-blk-pci,drive=d1,vectors=0"} {
		img := filepath.Join(dir, fmt.Sprintf("disk%d.img", i))
		if err := os.WriteFile(img, bytes.Repeat([]byte{byte(i + 1)}, 8<<20), 0o644); err != nil {
			t.Fatal(err)
		}
		drives = append(drives, "-drive", fmt.Sprintf("file=%s,if=none,id=d%d,format=raw,cache=unsafe", img, i), "-device", dev)
	}
	s := irqShape
	s.script = strings.ReplaceAll(strings.ReplaceAll(irqScript, "$MODS", strings.Join(irqModules, " ")), "$ROUNDS", "3")
	s.qemu = append(append(slices.Clone(s.qemu), drives...), "-netdev", "user,id=n0", "-device", "virtio-net-pci,netdev=n0")
	s.append = "corepin.http=" + strconv.Itoa(port)
	s.vmlinuz, s.kernel = vmlinuz, pkg
	s.initrd, err = buildInitrd(bin, busybox, []shape{s}, extra)
	if err != nil {
		t.Fatalf("building the initramfs: %v", err)
	}
	v := boot(t, s)
	checkIRQ(t, v)
}

// checkIRQ asserts on the machine's blocks (see TestVMIRQ).
func checkIRQ(t *testing.T, v *vm) {
	if got := strings.TrimSpace(v.get(t, "http")); got != "pong" {
		t.Fatalf("the guest did not reach the host's server: %q", got)
	}
	movable := map[int]bool{}
	for _, f := range strings.Fields(v.get(t, "movable")) {
		n, _ := strconv.Atoi(f)
		movable[n] = true
	}
	found := irqTable(t, v, "found")
	plain := cpusOf(t, v, "plain.create")
	lse := cpusOf(t, v, "lse.create")
	if !slices.Equal(plain, lse) {
		t.Logf("plain took %v, lse %v", plain, lse)
	}
	before, after := interrupts(t, v, "plain.before"), interrupts(t, v, "plain.after")
	lbefore, lafter := interrupts(t, v, "lse.before"), interrupts(t, v, "lse.after")
	held := irqTable(t, v, "lse.held")
	virtio := virtioKinds(t, v)

	// The table: every interrupt that fired in either window.
	var rows []string
	var plainOnLSE, plainDev, withOnLSE, withDev uint64
	var refusedVirtio, movableVirtio []string
	for _, n := range sortedKeys(found) {
		q := found[n]
		dp, dl := delta(before[n], after[n]), delta(lbefore[n], lafter[n])
		onPlain, onLSE := sumOn(dp, plain), sumOn(dl, lse)
		kind := q.kind(virtio)
		if strings.HasPrefix(q.name, "virtio") {
			if movable[n] {
				movableVirtio = append(movableVirtio, fmt.Sprintf("%d(%s)", n, q.name))
			} else {
				refusedVirtio = append(refusedVirtio, fmt.Sprintf("%d(%s)", n, q.name))
			}
		}
		if movable[n] {
			if onLSE != 0 {
				t.Errorf("irq %d (%s, %s, movable): %d interrupts on the LSE workload's CPUs %v with irq_isolate (per CPU %v; affinity held %s, effective %s)",
					n, q.name, kind, onLSE, lse, dl, held[n].aff, irqTable(t, v, "lse.effective")[n].eff)
			}
			if kind == "blk" || kind == "net" {
				plainOnLSE += onPlain
				plainDev += sum(dp)
				withDev += sum(dl)
			}
			withOnLSE += onLSE
		}
		if sum(dp)+sum(dl) == 0 {
			continue
		}
		mv := "no"
		if movable[n] {
			mv = "yes"
		}
		rows = append(rows, fmt.Sprintf("%4d %-18s %-4s %-7s %-9s %-9s %10d %10d %10d %10d", n, trunc(q.name, 18), kind, mv, q.aff, held[n].aff,
			sum(dp), onPlain, sum(dl), onLSE))
	}
	table := fmt.Sprintf("%4s %-18s %-4s %-7s %-9s %-9s %10s %10s %10s %10s\n", "irq", "name", "dev", "movable", "found", "held",
		"without", "on-lse", "with", "on-lse") + strings.Join(rows, "\n")
	t.Logf("kernel %s; LSE workload on CPUs %v (without irq_isolate: %v); counts over %s rounds of load (dd iflag=direct 1 MiB from each disk, wget 1 MiB):\n%s",
		v.kernel, lse, plain, "3", table)
	t.Logf("virtio interrupts the kernel lets move: %v; refused (managed): %v", movableVirtio, refusedVirtio)
	if p := os.Getenv("COREPIN_E2E_REPORT"); p != "" {
		os.WriteFile(p, []byte(table+"\n"), 0o644)
	}
	if len(movableVirtio) == 0 {
		t.Errorf("no virtio interrupt is movable: the test shows nothing (found %v)", found)
	}
	if plainDev == 0 || withDev == 0 {
		t.Errorf("the load raised no movable device interrupt (without %d, with %d): the windows show nothing", plainDev, withDev)
	}
	if plainOnLSE == 0 {
		t.Errorf("without irq_isolate no movable device interrupt reached the LSE workload's CPUs %v: the comparison shows nothing", plain)
	}
	if withOnLSE != 0 {
		t.Errorf("with irq_isolate %d movable interrupts reached the LSE workload's CPUs %v", withOnLSE, lse)
	}

	// Steered while held, across the SIGKILL and the restart.
	for _, b := range []string{"lse.held", "killed", "restarted"} {
		for n, q := range irqTable(t, v, b) {
			if movable[n] && found[n].affSet(t).Difference(lseSet(lse)).Size() > 0 && q.affSet(t).Intersects(lseSet(lse)) {
				t.Errorf("%s: movable irq %d (%s) affinity %s meets the LSE CPUs %v (found %s)", b, n, q.name, q.aff, lse, found[n].aff)
			}
		}
	}
	sameAffinities(t, v, "restarted", irqTable(t, v, "killed"), "the agent restarted with its workload alive: held as before the SIGKILL")
	// Given back, as found.
	sameAffinities(t, v, "released", found, "the workload deleted: the affinities found")
	lse2 := cpusOf(t, v, "lse2.create")
	heldAny := false
	for n, q := range irqTable(t, v, "dead") {
		heldAny = heldAny || (movable[n] && q.aff != found[n].aff)
		if movable[n] && found[n].affSet(t).Difference(lseSet(lse2)).Size() > 0 && q.affSet(t).Intersects(lseSet(lse2)) {
			t.Errorf("dead: irq %d on %s meets lse2's CPUs %v after the agent's SIGKILL", n, q.aff, lse2)
		}
	}
	if !heldAny {
		t.Errorf("dead: no interrupt steered off lse2's CPUs %v while it ran", lse2)
	}
	sameAffinities(t, v, "recovered", found, "the agent restarted after a SIGKILL, lse2 gone: the affinities found")

	// irqbalance.
	checkIrqbalance(t, v, movable, found)
}

// checkIrqbalance: irqbalance ran; corepin's CPUs stayed clear of it and
// its placements stood across the agent's syncs; the release gave back
// what corepin still held and left irqbalance's moves.
func checkIrqbalance(t *testing.T, v *vm, movable map[int]bool, found map[int]irqRow) {
	t.Logf("irqbalance's log (counted lines):\n%s", v.get(t, "ib.log"))
	t.Logf("agent log:\n%s", v.get(t, "agent.log"))
	env := v.get(t, "ib.env")
	k := lseSet(cpusOf(t, v, "lse3.create"))
	if m := regexp.MustCompile(`(?m)^IRQBALANCE_BANNED_CPULIST=(\S+)$`).FindStringSubmatch(env); m == nil || !slices.Equal(parseList(t, m[1]), []int(k)) {
		t.Errorf("irqbalance.env %q does not ban lse3's CPUs %s", env, k)
	}
	if strings.TrimSpace(v.get(t, "ib.alive")) != "running" {
		t.Fatalf("irqbalance did not keep running: its log:\n%s", v.get(t, "ib.log"))
	}
	held, first, second := irqTable(t, v, "lse3.held"), irqTable(t, v, "ib.first"), irqTable(t, v, "ib.second")
	var moved []string
	for n := range first {
		if !movable[n] {
			continue
		}
		if first[n].affSet(t).Intersects(k) && found[n].affSet(t).Difference(k).Size() > 0 {
			t.Errorf("irq %d (%s) on %s with irqbalance running: meets lse3's CPUs %s", n, first[n].name, first[n].aff, k)
		}
		if first[n].aff != second[n].aff {
			t.Errorf("irq %d (%s) went from %s to %s between two agent syncs with irqbalance running: they fight", n, first[n].name, first[n].aff, second[n].aff)
		}
		if first[n].aff != held[n].aff {
			moved = append(moved, fmt.Sprintf("%d %s->%s", n, held[n].aff, first[n].aff))
		}
	}
	t.Logf("irqbalance moved (corepin's affinity -> irqbalance's): %v", moved)
	if len(moved) == 0 {
		t.Errorf("irqbalance moved no interrupt: the coexistence shows nothing")
	}
	var mask uint64
	for _, c := range k {
		mask |= 1 << c
	}
	if want := fmt.Sprintf("Banned CPUs: %08x", mask); !strings.Contains(v.get(t, "ib.log"), want) {
		t.Errorf("irqbalance's log does not say %q: it did not take corepin's banned CPUs %s", want, k)
	}
	released := irqTable(t, v, "ib.released")
	for n := range released {
		if !movable[n] {
			continue
		}
		if released[n].aff != found[n].aff && released[n].aff != second[n].aff {
			t.Errorf("irq %d after lse3's release: %s, neither found (%s) nor irqbalance's (%s)", n, released[n].aff, found[n].aff, second[n].aff)
		}
	}
}

// irqRow is one line of the script's irqs().
type irqRow struct {
	aff, eff, name string
}

func (q irqRow) affSet(t *testing.T) cpusetList {
	t.Helper()
	return cpusetList(parseList(t, q.aff))
}

// kind is blk, net or "" for a virtio interrupt's device (virtioN in its
// name) as kinds (from /sys/bus/virtio) says.
func (q irqRow) kind(kinds map[string]string) string {
	m := regexp.MustCompile(`^(virtio\d+)`).FindStringSubmatch(q.name)
	if m == nil {
		return ""
	}
	return kinds[m[1]]
}

func irqTable(t *testing.T, v *vm, name string) map[int]irqRow {
	t.Helper()
	out := map[int]irqRow{}
	for _, l := range strings.Split(strings.TrimSpace(v.get(t, name)), "\n") {
		f := strings.Fields(l)
		if len(f) < 3 {
			continue
		}
		n, err := strconv.Atoi(f[0])
		if err != nil {
			continue
		}
		q := irqRow{aff: f[1], eff: f[2]}
		if len(f) > 3 {
			q.name = f[3]
		}
		out[n] = q
	}
	return out
}

// virtioKinds maps virtioN to blk or net from /sys/bus/virtio's device ids.
func virtioKinds(t *testing.T, v *vm) map[string]string {
	t.Helper()
	kinds := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(v.get(t, "virtio")), "\n") {
		f := strings.Fields(l)
		if len(f) != 2 {
			continue
		}
		switch f[1] {
		case "0x0001":
			kinds[f[0]] = "net"
		case "0x0002":
			kinds[f[0]] = "blk"
		}
	}
	return kinds
}

// interrupts parses /proc/interrupts: each numbered interrupt's count per
// CPU.
func interrupts(t *testing.T, v *vm, name string) map[int][]uint64 {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(v.get(t, name)), "\n")
	ncpu := len(strings.Fields(lines[0]))
	out := map[int][]uint64{}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) < ncpu+1 {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSuffix(f[0], ":"))
		if err != nil {
			continue
		}
		c := make([]uint64, ncpu)
		for i := range ncpu {
			c[i], _ = strconv.ParseUint(f[i+1], 10, 64)
		}
		out[n] = c
	}
	return out
}

func delta(a, b []uint64) []uint64 {
	d := make([]uint64, len(b))
	for i := range b {
		if i < len(a) {
			d[i] = b[i] - a[i]
		} else {
			d[i] = b[i]
		}
	}
	return d
}

func sum(c []uint64) (s uint64) {
	for _, x := range c {
		s += x
	}
	return s
}

func sumOn(c []uint64, cpus []int) (s uint64) {
	for _, i := range cpus {
		if i < len(c) {
			s += c[i]
		}
	}
	return s
}

// cpusOf is the cpuset of the workload ctl create -o json printed.
func cpusOf(t *testing.T, v *vm, name string) []int {
	t.Helper()
	m := regexp.MustCompile(`"cpuset":\s*"([^"]*)"`).FindStringSubmatch(v.get(t, name))
	if m == nil {
		t.Fatalf("%s: no cpuset in %s", name, v.get(t, name))
	}
	return parseList(t, m[1])
}

// cpusetList is a set of CPUs as parseList reads it.
type cpusetList []int

func lseSet(c []int) cpusetList { return cpusetList(c) }

func (a cpusetList) Intersects(b cpusetList) bool {
	return slices.ContainsFunc(a, func(x int) bool { return slices.Contains(b, x) })
}

func (a cpusetList) Difference(b cpusetList) cpusetList {
	var out cpusetList
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

func (a cpusetList) Size() int { return len(a) }

func (a cpusetList) String() string {
	var s []string
	for _, x := range a {
		s = append(s, strconv.Itoa(x))
	}
	return strings.Join(s, ",")
}

// sameAffinities checks that block name shows every interrupt of want
// with the same affinity.
func sameAffinities(t *testing.T, v *vm, name string, want map[int]irqRow, why string) {
	t.Helper()
	got := irqTable(t, v, name)
	for _, n := range sortedKeys(want) {
		if got[n].aff != want[n].aff {
			t.Errorf("%s: irq %d (%s) affinity %s, want %s (%s)", name, n, want[n].name, got[n].aff, want[n].aff, why)
		}
	}
}

func sortedKeys[V any](m map[int]V) []int {
	var ks []int
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func trunc(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// kernelModules returns a directory holding names' .ko files from kernel
// image package pkg, fetched once per version into $COREPIN_CACHE/vm/PKG.
func kernelModules(t *testing.T, pkg string, names []string) string {
	t.Helper()
	kernelMu.Lock()
	defer kernelMu.Unlock()
	dir := filepath.Join(cacheDir(t), "vm", pkg, "irq-modules")
	have := func() bool {
		for _, m := range names {
			if _, err := os.Stat(filepath.Join(dir, m+".ko")); err != nil {
				return false
			}
		}
		return true
	}
	if have() {
		return dir
	}
	sh := `set -e; cd "$1"; apt-get download "$2" >/dev/null 2>&1; dpkg -x ./*.deb x; rm -rf "$3.tmp"; mkdir -p "$3.tmp"
for m in $4; do find x/lib/modules -name "$m.ko" -exec cp {} "$3.tmp/" \;; done
rm -rf "$3"; mv "$3.tmp" "$3"`
	if out, err := exec.Command("sh", "-c", sh, "sh", t.TempDir(), pkg, dir, strings.Join(names, " ")).CombinedOutput(); err != nil {
		need(t, "fetching the modules of %s: %v\n%s", pkg, err, out)
	}
	if !have() {
		t.Fatalf("%s lacks one of the modules %v (compressed modules are not handled)", pkg, names)
	}
	return dir
}

// irqbalanceBinary returns Debian's irqbalance, downloaded (apt-get
// download, dpkg -x; never installed: its service would steer this
// host's interrupts) once per version into $COREPIN_CACHE.
func irqbalanceBinary(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("apt-cache", "policy", "irqbalance").Output()
	m := regexp.MustCompile(`Candidate: (\S+)`).FindSubmatch(out)
	if err != nil || m == nil || string(m[1]) == "(none)" {
		need(t, "apt-cache policy irqbalance names no candidate (run apt-get update): %v\n%s", err, out)
	}
	dir := filepath.Join(cacheDir(t), "irqbalance-"+string(m[1]))
	bin := filepath.Join(dir, "usr", "sbin", "irqbalance")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	sh := `set -e; cd "$1"; apt-get download irqbalance >/dev/null 2>&1; rm -rf "$2.tmp"; dpkg -x ./irqbalance_*.deb "$2.tmp"; rm -rf "$2"; mv "$2.tmp" "$2"`
	if out, err := exec.Command("sh", "-c", sh, "sh", t.TempDir(), dir).CombinedOutput(); err != nil {
		need(t, "fetching irqbalance: %v\n%s", err, out)
	}
	if out, err := exec.Command("ldd", bin).CombinedOutput(); err != nil || bytes.Contains(out, []byte("not found")) {
		need(t, "irqbalance's libraries on this host (apt-get install libglib2.0-0 libnuma1 libcap-ng0 libsystemd0): %v\n%s", err, out)
	}
	return bin
}
