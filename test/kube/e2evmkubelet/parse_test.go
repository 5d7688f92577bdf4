package e2evmkubelet

import (
	"strconv"
	"strings"
	"testing"
)

// A line of the machine's results port as make e2e-vm-kubelet saw it.
const sampleLog = "@@LOG /var/log/pods/default_pin_fcb5f64c-6143-4881-881d-5faf481df224/pin/0.log 2026-11-27T10:12:58.779578971Z stdout F " +
	"seq=2 allowed=4-7 env_cpuset=4-5 env_threads=2 file_cpuset=4-7 file_threads=4"

func TestParseState(t *testing.T) {
	for _, tc := range []struct {
		name, pod, line string
		ok              bool
		want            string // allowed env_cpuset env_threads file_cpuset file_threads seq
	}{
		{name: "pin's line", pod: "pin", line: sampleLog, ok: true, want: "4-7 4-5 2 4-7 4 2"},
		{name: "another pod's line", pod: "other", line: sampleLog},
		{name: "a pod whose name ends like it", pod: "in", line: sampleLog},
		{name: "not a log line", pod: "pin", line: "@@MARK kubelet"},
		{name: "no time", pod: "pin", line: "@@LOG /var/log/pods/default_pin_u/pin/0.log seq=2 allowed=4-7"},
		{name: "bad cpuset", pod: "pin", line: strings.Replace(sampleLog, "allowed=4-7", "allowed=7-4", 1)},
		{name: "bad seq", pod: "pin", line: strings.Replace(sampleLog, "seq=2", "seq=x", 1)},
		{name: "no files (no --info-dir)", pod: "pin", ok: true, want: "4-7 4-5 2  0 2",
			line: strings.Replace(sampleLog, "file_cpuset=4-7 file_threads=4", "file_cpuset= file_threads=", 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, ok := parseState(tc.pod, tc.line)
			if ok != tc.ok {
				t.Fatalf("parseState(%q, ...) ok = %v, want %v (%+v)", tc.pod, ok, tc.ok, s)
			}
			if !ok {
				return
			}
			got := strings.Join([]string{s.allowed.String(), s.envCPUSet.String(), strconv.Itoa(s.envThreads), s.fileCPUSet.String(), strconv.Itoa(s.fileThreads), strconv.Itoa(s.seq)}, " ")
			if got != tc.want {
				t.Errorf("parseState = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestParseTopo(t *testing.T) {
	for _, tc := range []struct {
		name, line, wantErr string
	}{
		{name: "the machine", line: "@@TOPO 0-3 4-7 0-1 2-3 4-5 6-7 "},
		{name: "no SMT", line: "@@TOPO 0-3 4-7 0 1 2 3 4 5 6 7", wantErr: "not 2 NUMA nodes"},
		{name: "one node", line: "@@TOPO 0-7", wantErr: "bad topology line"},
		{name: "a core across nodes", line: "@@TOPO 0-3 4-7 0-1 2,4 3,5 6-7", wantErr: "is not 2 threads of one NUMA node"},
		{name: "garbage", line: "@@TOPO x y z", wantErr: "topology line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseTopo(tc.line)
			if (err != nil) != (tc.wantErr != "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("parseTopo(%q) = %v, want an error containing %q", tc.line, err, tc.wantErr)
			}
		})
	}
}

// FuzzParseState: any line of the results port parses or is refused
// without a panic, and what parses has a sequence number.
func FuzzParseState(f *testing.F) {
	f.Add("pin", sampleLog)
	f.Add("pin", "@@LOG x 2026-11-27T10:12:58Z stdout F seq=1 allowed=")
	f.Fuzz(func(t *testing.T, pod, line string) {
		if s, ok := parseState(pod, line); ok && s.seq <= 0 {
			t.Errorf("parseState(%q, %q) accepted seq %d", pod, line, s.seq)
		}
	})
}

// FuzzParseTopo: any topology line parses or is refused without a panic,
// and what parses is the machine's shape.
func FuzzParseTopo(f *testing.F) {
	f.Add("@@TOPO 0-3 4-7 0-1 2-3 4-5 6-7 ")
	f.Fuzz(func(t *testing.T, line string) {
		if topo, err := parseTopo(line); err == nil && len(topo.cores) != 4 {
			t.Errorf("parseTopo(%q) accepted %d cores", line, len(topo.cores))
		}
	})
}
