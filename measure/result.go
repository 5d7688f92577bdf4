package measure

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"syscall"
	"time"

	"github.com/corepin/corepin/cpuset"
)

// Result is the outcome of one job: what rusage, the Sampler, the cgroup's
// cpu.stat and PSI said about it. Its JSON form uses snake_case keys,
// seconds as floats (wall_s, user_s, ...) and CPU sets in list format.
type Result struct {
	Wall     time.Duration // from start to exit
	User     time.Duration // rusage: user CPU of the process and its reaped descendants
	Sys      time.Duration // rusage: system CPU, likewise
	MaxRSSKB int64         // rusage: largest resident set of any one of them, in KiB (not a sum)

	CPUsUsed            cpuset.CPUSet // CPUs the tree's threads were seen on
	Migrations          int64
	CtxSwitches         int64 // VoluntarySwitches + InvoluntarySwitches
	VoluntarySwitches   int64
	InvoluntarySwitches int64
	RunTime             time.Duration // time on a CPU of the sampled threads (a lower bound of User+Sys)
	RunDelay            time.Duration // time runnable but waiting for a CPU
	Threads             int           // distinct threads sampled
	Processes           int           // distinct processes sampled
	Samples             int           // sweeps taken

	Throttle ThrottleDelta // zero when no cpu.stat was given
	PSI      *PSIDelta     // nil where the kernel has no PSI or none was read
}

// SetRusage fills Wall-independent rusage fields (User, Sys, MaxRSSKB) from
// the state of a waited-for process. On Linux the rusage of wait4 covers the
// process and the descendants it waited for, not orphans reaped by init.
func (r *Result) SetRusage(ps *os.ProcessState) error {
	if ps == nil {
		return fmt.Errorf("reading rusage: process not waited for")
	}
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok || ru == nil {
		return fmt.Errorf("reading rusage: got %T", ps.SysUsage())
	}
	r.User = time.Duration(ru.Utime.Nano())
	r.Sys = time.Duration(ru.Stime.Nano())
	r.MaxRSSKB = ru.Maxrss // kilobytes on Linux, getrusage(2)
	return nil
}

// SetSample fills the sampled fields from a Sampler's summary.
func (r *Result) SetSample(s Sample) {
	r.CPUsUsed = s.CPUsUsed
	r.Migrations = s.Migrations
	r.VoluntarySwitches = s.VoluntarySwitches
	r.InvoluntarySwitches = s.InvoluntarySwitches
	r.CtxSwitches = s.CtxSwitches()
	r.RunTime = s.RunTime
	r.RunDelay = s.RunDelay
	r.Threads = s.Threads
	r.Processes = s.Processes
	r.Samples = s.Samples
}

func seconds(d time.Duration) float64 { return d.Seconds() }

func duration(s float64) (time.Duration, error) {
	if math.IsNaN(s) || math.IsInf(s, 0) || math.Abs(s) > math.MaxInt64/1e9 {
		return 0, fmt.Errorf("decoding seconds %v: out of range", s)
	}
	return time.Duration(math.Round(s * 1e9)), nil
}

type resultJSON struct {
	Wall                float64       `json:"wall_s"`
	User                float64       `json:"user_s"`
	Sys                 float64       `json:"sys_s"`
	MaxRSSKB            int64         `json:"max_rss_kb"`
	CPUsUsed            cpuset.CPUSet `json:"cpus_used"`
	Migrations          int64         `json:"migrations"`
	CtxSwitches         int64         `json:"ctx_switches"`
	VoluntarySwitches   int64         `json:"voluntary_switches"`
	InvoluntarySwitches int64         `json:"involuntary_switches"`
	RunTime             float64       `json:"run_time_s"`
	RunDelay            float64       `json:"run_delay_s"`
	Threads             int           `json:"threads"`
	Processes           int           `json:"processes"`
	Samples             int           `json:"samples"`
	Throttle            ThrottleDelta `json:"throttle"`
	PSI                 *PSIDelta     `json:"psi,omitempty"`
}

// MarshalJSON encodes r as documented on Result.
func (r Result) MarshalJSON() ([]byte, error) {
	return json.Marshal(resultJSON{
		Wall: seconds(r.Wall), User: seconds(r.User), Sys: seconds(r.Sys), MaxRSSKB: r.MaxRSSKB,
		CPUsUsed: r.CPUsUsed, Migrations: r.Migrations, CtxSwitches: r.CtxSwitches,
		VoluntarySwitches: r.VoluntarySwitches, InvoluntarySwitches: r.InvoluntarySwitches,
		RunTime: seconds(r.RunTime), RunDelay: seconds(r.RunDelay), Threads: r.Threads, Processes: r.Processes, Samples: r.Samples,
		Throttle: r.Throttle, PSI: r.PSI,
	})
}

// UnmarshalJSON decodes the form MarshalJSON writes.
func (r *Result) UnmarshalJSON(b []byte) error {
	var j resultJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	var out Result
	var err [5]error
	out.Wall, err[0] = duration(j.Wall)
	out.User, err[1] = duration(j.User)
	out.Sys, err[2] = duration(j.Sys)
	out.RunDelay, err[3] = duration(j.RunDelay)
	out.RunTime, err[4] = duration(j.RunTime)
	for _, e := range err {
		if e != nil {
			return e
		}
	}
	out.MaxRSSKB, out.CPUsUsed, out.Migrations = j.MaxRSSKB, j.CPUsUsed, j.Migrations
	out.CtxSwitches, out.VoluntarySwitches, out.InvoluntarySwitches = j.CtxSwitches, j.VoluntarySwitches, j.InvoluntarySwitches
	out.Threads, out.Processes, out.Samples = j.Threads, j.Processes, j.Samples
	out.Throttle, out.PSI = j.Throttle, j.PSI
	*r = out
	return nil
}

type throttleJSON struct {
	Periods          int64   `json:"periods"`
	ThrottledPeriods int64   `json:"throttled_periods"`
	ThrottledTime    float64 `json:"throttled_s"`
	Bursts           int64   `json:"bursts"`
	BurstTime        float64 `json:"burst_s"`
}

// MarshalJSON encodes d with snake_case keys and times in seconds.
func (d ThrottleDelta) MarshalJSON() ([]byte, error) {
	return json.Marshal(throttleJSON{d.Periods, d.ThrottledPeriods, seconds(d.ThrottledTime), d.Bursts, seconds(d.BurstTime)})
}

// UnmarshalJSON decodes the form MarshalJSON writes.
func (d *ThrottleDelta) UnmarshalJSON(b []byte) error {
	var j throttleJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	tt, err := duration(j.ThrottledTime)
	if err != nil {
		return err
	}
	bt, err := duration(j.BurstTime)
	if err != nil {
		return err
	}
	*d = ThrottleDelta{j.Periods, j.ThrottledPeriods, tt, j.Bursts, bt}
	return nil
}

type psiJSON struct {
	Some float64  `json:"some_s"`
	Full *float64 `json:"full_s,omitempty"`
}

// MarshalJSON encodes d as {"some_s": ..., "full_s": ...}, leaving out
// full_s when the kernel has no "full" line.
func (d PSIDelta) MarshalJSON() ([]byte, error) {
	j := psiJSON{Some: seconds(d.Some)}
	if d.HasFull {
		f := seconds(d.Full)
		j.Full = &f
	}
	return json.Marshal(j)
}

// UnmarshalJSON decodes the form MarshalJSON writes.
func (d *PSIDelta) UnmarshalJSON(b []byte) error {
	var j psiJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	some, err := duration(j.Some)
	if err != nil {
		return err
	}
	out := PSIDelta{Some: some}
	if j.Full != nil {
		if out.Full, err = duration(*j.Full); err != nil {
			return err
		}
		out.HasFull = true
	}
	*d = out
	return nil
}
