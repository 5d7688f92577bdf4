package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// --no-load-balance and --no-cpu-quota are for LSE and LSR jobs (and the
// first for a cpuset cgroup): anything else exits 2 before a job starts.
func TestRunLowLatencyRefused(t *testing.T) {
	t.Setenv("COREPIN_STATE", filepath.Join(t.TempDir(), "state.db"))
	marker := filepath.Join(t.TempDir(), "ran")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{name: "no load balancing, LS", args: []string{"--no-load-balance", "--qos", "LS", "--mode", "quota"},
			want: "--no-load-balance applies to --qos LSE or LSR only"},
		{name: "no load balancing, BE", args: []string{"--no-load-balance", "--qos", "BE"},
			want: "--no-load-balance applies to --qos LSE or LSR only"},
		{name: "no quota, LS", args: []string{"--no-cpu-quota", "--qos", "LS", "--mode", "quota"},
			want: "--no-cpu-quota applies to --qos LSE or LSR only"},
		{name: "no quota, BE", args: []string{"--no-cpu-quota", "--qos", "BE"},
			want: "--no-cpu-quota applies to --qos LSE or LSR only"},
		{name: "no load balancing without a cgroup", args: []string{"--no-load-balance", "--qos", "LSE", "--driver", "affinity"},
			want: "--no-load-balance needs a cpuset cgroup"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, code := resultsCLI(t, append(append([]string{"run", "--no-db"}, tc.args...), "--", "touch", marker)...)
			if code != 2 || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want 2 saying %q", code, stderr, tc.want)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Errorf("a refused run ran its job")
			}
		})
	}
}

// As root on this machine's cgroup v1 (its cpuset root balancing every
// CPU): a --no-load-balance job fails (exit 1) with the layout's reason
// in its row, and never runs; --no-cpu-quota alone runs the job in a
// group without a quota.
func TestRunNoLoadBalanceRefusedHere(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: corepin's cgroups need root")
	}
	flag, err := os.ReadFile("/sys/fs/cgroup/cpuset/cpuset.sched_load_balance")
	if err != nil || strings.TrimSpace(string(flag)) != "1" {
		t.Skipf("skipping: no cgroup v1 cpuset root balancing every CPU here (%q, %v)", flag, err)
	}
	t.Setenv("COREPIN_STATE", filepath.Join(t.TempDir(), "state.db"))
	marker := filepath.Join(t.TempDir(), "ran")
	out, stderr, code := resultsCLI(t, "run", "--no-db", "-o", "json", "--qos", "LSE", "--cpus", "1", "--driver", "cgroup-v1",
		"--no-load-balance", "--", "touch", marker)
	var row struct {
		ExitCode int    `json:"exit_code"`
		Error    string `json:"error"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &row); err != nil {
		t.Fatalf("stdout %q: %v; stderr %q", out, err, stderr)
	}
	const want = "cannot take the CPUs out of load balancing: cgroup v1 cpuset /sys/fs/cgroup/cpuset (the hierarchy's root) has cpuset.sched_load_balance 1"
	if code != 1 || !strings.Contains(row.Error, want) {
		t.Errorf("exit %d, job error %q; want 1 and the error saying %q", code, row.Error, want)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("the refused job ran")
	}
	quota := filepath.Join(t.TempDir(), "quota")
	out, stderr, code = resultsCLI(t, "run", "--no-db", "--qos", "LSE", "--cpus", "1", "--driver", "cgroup-v1", "--no-cpu-quota", "--",
		"sh", "-c", `cg=$(grep -E '^[0-9]+:cpu(,cpuacct)?:' /proc/self/cgroup | cut -d: -f3); cat /sys/fs/cgroup/cpu$cg/cpu.cfs_quota_us > "$0"`, quota)
	got, _ := os.ReadFile(quota)
	if code != 0 || strings.TrimSpace(string(got)) != "-1" {
		t.Errorf("--no-cpu-quota: exit %d, the job's cpu.cfs_quota_us %q (stdout %q, stderr %q); want -1", code, got, out, stderr)
	}
}
