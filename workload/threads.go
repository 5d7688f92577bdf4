package workload

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// EnvThreads is the environment variable `corepin run` sets to the thread
// count it sized a job to; "auto" resolves to it when it is set.
const EnvThreads = "COREPIN_THREADS"

// ErrInvalid marks options or flags a caller got wrong.
var ErrInvalid = errors.New("invalid workload option")

// ThreadsNative asks for the program's own default thread count instead of
// one corepin sizes: ffmpeg's auto (-threads 0; x264 then runs about 1.5
// frame threads per CPU), and for spin one thread per CPU of the machine
// (runtime.NumCPU at start-up), as programs that ignore their cpuset do.
// The threads experiment compares it with threads = CPUs.
const ThreadsNative = "native"

// ResolveThreads turns a --threads value into a thread count. ThreadsNative
// gives 0, the program's own default. "" and "auto"
// mean $COREPIN_THREADS when set, else [AffinityCPUs]; anything else must be
// a positive integer. It does not cap N at the CPU count: oversubscribing is
// an experiment corepin runs on purpose.
func ResolveThreads(spec string) (int, error) {
	spec = strings.TrimSpace(spec)
	if spec == ThreadsNative {
		return 0, nil
	}
	if spec == "" || spec == "auto" {
		if v, ok := os.LookupEnv(EnvThreads); ok && strings.TrimSpace(v) != "" {
			n, err := parseThreads(v)
			if err != nil {
				return 0, fmt.Errorf("$%s: %w", EnvThreads, err)
			}
			return n, nil
		}
		return AffinityCPUs(), nil
	}
	return parseThreads(spec)
}

func parseThreads(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%w: threads %q: want auto or a positive integer", ErrInvalid, s)
	}
	return n, nil
}

// AffinityCPUs returns the number of CPUs this process may run on now, read
// with sched_getaffinity(2) (see cpuset(7): a cpuset cgroup narrows the
// mask). Unlike runtime.NumCPU it is read at call time, not at start-up; it
// falls back to runtime.NumCPU if the call fails.
func AffinityCPUs() int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err == nil {
		if n := set.Count(); n > 0 {
			return n
		}
	}
	return runtime.NumCPU()
}
