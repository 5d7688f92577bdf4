package cli

import (
	"bufio"
	"encoding/json"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/corepin/corepin/internal/testutil"
)

// replaceRunRoot points corepin run's topology at dir for one test.
func replaceRunRoot(t *testing.T, dir string) {
	t.Helper()
	old := runSysfsRoot
	runSysfsRoot = dir
	t.Cleanup(func() { runSysfsRoot = old })
}

// TestRunKeepsJobsOffIsolatedCPUs is issue 18's defect (isolcpus=6,7
// nohz_full=6,7, and corepin run --qos BE ran its batch on 6 and 7) on
// this machine's CPUs 0 and 1, CPU 0 isolated in the topology run reads
// (the lowest, which placement would take first): the BE batch (unbounded,
// the shared pool) and pinned LSE jobs run on CPU 1 only, as their own
// Cpus_allowed_list shows.
func TestRunKeepsJobsOffIsolatedCPUs(t *testing.T) {
	var live unix.CPUSet
	if err := unix.SchedGetaffinity(0, &live); err != nil || !live.IsSet(0) || !live.IsSet(1) {
		t.Skip("skipping: needs CPUs 0 and 1 in this process's affinity")
	}
	files := map[string]string{
		"sys/devices/system/cpu/online":    "0-1\n",
		"sys/devices/system/cpu/present":   "0-1\n",
		"sys/devices/system/cpu/isolated":  "0\n",
		"sys/devices/system/cpu/nohz_full": "0\n",
	}
	for _, cpu := range []string{"0", "1"} {
		files["sys/devices/system/cpu/cpu"+cpu+"/topology/thread_siblings_list"] = cpu + "\n"
		files["sys/devices/system/cpu/cpu"+cpu+"/topology/core_siblings_list"] = "0-1\n"
	}
	replaceRunRoot(t, testutil.WriteDir(t, mapFS(files)))
	for _, qos := range []string{"BE", "LSE"} {
		t.Run(qos, func(t *testing.T) {
			out, stderr, code := resultsCLI(t, "run", "--no-db", "-o", "json", "--driver", "affinity", "--qos", qos,
				"--jobs", "2", "--cpus", "1", "--", "sh", "-c", "grep Cpus_allowed_list /proc/self/status")
			if code != 0 {
				t.Fatalf("exit %d, stderr %q", code, stderr)
			}
			if n := strings.Count(stderr, "Cpus_allowed_list:\t1\n"); n != 2 || strings.Contains(stderr, "Cpus_allowed_list:\t0") {
				t.Errorf("jobs' Cpus_allowed_list (in stderr), want CPU 1 twice:\n%s", stderr)
			}
			sc := bufio.NewScanner(strings.NewReader(out))
			for sc.Scan() {
				var job struct {
					Cpuset string `json:"cpuset"`
				}
				if err := json.Unmarshal(sc.Bytes(), &job); err != nil {
					t.Fatalf("output line %q: %v", sc.Text(), err)
				}
				if job.Cpuset != "1" {
					t.Errorf("job cpuset %q, want 1 (CPU 0 is isolated)", job.Cpuset)
				}
			}
		})
	}
}
