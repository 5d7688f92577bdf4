package loadgen

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// ServiceProcess is a service running as a child process that announced
// its address as the first line of its stdout, as `corepin serve cpu`
// does. It lets a bench place the service with its own means (a cgroup, an
// affinity mask) and still find it.
type ServiceProcess struct {
	Cmd *exec.Cmd
	// Addr is the announced host:port.
	Addr string
	// URL is "http://" + Addr + "/".
	URL string

	waitc chan error
}

// StartService starts cmd (with start, such as a function that starts it
// inside a cgroup; nil means cmd.Start), reads the address from the first
// line of its stdout and returns once the service announced it, within
// timeout (0: 10 s). The line is either "host:port" or the JSON object of
// `corepin serve cpu -o json`. cmd.Stdout must be nil: StartService reads
// it, and discards what follows the first line.
func StartService(cmd *exec.Cmd, start func(*exec.Cmd) error, timeout time.Duration) (*ServiceProcess, error) {
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	if start == nil {
		start = (*exec.Cmd).Start
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("starting service: %w", err)
	}
	if err := start(cmd); err != nil {
		return nil, fmt.Errorf("starting service: %w", err)
	}
	p := &ServiceProcess{Cmd: cmd, waitc: make(chan error, 1)}
	linec := make(chan string, 1)
	errc := make(chan error, 1)
	go func() {
		br := bufio.NewReader(stdout)
		line, err := br.ReadString('\n')
		if err != nil {
			errc <- err
		} else {
			linec <- line
		}
		_, _ = io.Copy(io.Discard, br) // keep the pipe drained until exit
		p.waitc <- cmd.Wait()
	}()
	var line string
	select {
	case line = <-linec:
	case err := <-errc:
		werr := <-p.waitc
		return nil, fmt.Errorf("reading service address: %w (exit: %v)", err, werr)
	case <-time.After(timeout):
		_ = p.kill()
		return nil, fmt.Errorf("reading service address: no line within %s", timeout)
	}
	addr, err := ParseAddress(line)
	if err != nil {
		_ = p.kill()
		return nil, err
	}
	p.Addr, p.URL = addr, "http://"+addr+"/"
	return p, nil
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

// Stop sends SIGTERM, waits up to grace (0: 10 s) for the process to exit,
// then kills it. It returns the process's exit error, if any, or an error
// saying it had to be killed.
func (p *ServiceProcess) Stop(grace time.Duration) error {
	if grace == 0 {
		grace = 10 * time.Second
	}
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stopping service: %w", err)
	}
	select {
	case err := <-p.waitc:
		p.waitc <- err // later Stop calls see the same result
		if err != nil {
			return fmt.Errorf("stopping service: %w", err)
		}
		return nil
	case <-time.After(grace):
		_ = p.kill()
		return fmt.Errorf("stopping service: killed after %s without exiting on SIGTERM", grace)
	}
}

func (p *ServiceProcess) kill() error {
	err := p.Cmd.Process.Kill()
	werr := <-p.waitc
	p.waitc <- werr
	return err
}
