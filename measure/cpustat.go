package measure

import (
	"bytes"
	"fmt"
	"io/fs"
	"math"
	"time"
)

// CPUStat is the content of a cgroup's cpu.stat file, from either cgroup
// version:
//   - v1 (cpu controller, https://docs.kernel.org/scheduler/sched-bwc.html):
//     nr_periods, nr_throttled, throttled_time (ns) and, since Linux 5.14,
//     nr_bursts and burst_time (ns).
//   - v2 (https://docs.kernel.org/admin-guide/cgroup-v2.html#cpu-interface-files):
//     usage_usec, user_usec, system_usec always; nr_periods, nr_throttled,
//     throttled_usec, nr_bursts and burst_usec when the cpu controller is
//     enabled for the group.
//
// Unknown keys (nice_usec, core_sched.force_idle_usec, ...) are ignored.
// Throttled time is summed over the CPUs the group was throttled on, so it
// can exceed wall time.
type CPUStat struct {
	// Bandwidth is true when the file carries the CFS bandwidth counters
	// (nr_periods and friends); false for a v2 group without the cpu
	// controller, whose throttling fields are then zero.
	Bandwidth        bool
	Periods          int64         // nr_periods: enforcement periods that had runnable tasks
	ThrottledPeriods int64         // nr_throttled: periods in which the group ran out of quota
	ThrottledTime    time.Duration // throttled_time (v1, ns) or throttled_usec (v2)
	Bursts           int64         // nr_bursts: periods that used burst (cpu.cfs_burst_us, cpu.max.burst)
	BurstTime        time.Duration // burst_time (v1, ns) or burst_usec (v2)

	// Usage, User and System are v2 only (usage_usec, user_usec,
	// system_usec); zero on v1, where cpuacct holds them.
	Usage, User, System time.Duration
}

// ReadCPUStat reads and parses the cpu.stat file at path in fsys (for
// example os.DirFS("/sys/fs/cgroup/cpu") and "jobs/enc-1/cpu.stat").
func ReadCPUStat(fsys fs.FS, path string) (CPUStat, error) {
	data, err := fs.ReadFile(fsys, path)
	if err != nil {
		return CPUStat{}, fmt.Errorf("reading cpu.stat: %w", err)
	}
	return ParseCPUStat(data)
}

// ParseCPUStat parses the content of a cpu.stat file. Every non-empty line
// must be a key and an unsigned decimal; a file with no known key is an
// error, so a wrong file is never read as all zeros.
func ParseCPUStat(data []byte) (CPUStat, error) {
	var st CPUStat
	known := 0
	for line := range bytes.Lines(data) {
		line = bytes.TrimRight(line, "\n")
		if len(line) == 0 {
			continue
		}
		sp := bytes.IndexByte(line, ' ')
		if sp < 0 {
			return CPUStat{}, fmt.Errorf("parsing cpu.stat line %q: %w", line, errFormat)
		}
		key := string(line[:sp])
		v, ok := parseUint(line[sp+1:])
		if !ok || v > math.MaxInt64 {
			return CPUStat{}, fmt.Errorf("parsing cpu.stat %s %q: %w", key, line[sp+1:], errFormat)
		}
		n := int64(v)
		usec := func() (time.Duration, error) {
			if n > math.MaxInt64/int64(time.Microsecond) {
				return 0, fmt.Errorf("parsing cpu.stat %s %d: overflows a duration: %w", key, n, errFormat)
			}
			return time.Duration(n) * time.Microsecond, nil
		}
		var err error
		known++
		switch key {
		case "nr_periods":
			st.Periods, st.Bandwidth = n, true
		case "nr_throttled":
			st.ThrottledPeriods = n
		case "throttled_time":
			st.ThrottledTime = time.Duration(n)
		case "throttled_usec":
			st.ThrottledTime, err = usec()
		case "nr_bursts":
			st.Bursts = n
		case "burst_time":
			st.BurstTime = time.Duration(n)
		case "burst_usec":
			st.BurstTime, err = usec()
		case "usage_usec":
			st.Usage, err = usec()
		case "user_usec":
			st.User, err = usec()
		case "system_usec":
			st.System, err = usec()
		default:
			known--
		}
		if err != nil {
			return CPUStat{}, err
		}
	}
	if known == 0 {
		return CPUStat{}, fmt.Errorf("parsing cpu.stat: no known key: %w", errFormat)
	}
	return st, nil
}

// ThrottleDelta is what CFS bandwidth control did to a group between two
// reads of its cpu.stat.
type ThrottleDelta struct {
	Periods          int64
	ThrottledPeriods int64
	ThrottledTime    time.Duration
	Bursts           int64
	BurstTime        time.Duration
}

// Delta returns after minus before. It returns ErrCounterReset, and a zero
// delta, when any counter went backwards (the group was recreated).
func Delta(before, after CPUStat) (ThrottleDelta, error) {
	d := ThrottleDelta{
		Periods:          after.Periods - before.Periods,
		ThrottledPeriods: after.ThrottledPeriods - before.ThrottledPeriods,
		ThrottledTime:    after.ThrottledTime - before.ThrottledTime,
		Bursts:           after.Bursts - before.Bursts,
		BurstTime:        after.BurstTime - before.BurstTime,
	}
	if d.Periods < 0 || d.ThrottledPeriods < 0 || d.ThrottledTime < 0 || d.Bursts < 0 || d.BurstTime < 0 {
		return ThrottleDelta{}, fmt.Errorf("subtracting cpu.stat: %w", ErrCounterReset)
	}
	return d, nil
}
