package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/internal/testutil"
	"github.com/corepin/corepin/irq"
)

// replaceIRQRoot points run --irq-isolate at a machine root whose
// proc/irq holds irq 10, movable over every CPU of this machine (all),
// for one test (none with absent), and the shared state at a file of its
// own; it returns the root and irq 10's affinity file.
func replaceIRQRoot(t *testing.T, absent bool) (root, file string, all cpuset.CPUSet) {
	t.Helper()
	root = t.TempDir()
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		t.Skipf("no online CPUs to read: %v", err)
	}
	if all, err = cpuset.Parse(string(b)); err != nil || all.Size() < 2 {
		t.Skipf("online CPUs %q: want at least 2 to keep one clear", b)
	}
	file = filepath.Join(root, irq.Dir, "10", irq.AffinityFile)
	if !absent {
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte(all.String()+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old := runIRQRoot
	runIRQRoot = root
	t.Cleanup(func() { runIRQRoot = old })
	t.Setenv("COREPIN_STATE", filepath.Join(t.TempDir(), "state.db"))
	return root, file, all
}

// TestRunIRQIsolate: an LSE job with --irq-isolate sees irq 10 kept off
// its CPUs while it runs, and the affinity found back after; irqbalance
// running is said with the file of banned CPUs; where /proc/irq is
// absent one note says so and the job runs; LS and BE are refused.
func TestRunIRQIsolate(t *testing.T) {
	t.Run("kept clear while the job runs", func(t *testing.T) {
		root, file, all := replaceIRQRoot(t, false)
		// irqbalance runs on this fake machine.
		if err := os.MkdirAll(filepath.Join(root, "proc", "42"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, "proc", "42", "comm"), []byte("irqbalance\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		banned := filepath.Join(root, irq.DefaultBannedFile)
		out, stderr, code := resultsCLI(t, "run", "--no-db", "--qos", "LSE", "--cpus", "1", "--driver", "affinity", "--irq-isolate",
			"--", "sh", "-c", "echo cpuset={cpuset} irq=$(cat "+file+") banned=$(grep CPULIST "+banned+")")
		if code != 0 {
			t.Fatalf("exit %d, stderr %q", code, stderr)
		}
		var job, seen, ban string
		for f := range strings.FieldsSeq(out) {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "cpuset":
				job = v
			case "irq":
				seen = v
			case "banned":
				_, ban, _ = strings.Cut(v, "IRQBALANCE_BANNED_CPULIST=")
			}
		}
		cpus, err := cpuset.Parse(job)
		if err != nil || cpus.IsEmpty() {
			t.Fatalf("job's cpuset %q in %q: %v", job, out, err)
		}
		if want := all.Difference(cpus).String(); seen != want {
			t.Errorf("while the job ran on %s irq 10's affinity was %q, want %q", cpus, seen, want)
		}
		if ban != cpus.String() {
			t.Errorf("irqbalance's banned cpus while the job ran = %q, want %s", ban, cpus)
		}
		if b, _ := os.ReadFile(file); strings.TrimSpace(string(b)) != all.String() {
			t.Errorf("after the run irq 10's affinity is %q, want %s, as found", b, all)
		}
		if _, err := os.Stat(banned); !os.IsNotExist(err) {
			t.Errorf("banned file after the run: %v, want it removed", err)
		}
		for _, want := range []string{"irqbalance runs (pid 42)", "IRQBALANCE_BANNED_CPULIST", "kept clear of movable interrupts"} {
			if !strings.Contains(stderr, want) {
				t.Errorf("stderr lacks %q:\n%s", want, stderr)
			}
		}
	})
	t.Run("absent: said once, the job runs", func(t *testing.T) {
		replaceIRQRoot(t, true)
		out, stderr, code := resultsCLI(t, "run", "--no-db", "--qos", "LSE", "--cpus", "1", "--driver", "affinity", "--irq-isolate", "--", "echo", "ran")
		if code != 0 || !strings.Contains(out, "ran") {
			t.Fatalf("exit %d, stdout %q, stderr %q; want the job run", code, out, stderr)
		}
		const want = "irq-isolate changes nothing: no /proc/irq"
		if n := strings.Count(stderr, want); n != 1 {
			t.Errorf("stderr says %q %d times, want once:\n%s", want, n, stderr)
		}
	})
	for _, tc := range []struct {
		name string
		args []string
	}{
		{name: "LS", args: []string{"--qos", "LS", "--mode", "quota"}},
		{name: "BE", args: []string{"--qos", "BE"}},
	} {
		t.Run("refused for "+tc.name, func(t *testing.T) {
			_, file, all := replaceIRQRoot(t, false)
			_, stderr, code := resultsCLI(t, append(append([]string{"run", "--no-db", "--irq-isolate"}, tc.args...), "--", "true")...)
			const msg = "--irq-isolate applies to --qos LSE or LSR only"
			if code != 2 || !strings.Contains(stderr, msg) {
				t.Errorf("exit %d, stderr %q; want 2 saying %q", code, stderr, msg)
			}
			if b, _ := os.ReadFile(file); strings.TrimSpace(string(b)) != all.String() {
				t.Errorf("irq 10 %q after a refused run, want %s", b, all)
			}
		})
	}
}

// TestRunIRQIsolateNotRoot: as a user who may not write this machine's
// /proc/irq (read only: Probe checks access, nothing is written), one
// note says so and the job runs.
func TestRunIRQIsolateNotRoot(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root may write /proc/irq; TestRunIRQIsolateAsNobody runs this as nobody")
	}
	if _, err := os.Stat("/proc/irq"); err != nil {
		t.Skipf("no /proc/irq here: %v", err)
	}
	t.Setenv("COREPIN_STATE", filepath.Join(t.TempDir(), "state.db"))
	out, stderr, code := resultsCLI(t, "run", "--no-db", "--qos", "LSE", "--cpus", "1", "--driver", "affinity", "--irq-isolate", "--", "echo", "ran")
	if code != 0 || !strings.Contains(out, "ran") {
		t.Fatalf("exit %d, stdout %q, stderr %q; want the job run", code, out, stderr)
	}
	const want = "irq-isolate changes nothing: /proc/irq not writable (run as root)"
	if n := strings.Count(stderr, want); n != 1 {
		t.Errorf("stderr says %q %d times, want once:\n%s", want, n, stderr)
	}
}

// TestRunIRQIsolateAsNobody runs TestRunIRQIsolateNotRoot as user nobody.
func TestRunIRQIsolateAsNobody(t *testing.T) {
	if os.Getenv("COREPIN_TEST_IRQ_NOBODY") != "" {
		t.Skip("the child run")
	}
	testutil.RunAsNobody(t, "TestRunIRQIsolateNotRoot", "COREPIN_TEST_IRQ_NOBODY=1")
}
