package e2ekubelet

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// run runs a short command and fails the test with its output on error.
func run(t *testing.T, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// runStdout is run that returns the command's standard output alone and
// logs its standard error (notes, warnings).
func runStdout(t *testing.T, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\nstderr:\n%s\nstdout:\n%s", name, strings.Join(args, " "), err, stderr.String(), out)
	}
	if stderr.Len() > 0 {
		t.Logf("%s %s: stderr:\n%s", name, strings.Join(args, " "), stderr.String())
	}
	return string(out)
}

func writeFile(t *testing.T, path string, data []byte) string {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func fmtDur(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }
