package cli

import (
	"os"
	"strings"
	"testing"

	"github.com/corepin/corepin/cpuset"
)

// TestRunQoSBELoop: without an agent, run --qos BE runs the QoS loop over
// its own batch. The job sees a non-empty cpuset inside the pool it was
// given (the loop may have shrunk it), and the loop says what it did.
func TestRunQoSBELoop(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: corepin's BE root needs a writable cgroup (root)")
	}
	if _, ok := agentRunning(); ok {
		t.Skip("skipping: an agent runs here and controls BE work")
	}
	out, stderr, code := resultsCLI(t, "run", "--no-db", "--qos", "BE", "--suppress", "--cpus", "1", "--",
		"sh", "-c", "sleep 0.6; grep Cpus_allowed_list /proc/self/status")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	for _, want := range []string{"corepin: qos: no agent runs", "corepin: qos: last BE cpuset"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	_, list, ok := strings.Cut(out, "Cpus_allowed_list:")
	if !ok {
		t.Fatalf("job output lacks its affinity: %q", out)
	}
	set, err := cpuset.Parse(strings.TrimSpace(strings.SplitN(list, "\n", 2)[0]))
	if err != nil || set.IsEmpty() {
		t.Errorf("BE job ran on %q (%v), want a non-empty cpuset", list, err)
	}
}
