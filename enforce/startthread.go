package enforce

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"runtime"
	"strconv"
	"strings"
	"syscall"
)

// StartThread starts cmd with its process already in g, like Start, but
// on cgroup v1 without the shim: an OS thread locked to this call moves
// itself into g (its tid written to each hierarchy's tasks file) in every
// hierarchy but the scheduler's (cpu), forks cmd there, so the child is
// born in the group's cpuset (cgroup_fork copies the forking task's
// cgroups), moves itself back to the groups it came from, and moves the
// child into g's cpu group before returning (its weight and quota hold
// from then on; its CPUs from its first instruction). If moving back fails the thread stays locked, so the runtime ends
// it (or parks it) rather than run other Go code in g. This saves the
// shim's exec of this (large) binary, most of an admission's latency.
// Groups of other drivers, and a thread whose own groups cannot be read,
// go through Start, which on cgroup v2 uses CLONE_INTO_CGROUP.
func StartThread(g Group, cmd *exec.Cmd) error {
	cg, ok := g.(*cgGroup)
	if !ok || cg.d.name != NameV1 {
		return Start(g, cmd)
	}
	if cmd.Process != nil {
		return errors.New("starting command: already started")
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		tid := strconv.Itoa(syscall.Gettid())
		orig, ok := threadGroups(cg.d)
		if !ok {
			runtime.UnlockOSThread()
			errc <- Start(g, cmd)
			return
		}
		// The thread joins every hierarchy but the scheduler's (cpu), whose
		// new group costs the joining task a fresh placement in the run
		// queue: on a loaded machine the thread waited there 3-4 ms (p90)
		// before it could fork. The child joins that hierarchy right after
		// it is started (joinSched).
		sched := cg.d.pick("cpu.shares")
		if sched == cg.d.pick("cpuset.cpus") {
			sched = nil
		}
		var moved []cgfs
		moveBack := func() {
			for _, h := range moved {
				if h.write(path.Join(orig[h], "tasks"), tid) != nil {
					return // stay locked: this thread must not run other code
				}
			}
			runtime.UnlockOSThread()
		}
		for _, h := range cg.d.hs {
			if h == sched {
				continue
			}
			if err := h.write(path.Join(cg.dir, "tasks"), tid); err != nil {
				moveBack()
				errc <- fmt.Errorf("starting command: moving the forking thread into group %s: %w", cg.name, err)
				return
			}
			moved = append(moved, h)
		}
		err := cmd.Start()
		moveBack()
		if err != nil {
			errc <- fmt.Errorf("starting command in group %s: %w", cg.name, err)
			return
		}
		errc <- joinSched(cg, sched, cmd)
	}()
	return <-errc
}

// joinSched moves cmd's process, started in cg's other hierarchies, into
// cg's group of the scheduler's hierarchy sched (nil: none apart). A
// process that has exited already is not an error. On any other failure
// it kills and reaps the process, so that nothing runs outside the
// group's cpu settings, and says so.
func joinSched(cg *cgGroup, sched cgfs, cmd *exec.Cmd) error {
	if sched == nil {
		return nil
	}
	err := sched.write(path.Join(cg.dir, "cgroup.procs"), strconv.Itoa(cmd.Process.Pid))
	if err == nil || errors.Is(err, syscall.ESRCH) {
		return nil
	}
	cmd.Process.Kill()
	cmd.Wait()
	return fmt.Errorf("starting command in group %s: moving it into %s (it was killed): %w", cg.name, sched.mount(), err)
}

// threadGroups returns the calling thread's group in each of d's
// hierarchies (relative to the mount point), from /proc/thread-self/cgroup.
func threadGroups(d *cgDriver) (map[cgfs]string, bool) {
	b, err := os.ReadFile("/proc/thread-self/cgroup")
	if err != nil {
		return nil, false
	}
	out := map[cgfs]string{}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		for _, c := range strings.Split(f[1], ",") {
			var file string
			switch c {
			case "cpuset":
				file = "cpuset.cpus"
			case "cpu":
				file = "cpu.shares"
			case "cpuacct":
				file = "cpuacct.usage"
			default:
				continue
			}
			if h := d.pick(file); h != nil {
				rel, err := cleanParent(f[2])
				if err != nil {
					return nil, false
				}
				out[h] = rel
			}
		}
	}
	for _, h := range d.hs {
		if _, ok := out[h]; !ok {
			return nil, false
		}
	}
	return out, true
}
