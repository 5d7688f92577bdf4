package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/corepin/corepin/internal/testutil"
)

// serveInProcess runs `corepin serve cpu args...` until the test ends and
// returns the first line it printed.
func serveInProcess(t *testing.T, args ...string) (firstLine string, stop func() error) {
	t.Helper()
	return startInProcess(t, append([]string{"serve", "cpu"}, args...)...)
}

// startInProcess runs `corepin args...` (a command that serves until
// cancelled) until the test ends or stop is called, and returns the first
// line it printed.
func startInProcess(t *testing.T, args ...string) (firstLine string, stop func() error) {
	t.Helper()
	pr, pw := io.Pipe()
	var stderr strings.Builder
	root := NewRoot(strings.NewReader(""), pw, &stderr)
	root.SetArgs(args)
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		err := root.ExecuteContext(ctx)
		pw.Close()
		errc <- err
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		cancel()
		t.Fatalf("reading first line: %v (stderr %q, exit %v)", err, stderr.String(), <-errc)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	stop = sync.OnceValue(func() error {
		cancel()
		select {
		case err := <-errc:
			return err
		case <-time.After(testutil.Patience):
			return fmt.Errorf("%s did not stop within %v of cancel", args[0], testutil.Patience)
		}
	})
	t.Cleanup(func() { _ = stop() })
	return strings.TrimSpace(line), stop
}

func mustGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: status %d", url, resp.StatusCode)
	}
	return string(b)
}

func TestServeCPUPrintsAddressFirst(t *testing.T) {
	addr, stop := serveInProcess(t, "--cost", "1ms")
	if !strings.HasPrefix(addr, "127.0.0.1:") || strings.HasSuffix(addr, ":0") {
		t.Fatalf("first line = %q, want 127.0.0.1:PORT", addr)
	}
	if got := mustGet(t, "http://"+addr+"/"); got != "ok\n" {
		t.Errorf("body = %q, want %q", got, "ok\n")
	}
	if err := stop(); err != nil {
		t.Errorf("serve after cancel = %v, want nil", err)
	}
}

func TestServeCPUJSON(t *testing.T) {
	line, stop := serveInProcess(t, "--cost", "2500us", "-o", "json")
	var got struct {
		Listen string  `json:"listen"`
		CostMs float64 `json:"cost_ms"`
	}
	if err := json.Unmarshal([]byte(line), &got); err != nil {
		t.Fatalf("first line %q is not JSON: %v", line, err)
	}
	if !strings.HasPrefix(got.Listen, "127.0.0.1:") || got.CostMs != 2.5 {
		t.Errorf("got %+v, want listen 127.0.0.1:PORT and cost_ms 2.5", got)
	}
	mustGet(t, "http://"+got.Listen+"/healthz")
	if err := stop(); err != nil {
		t.Errorf("serve after cancel = %v, want nil", err)
	}
}

func TestServeUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{name: "no service", args: []string{"serve"}},
		{name: "negative cost", args: []string{"serve", "cpu", "--cost", "-1ms"}},
		{name: "bad cost", args: []string{"serve", "cpu", "--cost", "3"}},
		{name: "negative workers", args: []string{"serve", "cpu", "--workers", "-1"}},
		{name: "extra arg", args: []string{"serve", "cpu", "x"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb strings.Builder
			if code := Main(tc.args, strings.NewReader(""), &out, &errb); code != 2 {
				t.Errorf("Main(%q) = %d, want 2 (stderr %q)", tc.args, code, errb.String())
			}
		})
	}
}

func TestServeListenFailure(t *testing.T) {
	var out, errb strings.Builder
	if code := Main([]string{"serve", "cpu", "--listen", "256.0.0.1:0"}, strings.NewReader(""), &out, &errb); code != 1 {
		t.Errorf("Main(serve cpu --listen 256.0.0.1:0) = %d, want 1 (stderr %q)", code, errb.String())
	}
}

// TestServeHelperProcess is not a test: TestServeCPUSIGTERM runs the test
// binary as `corepin serve cpu` through it.
func TestServeHelperProcess(t *testing.T) {
	if os.Getenv("COREPIN_SERVE_HELPER") != "1" {
		t.Skip("helper process for TestServeCPUSIGTERM")
	}
	os.Exit(Main([]string{"serve", "cpu", "--cost", "1ms"}, os.Stdin, os.Stdout, os.Stderr))
}

func TestServeCPUSIGTERM(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestServeHelperProcess$")
	cmd.Env = append(os.Environ(), "COREPIN_SERVE_HELPER=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting helper: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("reading address: %v (stderr %q)", err, stderr.String())
	}
	addr := strings.TrimSpace(line)
	mustGet(t, "http://"+addr+"/")
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("sending SIGTERM: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve after SIGTERM: %v (stderr %q), want exit 0", err, stderr.String())
		}
	case <-time.After(testutil.Patience):
		t.Fatalf("serve did not exit within %v of SIGTERM", testutil.Patience)
	}
}
