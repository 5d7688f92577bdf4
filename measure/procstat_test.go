package measure

import (
	"errors"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// A real /proc/stat head (Linux 6.1, 2 CPUs).
const procStat2 = `cpu  4705 356 584 3699 23 23 0 0 0 0
cpu0 1393 280 290 1839 11 13 0 0 0 0
cpu1 3312 76 294 1860 12 10 0 0 0 0
intr 114930548 113199788 3 0 5 263 0 4 [...]
ctxt 1990473
btime 1062191376
processes 2915
procs_running 1
procs_blocked 0
`

func TestParseProcStat(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []SystemCPU
		wantErr bool
	}{
		{name: "two CPUs", in: procStat2, want: []SystemCPU{
			{CPU: 0, User: 1393, Nice: 280, System: 290, Idle: 1839, IOWait: 11, IRQ: 13},
			{CPU: 1, User: 3312, Nice: 76, System: 294, Idle: 1860, IOWait: 12, IRQ: 10},
		}},
		{name: "offline CPU missing", in: "cpu  1 1 1 1 1 1 1 1\ncpu2 5 0 0 0 0 0 0 7\n", want: []SystemCPU{{CPU: 2, User: 5, Steal: 7}}},
		{name: "only the summary", in: "cpu  1 2 3 4 5 6 7 8\n", wantErr: true},
		{name: "empty", in: "", wantErr: true},
		{name: "short line", in: "cpu0 1 2 3\n", wantErr: true},
		{name: "not a number", in: "cpu0 1 2 x 4 5 6 7 8\n", wantErr: true},
		{name: "negative", in: "cpu0 1 2 -3 4 5 6 7 8\n", wantErr: true},
		{name: "bad cpu id", in: "cpuX 1 2 3 4 5 6 7 8\n", wantErr: true},
		{name: "cpu id too large", in: "cpu70000 1 2 3 4 5 6 7 8\n", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseProcStat([]byte(tc.in))
			if tc.wantErr {
				if !errors.Is(err, errFormat) {
					t.Fatalf("ParseProcStat(%q) error = %v, want a format error", tc.in, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseProcStat(%q): %v", tc.in, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseProcStat (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSystemCPUBusyAndTicks(t *testing.T) {
	c := SystemCPU{User: 100, Nice: 50, System: 25, Idle: 1000, IOWait: 1000, IRQ: 10, SoftIRQ: 10, Steal: 5}
	if got, want := c.Busy(), 2*time.Second; got != want {
		t.Errorf("Busy() = %v, want %v", got, want)
	}
	if got, want := (TaskStat{UTime: 150, STime: 1}).CPUTime(), 1510*time.Millisecond; got != want {
		t.Errorf("CPUTime() = %v, want %v", got, want)
	}
}

func TestReadProcStat(t *testing.T) {
	got, err := ReadProcStat(fstest.MapFS{"stat": {Data: []byte(procStat2)}})
	if err != nil || len(got) != 2 {
		t.Fatalf("ReadProcStat = %v, %v", got, err)
	}
	if _, err := ReadProcStat(fstest.MapFS{}); err == nil {
		t.Errorf("ReadProcStat without a stat file: no error")
	}
}

func FuzzParseProcStat(f *testing.F) {
	f.Add([]byte(procStat2))
	f.Add([]byte("cpu0 1 2 3 4 5 6 7 8\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		cpus, err := ParseProcStat(b)
		if err == nil && len(cpus) == 0 {
			t.Errorf("ParseProcStat(%q): no CPUs and no error", b)
		}
		for _, c := range cpus {
			_ = c.Busy()
		}
	})
}
