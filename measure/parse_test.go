package measure

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// epyc is a snapshot of real kernel output captured on the machine this
// package was written on (AMD EPYC, 2 CPUs, Linux 6.18, cgroup v1): a shell
// (6140) running a 4-thread Go program (6142) and a sleep renamed
// "a) (b c)" (6143), unrelated processes 1 and 4139, PSI files, and cpu.stat
// from cgroup v1 groups idle, throttled and bursting, and from a cgroup v2
// group without the cpu controller.
const epyc = "testdata/epyc-2cpu-6.18"

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(epyc, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseTaskStat(t *testing.T) {
	tests := []struct {
		name    string
		data    []byte
		want    TaskStat
		wantErr bool
	}{
		{
			name: "epyc/go-thread",
			data: readTestdata(t, "proc/6142/task/6145/stat"),
			want: TaskStat{PID: 6145, Comm: "spin", State: 'S', PPID: 6140, PGRP: 6137, UTime: 86, STime: 0, NumThreads: 4, StartTime: 36370, Processor: 1},
		},
		{
			name: "epyc/comm-with-parens-and-spaces",
			data: readTestdata(t, "proc/6143/stat"),
			want: TaskStat{PID: 6143, Comm: "a) (b c)", State: 'S', PPID: 6140, PGRP: 6137, NumThreads: 1, StartTime: 36370, Processor: 1},
		},
		{
			name: "comm-with-newline-and-digits",
			data: []byte(fakeStat(TaskStat{PID: 42, Comm: "x) 1 2\n3", State: 'R', PPID: 1, UTime: 7, STime: 8, NumThreads: 1, StartTime: 99, Processor: 3})),
			want: TaskStat{PID: 42, Comm: "x) 1 2\n3", State: 'R', PPID: 1, UTime: 7, STime: 8, NumThreads: 1, StartTime: 99, Processor: 3},
		},
		{
			name: "pgrp-minus-one",
			data: []byte(fakeStat(TaskStat{PID: 287, Comm: "cginfo", State: 'S', PPID: 1, PGRP: -1, NumThreads: 1, Processor: 2})),
			want: TaskStat{PID: 287, Comm: "cginfo", State: 'S', PPID: 1, PGRP: -1, NumThreads: 1, Processor: 2},
		},
		{name: "empty", data: nil, wantErr: true},
		{name: "no-comm", data: []byte("1 R 0 0"), wantErr: true},
		{name: "short", data: []byte("1 (init) S 0 0 0 0 -1 4194560 33889"), wantErr: true},
		{name: "38-fields", data: []byte(strings.Join(strings.Fields(fakeStat(TaskStat{PID: 1, Comm: "a", State: 'S'}))[:38], " ")), wantErr: true},
		{name: "negative-processor", data: []byte(strings.Replace(fakeStat(TaskStat{PID: 1, Comm: "a", State: 'S', Processor: 77}), " 77 ", " -1 ", 1)), wantErr: true},
		{name: "huge-processor", data: []byte(fakeStat(TaskStat{PID: 1, Comm: "a", State: 'S', Processor: 70000})), wantErr: true},
		{name: "bad-pid", data: []byte("x" + fakeStat(TaskStat{PID: 1, Comm: "a", State: 'S'})), wantErr: true},
		{name: "two-char-state", data: []byte(strings.Replace(fakeStat(TaskStat{PID: 1, Comm: "a", State: 'S'}), ") S ", ") SS ", 1)), wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseTaskStat(tc.data)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("ParseTaskStat(%q) = %+v, want error", tc.data, got)
				}
				if !errors.Is(err, errFormat) {
					t.Errorf("ParseTaskStat(%q) error %v does not wrap errFormat", tc.data, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseTaskStat: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseTaskStat mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseTaskSched(t *testing.T) {
	tests := []struct {
		name    string
		data    []byte
		want    TaskSched
		wantErr bool
	}{
		{
			name: "epyc/go-thread",
			data: readTestdata(t, "proc/6142/task/6144/sched"),
			want: TaskSched{Migrations: 23, Switches: 229, VoluntarySwitches: 227, InvoluntarySwitches: 2},
		},
		{
			name: "epyc/renamed-sleep",
			data: readTestdata(t, "proc/6143/task/6143/sched"),
			want: TaskSched{Migrations: 0, Switches: 1, VoluntarySwitches: 1, InvoluntarySwitches: 0},
		},
		{
			// A command name can hold a newline; keys in the header must
			// not be read.
			name: "forged-header",
			data: []byte("x\nnr_switches:9 (7, #threads: 1)\n" + dashes + "\nse.nr_migrations : 1\nnr_voluntary_switches : 2\nnr_involuntary_switches : 3\n"),
			want: TaskSched{Migrations: 1, Switches: 5, VoluntarySwitches: 2, InvoluntarySwitches: 3},
		},
		{name: "empty", wantErr: true},
		{name: "no-separator", data: []byte("se.nr_migrations : 1\nnr_voluntary_switches : 2\nnr_involuntary_switches : 3\n"), wantErr: true},
		{name: "missing-migrations", data: []byte("a (1, #threads: 1)\n" + dashes + "\nnr_voluntary_switches : 2\nnr_involuntary_switches : 3\n"), wantErr: true},
		{name: "repeated", data: []byte("a (1, #threads: 1)\n" + dashes + "\nse.nr_migrations : 1\nse.nr_migrations : 1\nnr_voluntary_switches : 2\nnr_involuntary_switches : 3\n"), wantErr: true},
		{name: "float", data: []byte("a (1, #threads: 1)\n" + dashes + "\nse.nr_migrations : 1.5\nnr_voluntary_switches : 2\nnr_involuntary_switches : 3\n"), wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseTaskSched(tc.data)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("ParseTaskSched = %+v, want error", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseTaskSched: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseTaskSched mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// fakeStat formats st as the kernel formats a stat line (52 fields, the
// others zero).
func fakeStat(st TaskStat) string {
	f := make([]string, 53)
	for i := range f {
		f[i] = "0"
	}
	f[1] = strconv.Itoa(st.PID)
	f[2] = "(" + st.Comm + ")"
	f[3] = string([]byte{st.State})
	f[4] = strconv.Itoa(st.PPID)
	f[5] = strconv.Itoa(st.PGRP)
	f[14] = strconv.FormatUint(st.UTime, 10)
	f[15] = strconv.FormatUint(st.STime, 10)
	f[20] = strconv.Itoa(st.NumThreads)
	f[22] = strconv.FormatUint(st.StartTime, 10)
	f[39] = strconv.Itoa(st.Processor)
	return strings.Join(f[1:], " ") + "\n"
}

const dashes = "-------------------------------------------------------------------"

func TestParseSchedStat(t *testing.T) {
	tests := []struct {
		name    string
		data    []byte
		want    SchedStat
		wantErr bool
	}{
		{name: "epyc", data: readTestdata(t, "proc/6142/task/6146/schedstat"), want: SchedStat{Run: 408187491, Wait: 106152472, Timeslices: 147}},
		{name: "two-fields", data: []byte("1 2\n"), wantErr: true},
		{name: "four-fields", data: []byte("1 2 3 4\n"), wantErr: true},
		{name: "negative", data: []byte("1 -2 3\n"), wantErr: true},
		{name: "overflow", data: []byte("1 9223372036854775808 3\n"), wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseSchedStat(tc.data)
			if (err != nil) != tc.wantErr {
				t.Fatalf("ParseSchedStat(%q) = %+v, %v; want error %v", tc.data, got, err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("ParseSchedStat(%q) = %+v, want %+v", tc.data, got, tc.want)
			}
		})
	}
}

func TestReadCPUStat(t *testing.T) {
	fsys := os.DirFS(epyc)
	tests := []struct {
		name    string
		path    string
		want    CPUStat
		wantErr bool
	}{
		{name: "v1-root", path: "cgroup-v1-cpu/cpu.stat", want: CPUStat{Bandwidth: true}},
		{
			name: "v1-throttled",
			path: "cgroup-v1-cpu-throttled/cpu.stat",
			want: CPUStat{Bandwidth: true, Periods: 16, ThrottledPeriods: 16, ThrottledTime: 2199565154},
		},
		{
			name: "v1-burst",
			path: "cgroup-v1-cpu-burst/cpu.stat",
			want: CPUStat{Bandwidth: true, Periods: 26, ThrottledPeriods: 26, ThrottledTime: 3502350799, Bursts: 1, BurstTime: 10 * time.Millisecond},
		},
		{
			name: "v2-without-cpu-controller",
			path: "cgroup-v2-nocpuctl/cpu.stat",
			want: CPUStat{Usage: 797763 * time.Microsecond, User: 767369 * time.Microsecond, System: 30393 * time.Microsecond},
		},
		{
			// cpu.stat.local holds only throttled_time on v1: a known key,
			// so it parses, with Bandwidth false.
			name: "v1-local",
			path: "cgroup-v1-cpu-throttled/cpu.stat.local",
			want: CPUStat{ThrottledTime: 2199565154},
		},
		{name: "missing", path: "cgroup-v1-cpu/nope", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadCPUStat(fsys, tc.path)
			if (err != nil) != tc.wantErr {
				t.Fatalf("ReadCPUStat(%q) error = %v, want error %v", tc.path, err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ReadCPUStat(%q) mismatch (-want +got):\n%s", tc.path, diff)
			}
		})
	}
}

func TestParseCPUStat(t *testing.T) {
	tests := []struct {
		name    string
		data    string
		want    CPUStat
		wantErr bool
	}{
		{
			// The layout of Documentation/admin-guide/cgroup-v2.rst with
			// the cpu controller enabled (this machine has no such group).
			name: "v2-with-cpu-controller",
			data: "usage_usec 2000\nuser_usec 1500\nsystem_usec 500\nnice_usec 0\ncore_sched.force_idle_usec 0\n" +
				"nr_periods 10\nnr_throttled 4\nthrottled_usec 3000\nnr_bursts 2\nburst_usec 700\n",
			want: CPUStat{Bandwidth: true, Periods: 10, ThrottledPeriods: 4, ThrottledTime: 3 * time.Millisecond, Bursts: 2,
				BurstTime: 700 * time.Microsecond, Usage: 2 * time.Millisecond, User: 1500 * time.Microsecond, System: 500 * time.Microsecond},
		},
		{name: "empty", data: "", wantErr: true},
		{name: "only-unknown", data: "nice_usec 0\n", wantErr: true},
		{name: "no-value", data: "nr_periods\n", wantErr: true},
		{name: "negative", data: "nr_periods -1\n", wantErr: true},
		{name: "usec-overflow", data: "throttled_usec 9223372036854776\n", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseCPUStat([]byte(tc.data))
			if (err != nil) != tc.wantErr {
				t.Fatalf("ParseCPUStat(%q) error = %v, want error %v", tc.data, err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseCPUStat mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDelta(t *testing.T) {
	fsys := os.DirFS(epyc)
	before, err := ReadCPUStat(fsys, "cgroup-v1-cpu-throttled/cpu.stat")
	if err != nil {
		t.Fatal(err)
	}
	after, err := ReadCPUStat(fsys, "cgroup-v1-cpu-burst/cpu.stat")
	if err != nil {
		t.Fatal(err)
	}
	got, err := Delta(before, after)
	if err != nil {
		t.Fatalf("Delta: %v", err)
	}
	want := ThrottleDelta{Periods: 10, ThrottledPeriods: 10, ThrottledTime: 3502350799 - 2199565154, Bursts: 1, BurstTime: 10 * time.Millisecond}
	if got != want {
		t.Errorf("Delta = %+v, want %+v", got, want)
	}
	if _, err := Delta(after, before); !errors.Is(err, ErrCounterReset) {
		t.Errorf("Delta(after, before) error = %v, want ErrCounterReset", err)
	}
}

func TestReadPSI(t *testing.T) {
	tests := []struct {
		name  string
		fsys  fs.FS
		path  string
		want  PSI
		check func(error) bool
	}{
		{
			name: "epyc/system-cpu",
			fsys: os.DirFS(epyc), path: "proc/pressure/cpu",
			want: PSI{Some: PSILine{Avg10: 0.9, Avg60: 1.17, Avg300: 2.13, Total: 13910349 * time.Microsecond}, HasFull: true},
		},
		{
			name: "epyc/cgroup-v2",
			fsys: os.DirFS(epyc), path: "cgroup-v2-nocpuctl/cpu.pressure",
			want: PSI{Some: PSILine{Total: 289485 * time.Microsecond}, Full: PSILine{Total: 119983 * time.Microsecond}, HasFull: true},
		},
		{
			name: "before-5.13-no-full",
			fsys: fstest.MapFS{"pressure/cpu": {Data: []byte("some avg10=1.50 avg60=0.25 avg300=0.00 total=42\n")}},
			path: "pressure/cpu",
			want: PSI{Some: PSILine{Avg10: 1.5, Avg60: 0.25, Total: 42 * time.Microsecond}},
		},
		{
			name:  "no-psi",
			fsys:  fstest.MapFS{},
			path:  "pressure/cpu",
			check: func(err error) bool { return errors.Is(err, ErrNotSupported) && errors.Is(err, fs.ErrNotExist) },
		},
		{
			name:  "psi=0",
			fsys:  errFS{syscall.EOPNOTSUPP},
			path:  "pressure/cpu",
			check: func(err error) bool { return errors.Is(err, ErrNotSupported) },
		},
		{
			name:  "unreadable",
			fsys:  errFS{syscall.EACCES},
			path:  "pressure/cpu",
			check: func(err error) bool { return err != nil && !errors.Is(err, ErrNotSupported) },
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadPSI(tc.fsys, tc.path)
			if tc.check != nil {
				if !tc.check(err) {
					t.Fatalf("ReadPSI error = %v, not the expected kind", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ReadPSI: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ReadPSI mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// errFS fails every Open with err, as a kernel does for a file it refuses.
type errFS struct{ err error }

func (e errFS) Open(name string) (fs.File, error) {
	return nil, &fs.PathError{Op: "open", Path: name, Err: e.err}
}

func TestParsePSIErrors(t *testing.T) {
	for _, data := range []string{
		"",
		"full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
		"some avg10=0.00 avg60=0.00 avg300=0.00\n",
		"some avg10=0.00 avg60=0.00 avg300=0.00 total=0 total=0\n",
		"some avg10=NaN avg60=0.00 avg300=0.00 total=0\n",
		"some avg10=101 avg60=0.00 avg300=0.00 total=0\n",
		"some avg10=0.00 avg60=0.00 avg300=0.00 total=-1\n",
		"some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nsome avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
		"half avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
	} {
		if got, err := ParsePSI([]byte(data)); err == nil {
			t.Errorf("ParsePSI(%q) = %+v, want error", data, got)
		}
	}
}

func TestPSISub(t *testing.T) {
	before := PSI{Some: PSILine{Total: time.Second}, Full: PSILine{Total: time.Millisecond}, HasFull: true}
	after := PSI{Some: PSILine{Total: 3 * time.Second}, Full: PSILine{Total: 5 * time.Millisecond}, HasFull: true}
	got, err := PSISub(before, after)
	if err != nil {
		t.Fatal(err)
	}
	if want := (PSIDelta{Some: 2 * time.Second, Full: 4 * time.Millisecond, HasFull: true}); got != want {
		t.Errorf("PSISub = %+v, want %+v", got, want)
	}
	if _, err := PSISub(after, before); !errors.Is(err, ErrCounterReset) {
		t.Errorf("PSISub(after, before) error = %v, want ErrCounterReset", err)
	}
}
