package e2evm

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// rtRouteShape shows the LS real-time route's bound on a kernel without
// real-time group scheduling under cgroup v2 (Debian 6.12, as most hosts
// run): a `corepin run --qos LS --sched rr` job spinning on every CPU
// beside system-like fair work (the quiet guest has no other),
// both measured by corepin run. The kernel's real-time throttling (95% of
// each period) and, on 6.12, its fair server keep the fair work running.
// TestVMs does not boot it; TestVMRealTimeRoute does.
var rtRouteShape = shape{
	name: "rt-route", kernel: kernel612, mem: 512, cg: "v2", qemu: []string{"-smp", "2"},
	script: `
block rt.kernel sh -c 'cat /proc/sys/kernel/sched_rt_runtime_us /proc/sys/kernel/sched_rt_period_us'
corepin run --no-db -o json --qos LS --mode unbounded --cpus 2 -- corepin workload spin --threads 2 --seconds 8 >/tmp/sys.json 2>/tmp/sys.err & S=$!
block rt.job corepin run --no-db -o json --qos LS --sched rr --cpus 1 -- corepin workload spin --threads 2 --seconds 6
wait $S
block rt.sys cat /tmp/sys.json
block rt.syserr cat /tmp/sys.err
`,
}

// TestVMRealTimeRoute boots rtRouteShape (with COREPIN_E2E_VM_ONLY set,
// only if it names rt-route): the spinning rr job ran and ended (no
// runtime thread starved), and the fair work beside it got at least half
// of the 5% of each CPU the kernel keeps from real-time tasks. Shares of
// CPU time, not timings, are what is compared (qemu's emulation distorts
// time, not the guest scheduler's split of it).
func TestVMRealTimeRoute(t *testing.T) {
	if only := strings.Fields(strings.ReplaceAll(getenv("COREPIN_E2E_VM_ONLY"), ",", " ")); len(only) > 0 && !slices.Contains(only, rtRouteShape.name) {
		t.Skip("COREPIN_E2E_VM_ONLY does not name rt-route")
	}
	v := boot(t, rtRouteShape)
	type result struct {
		UserS    float64 `json:"user_s"`
		SysS     float64 `json:"sys_s"`
		WallS    float64 `json:"wall_s"`
		ExitCode int     `json:"exit_code"`
	}
	parse := func(name string) result {
		t.Helper()
		var r result
		line, _, _ := strings.Cut(v.get(t, name), "\n")
		if err := json.Unmarshal([]byte(line), &r); err != nil || r.ExitCode != 0 {
			t.Fatalf("%s: %q: %v (exit %d)", name, line, err, r.ExitCode)
		}
		return r
	}
	job, sys := parse("rt.job"), parse("rt.sys")
	rtCPU, sysCPU := job.UserS+job.SysS, sys.UserS+sys.SysS
	t.Logf("kernel %s, sched_rt_runtime_us/period: %q; the spinning rr job: %.2f CPU-s in %.1f s; the fair work beside it: %.2f CPU-s in %.1f s",
		v.kernel, strings.Fields(v.get(t, "rt.kernel")), rtCPU, job.WallS, sysCPU, sys.WallS)
	if least := 0.5 * 0.05 * 2 * job.WallS; sysCPU < least {
		t.Errorf("the fair work beside the spinning rr job got %.2f CPU-s, want at least %.2f (half the kernel's 5%% of 2 CPUs over %.1f s)", sysCPU, least, job.WallS)
	}
	if rtCPU > 0.95*2*(job.WallS+1)*1.05+0.1 {
		t.Errorf("the rr job used %.2f CPU-s in %.1f s on 2 CPUs: past the kernel's throttling", rtCPU, job.WallS)
	}
}
