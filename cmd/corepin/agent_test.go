package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corepin/corepin/agent"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/internal/testutil"
)

// TestAgentAndCtlEndToEnd runs the real binary as the agent and drives it
// with corepin ctl: create, get, list, top and delete, the exit codes of
// refusals, corepin topo drawing the assignment, and a graceful SIGTERM.
func TestAgentAndCtlEndToEnd(t *testing.T) {
	requireCgroupRoot(t)
	dir := t.TempDir()
	socket, state := filepath.Join(dir, "a.sock"), filepath.Join(dir, "state.db")
	root := fmt.Sprintf("corepin-e2e-agent-%d", os.Getpid())
	t.Cleanup(func() {
		for _, d := range []string{"cpuset", "cpu", "cpuacct"} {
			syscall.Rmdir(filepath.Join("/sys/fs/cgroup", d, root))
		}
	})
	agent := exec.Command(binary, "agent", "--socket", socket, "--state", state, "--cgroup-root", root)
	var logs strings.Builder
	agent.Stderr = &logs
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- agent.Wait() }()
	defer func() {
		agent.Process.Kill()
		<-done
	}()
	for deadline := time.Now().Add(testutil.Patience); ; {
		if c, err := net.Dial("unix", socket); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("agent did not listen within %v; log:\n%s", testutil.Patience, logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, p := range []string{socket, state} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, %v; want 0600", filepath.Base(p), fi.Mode().Perm(), err)
		}
	}
	ctl := func(args ...string) (string, string, int) {
		return run(t, append([]string{"ctl", "--socket", socket}, args...)...)
	}
	out, errOut, code := ctl("create", "e2e-1", "--cpus", "1", "--qos", "LSE", "-o", "json", "--", "sleep", "600")
	if code != 0 {
		t.Fatalf("ctl create: exit %d: %s", code, errOut)
	}
	var w struct {
		Name, QoS, Cpuset string
	}
	if err := json.Unmarshal([]byte(out), &w); err != nil || w.Name != "e2e-1" || w.Cpuset == "" {
		t.Fatalf("ctl create -o json = %q (%v)", out, err)
	}
	// Issue 17 §5: what the agent already runs is not adopted.
	groups, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup/cpuset", root, "run-*-e2e-1"))
	if len(groups) != 1 {
		t.Fatalf("e2e-1's groups: %v", groups)
	}
	lseGroup := root + "/" + filepath.Base(groups[0])
	lsePid := strings.Fields(readFile(t, filepath.Join(groups[0], "cgroup.procs")))
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", agent.Process.Pid))
	agentThread := tasks[len(tasks)-1].Name()
	adopt := func(how ...string) []string {
		return append([]string{"create", "evil", "--qos", "LS", "--cpus", "0.2"}, how...)
	}
	for _, tc := range []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
		noState  bool // $COREPIN_STATE names no file (the other tests' runs make theirs)
	}{
		{name: "another workload's group", args: adopt("--cgroup", lseGroup), wantCode: 2, wantErr: "corepin's own"},
		{name: "the agent's root as BE", args: []string{"create", "evil", "--qos", "BE", "--cpus", "0", "--cgroup", root}, wantCode: 2, wantErr: "corepin's own"},
		{name: "the agent's root as LSE", args: []string{"create", "evil", "--qos", "LSE", "--cpus", "1", "--cgroup", root}, wantCode: 2, wantErr: "corepin's own"},
		{name: "another workload's process", args: adopt("--pid", lsePid[0]), wantCode: 2, wantErr: "already run by corepin"},
		{name: "a thread of the agent", args: adopt("--pid", agentThread), wantCode: 2, wantErr: "the agent itself"},
		{name: "LS above the machine", args: []string{"create", "big", "--qos", "LS", "--cpus", "4096", "--", "sleep", "1"}, wantCode: 2, wantErr: "usable"},
		{name: "LS under 0.01", args: []string{"create", "tiny", "--qos", "LS", "--cpus", "0.001", "--", "sleep", "1"}, wantCode: 2, wantErr: "at least 0.01"},
		{name: "exists", args: []string{"create", "e2e-1", "--cpus", "1", "--", "sleep", "1"}, wantCode: 2, wantErr: "already"},
		{name: "unknown qos", args: []string{"create", "x", "--cpus", "1", "--qos", "GOLD", "--", "sleep", "1"}, wantCode: 2, wantErr: "unknown qos"},
		{name: "traversal", args: []string{"get", "../etc"}, wantCode: 2},
		{name: "missing", args: []string{"delete", "nope"}, wantCode: 2, wantErr: "no such workload"},
		{name: "no agent", args: []string{"--socket", filepath.Join(dir, "none.sock"), "list"}, wantCode: 1, noState: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.noState {
				t.Setenv("COREPIN_STATE", filepath.Join(dir, "none.db"))
			}
			_, errOut, code := ctl(tc.args...)
			if code != tc.wantCode || !strings.Contains(errOut, tc.wantErr) || strings.Count(errOut, "\n") != 1 {
				t.Errorf("ctl %v: exit %d, stderr %q; want exit %d and one line mentioning %q", tc.args, code, errOut, tc.wantCode, tc.wantErr)
			}
		})
	}
	if got := strings.Fields(readFile(t, filepath.Join(groups[0], "cgroup.procs"))); !slices.Equal(got, lsePid) {
		t.Errorf("e2e-1's group holds %v after the refused adoptions, want %v", got, lsePid)
	}
	if out, _, code := ctl("list"); code != 0 || !strings.Contains(out, "e2e-1") || !strings.Contains(out, "NAME") || strings.Contains(out, "evil") {
		t.Errorf("ctl list: exit %d:\n%s", code, out)
	}
	if out, _, code := ctl("top", "--interval", "200ms", "-o", "json"); code != 0 || !strings.Contains(out, `"e2e-1"`) ||
		!strings.Contains(out, `"scheduler"`) || !strings.Contains(out, `"sis_util"`) {
		t.Errorf("ctl top -o json: exit %d, want e2e-1 and the agent's scheduler section:\n%s", code, out)
	}
	if out, _, code := ctl("top", "--interval", "200ms"); code != 0 || !strings.Contains(out, "Wake placement: kernel ") {
		t.Errorf("ctl top: exit %d, want the wake placement line:\n%s", code, out)
	}
	if out, _, code := run(t, "topo", "--socket", socket); code != 0 || !strings.Contains(out, "e2e-1") {
		t.Errorf("corepin topo with an agent does not show the workload: exit %d:\n%s", code, out)
	}
	if out, _, code := run(t, "topo", "--socket", socket, "-o", "json"); code != 0 || !strings.Contains(out, `"workloads"`) || !strings.Contains(out, `"numa_distances"`) {
		t.Errorf("corepin topo -o json with an agent: exit %d:\n%s", code, out)
	}
	if _, errOut, code := ctl("delete", "e2e-1"); code != 0 {
		t.Fatalf("ctl delete: exit %d: %s", code, errOut)
	}
	agent.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		done <- err
		if err != nil {
			t.Errorf("agent after SIGTERM: %v; log:\n%s", err, logs.String())
		}
	case <-time.After(testutil.Patience):
		t.Fatalf("agent did not stop within %v of SIGTERM", testutil.Patience)
	}
	if _, err := os.Stat(socket); err == nil {
		t.Error("socket left behind after a graceful stop")
	}
	// A state file that is not corepin's: exit 2, one line, file unchanged.
	bad := filepath.Join(dir, "bad.db")
	os.WriteFile(bad, []byte("not a database\n"), 0o600)
	_, errOut, code = run(t, "agent", "--socket", filepath.Join(dir, "b.sock"), "--state", bad, "--cgroup-root", root)
	if b, _ := os.ReadFile(bad); code != 2 || string(b) != "not a database\n" || !strings.Contains(errOut, "left unchanged") {
		t.Errorf("agent on a foreign file: exit %d, stderr %q, file %q", code, errOut, b)
	}
}

// Issue 10 §2: two `corepin run --mode pinned --cpus 1 --jobs 2` started
// together, sharing the state file, with and without an agent on it: no
// two jobs that run at the same time share a CPU. Each job prints its own
// Cpus_allowed_list and its start and end times; the lists are compared
// as CPU sets. With an agent, the agent must answer before the runs start
// and still answer after they end (issue 17 §6: the test went on without
// one when it never started, and took "0" and "0-1" for disjoint).
func TestTwoPinnedRunsNeverShareACPU(t *testing.T) {
	requireCgroupRoot(t)
	for _, withAgent := range []bool{false, true} {
		t.Run(fmt.Sprintf("agent=%v", withAgent), func(t *testing.T) {
			dir := t.TempDir()
			state := filepath.Join(dir, "state.db")
			if withAgent {
				root := fmt.Sprintf("corepin-e2e-runs-%d", os.Getpid())
				t.Cleanup(func() {
					for _, d := range []string{"cpuset", "cpu", "cpuacct"} {
						syscall.Rmdir(filepath.Join("/sys/fs/cgroup", d, root))
					}
				})
				socket := filepath.Join(dir, "a.sock")
				a := exec.Command(binary, "agent", "--socket", socket, "--state", state, "--cgroup-root", root)
				var logs strings.Builder
				a.Stderr = &logs
				if err := a.Start(); err != nil {
					t.Fatal(err)
				}
				exited := make(chan error, 1)
				go func() { exited <- a.Wait() }()
				defer func() {
					a.Process.Signal(syscall.SIGTERM)
					select {
					case <-exited:
					case <-time.After(30 * time.Second):
						a.Process.Kill()
						<-exited
					}
				}()
				cl := agent.NewClient(socket, "")
				serving := func(when string) {
					t.Helper()
					for deadline := time.Now().Add(testutil.Patience); cl.Healthy() != nil; {
						select {
						case err := <-exited:
							exited <- err
							t.Fatalf("%s: the agent exited (%v); log:\n%s", when, err, logs.String())
						default:
						}
						if time.Now().After(deadline) {
							t.Fatalf("%s: the agent does not answer /healthz after %v; log:\n%s", when, testutil.Patience, logs.String())
						}
						time.Sleep(20 * time.Millisecond)
					}
				}
				serving("before the runs")
				defer serving("after the runs")
			}
			job := `grep Cpus_allowed_list /proc/self/status; echo start $(date +%s%N); ` + spin + `; echo end $(date +%s%N)`
			type span struct {
				cpus       cpuset.CPUSet
				start, end int64
			}
			var spans []span
			outs := make([]*strings.Builder, 2)
			errs := make([]*strings.Builder, 2)
			cmds := make([]*exec.Cmd, 2)
			for i := range cmds {
				outs[i] = &strings.Builder{}
				cmds[i] = exec.Command(binary, "run", "--db", filepath.Join(dir, fmt.Sprintf("r%d.db", i)), "--jobs", "2", "--concurrency", "2",
					"--cpus", "1", "--mode", "pinned", "-o", "json", "--", "sh", "-c", job)
				cmds[i].Env = append(os.Environ(), "COREPIN_STATE="+state)
				cmds[i].Stdout = outs[i]
				errs[i] = &strings.Builder{}
				cmds[i].Stderr = errs[i]
				if err := cmds[i].Start(); err != nil {
					t.Fatal(err)
				}
			}
			for i, c := range cmds {
				if err := c.Wait(); err != nil {
					t.Fatalf("run %d: %v: %s", i, err, errs[i])
				}
				for _, j := range decodeJobs(t, outs[i].String()) {
					var s span
					for _, l := range strings.Split(j.StdoutTail, "\n") {
						f := strings.Fields(l)
						switch {
						case len(f) == 2 && f[0] == "Cpus_allowed_list:":
							set, err := cpuset.Parse(f[1])
							if err != nil {
								t.Fatalf("run %d job %d: Cpus_allowed_list %q: %v", i, j.Job, f[1], err)
							}
							s.cpus = set
						case len(f) == 2 && f[0] == "start":
							fmt.Sscan(f[1], &s.start)
						case len(f) == 2 && f[0] == "end":
							fmt.Sscan(f[1], &s.end)
						}
					}
					if s.cpus.IsEmpty() || s.end == 0 || j.ExitCode != 0 {
						t.Fatalf("run %d job %d: output %q, exit %d", i, j.Job, j.StdoutTail, j.ExitCode)
					}
					spans = append(spans, s)
				}
			}
			if len(spans) != 4 {
				t.Fatalf("%d jobs, want 4", len(spans))
			}
			for i := range spans {
				for k := i + 1; k < len(spans); k++ {
					a, b := spans[i], spans[k]
					overlap := a.start < b.end && b.start < a.end
					if overlap && a.cpus.Intersects(b.cpus) {
						t.Errorf("jobs on cpus %s and %s overlap in time: %+v and %+v", a.cpus, b.cpus, a, b)
					}
				}
			}
		})
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Issue 30 §2: the real agent with the node setting sched_ext layered on
// this machine. Without /sys/kernel/sched_ext it starts nothing and says
// so in ctl top (text and -o json) and in its metrics; with sched_ext the
// supervision itself is schedext's tests' (a fake sysfs root).
func TestAgentSchedExtSetting(t *testing.T) {
	requireCgroupRoot(t)
	if _, err := os.Stat("/sys/kernel/sched_ext"); err == nil {
		t.Skip("this kernel has sched_ext: the agent would start the fake scheduler for real")
	}
	dir := t.TempDir()
	scx := filepath.Join(dir, "scx_layered")
	if err := os.WriteFile(scx, []byte("#!/bin/sh\ntouch \"$0.ran\"\nsleep 600\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "agent.yaml")
	if err := os.WriteFile(conf, []byte("sched_ext:\n  mode: layered\n  binary: "+scx+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	socket, state := filepath.Join(dir, "a.sock"), filepath.Join(dir, "state.db")
	root := fmt.Sprintf("corepin-e2e-scx-%d", os.Getpid())
	t.Cleanup(func() {
		for _, d := range []string{"cpuset", "cpu", "cpuacct", ""} {
			syscall.Rmdir(filepath.Join("/sys/fs/cgroup", d, root))
		}
	})
	a := exec.Command(binary, "agent", "--config", conf, "--socket", socket, "--state", state, "--cgroup-root", root)
	var logs testutil.SyncBuffer // read while exec's goroutine copies the agent's stderr into it
	a.Stderr = &logs
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		a.Process.Kill()
		a.Wait()
	}()
	top := func(args ...string) string {
		t.Helper()
		var out string
		for deadline := time.Now().Add(testutil.Patience); ; time.Sleep(20 * time.Millisecond) {
			o, _, code := run(t, append([]string{"ctl", "--socket", socket, "top", "--interval", "100ms"}, args...)...)
			if code == 0 && (strings.Contains(o, "no sched_ext in this kernel") || strings.Contains(o, `"state": "unavailable"`)) {
				return o
			}
			out = o
			if time.Now().After(deadline) {
				t.Fatalf("ctl top %v never said sched_ext is unavailable:\n%s\nagent log:\n%s", args, out, logs.String())
			}
		}
	}
	if out := top(); !strings.Contains(out, "sched_ext layered route: no sched_ext in this kernel: the fair class decides") ||
		!strings.Contains(out, "off -> unavailable, unavailable: no /sys/kernel/sched_ext") {
		t.Errorf("ctl top:\n%s", out)
	}
	var doc struct {
		Route struct {
			Mode, State, Decides string
			InertRoutes          []string `json:"inert_routes"`
		} `json:"sched_ext_route"`
	}
	if err := json.Unmarshal([]byte(top("-o", "json")), &doc); err != nil || doc.Route.Mode != "layered" || doc.Route.Decides != "fair" ||
		doc.Route.InertRoutes == nil || len(doc.Route.InertRoutes) != 0 {
		t.Errorf("ctl top -o json sched_ext_route = %+v (%v)", doc.Route, err)
	}
	if _, err := os.Stat(scx + ".ran"); err == nil {
		t.Error("the agent ran scx_layered on a kernel without sched_ext")
	}
	if !strings.Contains(logs.String(), "sched_ext: scx_layered not started") {
		t.Errorf("the agent's log does not say scx_layered was not started:\n%s", logs.String())
	}
}
