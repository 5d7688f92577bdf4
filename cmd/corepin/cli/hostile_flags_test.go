package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Issue 27 §3: `corepin bench --repeats 1000000000` was accepted,
// `--spec /dev/zero` read without end and `--spec FIFO` hung. Every count
// flag is bounded and every file a flag names is a regular file of bounded
// size; each refusal is exit 2 with one line naming the limit or what the
// file is, and nothing runs.
func TestHostileFlags(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("making a FIFO: %v", err)
	}
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, bytes.Repeat([]byte("#"), maxSpecBytes+1), 0o600); err != nil {
		t.Fatal(err)
	}
	long := filepath.Join(dir, "long.yaml")
	if err := os.WriteFile(long, []byte("concurrency:\n  concurrency: ["+strings.Repeat("1,", 64)+"1]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The node setting sched_ext naming a binary that cannot run (issue
	// 30 §2): refused at config load, before anything is started.
	notExec := filepath.Join(dir, "scx_layered")
	scxConf := filepath.Join(dir, "scx.yaml")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(scxConf, []byte("sched_ext:\n  mode: layered\n  binary: "+notExec+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "r.db")
	benchArgs := func(args ...string) []string {
		return append([]string{"bench", "--db", db, "--report-dir", filepath.Join(dir, "report")}, args...)
	}
	tests := []struct {
		name string
		args []string
		msg  string
	}{
		{name: "bench repeats 1e9", args: benchArgs("--repeats", "1000000000"), msg: "--repeats 1000000000: want 1 to 100"},
		{name: "bench repeats 0", args: benchArgs("--repeats", "0"), msg: "--repeats 0: want 1 to 100"},
		{name: "bench spec /dev/zero", args: benchArgs("--spec", "/dev/zero"), msg: "reading --spec: open /dev/zero: not a regular file: a character device"},
		{name: "bench spec FIFO", args: benchArgs("--spec", fifo), msg: "not a regular file: a named pipe"},
		{name: "bench spec directory", args: benchArgs("--spec", dir), msg: "not a regular file: a directory"},
		{name: "bench spec over 1 MiB", args: benchArgs("--spec", big), msg: "file too large: over 1048576 bytes"},
		{name: "bench spec list of 65", args: benchArgs("concurrency", "--spec", long), msg: "a list of 65 values at line 2: at most 64"},
		{name: "kube jobs spec FIFO", args: []string{"kube", "jobs", "--sweep", "concurrency", "--spec", fifo}, msg: "reading --spec: open " + fifo + ": not a regular file: a named pipe"},
		{name: "run jobs-file FIFO", args: []string{"run", "--no-db", "--jobs-file", fifo}, msg: "--jobs-file: open " + fifo + ": not a regular file: a named pipe"},
		{name: "run sample-interval 1ns", args: []string{"run", "--no-db", "--sample-interval", "1ns", "--", "true"}, msg: "--sample-interval 1ns: want 1ms to 1m"},
		{name: "run sched deadline", args: []string{"run", "--no-db", "--sched", "deadline", "--", "true"}, msg: `--sched "deadline": use normal, rr or fifo`},
		{name: "run BE sched rr", args: []string{"run", "--no-db", "--qos", "BE", "--sched", "rr", "--", "true"}, msg: "--sched rr is the real-time route of LS work on the shared pool"},
		{name: "run pinned sched fifo", args: []string{"run", "--no-db", "--cpus", "1", "--sched", "fifo", "--", "true"}, msg: "qos LSE: use --qos LS"},
		{name: "simulate topology FIFO", args: []string{"simulate", "--gen", "farm", "--topology", fifo}, msg: "--topology: open " + fifo + ": not a regular file"},
		{name: "simulate trace /dev/zero", args: []string{"simulate", "--trace", "/dev/zero"}, msg: "--trace: open /dev/zero: not a regular file: a character device"},
		{name: "simulate sample-every -5", args: []string{"simulate", "--gen", "farm", "--sample-every", "-5"}, msg: "--sample-every -5: want 0"},
		{name: "simulate mean-duration 1e300", args: []string{"simulate", "--gen", "farm", "--mean-duration", "1e300"}, msg: "at most 31536000 seconds"},
		{name: "load connections 1e9", args: []string{"load", "--url", "http://127.0.0.1:1/", "--connections", "1000000000"}, msg: "--connections 1000000000: want 1 to 10000"},
		{name: "pingpong size 1e12", args: []string{"pingpong", "client", "--connect", "127.0.0.1:1", "--messages", "1", "--size", "1000000000000"}, msg: "size 1 to 16777216 bytes"},
		{name: "ctl token-file FIFO", args: []string{"ctl", "list", "--token-file", fifo}, msg: "reading --token-file: open " + fifo + ": not a regular file"},
		{name: "nri irq-isolate on", args: []string{"nri", "--irq-isolate", "on"}, msg: `--irq-isolate: irq_isolate "on": want off, pod or exclusive`},
		{name: "irq sync interval 1ns", args: []string{"irq", "sync", "--interval", "1ns"}, msg: "--interval 1ns: give 100ms to 1m"},
		{name: "irq sync resync below interval", args: []string{"irq", "sync", "--interval", "2s", "--resync", "1s"}, msg: "--resync 1s: give --interval (2s) to 1h"},
		{name: "irq sync log format", args: []string{"irq", "sync", "--log-format", "yaml"}, msg: `--log-format "yaml": want text or json`},
		{name: "agent sched_ext binary not executable", args: []string{"agent", "--config", scxConf, "--socket", filepath.Join(dir, "a.sock"), "--state", filepath.Join(dir, "s.db")},
			msg: "sched_ext.binary " + notExec + " is not executable by this user: chmod +x it"},
		{name: "agent config FIFO", args: []string{"agent", "--config", fifo, "--socket", filepath.Join(dir, "a.sock"), "--state", filepath.Join(dir, "s.db")}, msg: "--config: open " + fifo + ": not a regular file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			stderr, code := mainReturns(t, tc.args...)
			if code != 2 || !strings.Contains(stderr, tc.msg) || strings.Count(stderr, "\n") != 1 {
				t.Errorf("exit %d, stderr %q; want exit 2 and one line with %q", code, stderr, tc.msg)
			}
		})
	}
	if _, err := os.Stat(db); err == nil {
		t.Error("a refused bench created its results database")
	}
}

// mainReturns runs Main with args and returns its stderr and exit code;
// it fails the test if Main has not returned after a minute (a FIFO
// waited on, a device read without end), far beyond what a refusal takes
// on any machine.
func mainReturns(t *testing.T, args ...string) (string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	done := make(chan int, 1)
	go func() { done <- Main(args, strings.NewReader(""), &out, &errb) }()
	select {
	case code := <-done:
		return errb.String(), code
	case <-time.After(time.Minute):
		t.Fatalf("corepin %s has not returned after a minute", strings.Join(args, " "))
		return "", 0
	}
}
