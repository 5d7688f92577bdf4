package measure

import (
	"bytes"
	"fmt"
	"math"
	"time"
)

// TaskSched holds the counters measure uses from /proc/PID/task/TID/sched,
// the scheduler's debug view of one task (kernel/sched/debug.c,
// proc_sched_show_task). The file has no stable ABI, so only long-standing
// keys are read.
type TaskSched struct {
	Migrations          int64 // se.nr_migrations: moves between CPUs
	Switches            int64 // nr_switches
	VoluntarySwitches   int64 // nr_voluntary_switches: the task blocked
	InvoluntarySwitches int64 // nr_involuntary_switches: the task was preempted
}

var (
	keyMigrations  = []byte("se.nr_migrations")
	keySwitches    = []byte("nr_switches")
	keyVoluntary   = []byte("nr_voluntary_switches")
	keyInvoluntary = []byte("nr_involuntary_switches")
)

// ParseTaskSched parses a sched file. The first line names the task and may
// contain anything its command name holds, newlines included, so keys are
// read only after the line of dashes that follows it. se.nr_migrations,
// nr_voluntary_switches and nr_involuntary_switches are required;
// nr_switches, when absent, is their sum.
func ParseTaskSched(data []byte) (TaskSched, error) {
	var ts TaskSched
	// The kernel prints a line of 67 dashes; a 15-byte command name cannot
	// forge a line of 20 dashes followed by a key line.
	sep := bytes.Index(data, []byte("\n--------------------"))
	if sep < 0 {
		return ts, fmt.Errorf("parsing sched: no header separator: %w", errFormat)
	}
	rest := data[sep+1:]
	if i := bytes.IndexByte(rest, '\n'); i >= 0 {
		rest = rest[i+1:]
	} else {
		rest = nil
	}
	const (
		haveMigrations = 1 << iota
		haveSwitches
		haveVoluntary
		haveInvoluntary
	)
	have := 0
	for len(rest) > 0 {
		line := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line, rest = rest[:i], rest[i+1:]
		} else {
			rest = nil
		}
		colon := bytes.IndexByte(line, ':')
		if colon < 0 {
			continue
		}
		key := bytes.TrimSpace(line[:colon])
		var dst *int64
		var bit int
		switch {
		case bytes.Equal(key, keyMigrations):
			dst, bit = &ts.Migrations, haveMigrations
		case bytes.Equal(key, keySwitches):
			dst, bit = &ts.Switches, haveSwitches
		case bytes.Equal(key, keyVoluntary):
			dst, bit = &ts.VoluntarySwitches, haveVoluntary
		case bytes.Equal(key, keyInvoluntary):
			dst, bit = &ts.InvoluntarySwitches, haveInvoluntary
		default:
			continue
		}
		if have&bit != 0 {
			return ts, fmt.Errorf("parsing sched: %s repeated: %w", key, errFormat)
		}
		v, ok := parseUint(bytes.TrimSpace(line[colon+1:]))
		if !ok || v > math.MaxInt64 {
			return ts, fmt.Errorf("parsing sched %s %q: %w", key, bytes.TrimSpace(line[colon+1:]), errFormat)
		}
		*dst = int64(v)
		have |= bit
	}
	if need := haveMigrations | haveVoluntary | haveInvoluntary; have&need != need {
		return ts, fmt.Errorf("parsing sched: missing %s, %s or %s: %w", keyMigrations, keyVoluntary, keyInvoluntary, errFormat)
	}
	if have&haveSwitches == 0 {
		ts.Switches = ts.VoluntarySwitches + ts.InvoluntarySwitches
	}
	return ts, nil
}

// SchedStat is the content of /proc/PID/task/TID/schedstat
// (https://docs.kernel.org/scheduler/sched-stats.html): time the task spent
// on a CPU, time it spent runnable but waiting on a run queue, and the
// number of timeslices it ran.
type SchedStat struct {
	Run        time.Duration
	Wait       time.Duration // run-queue delay
	Timeslices int64
}

// ParseSchedStat parses a schedstat line: exactly three unsigned decimals.
func ParseSchedStat(data []byte) (SchedStat, error) {
	var ss SchedStat
	var v [3]uint64
	f := bytes.Fields(data)
	if len(f) != 3 {
		return ss, fmt.Errorf("parsing schedstat: %d fields, want 3: %w", len(f), errFormat)
	}
	for i := range f {
		n, ok := parseUint(f[i])
		if !ok || n > math.MaxInt64 {
			return ss, fmt.Errorf("parsing schedstat field %d %q: %w", i+1, f[i], errFormat)
		}
		v[i] = n
	}
	return SchedStat{Run: time.Duration(v[0]), Wait: time.Duration(v[1]), Timeslices: int64(v[2])}, nil
}
