package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/corepin/corepin/netbench"
)

// The ranks' command line is cobra's: bad input exits 2 with one line,
// -o json (before or after the role) gives the documented objects.
func TestPingPongCommand(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantOut  string
		wantErr  string
	}{
		{name: "compute json", args: []string{"pingpong", "compute", "--ops", "100", "-o", "json"}, wantOut: `"ops":100`},
		{name: "global -o before the role", args: []string{"-o", "json", "pingpong", "compute", "--ops", "50"}, wantOut: `"ops":50`},
		{name: "compute text", args: []string{"pingpong", "compute", "--ops", "10"}, wantOut: "10 ops in"},
		{name: "no role", args: []string{"pingpong"}, wantCode: 2, wantErr: "needs a role"},
		{name: "unknown role", args: []string{"pingpong", "bounce"}, wantCode: 2, wantErr: "unknown command"},
		{name: "server without listen", args: []string{"pingpong", "server"}, wantCode: 2, wantErr: "--listen"},
		{name: "client without messages", args: []string{"pingpong", "client", "--connect", "127.0.0.1:1"}, wantCode: 2, wantErr: "--messages 0"},
		{name: "compute without ops", args: []string{"pingpong", "compute"}, wantCode: 2, wantErr: "--ops 0"},
		{name: "bad output", args: []string{"pingpong", "compute", "--ops", "1", "-o", "yaml"}, wantCode: 2, wantErr: "output format"},
		{name: "unknown flag", args: []string{"pingpong", "compute", "--opz", "1"}, wantCode: 2, wantErr: "unknown flag"},
		{name: "extra argument", args: []string{"pingpong", "compute", "--ops", "1", "more"}, wantCode: 2, wantErr: "unknown command"},
		{name: "server has no barrier", args: []string{"pingpong", "server", "--listen", "127.0.0.1:0", "--wait-stdin"}, wantCode: 2, wantErr: "unknown flag"},
		{name: "two barriers", args: []string{"pingpong", "compute", "--ops", "1", "--wait-stdin", "--wait-fifo", "/x"}, wantCode: 2, wantErr: "give one of them"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := runCLI(t, tc.args...)
			if code != tc.wantCode {
				t.Fatalf("corepin %q: exit %d, want %d (stderr %q)", tc.args, code, tc.wantCode, errOut)
			}
			if !strings.Contains(out, tc.wantOut) || !strings.Contains(errOut, tc.wantErr) {
				t.Errorf("corepin %q: stdout %q, stderr %q; want %q and %q", tc.args, out, errOut, tc.wantOut, tc.wantErr)
			}
			if tc.wantCode != 0 && strings.Count(errOut, "\n") != 1 {
				t.Errorf("corepin %q: stderr %q, want one line", tc.args, errOut)
			}
		})
	}
	out, _, code := runCLI(t, "pingpong", "compute", "--ops", "20", "-o", "json")
	var res netbench.ComputeResult
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.Ops != 20 {
		t.Errorf("compute -o json printed %q (exit %d), want a ComputeResult of 20 ops", out, code)
	}
}
