package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corepin/corepin/topology"
)

// replaceSchedRoot points run --wake-scan at a machine root holding the
// features file data ("" for none) for one test, and the shared state
// at a file of its own; it returns the features file's path.
func replaceSchedRoot(t *testing.T, data string) string {
	t.Helper()
	root := t.TempDir()
	path := filepath.Join(root, topology.SchedFeaturesFile)
	if data != "" {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old := runSchedRoot
	runSchedRoot = root
	t.Cleanup(func() { runSchedRoot = old })
	t.Setenv("COREPIN_STATE", filepath.Join(t.TempDir(), "state.db"))
	return path
}

// TestRunWakeScan: a BE batch with --wake-scan full sees SIS_UTIL off
// while it runs and the value found back after; where the file is
// absent one note says so and the batch runs; unknown values and non-BE
// batches are refused with exit 2.
func TestRunWakeScan(t *testing.T) {
	const found = "WA_IDLE SIS_UTIL NO_SIS_PROP\n"
	t.Run("switched while the batch runs", func(t *testing.T) {
		path := replaceSchedRoot(t, found)
		out, stderr, code := resultsCLI(t, "run", "--no-db", "--qos", "BE", "--mode", "unbounded", "--driver", "affinity",
			"--wake-scan", "full", "--", "cat", path)
		if code != 0 {
			t.Fatalf("exit %d, stderr %q", code, stderr)
		}
		if !strings.Contains(out, "NO_SIS_UTIL") {
			t.Errorf("the job saw the features %q, want NO_SIS_UTIL", out)
		}
		if b, _ := os.ReadFile(path); !strings.Contains(string(b), "SIS_UTIL") || strings.Contains(string(b), "NO_SIS_UTIL") {
			t.Errorf("after the run the features say %q, want SIS_UTIL on, as found", b)
		}
		for _, want := range []string{"wake_scan full: SIS_UTIL off", "SIS_UTIL restored"} {
			if !strings.Contains(stderr, want) {
				t.Errorf("stderr lacks %q:\n%s", want, stderr)
			}
		}
	})
	t.Run("default changes nothing", func(t *testing.T) {
		path := replaceSchedRoot(t, found)
		out, stderr, code := resultsCLI(t, "run", "--no-db", "--qos", "BE", "--mode", "unbounded", "--driver", "affinity", "--", "cat", path)
		if code != 0 || !strings.Contains(out, found) || strings.Contains(stderr, "wake_scan") {
			t.Errorf("exit %d, job saw %q, stderr %q; want 0, the features as found, nothing said", code, out, stderr)
		}
	})
	t.Run("absent: said once, the batch runs", func(t *testing.T) {
		replaceSchedRoot(t, "")
		out, stderr, code := resultsCLI(t, "run", "--no-db", "--qos", "BE", "--mode", "unbounded", "--driver", "affinity",
			"--wake-scan", "full", "--", "echo", "ran")
		if code != 0 || !strings.Contains(out, "ran") {
			t.Fatalf("exit %d, stdout %q, stderr %q; want the batch run", code, out, stderr)
		}
		const want = "wake_scan full changes nothing: no scheduler features file (mount debugfs)"
		if n := strings.Count(stderr, want); n != 1 {
			t.Errorf("stderr says %q %d times, want once:\n%s", want, n, stderr)
		}
	})
	for _, tc := range []struct {
		name string
		args []string
		msg  string
	}{
		{name: "unknown value", args: []string{"--qos", "BE", "--wake-scan", "on"}, msg: `--wake-scan "on": want default or full`},
		{name: "not BE", args: []string{"--qos", "LS", "--mode", "quota", "--wake-scan", "full"}, msg: "--wake-scan full applies to --qos BE only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := replaceSchedRoot(t, found)
			_, stderr, code := resultsCLI(t, append(append([]string{"run", "--no-db"}, tc.args...), "--", "true")...)
			if code != 2 || !strings.Contains(stderr, tc.msg) {
				t.Errorf("exit %d, stderr %q; want 2 saying %q", code, stderr, tc.msg)
			}
			if b, _ := os.ReadFile(path); string(b) != found {
				t.Errorf("features %q after a refused run, want %q", b, found)
			}
		})
	}
}
