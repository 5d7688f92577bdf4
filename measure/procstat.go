package measure

import (
	"bytes"
	"fmt"
	"io/fs"
	"strconv"
	"time"

	"github.com/corepin/corepin/cpuset"
)

// ClockTicks is USER_HZ, the unit of the times in /proc/stat and
// /proc/PID/stat: 100 on every Linux architecture corepin supports
// (proc_stat(5), https://man7.org/linux/man-pages/man5/proc_stat.5.html).
const ClockTicks = 100

// Ticks converts a count of clock ticks to a duration.
func Ticks(n uint64) time.Duration {
	return time.Duration(n/ClockTicks)*time.Second + time.Duration(n%ClockTicks)*time.Second/ClockTicks
}

// CPUTime is the CPU time (user + system) st's task has used.
func (st TaskStat) CPUTime() time.Duration { return Ticks(st.UTime + st.STime) }

// SystemCPU is one CPU's line of /proc/stat ("cpu3 ..."), in clock ticks.
type SystemCPU struct {
	CPU                                                   int
	User, Nice, System, Idle, IOWait, IRQ, SoftIRQ, Steal uint64
}

// Busy is the time the CPU ran something: user, nice, system, irq, softirq
// and steal (idle and iowait are not busy).
func (c SystemCPU) Busy() time.Duration {
	return Ticks(c.User + c.Nice + c.System + c.IRQ + c.SoftIRQ + c.Steal)
}

// ReadProcStat reads and parses "stat" in a procfs root (os.DirFS("/proc")).
func ReadProcStat(fsys fs.FS) ([]SystemCPU, error) {
	data, err := fs.ReadFile(fsys, "stat")
	if err != nil {
		return nil, fmt.Errorf("reading /proc/stat: %w", err)
	}
	return ParseProcStat(data)
}

// ParseProcStat parses the per-CPU lines of /proc/stat, in file order; the
// summary "cpu" line and the other lines are skipped. A per-CPU line needs
// the eight fields up to steal (Linux 2.6.11); a file without any is an
// error, so a wrong file never reads as idle CPUs.
func ParseProcStat(data []byte) ([]SystemCPU, error) {
	var out []SystemCPU
	for line := range bytes.Lines(data) {
		f := bytes.Fields(line)
		if len(f) == 0 || !bytes.HasPrefix(f[0], []byte("cpu")) || len(f[0]) == 3 {
			continue
		}
		cpu, err := strconv.Atoi(string(f[0][3:]))
		if err != nil || cpu < 0 || cpu > cpuset.MaxCPU {
			return nil, fmt.Errorf("parsing /proc/stat line %q: %w", f[0], errFormat)
		}
		if len(f) < 9 {
			return nil, fmt.Errorf("parsing /proc/stat %s: %d fields, want at least 8: %w", f[0], len(f)-1, errFormat)
		}
		var v [8]uint64
		for i := range v {
			n, ok := parseUint(f[i+1])
			if !ok {
				return nil, fmt.Errorf("parsing /proc/stat %s field %d %q: %w", f[0], i+1, f[i+1], errFormat)
			}
			v[i] = n
		}
		out = append(out, SystemCPU{CPU: cpu, User: v[0], Nice: v[1], System: v[2], Idle: v[3], IOWait: v[4], IRQ: v[5], SoftIRQ: v[6], Steal: v[7]})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("parsing /proc/stat: no per-CPU lines: %w", errFormat)
	}
	return out, nil
}
