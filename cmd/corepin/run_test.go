package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/internal/testutil"
)

func requireCgroupRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("corepin run with cgroups needs root")
	}
	if _, err := os.Stat("/sys/fs/cgroup/cpuset/cgroup.procs"); err != nil {
		if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err != nil {
			t.Skip("no cgroup v1 cpuset or cgroup v2 mount")
		}
	}
}

type jobJSON struct {
	Job              int     `json:"job"`
	Cpuset           string  `json:"cpuset"`
	Mode             string  `json:"mode"`
	WallS            float64 `json:"wall_s"`
	CPUsUsed         string  `json:"cpus_used"`
	ThrottledPeriods int     `json:"throttled_periods"`
	ThrottledS       float64 `json:"throttled_s"`
	ExitCode         int     `json:"exit_code"`
	StdoutTail       string  `json:"stdout_tail"`
}

func decodeJobs(t *testing.T, out string) []jobJSON {
	t.Helper()
	var jobs []jobJSON
	dec := json.NewDecoder(strings.NewReader(out))
	for dec.More() {
		var j jobJSON
		if err := dec.Decode(&j); err != nil {
			t.Fatalf("decoding %q: %v", out, err)
		}
		jobs = append(jobs, j)
	}
	return jobs
}

const spin = `i=0; while [ $i -lt 150000 ]; do i=$((i+1)); done`

// The first must-show: two concurrent pinned jobs on different
// single CPUs, each seeing only its own, cpus_used inside cpuset.
func TestRunPinnedJSON(t *testing.T) {
	requireCgroupRoot(t)
	db := filepath.Join(t.TempDir(), "r.db")
	out, errOut, code := run(t, "run", "--db", db, "--jobs", "4", "--concurrency", "2", "--cpus", "1", "--mode", "pinned", "-o", "json", "--",
		"sh", "-c", "grep Cpus_allowed_list /proc/self/status; "+spin)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	jobs := decodeJobs(t, out)
	if len(jobs) != 4 {
		t.Fatalf("%d job objects, want 4:\n%s", len(jobs), out)
	}
	for _, j := range jobs {
		set := cpuset.MustParse(j.Cpuset)
		if set.Size() != 1 || !strings.Contains(j.StdoutTail, "Cpus_allowed_list:\t"+j.Cpuset+"\n") {
			t.Errorf("job %d: cpuset %q, saw %q", j.Job, j.Cpuset, j.StdoutTail)
		}
		if used := cpuset.MustParse(j.CPUsUsed); used.IsEmpty() || !used.IsSubsetOf(set) {
			t.Errorf("job %d: cpus_used %q not inside cpuset %q", j.Job, j.CPUsUsed, j.Cpuset)
		}
	}
	if jobs[0].Cpuset == jobs[1].Cpuset {
		t.Errorf("concurrent jobs 0 and 1 both on cpu %s", jobs[0].Cpuset)
	}
	// The rows are in the results database.
	csv, errOut, code := run(t, "results", "--db", db, "--format", "csv")
	if code != 0 {
		t.Fatalf("corepin results: exit %d: %s", code, errOut)
	}
	if n := strings.Count(strings.TrimSpace(csv), "\n"); n != 4 {
		t.Errorf("results csv has %d rows, want 4:\n%s", n, csv)
	}
}

// untilThrottled is a job of three busy loops that ends once its own cpu
// cgroup (v1, else v2) counts time throttled (added when a throttled
// period ends, after nr_throttled counts it), or after about 120 s: a
// fixed amount of work is throttled only if the machine gives it more
// than its quota, which a loaded one may not.
const untilThrottled = `cg=$(awk -F: '$2 ~ /(^|,)cpu(,|$)/ {print "/sys/fs/cgroup/" $2 $3; exit}' /proc/self/cgroup)
[ -n "$cg" ] || cg=/sys/fs/cgroup$(sed -n 's/^0:://p' /proc/self/cgroup)
for i in 1 2 3; do (while :; do :; done) & p="$p $!"; done
n=0; until awk '($1 == "throttled_time" || $1 == "throttled_usec") && $2 > 0 {f = 1} END {exit !f}' "$cg/cpu.stat" || [ $n -ge 2400 ]; do n=$((n+1)); sleep 0.05; done
kill $p`

// Quota jobs share the pool and their throttling is counted.
func TestRunQuotaJSON(t *testing.T) {
	requireCgroupRoot(t)
	burners := untilThrottled
	out, errOut, code := run(t, "run", "--no-db", "--jobs", "2", "--concurrency", "2", "--cpus", "0.2", "--mode", "quota", "-o", "json", "--", "sh", "-c", burners)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	jobs := decodeJobs(t, out)
	if len(jobs) != 2 || jobs[0].Cpuset != jobs[1].Cpuset || cpuset.MustParse(jobs[0].Cpuset).Size() < 1 {
		t.Fatalf("quota jobs should share one pool: %+v", jobs)
	}
	for _, j := range jobs {
		if j.Mode != "quota" || j.ThrottledPeriods == 0 || j.ThrottledS <= 0 {
			t.Errorf("job %d: mode %s throttled %d periods (%v s), want throttling", j.Job, j.Mode, j.ThrottledPeriods, j.ThrottledS)
		}
	}
}

// SIGINT mid-batch: partial results kept, no corepin cgroup and no child
// process remains.
func TestRunSIGINTLeavesNothing(t *testing.T) {
	requireCgroupRoot(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "r.db")
	cmd := exec.Command(binary, "run", "--db", db, "--jobs", "6", "--concurrency", "2", "--cpus", "1", "--", "sh", "-c",
		"sleep 60 & echo $! >> "+dir+"/pids; echo $$ >> "+dir+"/pids; wait")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(testutil.Patience)
	for {
		b, _ := os.ReadFile(filepath.Join(dir, "pids"))
		if strings.Count(string(b), "\n") >= 4 {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("jobs did not start: %s", stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	groups := corepinGroups(t, cmd.Process.Pid)
	if len(groups) == 0 {
		t.Errorf("no corepin job group while jobs run")
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(testutil.Patience):
		cmd.Process.Kill()
		t.Fatal("corepin did not exit after SIGINT")
	}
	if cmd.ProcessState.ExitCode() == 0 {
		t.Errorf("exit code 0 after SIGINT, want a failure")
	}
	b, _ := os.ReadFile(filepath.Join(dir, "pids"))
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		pid, _ := strconv.Atoi(sc.Text())
		if pid > 0 && syscall.Kill(pid, 0) == nil {
			if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && !strings.Contains(string(st), ") Z ") {
				t.Errorf("process %d still running after SIGINT", pid)
			}
		}
	}
	for _, g := range groups {
		if _, err := os.Stat(g); err == nil {
			t.Errorf("group %s remains after SIGINT", g)
		}
	}
	out, errOut, code := run(t, "results", "--db", db, "-o", "json")
	if code != 0 {
		t.Fatalf("corepin results: exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "SIGKILL") && !strings.Contains(out, "killed") {
		t.Errorf("killed jobs not recorded: %s", out)
	}
}

// corepinGroups lists corepin's run groups owned by process owner, or with
// owner 0 those whose owner is gone: groups left behind. Groups of live
// corepin processes of other tests running at the same time are not
// listed.
func corepinGroups(t *testing.T, owner int) []string {
	t.Helper()
	var out []string
	for _, pat := range []string{"/sys/fs/cgroup/*/corepin/run-*", "/sys/fs/cgroup/corepin/run-*"} {
		m, _ := filepath.Glob(pat)
		for _, g := range m {
			// run-<pid>-<start>-<name>: the corepin process that owns it.
			f := strings.SplitN(strings.TrimPrefix(filepath.Base(g), "run-"), "-", 2)
			pid, err := strconv.Atoi(f[0])
			switch {
			case err != nil:
				out = append(out, g)
			case owner > 0 && pid == owner:
				out = append(out, g)
			case owner == 0 && syscall.Kill(pid, 0) != nil:
				out = append(out, g)
			}
		}
	}
	return out
}

// A real ffmpeg batch of 4 transcodes completes with per-job rows, frames
// included, in the results database.
func TestRunTranscodeBatchRecorded(t *testing.T) {
	requireCgroupRoot(t)
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		t.Skip("ffmpeg not installed (Debian package ffmpeg)")
	}
	dir := t.TempDir()
	db := filepath.Join(dir, "r.db")
	_, errOut, code := run(t, "run", "--db", db, "--jobs", "4", "--concurrency", "2", "--cpus", "1", "--", binary,
		"workload", "transcode", "--cache-dir", dir, "--size", "320x180", "--seconds", "1", "--preset", "veryfast", "--threads", "{threads}", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	out, errOut, code := run(t, "results", "--db", db, "-o", "json")
	if code != 0 {
		t.Fatalf("corepin results: exit %d: %s", code, errOut)
	}
	var res struct {
		Jobs []struct {
			Job        int      `json:"job"`
			ExitCode   int      `json:"exit_code"`
			Cpuset     string   `json:"cpuset"`
			FramesPerS *float64 `json:"frames_per_s"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("decoding %s: %v", out, err)
	}
	if len(res.Jobs) != 4 {
		t.Fatalf("%d job rows, want 4: %s", len(res.Jobs), out)
	}
	for _, j := range res.Jobs {
		if j.ExitCode != 0 || j.FramesPerS == nil || *j.FramesPerS <= 0 || cpuset.MustParse(j.Cpuset).Size() != 1 {
			t.Errorf("job row %+v: want exit 0, frames/s > 0, one pinned cpu", j)
		}
	}
}
