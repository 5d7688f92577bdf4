package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Issue 27 §3: corepin bench did not stop within 3 s of SIGTERM. SIGTERM
// in the middle of a measured job ends the job and the bench (exit 1,
// "bench stopped", what was measured reported) at once; the bound here
// is generous for a loaded machine, the code takes well under a second.
func TestBenchStopsOnSIGTERM(t *testing.T) {
	dir := t.TempDir()
	spec := filepath.Join(dir, "slow.yaml")
	if err := os.WriteFile(spec, []byte(`
concurrency:
  job: {workload: spin, job_seconds: 600}
  modes: [pinned]
  concurrency: [1]
  cpus: [1]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "bench", "concurrency", "--spec", spec, "--repeats", "1", "--driver", "affinity",
		"--db", filepath.Join(dir, "r.db"), "--report-dir", filepath.Join(dir, "report"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// Wait for a spin job of the bench (its warm-up run, 600 s long).
	var job int
	for deadline := time.Now().Add(2 * time.Minute); job == 0; {
		select {
		case err := <-exited:
			t.Fatalf("bench ended before its first job: %v\nstderr:\n%s", err, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("no spin job of the bench after 2 minutes\nstderr:\n%s", stderr.String())
		}
		for _, pid := range descendants(cmd.Process.Pid) {
			if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline"); err == nil && bytes.Contains(b, []byte("--ops")) {
				job = pid
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var err error
	select {
	case err = <-exited:
	case <-time.After(5 * time.Second):
		cmd.Process.Kill()
		syscall.Kill(job, syscall.SIGKILL)
		<-exited
		t.Fatalf("bench still running 5 s after SIGTERM\nstderr:\n%s", stderr.String())
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(stderr.String(), "corepin: bench stopped: context canceled") {
		t.Errorf("bench after SIGTERM: %v, stderr %q; want exit 1 saying the bench stopped", err, stderr.String())
	}
	if !strings.Contains(stdout.String(), "Results: ") {
		t.Errorf("bench after SIGTERM reported nothing: stdout %q", stdout.String())
	}
	if b, err := os.ReadFile("/proc/" + strconv.Itoa(job) + "/cmdline"); err == nil && bytes.Contains(b, []byte("--ops")) {
		t.Errorf("the bench's spin job %d outlived it", job)
	}
}

// descendants are the processes below pid, read from /proc.
func descendants(pid int) []int {
	ents, _ := os.ReadDir("/proc")
	children := map[int][]int{}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(b, ')')
		f := strings.Fields(string(b[i+1:]))
		if i < 0 || len(f) < 2 {
			continue
		}
		if ppid, err := strconv.Atoi(f[1]); err == nil {
			children[ppid] = append(children[ppid], p)
		}
	}
	var out []int
	for queue := []int{pid}; len(queue) > 0; queue = queue[1:] {
		for _, c := range children[queue[0]] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}
