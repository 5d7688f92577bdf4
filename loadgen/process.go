package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/corepin/corepin/proc"
)

// ServiceProcess is a service running as a child process (started by
// proc, so in its own enforce group when the spec names a driver) that
// announced its address as the first line of its stdout, as `corepin
// serve cpu` does.
type ServiceProcess struct {
	// Proc is the running process: its pid, group and exit.
	Proc *proc.Process
	// Addr is the announced host:port.
	Addr string
	// URL is "http://" + Addr + "/".
	URL string
}

// maxAddressLine bounds the first line a service prints.
const maxAddressLine = 4096

// StartService starts spec with proc.Start, reads the address from the
// first line of its stdout and returns once the service announced it,
// within timeout (0: 10 s). The line is either "host:port" or the JSON
// object of `corepin serve cpu -o json`. What follows the first line goes
// to spec.Stdout, if set. A service that exits, stays silent or prints no
// address is stopped (its group removed) and is StartService's error.
func StartService(ctx context.Context, spec proc.Spec, timeout time.Duration) (*ServiceProcess, error) {
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	fl := &addressLine{rest: spec.Stdout, line: make(chan string, 1)}
	spec.Stdout = fl
	p, err := proc.Start(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("starting service: %w", err)
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	var line string
	select {
	case line = <-fl.line:
	case <-p.Done():
		ex, _ := p.Wait()
		return nil, fmt.Errorf("reading service address: exited (code %d%s) before printing one; stderr: %q",
			ex.Code, signalSuffix(ex.Signal), ex.Stderr)
	case <-t.C:
		_, _ = p.Stop(0)
		return nil, fmt.Errorf("reading service address: no line within %s", timeout)
	}
	addr, err := ParseAddress(line)
	if err != nil {
		_, _ = p.Stop(0)
		return nil, err
	}
	return &ServiceProcess{Proc: p, Addr: addr, URL: "http://" + addr + "/"}, nil
}

func signalSuffix(sig string) string {
	if sig == "" {
		return ""
	}
	return ", " + sig
}

// addressLine hands the first line written to it (at most maxAddressLine
// bytes) to line, and passes everything after it to rest.
type addressLine struct {
	mu   sync.Mutex
	buf  []byte
	done bool
	rest io.Writer
	line chan string
}

func (f *addressLine) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := len(p)
	if !f.done {
		i := bytes.IndexByte(p, '\n')
		if i < 0 && len(f.buf)+len(p) <= maxAddressLine {
			f.buf = append(f.buf, p...)
			return n, nil
		}
		if i < 0 {
			i = min(len(p), maxAddressLine-len(f.buf))
		} else {
			i++
		}
		f.buf = append(f.buf, p[:i]...)
		f.done = true
		f.line <- string(f.buf)
		p = p[i:]
	}
	if f.rest != nil && len(p) > 0 {
		_, _ = f.rest.Write(p)
	}
	return n, nil
}

// ParseAddress reads the address line of a service: "host:port", or the
// JSON object {"listen": "host:port", ...}.
func ParseAddress(line string) (string, error) {
	line = strings.TrimSpace(line)
	if strings.HasPrefix(line, "{") {
		var v struct {
			Listen string `json:"listen"`
		}
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			return "", fmt.Errorf("parsing service address %q: %w", line, err)
		}
		line = v.Listen
	}
	if _, _, err := net.SplitHostPort(line); err != nil {
		return "", fmt.Errorf("parsing service address %q: %w", line, err)
	}
	return line, nil
}

// Stop ends the service (proc.Process.Stop: SIGTERM, up to grace (0: 10 s),
// SIGKILL) and removes its group. It returns an error when the service
// did not exit cleanly on SIGTERM; later calls return the same.
func (p *ServiceProcess) Stop(grace time.Duration) error {
	if grace == 0 {
		grace = 10 * time.Second
	}
	ex, err := p.Proc.Stop(grace)
	switch {
	case err != nil:
		return fmt.Errorf("stopping service: %w", err)
	case ex.Signal == "killed":
		return fmt.Errorf("stopping service: killed after %s without exiting on SIGTERM", grace)
	case ex.Code != 0 && ex.Signal != "terminated":
		return fmt.Errorf("stopping service: exit code %d; stderr: %q", ex.Code, ex.Stderr)
	}
	return nil
}
