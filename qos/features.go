package qos

import (
	"errors"
	"io/fs"
	"runtime"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corepin/corepin/enforce"
)

// Support is a tri-state probe result.
type Support int8

// Probe results. Unknown means the probe could not tell (no group to look
// in, no permission), which callers treat as unsupported but report apart.
const (
	Unknown Support = iota
	Supported
	Unsupported
)

func (s Support) String() string {
	switch s {
	case Supported:
		return "yes"
	case Unsupported:
		return "no"
	}
	return "unknown"
}

// Features are the kernel levers this machine offers BE and LS work.
type Features struct {
	CPUIdle    Support // cpu.idle on a group (Linux 5.15)
	MinWeight  Support // cpu.shares=2 / cpu.weight=1 on a group
	Burst      Support // cpu.cfs_burst_us / cpu.max.burst (Linux 5.14)
	GroupPSI   Support // cpu.pressure per group (cgroup v2)
	ThreadIdle Support // SCHED_IDLE per thread
	Slice      Support // EEVDF requested slice via sched_setattr (Linux 6.12)
}

// ProbeGroup looks for the control files of g (a cgroup group's
// enforce.ControlFiler) and adds the per-thread probes (ProbeThreads).
// Without control files the group levers are Unknown.
func ProbeGroup(g enforce.Group) Features {
	f := ProbeThreads()
	cf, ok := g.(enforce.ControlFiler)
	if !ok {
		return f
	}
	fsys := cf.ControlFS()
	has := func(names ...string) Support {
		for _, n := range names {
			if _, err := fs.Stat(fsys, n); err == nil {
				return Supported
			} else if !errors.Is(err, fs.ErrNotExist) {
				return Unknown
			}
		}
		return Unsupported
	}
	f.CPUIdle = has("cpu.idle")
	f.MinWeight = has("cpu.shares", "cpu.weight")
	f.Burst = has("cpu.cfs_burst_us", "cpu.max.burst")
	f.GroupPSI = has("cpu.pressure")
	return f
}

// ProbeThreads returns the per-thread probes, run once per process: each
// sets the lever on a throwaway OS thread (a goroutine locked to it that
// exits locked, so the runtime discards the thread) and reads it back.
var ProbeThreads = sync.OnceValue(func() Features {
	var f Features
	f.ThreadIdle = onThrowawayThread(func() Support {
		if err := enforce.SetTaskSched(0, enforce.ThreadSched{Idle: true}); err != nil {
			return Unsupported
		}
		if _, idle, err := enforce.TaskSlice(0); err != nil || !idle {
			return Unsupported
		}
		return Supported
	})
	f.Slice = Unsupported
	if enforce.KernelAtLeast(6, 12) {
		f.Slice = onThrowawayThread(func() Support {
			want := 3 * time.Millisecond / 2
			if err := enforce.SetTaskSched(0, enforce.ThreadSched{Slice: want}); err != nil {
				if errors.Is(err, unix.EPERM) {
					return Unknown
				}
				return Unsupported
			}
			if got, _, err := enforce.TaskSlice(0); err != nil || got != want {
				return Unsupported
			}
			return Supported
		})
	}
	return f
})

func onThrowawayThread(probe func() Support) Support {
	ch := make(chan Support, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		ch <- probe()
	}()
	return <-ch
}

// Lever is how BE is kept out of LS's way, best first.
type Lever string

// Levers.
const (
	LeverCPUIdle    Lever = "cpu.idle"
	LeverThreadIdle Lever = "sched_idle"
	LeverMinWeight  Lever = "min-weight"
	LeverNone       Lever = "none"
)

// BestLever picks the BE priority lever f offers, best first: cpu.idle on
// the group, SCHED_IDLE per thread, the minimal weight. why says what was
// passed over.
func BestLever(f Features) (l Lever, why string) {
	var skipped []string
	for _, c := range []struct {
		s Support
		l Lever
	}{{f.CPUIdle, LeverCPUIdle}, {f.ThreadIdle, LeverThreadIdle}, {f.MinWeight, LeverMinWeight}} {
		if c.s == Supported {
			return c.l, strings.Join(skipped, "; ")
		}
		skipped = append(skipped, string(c.l)+": "+c.s.String())
	}
	return LeverNone, strings.Join(skipped, "; ")
}
