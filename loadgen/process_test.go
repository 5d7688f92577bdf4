package loadgen

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corepin/corepin/proc"
)

// TestHelperService is not a test: it makes the test binary a service
// that prints its address first and serves until SIGTERM, like
// `corepin serve cpu`, for TestStartService.
func TestHelperService(t *testing.T) {
	mode := os.Getenv("LOADGEN_HELPER")
	if mode == "" {
		t.Skip("helper process for TestStartService")
	}
	if mode == "silent" {
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	s, err := NewCPUService(WithCost(time.Millisecond))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if mode == "json" {
		fmt.Printf("{\"listen\":%q,\"cost_ms\":1}\n", ln.Addr().String())
	} else {
		fmt.Println(ln.Addr().String())
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := s.Serve(ctx, ln); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

func helperSpec(mode string) proc.Spec {
	return proc.Spec{Argv: []string{os.Args[0], "-test.run=^TestHelperService$"}, Env: append(os.Environ(), "LOADGEN_HELPER="+mode)}
}

func TestStartService(t *testing.T) {
	for _, mode := range []string{"text", "json"} {
		t.Run(mode, func(t *testing.T) {
			p, err := StartService(t.Context(), helperSpec(mode), 0)
			if err != nil {
				t.Fatalf("StartService: %v", err)
			}
			t.Cleanup(func() { _ = p.Stop(time.Second) })
			r, err := OpenLoop(t.Context(), Load{URL: p.URL, Rate: 50, Duration: 200 * time.Millisecond})
			if err != nil {
				t.Fatalf("OpenLoop against the child: %v", err)
			}
			if r.Requests == 0 || r.Errors != 0 {
				t.Errorf("Requests %d Errors %d, want some and none", r.Requests, r.Errors)
			}
			if err := p.Stop(0); err != nil {
				t.Errorf("Stop = %v, want nil (exit 0 on SIGTERM)", err)
			}
			if err := p.Stop(0); err != nil {
				t.Errorf("second Stop = %v, want nil", err)
			}
			if err := syscall.Kill(p.Proc.Pid(), 0); err == nil {
				t.Errorf("service %d still exists after Stop", p.Proc.Pid())
			}
		})
	}
}

func TestStartServiceNoAddress(t *testing.T) {
	_, err := StartService(t.Context(), helperSpec("silent"), 300*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "no line within") {
		t.Fatalf("StartService of a silent child = %v, want a timeout", err)
	}
	_, err = StartService(t.Context(), proc.Spec{Argv: []string{"true"}}, 0)
	if err == nil || !strings.Contains(err.Error(), "exited") {
		t.Fatalf("StartService of a child printing nothing = %v, want one", err)
	}
	_, err = StartService(t.Context(), proc.Spec{Argv: []string{"sh", "-c", "echo not-an-address; sleep 100"}}, 0)
	if err == nil || !strings.Contains(err.Error(), "parsing service address") {
		t.Fatalf("StartService of a child printing garbage = %v, want a parse error", err)
	}
}

func TestParseAddress(t *testing.T) {
	tests := []struct {
		line, want string
		ok         bool
	}{
		{line: "127.0.0.1:8080\n", want: "127.0.0.1:8080", ok: true},
		{line: `{"listen":"[::1]:80","cost_ms":3}`, want: "[::1]:80", ok: true},
		{line: "listening on 8080", ok: false},
		{line: `{"listen":5}`, ok: false},
		{line: "", ok: false},
	}
	for _, tc := range tests {
		got, err := ParseAddress(tc.line)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseAddress(%q) = %q, %v; want %q, ok %v", tc.line, got, err, tc.want, tc.ok)
		}
	}
}
