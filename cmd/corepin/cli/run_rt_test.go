package cli

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/corepin/corepin/enforce"
)

// The LS real-time route through `corepin run --qos LS --sched rr|fifo`:
// every process of the job runs in the class (field 41 of
// /proc/PID/stat, read by a process the job's shell forked), at priority
// 1 (field 40), and the result says the job ran.
func TestRunSchedRealTime(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: a real-time class needs root here (CAP_SYS_NICE)")
	}
	if err := enforce.CheckRealTime(enforce.RealTime{Policy: enforce.RTRR}); err != nil {
		t.Skipf("skipping: %v", err)
	}
	for _, c := range []struct{ sched, policy string }{{"rr", "2"}, {"fifo", "1"}, {"normal", "0"}} {
		out, stderr, code := resultsCLI(t, "run", "--no-db", "-o", "json", "--qos", "LS", "--sched", c.sched, "--cpus", "0.2", "--",
			"sh", "-c", `cat /proc/self/stat`)
		if code != 0 {
			t.Fatalf("--sched %s: exit %d, stderr %q", c.sched, code, stderr)
		}
		var res struct {
			ExitCode   int    `json:"exit_code"`
			StdoutTail string `json:"stdout_tail"`
		}
		if err := json.Unmarshal([]byte(strings.SplitN(out, "\n", 2)[0]), &res); err != nil {
			t.Fatalf("--sched %s: %v in %q", c.sched, err, out)
		}
		_, rest, _ := strings.Cut(res.StdoutTail, ") ") // after the command's name
		f := strings.Fields(rest)
		if len(f) < 39 {
			t.Fatalf("--sched %s: /proc/self/stat %q", c.sched, res.StdoutTail)
		}
		// Fields 40 and 41 (rt_priority, policy) are the 38th and 39th
		// after the name.
		prio, policy := f[37], f[38]
		wantPrio := "1"
		if c.policy == "0" {
			wantPrio = "0"
		}
		if policy != c.policy || prio != wantPrio {
			t.Errorf("--sched %s: the job's forked process has policy %s priority %s, want %s and %s", c.sched, policy, prio, c.policy, wantPrio)
		}
	}
}
