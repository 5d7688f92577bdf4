package measure

import (
	"bytes"
	"fmt"
	"math"

	"github.com/corepin/corepin/cpuset"
)

// TaskStat holds the fields of /proc/PID/stat or /proc/PID/task/TID/stat
// that measure uses. Field numbers are those of proc_pid_stat(5),
// https://man7.org/linux/man-pages/man5/proc_pid_stat.5.html.
type TaskStat struct {
	PID        int    // (1) process or thread id
	Comm       string // (2) command name, without the parentheses
	State      byte   // (3) R, S, D, Z, ...
	PPID       int    // (4) parent process id
	PGRP       int    // (5) process group id; -1 for none
	UTime      uint64 // (14) user time, in clock ticks
	STime      uint64 // (15) system time, in clock ticks
	NumThreads int    // (20) threads in the thread group
	StartTime  uint64 // (22) start time after boot, in clock ticks
	Processor  int    // (39) CPU the task last ran on
}

// ParseTaskStat parses the one-line content of a stat file. The command
// name may hold spaces, parentheses and newlines, so the fields after it are
// found from the last ')'. It rejects lines shorter than field 39, and a
// processor outside [0, cpuset.MaxCPU].
func ParseTaskStat(data []byte) (TaskStat, error) {
	var st TaskStat
	open := bytes.IndexByte(data, '(')
	closing := bytes.LastIndexByte(data, ')')
	if open < 1 || closing < open {
		return st, fmt.Errorf("parsing stat: no (comm): %w", errFormat)
	}
	pid, ok := parseUint(bytes.TrimSuffix(data[:open], []byte(" ")))
	if !ok || pid > math.MaxInt32 {
		return st, fmt.Errorf("parsing stat pid %q: %w", data[:open], errFormat)
	}
	st.PID = int(pid)
	var err error
	st.Comm = string(data[open+1 : closing])

	rest := data[closing+1:]
	// field returns the next space-separated field of rest.
	field := func() []byte {
		for len(rest) > 0 && (rest[0] == ' ' || rest[0] == '\n') {
			rest = rest[1:]
		}
		i := 0
		for i < len(rest) && rest[i] != ' ' && rest[i] != '\n' {
			i++
		}
		f := rest[:i]
		rest = rest[i:]
		return f
	}
	unsigned := func(n int, f []byte) (uint64, error) {
		v, ok := parseUint(f)
		if !ok {
			return 0, fmt.Errorf("parsing stat field %d %q: %w", n, f, errFormat)
		}
		return v, nil
	}
	integer := func(n int, f []byte) (int, error) {
		v, ok := parseUint(f)
		if !ok || v > math.MaxInt32 {
			return 0, fmt.Errorf("parsing stat field %d %q: %w", n, f, errFormat)
		}
		return int(v), nil
	}
	for n := 3; n <= 39; n++ {
		f := field()
		if len(f) == 0 {
			return st, fmt.Errorf("parsing stat: %d fields, want at least 39: %w", n-1, errFormat)
		}
		switch n {
		case 3:
			if len(f) != 1 {
				return st, fmt.Errorf("parsing stat state %q: %w", f, errFormat)
			}
			st.State = f[0]
		case 4:
			if st.PPID, err = integer(n, f); err != nil {
				return st, err
			}
		case 5:
			// -1 where the task has no process group any more: the
			// kernel wrote it for an exiting job thread under Linux 6.12
			// (make e2e-vm).
			neg := len(f) > 1 && f[0] == '-'
			if st.PGRP, err = integer(n, bytes.TrimPrefix(f, []byte("-"))); err != nil {
				return st, err
			}
			if neg {
				st.PGRP = -st.PGRP
			}
		case 14:
			if st.UTime, err = unsigned(n, f); err != nil {
				return st, err
			}
		case 15:
			if st.STime, err = unsigned(n, f); err != nil {
				return st, err
			}
		case 20:
			if st.NumThreads, err = integer(n, f); err != nil {
				return st, err
			}
		case 22:
			if st.StartTime, err = unsigned(n, f); err != nil {
				return st, err
			}
		case 39:
			if st.Processor, err = integer(n, f); err != nil {
				return st, err
			}
			if st.Processor < 0 || st.Processor > cpuset.MaxCPU {
				return st, fmt.Errorf("parsing stat processor %d: out of range: %w", st.Processor, errFormat)
			}
		}
	}
	return st, nil
}

// parseUint parses a non-empty run of ASCII digits that fits in a uint64,
// without allocating (strconv's errors keep a copy of their input).
func parseUint(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if v > (math.MaxUint64-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	return v, true
}
