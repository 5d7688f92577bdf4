package e2evm

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// numa2SMT is 2 sockets x 2 cores x 2 threads, one NUMA node per socket;
// qemu numbers threads of a core consecutively (0-1 is core 0).
var numa2SMT = []string{"-smp", "8,sockets=2,cores=2,threads=2",
	"-object", "memory-backend-ram,id=m0,size=384M", "-object", "memory-backend-ram,id=m1,size=384M",
	"-numa", "node,cpus=0-3,nodeid=0,memdev=m0", "-numa", "node,cpus=4-7,nodeid=1,memdev=m1"}

var numa2SMTMachine = machine{online: "0-7", sockets: 2, cores: 4,
	nodeCPUs: map[int]string{0: "0-3", 1: "4-7"}, distances: map[int][]int{0: {10, 20}, 1: {20, 10}}}

// v2Runs are corepin run's modes and classes on cgroup v2, each job
// reading its own cgroup back (cginfo).
var v2Runs = runScript("pinned", "--cpus 2") +
	runScript("quota", "--qos LS --mode quota --cpus 1.5") +
	runScript("burst", "--mode burst --cpus 1") +
	runScript("unbounded", "--qos LS --mode unbounded --cpus 3") +
	runScript("be", "--qos BE")

// shapes are the machines, the longest first (the agent's, then the wake
// placement ones): two run at a time.
var shapes = append(append(baseShapes[:1:1], wakeShapes()...), baseShapes[1:]...)

var baseShapes = []shape{
	{
		name: "agent-v2", kernel: kernel612, mem: 768, cg: "v2", qemu: numa2SMT, script: agentScript,
	},
	{
		name: "numa2-smt-v2", kernel: kernel612, mem: 768, cg: "v2", qemu: numa2SMT,
		script: topoScript + "block controllers cat /sys/fs/cgroup/cgroup.controllers\n" + v2Runs + leftScript,
	},
	{
		name: "numa2-smt-v1", kernel: kernel61, mem: 768, cg: "v1", qemu: numa2SMT,
		script: topoScript + runScript("pinned", "--cpus 2") + runScript("quota", "--qos LS --mode quota --cpus 1.5") +
			runScript("unbounded", "--qos LS --mode unbounded --cpus 3") + runScript("be", "--qos BE") + leftScript,
	},
	{
		name: "numa4-uneven", kernel: kernel61, mem: 768, cg: "v2",
		qemu: []string{"-smp", "8,sockets=1,cores=4,threads=2",
			"-object", "memory-backend-ram,id=m0,size=192M", "-object", "memory-backend-ram,id=m1,size=192M",
			"-object", "memory-backend-ram,id=m2,size=192M", "-object", "memory-backend-ram,id=m3,size=192M",
			"-numa", "node,cpus=0-1,nodeid=0,memdev=m0", "-numa", "node,cpus=2-3,nodeid=1,memdev=m1",
			"-numa", "node,cpus=4-5,nodeid=2,memdev=m2", "-numa", "node,cpus=6-7,nodeid=3,memdev=m3",
			"-numa", "dist,src=0,dst=1,val=12", "-numa", "dist,src=0,dst=2,val=20", "-numa", "dist,src=0,dst=3,val=30",
			"-numa", "dist,src=1,dst=2,val=25", "-numa", "dist,src=1,dst=3,val=20", "-numa", "dist,src=2,dst=3,val=15"},
		script: topoScript + runScript("pinned", "--cpus 2") + leftScript,
	},
	{
		name: "memnode", kernel: kernel612, mem: 768, cg: "v2",
		qemu: []string{"-smp", "4,sockets=1,cores=2,threads=2",
			"-object", "memory-backend-ram,id=m0,size=512M", "-object", "memory-backend-ram,id=m1,size=256M",
			"-numa", "node,cpus=0-3,nodeid=0,memdev=m0", "-numa", "node,nodeid=1,memdev=m1"},
		script: topoScript + runScript("pinned", "--cpus 2") + runScript("be", "--qos BE") + leftScript,
	},
	{
		name: "offline", kernel: kernel61, mem: 768, cg: "v2", qemu: numa2SMT,
		script: "echo 0 > /sys/devices/system/cpu/cpu3/online; echo 0 > /sys/devices/system/cpu/cpu5/online\n" +
			topoScript + "block run.pinned3 corepin run --no-db -o json --jobs 3 --concurrency 3 --cpus 2 -- sleep 1\n" +
			runScript("be", "--qos BE") + leftScript,
	},
	{
		name: "isolcpus", kernel: kernel612, mem: 768, cg: "v2", qemu: numa2SMT, append: "isolcpus=6,7 nohz_full=6,7",
		script: topoScript +
			"block isolated.be corepin run --no-db --qos BE -- sh -c 'grep Cpus_allowed_list /proc/self/status'\n" +
			runScript("be", "--qos BE") + runScript("quota", "--qos LS --mode quota --cpus 1") +
			runScript("unbounded", "--qos LS --mode unbounded --cpus 1") + leftScript,
	},
}

func TestVMs(t *testing.T) {
	checks := map[string]func(*testing.T, *vm){
		"numa2-smt-v2": checkNUMA2V2, "numa2-smt-v1": checkNUMA2V1, "numa4-uneven": checkNUMA4,
		"memnode": checkMemNode, "offline": checkOffline, "isolcpus": checkIsolcpus, "agent-v2": checkAgent,
	}
	for _, s := range wakeShapes() {
		checks[s.name] = checkWake
	}
	only := strings.Fields(strings.ReplaceAll(getenv("COREPIN_E2E_VM_ONLY"), ",", " "))
	t.Cleanup(func() { logReport(t) })
	// Two machines at a time: each emulated machine keeps about one host
	// CPU busy, and CI has two.
	sem := make(chan struct{}, 2)
	for _, s := range shapes {
		if len(only) > 0 && !slices.Contains(only, s.name) {
			continue
		}
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			sem <- struct{}{}
			defer func() { <-sem }()
			checks[s.name](t, boot(t, s))
		})
	}
}

func checkNUMA2V2(t *testing.T, v *vm) {
	checkTopo(t, v, numa2SMTMachine)
	if c := v.get(t, "controllers"); !strings.Contains(c, "cpuset") || !strings.Contains(c, "cpu ") {
		t.Fatalf("cgroup.controllers = %q: the kernel offers no cpuset or cpu controller", c)
	}
	sys := sysfsOf(t, v)

	// Pinned (LSE): two CPUs of one core, their node's memory, no quota.
	p := runJob(t, v, "pinned")
	if p.Mode != "pinned" || len(parseList(t, p.Cpuset)) != 2 {
		t.Fatalf("pinned: mode %s cpuset %s, want pinned on 2 CPUs", p.Mode, p.Cpuset)
	}
	first := parseList(t, p.Cpuset)[0]
	if sib := sys[fmt.Sprintf("cpu/cpu%d/topology/thread_siblings_list", first)]; !sameList(t, sib, p.Cpuset) {
		t.Errorf("pinned: cpuset %s is not one whole core (thread siblings of cpu %d: %s)", p.Cpuset, first, sib)
	}
	node := "0"
	if first >= 4 {
		node = "1"
	}
	p.wantList(t, "pinned", "Cpus_allowed_list", p.Cpuset)
	p.wantList(t, "pinned", "cpuset.cpus", p.Cpuset)
	p.wantList(t, "pinned", "cpuset.cpus.effective", p.Cpuset)
	p.wantAll(t, "pinned", map[string]string{"cpuset.mems": node, "cpuset.mems.effective": node, "Mems_allowed_list": node,
		"cpu.max": "max 100000", "cpu.max.burst": "0", "cpu.weight": "100", "cpu.idle": "0"})
	checkV2Group(t, "pinned", p)

	// Quota (LS, 1.5 CPUs): 150ms per 100ms over the shared pool.
	q := runJob(t, v, "quota")
	q.wantAll(t, "quota", map[string]string{"cpu.max": "150000 100000", "cpu.weight": "100", "cpu.idle": "0", "cpuset.mems.effective": "0-1"})
	q.wantList(t, "quota", "cpuset.cpus.effective", "0-7")
	q.wantList(t, "quota", "Cpus_allowed_list", "0-7")
	checkV2Group(t, "quota", q)

	// Burst (1 CPU): quota of 2 CPUs; cpu.max.burst written 0 before it.
	b := runJob(t, v, "burst")
	b.wantAll(t, "burst", map[string]string{"cpu.max": "200000 100000", "cpu.max.burst": "0"})
	checkV2Group(t, "burst", b)

	// Unbounded (LS, 3 CPUs): weight 300, no quota.
	u := runJob(t, v, "unbounded")
	u.wantAll(t, "unbounded", map[string]string{"cpu.weight": "300", "cpu.max": "max 100000", "cpu.idle": "0"})
	checkV2Group(t, "unbounded", u)

	// BE: cpu.idle under its own root.
	be := runJob(t, v, "be")
	be.wantAll(t, "be", map[string]string{"cpu.idle": "1", "cpu.max": "max 100000"})
	if !strings.HasPrefix(be.info["cgroup"], "/corepin-be/") {
		t.Errorf("be: cgroup %s, want under /corepin-be", be.info["cgroup"])
	}
	checkV2Group(t, "be", be)
	checkLeft(t, v, "corepin", "corepin-be")
}

// checkV2Group checks what every v2 job's group shares: the parent
// enables cpuset and cpu for it and holds no process itself (the kernel's
// no-internal-process rule), and PSI was read from the group's own
// cpu.pressure.
func checkV2Group(t *testing.T, name string, j job) {
	t.Helper()
	sub := strings.Fields(j.info["parent.subtree_control"])
	if !slices.Contains(sub, "cpuset") || !slices.Contains(sub, "cpu") {
		t.Errorf("%s: parent's cgroup.subtree_control = %q, want cpuset and cpu", name, j.info["parent.subtree_control"])
	}
	if j.info["parent.procs"] != "0" {
		t.Errorf("%s: parent group holds %s processes, want 0 (no internal processes)", name, j.info["parent.procs"])
	}
	if !strings.HasPrefix(j.info["cpu.pressure"], "some avg10=") {
		t.Errorf("%s: cpu.pressure = %q, want PSI's 'some avg10=...'", name, j.info["cpu.pressure"])
	}
	if j.PSIScope != "group" || j.PSISome == nil {
		t.Errorf("%s: run reported psi_scope %q psi_some_s %v, want the group's own PSI", name, j.PSIScope, j.PSISome)
	}
}

func checkNUMA2V1(t *testing.T, v *vm) {
	checkTopo(t, v, numa2SMTMachine)
	p := runJob(t, v, "pinned")
	node := "0"
	if parseList(t, p.Cpuset)[0] >= 4 {
		node = "1"
	}
	p.wantList(t, "pinned", "Cpus_allowed_list", p.Cpuset)
	p.wantList(t, "pinned", "cpuset.cpus", p.Cpuset)
	p.wantList(t, "pinned", "cpuset.effective_cpus", p.Cpuset)
	p.wantAll(t, "pinned", map[string]string{"cpuset.mems": node, "cpu.cfs_quota_us": "-1", "cpu.shares": "1024"})
	q := runJob(t, v, "quota")
	q.wantAll(t, "quota", map[string]string{"cpu.cfs_quota_us": "150000", "cpu.cfs_period_us": "100000"})
	u := runJob(t, v, "unbounded")
	u.want(t, "unbounded", "cpu.shares", "3072") // weight 300, the kernel's mapping
	be := runJob(t, v, "be")
	be.want(t, "be", "cpu.idle", "1")
	checkLeft(t, v, "corepin", "corepin-be")
}

func checkNUMA4(t *testing.T, v *vm) {
	checkTopo(t, v, machine{online: "0-7", sockets: 1, cores: 4,
		nodeCPUs:  map[int]string{0: "0-1", 1: "2-3", 2: "4-5", 3: "6-7"},
		distances: map[int][]int{0: {10, 12, 20, 30}, 1: {12, 10, 25, 20}, 2: {20, 25, 10, 15}, 3: {30, 20, 15, 10}}})
	p := runJob(t, v, "pinned")
	c := parseList(t, p.Cpuset)
	if len(c) != 2 || c[0]/2 != c[1]/2 {
		t.Fatalf("pinned: cpuset %s, want the 2 CPUs of one node", p.Cpuset)
	}
	p.want(t, "pinned", "cpuset.mems.effective", fmt.Sprint(c[0]/2))
	p.wantList(t, "pinned", "Cpus_allowed_list", p.Cpuset)
	checkLeft(t, v, "corepin")
}

func checkMemNode(t *testing.T, v *vm) {
	checkTopo(t, v, machine{online: "0-3", sockets: 1, cores: 2,
		nodeCPUs: map[int]string{0: "0-3", 1: ""}, distances: map[int][]int{0: {10, 20}, 1: {20, 10}}})
	p := runJob(t, v, "pinned")
	p.want(t, "pinned", "cpuset.mems.effective", "0")
	p.wantList(t, "pinned", "Cpus_allowed_list", p.Cpuset)
	be := runJob(t, v, "be")
	be.want(t, "be", "cpuset.mems.effective", "0-1")
	checkLeft(t, v, "corepin", "corepin-be")
}

func checkOffline(t *testing.T, v *vm) {
	checkTopo(t, v, machine{online: "0-2,4,6-7", sockets: 2, cores: 4,
		nodeCPUs: map[int]string{0: "0-2", 1: "4,6-7"}, distances: map[int][]int{0: {10, 20}, 1: {20, 10}}})
	var held []int
	for _, l := range strings.Split(strings.TrimSpace(v.get(t, "run.pinned3")), "\n") {
		var j job
		if err := json.Unmarshal([]byte(l), &j); err != nil {
			t.Fatalf("run.pinned3: %v: %s", err, l)
		}
		for _, c := range parseList(t, j.Cpuset) {
			if c == 3 || c == 5 {
				t.Errorf("pinned job on %s, which holds offline cpu %d", j.Cpuset, c)
			}
			if slices.Contains(held, c) {
				t.Errorf("pinned job on %s: cpu %d given to two concurrent jobs", j.Cpuset, c)
			}
			held = append(held, c)
		}
	}
	be := runJob(t, v, "be")
	be.wantList(t, "be", "Cpus_allowed_list", "0-2,4,6-7")
	checkLeft(t, v, "corepin", "corepin-be")
}

func checkIsolcpus(t *testing.T, v *vm) {
	checkTopo(t, v, numa2SMTMachine)
	if iso := sysfsOf(t, v)["cpu/isolated"]; iso != "6-7" {
		t.Fatalf("kernel: cpu/isolated = %q, want 6-7 (isolcpus=6,7)", iso)
	}
	out := v.get(t, "isolated.be")
	t.Logf("corepin run --qos BE -- sh -c 'grep Cpus_allowed_list /proc/self/status':\n%s", out)
	if !strings.Contains(out, "Cpus_allowed_list:\t0-5\n") {
		t.Errorf("BE job's Cpus_allowed_list: %q, want 0-5 (isolated 6-7 are in no shared pool)", out)
	}
	for _, name := range []string{"be", "quota", "unbounded"} {
		j := runJob(t, v, name)
		j.wantList(t, name, "Cpus_allowed_list", "0-5")
		j.wantList(t, name, "cpuset.cpus.effective", "0-5")
	}
	checkLeft(t, v, "corepin", "corepin-be")
}
