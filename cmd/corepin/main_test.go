package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corepin/corepin/internal/testutil"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "corepin-e2e")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "corepin")
	// Pinned runs share one state file (issue 10 §2); the tests' runs share
	// theirs, never the machine's /var/lib/corepin.
	if os.Getenv("COREPIN_STATE") == "" {
		os.Setenv("COREPIN_STATE", filepath.Join(dir, "state.db"))
	}
	out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput()
	if err != nil {
		os.Stderr.Write(out)
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func run(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), code
}

// TestTopoFixturesEndToEnd runs the real binary on every extracted dump and
// diffs its JSON with the topology package's golden files.
func TestTopoFixturesEndToEnd(t *testing.T) {
	for _, name := range testutil.Fixtures(t) {
		t.Run(name, func(t *testing.T) {
			root := testutil.ExtractTarBz2(t, name)
			out, errOut, code := run(t, "topo", "--sysfs-root", root, "-o", "json")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			want, err := os.ReadFile(filepath.Join("..", "..", "topology", "testdata", "TestDiscoverGolden", name+".golden.json"))
			if err != nil {
				t.Fatal(err)
			}
			if out != string(want) {
				t.Errorf("corepin topo -o json differs from the golden file for %s", name)
			}
			text, _, code := run(t, "topo", "--sysfs-root", root)
			if code != 0 || !strings.HasPrefix(text, "Machine: ") {
				t.Errorf("text output (exit %d) = %q", code, text)
			}
		})
	}
}

func TestTopoLive(t *testing.T) {
	out, errOut, code := run(t, "topo")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "Package 0") || !strings.Contains(out, "cores:") {
		t.Errorf("corepin topo output lacks the package/core view:\n%s", out)
	}
	if !strings.Contains(out, "\nWake placement: kernel ") {
		t.Errorf("corepin topo output lacks the wake-placement line:\n%s", out)
	}
	out, errOut, code = run(t, "topo", "-o", "json")
	if code != 0 {
		t.Fatalf("topo -o json: exit %d: %s", code, errOut)
	}
	// The scheduler section's keys are a contract (design.md): every one
	// present, null where unknown, inert_routes a list.
	var doc struct {
		Scheduler map[string]json.RawMessage `json:"scheduler"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"kernel", "features_readable", "features_writable", "sis_util", "sched_ext", "inert_routes"} {
		if _, ok := doc.Scheduler[k]; !ok {
			t.Errorf("topo -o json scheduler section lacks %q: %s", k, out)
		}
	}
	var ext struct{ State, Ops json.RawMessage }
	if err := json.Unmarshal(doc.Scheduler["sched_ext"], &ext); err != nil || ext.State == nil || ext.Ops == nil {
		t.Errorf("scheduler.sched_ext = %s (%v), want state and ops", doc.Scheduler["sched_ext"], err)
	}
	if r := string(doc.Scheduler["inert_routes"]); !strings.HasPrefix(r, "[") {
		t.Errorf("scheduler.inert_routes = %s, want a list", r)
	}
}

func TestExitCodes(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{name: "missing root", args: []string{"topo", "--sysfs-root", "/nonexistent"}, code: 2, msg: "--sysfs-root"},
		{name: "root without sysfs", args: []string{"topo", "--sysfs-root", os.TempDir()}, code: 2, msg: "no sys/devices/system/cpu"},
		{name: "bad output", args: []string{"topo", "-o", "yaml"}, code: 2, msg: "unknown output format"},
		{name: "unknown flag", args: []string{"topo", "--bogus"}, code: 2, msg: "unknown flag"},
		{name: "unknown command", args: []string{"bogus"}, code: 2, msg: "unknown command"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, errOut, code := run(t, tc.args...)
			if code != tc.code {
				t.Errorf("exit code = %d, want %d (stderr %q)", code, tc.code, errOut)
			}
			if !strings.Contains(errOut, tc.msg) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
				t.Errorf("stderr = %q, want one line containing %q", errOut, tc.msg)
			}
		})
	}
}
