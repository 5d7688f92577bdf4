package measure

import (
	"fmt"
	"io/fs"
	"time"
)

// Overhead is the measured cost of sampling one process tree.
type Overhead struct {
	Interval    time.Duration
	Sweeps      int
	Threads     int           // distinct threads seen
	PerSweep    time.Duration // mean CPU time of one sweep
	CPUFraction float64       // sampler CPU / elapsed; 0.01 is 1% of one CPU
}

func (o Overhead) String() string {
	return fmt.Sprintf("%d sweeps of %d threads every %v: %v CPU per sweep, %.3f%% of one CPU",
		o.Sweeps, o.Threads, o.Interval, o.PerSweep, 100*o.CPUFraction)
}

// MeasureOverhead samples the process tree of pid every interval for d and
// reports what the sampling itself cost, from the thread CPU clock of the
// sampling goroutine. It counts the sweeps only, not the Go runtime's
// background work (GC of the few allocations a sweep makes).
func MeasureOverhead(fsys fs.FS, pid int, interval, d time.Duration) (Overhead, error) {
	s := NewSampler(fsys, pid, interval)
	s.Start()
	time.Sleep(d)
	sm, err := s.Stop()
	if err != nil {
		return Overhead{}, fmt.Errorf("measuring overhead: %w", err)
	}
	o := Overhead{Interval: s.interval, Sweeps: sm.Samples, Threads: sm.Threads, CPUFraction: sm.Overhead()}
	if sm.Samples > 0 {
		o.PerSweep = sm.SamplerCPU / time.Duration(sm.Samples)
	}
	return o, nil
}
