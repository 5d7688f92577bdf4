package measure

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"strconv"
	"time"

	"github.com/corepin/corepin/cpuset"
)

// ClockTicks is USER_HZ, the unit of the times in /proc/stat and
// /proc/PID/stat: 100 on every Linux architecture corepin supports
// (proc(5), "sysconf(_SC_CLK_TCK)"; the kernel exports USER_HZ, not HZ).
const ClockTicks = 100

// ProcStatFile is the system-wide CPU time file, relative to a procfs root.
const ProcStatFile = "stat"

// maxProcStat bounds how much of /proc/stat is read (a line per CPU of
// some 100 bytes, for cpuset.MaxCPU CPUs, and the rest).
const maxProcStat = 8 << 20

// CPUTimes are the times of one CPU from a "cpuN" line of /proc/stat, in
// clock ticks (proc(5)). Guest time is already counted in User and Nice.
type CPUTimes struct {
	CPU                              int
	User, Nice, System, Idle, IOWait uint64
	IRQ, SoftIRQ, Steal              uint64
}

// Busy is the time the CPU was not idle: user, nice, system, irq, softirq
// and steal (iowait counts as idle).
func (c CPUTimes) Busy() time.Duration {
	return ticks(c.User + c.Nice + c.System + c.IRQ + c.SoftIRQ + c.Steal)
}

// ticks converts clock ticks to a duration.
func ticks(n uint64) time.Duration { return time.Duration(n) * (time.Second / ClockTicks) }

// ParseProcStat reads the per-CPU lines ("cpu0 ...") of /proc/stat, in the
// order given, skipping the "cpu" total and every other line. A cpuN line
// needs at least the eight fields up to steal (Linux 2.6.11); a CPU number
// above cpuset.MaxCPU or a repeated one is an error.
func ParseProcStat(data []byte) ([]CPUTimes, error) {
	var out []CPUTimes
	seen := map[int]bool{}
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		f := bytes.Fields(line)
		if len(f) == 0 || !bytes.HasPrefix(f[0], []byte("cpu")) || len(f[0]) == 3 {
			continue
		}
		cpu, ok := parseUint(f[0][3:])
		if !ok || cpu > cpuset.MaxCPU {
			return nil, fmt.Errorf("parsing /proc/stat line %.40q: %w", line, errFormat)
		}
		if len(f) < 9 {
			return nil, fmt.Errorf("parsing /proc/stat %s: %d fields, want at least 8 times: %w", f[0], len(f)-1, errFormat)
		}
		var v [8]uint64
		for i := range v {
			if v[i], ok = parseUint(f[i+1]); !ok {
				return nil, fmt.Errorf("parsing /proc/stat %s field %d %.20q: %w", f[0], i+1, f[i+1], errFormat)
			}
		}
		if seen[int(cpu)] {
			return nil, fmt.Errorf("parsing /proc/stat: %s twice: %w", f[0], errFormat)
		}
		seen[int(cpu)] = true
		out = append(out, CPUTimes{CPU: int(cpu), User: v[0], Nice: v[1], System: v[2], Idle: v[3], IOWait: v[4],
			IRQ: v[5], SoftIRQ: v[6], Steal: v[7]})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("parsing /proc/stat: no cpuN lines: %w", errFormat)
	}
	return out, nil
}

// ReadCPUBusy returns the busy time since boot (CPUTimes.Busy) summed over
// cpus, or over every CPU when cpus is empty, from ProcStatFile in the
// procfs root fsys. The difference of two readings is the CPU time a set
// of CPUs spent on anything, which an experiment compares with its own
// processes' time.
func ReadCPUBusy(fsys fs.FS, cpus cpuset.CPUSet) (time.Duration, error) {
	t, err := ReadCPUSum(fsys, cpus)
	return t.Busy(), err
}

// ReadCPUSum sums the times of the CPUs in cpus (all of them when cpus is
// empty) from /proc/stat in the procfs root fsys; its CPU field is -1.
func ReadCPUSum(fsys fs.FS, cpus cpuset.CPUSet) (CPUTimes, error) {
	sum := CPUTimes{CPU: -1}
	data, err := readBounded(fsys, ProcStatFile, maxProcStat)
	if err != nil {
		return sum, fmt.Errorf("reading cpu times: %w", err)
	}
	ts, err := ParseProcStat(data)
	if err != nil {
		return sum, err
	}
	for _, t := range ts {
		if cpus.IsEmpty() || cpus.Contains(t.CPU) {
			sum.User += t.User
			sum.Nice += t.Nice
			sum.System += t.System
			sum.Idle += t.Idle
			sum.IOWait += t.IOWait
			sum.IRQ += t.IRQ
			sum.SoftIRQ += t.SoftIRQ
			sum.Steal += t.Steal
		}
	}
	return sum, nil
}

// ProcessCPU returns the CPU time (utime + stime) used so far by process
// pid and its threads, from PID/stat in the procfs root fsys.
func ProcessCPU(fsys fs.FS, pid int) (time.Duration, error) {
	data, err := readBounded(fsys, strconv.Itoa(pid)+"/stat", 64<<10)
	if err != nil {
		return 0, fmt.Errorf("reading cpu time of pid %d: %w", pid, err)
	}
	st, err := ParseTaskStat(data)
	if err != nil {
		return 0, err
	}
	return ticks(st.UTime + st.STime), nil
}

// readBounded reads at most limit bytes of name; more is an error.
func readBounded(fsys fs.FS, name string, limit int64) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s: over %d bytes: %w", name, limit, errFormat)
	}
	return data, nil
}
