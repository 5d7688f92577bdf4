package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/enforce"
	"github.com/corepin/corepin/measure"
)

// Issue 28 §2: an LS job of the real-time route that spins must not take
// the node. Beside it, system-like fair work (at nice -20, as a node's
// system daemons weigh against other fair work) keeps at least half of
// what the job's bound leaves it: on cgroup v1 with real-time group
// scheduling the job's share (its --cpus over the pool), elsewhere the
// kernel's 95%. The job itself uses no more than its share of the
// periods it ran in. The job is rr: under fifo, threads spinning on every
// CPU never yield to the Go runtime's own threads of the same class and
// priority (sysmon, the timers), so `workload spin --seconds 3` ran for
// ten minutes here until killed.
func TestRunSchedSpinnerLeavesSystemItsShare(t *testing.T) {
	requireCgroupRoot(t)
	if err := enforce.CheckRealTime(enforce.RealTime{Policy: enforce.RTRR}); err != nil {
		t.Skipf("skipping: %v", err)
	}
	n := runtime.NumCPU()
	const secs = 3
	share := enforce.MaxRTShare
	if _, err := os.Stat("/sys/fs/cgroup/cpu/cpu.rt_runtime_us"); err == nil {
		share = min(1/float64(n), 0.9) // --cpus 1 of the pool
	}
	sys := exec.Command("nice", "-n", "-20", binary, "workload", "spin", "--threads", strconv.Itoa(n), "--seconds", strconv.Itoa(secs))
	all := cpuset.Range(0, n-1)
	busy0, err := measure.ReadCPUBusy(os.DirFS("/proc"), all)
	if err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	if err := sys.Start(); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := run(t, "run", "--no-db", "-o", "json", "--qos", "LS", "--sched", "rr", "--cpus", "1", "--",
		binary, "workload", "spin", "--threads", strconv.Itoa(n), "--seconds", strconv.Itoa(secs))
	if code != 0 {
		t.Fatalf("corepin run --sched rr: exit %d: %s", code, errOut)
	}
	if err := sys.Wait(); err != nil {
		t.Fatal(err)
	}
	wall := time.Since(begin).Seconds()
	busy1, err := measure.ReadCPUBusy(os.DirFS("/proc"), all)
	if err != nil {
		t.Fatal(err)
	}
	var job struct {
		UserS float64 `json:"user_s"`
		SysS  float64 `json:"sys_s"`
		WallS float64 `json:"wall_s"`
	}
	if err := json.Unmarshal([]byte(strings.SplitN(out, "\n", 2)[0]), &job); err != nil {
		t.Fatalf("%v in %q", err, out)
	}
	rtCPU := job.UserS + job.SysS
	sysCPU := (sys.ProcessState.UserTime() + sys.ProcessState.SystemTime()).Seconds()
	// Other work on the machine (other users, a CI beside) took what it
	// took: the system-like work is owed half of what neither the job
	// nor that work used, up to half of what the job's share leaves.
	other := max(0, (busy1-busy0).Seconds()-rtCPU-sysCPU)
	t.Logf("on %d CPUs over %.1f s: the spinning rr job (share %.2f) used %.2f CPU-s in %.1f s, the nice -20 fair work %.2f CPU-s, other work %.2f CPU-s",
		n, wall, share, rtCPU, job.WallS, sysCPU, other)
	if bound := share*float64(n)*(job.WallS+1)*1.05 + 0.05; rtCPU > bound {
		t.Errorf("the spinning rr job used %.2f CPU-s in %.1f s, want at most %.2f (a share of %.2f of %d CPUs)", rtCPU, job.WallS, bound, share, n)
	}
	left := float64(n)*wall - rtCPU - other
	if least := 0.5 * min((1-share)*float64(n)*secs, left); sysCPU < least {
		t.Errorf("the system-like work beside the spinning rr job got %.2f CPU-s of %d s on %d CPUs, want at least %.2f (half of what the job's share of %.2f leaves, %.2f CPU-s left by the job and %.2f CPU-s of other work)",
			sysCPU, secs, n, least, share, left, other)
	}
}
