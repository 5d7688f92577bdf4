package testutil

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// Nobody is the uid and gid RunAsNobody runs tests as.
const Nobody = 65534

// RunAsNobody runs the test named test of the current test binary again,
// as user and group nobody, with env added to the environment, and fails
// t unless that run passes. The binary is copied where nobody may execute
// it (go test's build directory is private). It skips unless this process
// is root. The test tells its second run by env.
func RunAsNobody(t *testing.T, test string, env ...string) {
	t.Helper()
	runAsNobody(t, 0, test, env...)
}

// NicerBy is how much nicer RunAsNobodyNicer runs a test than this
// process: nice(1)'s default increment would do too, but 5 is the batch
// user of issue 17 §2.
const NicerBy = 5

// RunAsNobodyNicer is RunAsNobody at a nice NicerBy above this process's
// (through nice(1), which runs as nobody already: raising one's own nice
// needs no right), so the test runs as an unprivileged user whose nice
// corepin may not lower back (issue 17 §2).
func RunAsNobodyNicer(t *testing.T, test string, env ...string) {
	t.Helper()
	runAsNobody(t, NicerBy, test, env...)
}

func runAsNobody(t *testing.T, nicer int, test string, env ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipping: running a test as nobody needs root")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "corepin-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin := filepath.Join(dir, filepath.Base(exe))
	b, err := os.ReadFile(exe)
	if err == nil {
		err = os.WriteFile(bin, b, 0o755)
	}
	if err == nil {
		err = os.Chmod(dir, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^"+test+"$", "-test.v")
	if nicer != 0 {
		cmd = exec.Command("nice", append([]string{"-n", strconv.Itoa(nicer)}, cmd.Args...)...)
	}
	cmd.Dir = "/"
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: Nobody, Gid: Nobody}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+test) {
		t.Errorf("%s as nobody: %v\n%s", test, err, out)
	}
}
