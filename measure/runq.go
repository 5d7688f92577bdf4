package measure

import (
	"fmt"
	"io/fs"
	"strconv"
	"time"
)

// MaxTasks bounds the threads RunDelay reads per process.
const MaxTasks = 1 << 16

// RunDelay returns the run-queue wait (schedstat field 2, "time spent
// waiting on a runqueue") summed over every thread of process pid, from
// PID/task/TID/schedstat in the procfs root fsys. The total only grows
// while the threads live; a thread that exits between listing and reading
// is skipped (its wait leaves the sum, which a caller's delta then sees as
// a reset). See https://docs.kernel.org/scheduler/sched-stats.html.
func RunDelay(fsys fs.FS, pid int) (time.Duration, error) {
	dir := strconv.Itoa(pid) + "/task"
	es, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return 0, fmt.Errorf("listing threads of pid %d: %w", pid, err)
	}
	if len(es) > MaxTasks {
		return 0, fmt.Errorf("listing threads of pid %d: %d threads, over %d: %w", pid, len(es), MaxTasks, errFormat)
	}
	var sum time.Duration
	var buf []byte
	for _, e := range es {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		data, err := readFile(fsys, dir+"/"+e.Name()+"/schedstat", &buf)
		if isGone(err) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("reading run delay of pid %d: %w", pid, err)
		}
		ss, err := ParseSchedStat(data)
		if err != nil {
			return 0, err
		}
		sum += ss.Wait
	}
	return sum, nil
}
