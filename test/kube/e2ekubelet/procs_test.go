package e2ekubelet

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// proc is one component the test started, in a process group of its own.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  *logBuf
	done chan struct{}
}

// procs are the components of one run, stopped in reverse order of start.
type procs struct {
	t    *testing.T
	list []*proc
}

// start runs a component in its own process group (so that stop reaches
// what it forks, e.g. containerd's shims are reparented, not children of
// the group, and are stopped through the CRI first), its output kept for
// the failure report.
func (ps *procs) start(name string, env []string, path string, args ...string) *proc {
	ps.t.Helper()
	buf := &logBuf{}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = buf, buf
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		ps.t.Fatalf("starting %s: %v", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: buf, done: make(chan struct{})}
	go func() { cmd.Wait(); close(p.done) }()
	ps.list = append(ps.list, p)
	return p
}

// stopOne sends SIGTERM to p's process group, then SIGKILL after 15 s
// (kube-apiserver's graceful stop takes about 8 s).
func (ps *procs) stopOne(p *proc) {
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
	if ps.t.Failed() {
		ps.t.Logf("---- %s output (last 6 KiB) ----\n%s", p.name, tail(p.log.String(), 6<<10))
	}
}

// stop stops every component, newest first.
func (ps *procs) stop() {
	for i := len(ps.list) - 1; i >= 0; i-- {
		ps.stopOne(ps.list[i])
	}
	ps.list = nil
}

// pids are the process ids of the components still running.
func (ps *procs) pids() []int {
	var out []int
	for _, p := range ps.list {
		select {
		case <-p.done:
		default:
			out = append(out, p.cmd.Process.Pid)
		}
	}
	return out
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// logBuf keeps a component's output; the process writes while a failing
// test reads. It keeps the last 1 MiB.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() > 1<<20 {
		keep := l.b.Bytes()[l.b.Len()-(512<<10):]
		l.b = *bytes.NewBuffer(append([]byte(nil), keep...))
	}
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// freePort asks the kernel for a free loopback port.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// waitOK polls url until it answers 200 "ok" (etcd: {"health":"true"}),
// or fails the test after limit, naming the component and whether its
// process died.
func waitOK(t *testing.T, p *proc, url, token string, limit time.Duration) time.Duration {
	t.Helper()
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	start := time.Now()
	for time.Since(start) < limit {
		select {
		case <-p.done:
			t.Fatalf("%s exited while starting:\n%s", p.name, tail(p.log.String(), 6<<10))
		default:
		}
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if rsp, err := client.Do(req); err == nil {
			body, _ := io.ReadAll(io.LimitReader(rsp.Body, 1024))
			rsp.Body.Close()
			healthy := strings.TrimSpace(string(body)) == "ok" || strings.Contains(string(body), `"health":"true"`)
			if rsp.StatusCode == http.StatusOK && healthy {
				return time.Since(start)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s not healthy at %s after %v:\n%s", p.name, url, limit, tail(p.log.String(), 6<<10))
	return 0
}

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

func writeFile(t *testing.T, path string, data []byte) string {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func fmtDur(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }
