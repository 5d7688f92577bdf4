package enforce

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Issue 8 §3: as non-root, Detect chose the cgroup driver because
// corepin's root (made earlier by root) exists, and every job then failed
// with permission denied. A user who cannot create groups there gets the
// affinity driver, with the reason first in its Limitations.
func TestDetectAsNobodyFallsBack(t *testing.T) {
	if root := os.Getenv("COREPIN_TEST_DETECT_ROOT"); root != "" {
		d, err := Detect(WithRoot(root))
		if err != nil {
			t.Fatalf("Detect() as uid %d = %v", os.Geteuid(), err)
		}
		if d.Name() != NameAffinity || !strings.Contains(d.Limitations()[0], "permission denied") {
			t.Fatalf("Detect() as uid %d = %s, limitations %q; want affinity, permission denied first", os.Geteuid(), d.Name(), d.Limitations())
		}
		return
	}
	requireRoot(t)
	root := testRoot(t)
	d, err := Detect(WithRoot(root))
	if err != nil {
		t.Fatal(err)
	}
	if d.Name() == NameAffinity {
		t.Skipf("skipping: no writable cgroup even as root: %q", d.Limitations())
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
	b, err := os.ReadFile(exe)
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "enforce.test"), b, 0o755)
	}
	if err == nil {
		err = os.Chmod(dir, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(dir, "enforce.test"), "-test.run=^TestDetectAsNobodyFallsBack$", "-test.v")
	cmd.Dir = "/"
	cmd.Env = append(os.Environ(), "COREPIN_TEST_DETECT_ROOT="+root)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestDetectAsNobodyFallsBack") {
		t.Errorf("Detect as nobody: %v\n%s", err, out)
	}
}
