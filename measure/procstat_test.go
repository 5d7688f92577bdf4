package measure

import (
	"errors"
	"os"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/corepin/corepin/cpuset"
)

const procStat2CPU = `cpu  300 10 200 5000 20 1 2 3 0 0
cpu0 100 10 50 2500 10 1 1 1 0 0
cpu1 200 0 150 2500 10 0 1 2 0 0
intr 12345 0 0
ctxt 999
btime 1700000000
`

func TestParseProcStat(t *testing.T) {
	tests := []struct {
		name    string
		data    string
		want    []CPUTimes
		wantErr bool
	}{
		{name: "two cpus", data: procStat2CPU, want: []CPUTimes{
			{CPU: 0, User: 100, Nice: 10, System: 50, Idle: 2500, IOWait: 10, IRQ: 1, SoftIRQ: 1, Steal: 1},
			{CPU: 1, User: 200, System: 150, Idle: 2500, IOWait: 10, SoftIRQ: 1, Steal: 2},
		}},
		{name: "offline cpu absent, no trailing newline", data: "cpu  1 1 1 1 1 1 1 1\ncpu3 1 2 3 4 5 6 7 8", want: []CPUTimes{
			{CPU: 3, User: 1, Nice: 2, System: 3, Idle: 4, IOWait: 5, IRQ: 6, SoftIRQ: 7, Steal: 8}}},
		{name: "too few fields", data: "cpu0 1 2 3 4 5 6 7\n", wantErr: true},
		{name: "not a number", data: "cpu0 1 2 3 4 5 6 7 x\n", wantErr: true},
		{name: "negative", data: "cpu0 -1 2 3 4 5 6 7 8\n", wantErr: true},
		{name: "cpu above MaxCPU", data: "cpu99999999 1 2 3 4 5 6 7 8\n", wantErr: true},
		{name: "repeated cpu", data: "cpu0 1 2 3 4 5 6 7 8\ncpu0 1 2 3 4 5 6 7 8\n", wantErr: true},
		{name: "no cpu lines", data: "intr 1\n", wantErr: true},
		{name: "empty", data: "", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseProcStat([]byte(tc.data))
			if (err != nil) != tc.wantErr || (err != nil && !errors.Is(err, errFormat)) {
				t.Fatalf("ParseProcStat() error = %v, want error %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseProcStat() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadCPUBusyAndProcessCPU(t *testing.T) {
	m := fstest.MapFS{
		"stat":    {Data: []byte(procStat2CPU)},
		"42/stat": {Data: []byte(fakeStat(TaskStat{PID: 42, Comm: "x", State: 'R', UTime: 150, STime: 50}))},
	}
	tests := []struct {
		name string
		cpus cpuset.CPUSet
		want time.Duration
	}{
		{name: "all", want: (163 + 353) * 10 * time.Millisecond},
		{name: "cpu1", cpus: cpuset.New(1), want: 353 * 10 * time.Millisecond},
		{name: "cpu5 absent", cpus: cpuset.New(5), want: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadCPUBusy(m, tc.cpus)
			if err != nil || got != tc.want {
				t.Errorf("ReadCPUBusy(%s) = %v, %v; want %v", tc.cpus, got, err, tc.want)
			}
		})
	}
	if got, err := ProcessCPU(m, 42); err != nil || got != 2*time.Second {
		t.Errorf("ProcessCPU(42) = %v, %v; want 2s", got, err)
	}
	if _, err := ProcessCPU(m, 43); err == nil {
		t.Error("ProcessCPU of a missing pid = nil error")
	}
}

// The live /proc/stat parses, and this process's CPU time is readable.
func TestProcStatLive(t *testing.T) {
	proc := os.DirFS("/proc")
	if _, err := ReadCPUBusy(proc, cpuset.CPUSet{}); err != nil {
		t.Errorf("ReadCPUBusy(/proc) = %v", err)
	}
	if _, err := ProcessCPU(proc, os.Getpid()); err != nil {
		t.Errorf("ProcessCPU(self) = %v", err)
	}
}

// FuzzParseProcStat: any content parses or fails with errFormat, never
// panics, and every CPU it returns is in range and unique.
func FuzzParseProcStat(f *testing.F) {
	f.Add([]byte(procStat2CPU))
	f.Add([]byte("cpu0 1 2 3 4 5 6 7 8 9 10\n"))
	f.Add([]byte("cpu18446744073709551615 1 2 3 4 5 6 7 8\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ts, err := ParseProcStat(data)
		if err != nil {
			if !errors.Is(err, errFormat) {
				t.Fatalf("error %v does not wrap errFormat", err)
			}
			return
		}
		seen := map[int]bool{}
		for _, c := range ts {
			if c.CPU < 0 || c.CPU > cpuset.MaxCPU || seen[c.CPU] {
				t.Fatalf("CPU %d out of range or repeated", c.CPU)
			}
			seen[c.CPU] = true
		}
	})
}
