package kubetest

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// Proc is one component a test started, in a process group of its own.
type Proc struct {
	Name string
	Cmd  *exec.Cmd
	Log  *LogBuf
	Done chan struct{}
}

// Procs are the components of one test, stopped in reverse order of start.
type Procs struct {
	T    *testing.T
	list []*Proc
}

// Start runs a component in its own process group (so that stopping it
// reaches what it forks), its output kept for the failure report. A nil
// env is the test's environment.
func (ps *Procs) Start(name string, env []string, path string, args ...string) *Proc {
	ps.T.Helper()
	buf := &LogBuf{}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = buf, buf
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		ps.T.Fatalf("starting %s: %v", name, err)
	}
	p := &Proc{Name: name, Cmd: cmd, Log: buf, Done: make(chan struct{})}
	go func() { cmd.Wait(); close(p.Done) }()
	ps.list = append(ps.list, p)
	return p
}

// StopOne sends SIGTERM to p's process group, then SIGKILL after 15 s
// (kube-apiserver's graceful stop takes about 8 s); a failed test gets the
// end of p's output.
func (ps *Procs) StopOne(p *Proc) {
	syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.Done:
	case <-time.After(15 * time.Second):
		syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGKILL)
		<-p.Done
	}
	if ps.T.Failed() {
		ps.T.Logf("---- %s: last lines worth reading (whole output in %s) ----\n%s", p.Name, ps.save(p), Notable(p.Log.String(), 12))
	}
}

// save writes p's whole output to a file beside the other components' of
// the failed test, where it outlives the test's temporary directories, and
// returns its path.
func (ps *Procs) save(p *Proc) string {
	dir := filepath.Join(os.TempDir(), "corepin-e2e-logs", strings.NewReplacer("/", "_", " ", "_").Replace(ps.T.Name()))
	name := filepath.Join(dir, strings.NewReplacer("/", "_", " ", "_").Replace(p.Name)+".log")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "(not saved: " + err.Error() + ")"
	}
	if err := os.WriteFile(name, []byte(p.Log.String()), 0o644); err != nil {
		return "(not saved: " + err.Error() + ")"
	}
	return name
}

// Notable is the last n lines of a component's output that say something
// went wrong: structured lines (JSON or klog) at info, debug or warn level
// are left out, since they bury a failing test's own message in CI's
// excerpt of its output. Lines of other forms are kept.
func Notable(out string, n int) string {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	var keep []string
	for i := len(lines) - 1; i >= 0 && len(keep) < n; i-- {
		l := lines[i]
		switch {
		case l == "",
			strings.Contains(l, `"level":"info"`), strings.Contains(l, `"level":"warn"`), strings.Contains(l, `"level":"debug"`),
			len(l) > 0 && (l[0] == 'I' || l[0] == 'W') && len(l) > 5 && l[1] >= '0' && l[1] <= '9':
			continue
		}
		keep = append(keep, Tail(l, 400))
	}
	slices.Reverse(keep)
	return strings.Join(keep, "\n")
}

// StopNamed stops the component called name, if it was started, and
// forgets it.
func (ps *Procs) StopNamed(name string) {
	for i, p := range ps.list {
		if p.Name == name {
			ps.StopOne(p)
			ps.list = append(ps.list[:i], ps.list[i+1:]...)
			return
		}
	}
}

// Stop stops every component, newest first.
func (ps *Procs) Stop() {
	for i := len(ps.list) - 1; i >= 0; i-- {
		ps.StopOne(ps.list[i])
	}
	ps.list = nil
}

// Pids are the process ids of the components still running.
func (ps *Procs) Pids() []int {
	var out []int
	for _, p := range ps.list {
		select {
		case <-p.Done:
		default:
			out = append(out, p.Cmd.Process.Pid)
		}
	}
	return out
}

// Tail is the last n bytes of s.
func Tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// LogBuf keeps a component's output; the process writes while a failing
// test reads. It keeps the last 1 MiB.
type LogBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LogBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() > 1<<20 {
		keep := l.b.Bytes()[l.b.Len()-(512<<10):]
		l.b = *bytes.NewBuffer(append([]byte(nil), keep...))
	}
	return l.b.Write(p)
}

func (l *LogBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// FreePort asks the kernel for a free loopback port.
func FreePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// WaitOK polls url until it answers 200 "ok" (etcd: {"health":"true"}),
// or fails the test after limit, naming the component and whether its
// process died. It returns how long that took.
func WaitOK(t *testing.T, p *Proc, url, token string, limit time.Duration) time.Duration {
	t.Helper()
	took, err := waitOK(p, url, token, limit)
	if err != nil {
		t.Fatal(err)
	}
	return took
}

// errExited is waitOK's error for a process that exited while starting.
var errExited = errors.New("exited while starting")

// waitOK is WaitOK returning the failure: errExited (wrapped, with the
// process's last output) when the process exited.
func waitOK(p *Proc, url, token string, limit time.Duration) (time.Duration, error) {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	start := time.Now()
	for time.Since(start) < limit {
		select {
		case <-p.Done:
			return 0, fmt.Errorf("%s %w:\n%s", p.Name, errExited, Tail(p.Log.String(), 6<<10))
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
				return time.Since(start), nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return 0, fmt.Errorf("%s not healthy at %s after %v:\n%s", p.Name, url, limit, Tail(p.Log.String(), 6<<10))
}

// StartServing starts a server on n loopback ports FreePort picks (start
// starts it on ports and returns its process and the URL and token
// WaitOK polls) and waits until it is healthy, at most limit. A port taken
// between FreePort and the server's bind (another process's listener, or
// an outgoing connection's local port, got it first: "address already in
// use") is not the component's failure: the server is started again on
// fresh ports, at most 3 times in all.
func StartServing(t *testing.T, n int, limit time.Duration, start func(ports []int) (p *Proc, url, token string)) (*Proc, []int) {
	t.Helper()
	for try := 1; ; try++ {
		ports := make([]int, n)
		for i := range ports {
			ports[i] = FreePort(t)
		}
		p, url, token := start(ports)
		_, err := waitOK(p, url, token, limit)
		if err == nil {
			return p, ports
		}
		if try < 3 && errors.Is(err, errExited) && strings.Contains(p.Log.String(), "address already in use") {
			t.Logf("%s: a port was taken before it bound (%v); starting it again on other ports", p.Name, ports)
			continue
		}
		t.Fatal(err)
	}
}

// Scrape reads a Prometheus text page into series -> value.
func Scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	rsp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer rsp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(rsp.Body, 4<<20))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		i := strings.LastIndexByte(line, ' ')
		if line == "" || strings.HasPrefix(line, "#") || i < 0 {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(line[i+1:], &v); err == nil {
			out[line[:i]] = v
		}
	}
	return out
}

// SchedulerConfigFile is the shipped scheduler configuration, from a test
// package directory under test/kube.
const SchedulerConfigFile = "../../../deploy/kubernetes/scheduler/scheduler-config.yaml"

// ShippedSchedulerConfig is SchedulerConfigFile with only what differs on
// this machine changed: the kubeconfig path and the extender's port.
func ShippedSchedulerConfig(t *testing.T, kubeconfig string, extPort int) []byte {
	t.Helper()
	data, err := os.ReadFile(SchedulerConfigFile)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		t.Fatalf("the shipped scheduler config: %v", err)
	}
	cc, _ := cfg["clientConnection"].(map[string]any)
	if cc == nil {
		t.Fatal("the shipped scheduler config has no clientConnection")
	}
	cc["kubeconfig"] = kubeconfig
	exts, _ := cfg["extenders"].([]any)
	if len(exts) != 1 {
		t.Fatalf("the shipped scheduler config has %d extenders, want corepin's only", len(exts))
	}
	ext := exts[0].(map[string]any)
	if prefix, _ := ext["urlPrefix"].(string); !strings.HasPrefix(prefix, "http://127.0.0.1:") {
		t.Fatalf("urlPrefix %q: the tests expect the shipped loopback extender", prefix)
	}
	ext["urlPrefix"] = fmt.Sprintf("http://127.0.0.1:%d", extPort)
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
