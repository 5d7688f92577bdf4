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
// itself into g (its tid written to each hierarchy's tasks file), forks
// cmd there, so the child is born in the group (cgroup_fork copies the
// forking task's cgroups), and moves itself back to the groups it came
// from. If moving back fails the thread stays locked, so the runtime ends
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
		moveBack := func() {
			for _, h := range cg.d.hs {
				if h.write(path.Join(orig[h], "tasks"), tid) != nil {
					return // stay locked: this thread must not run other code
				}
			}
			runtime.UnlockOSThread()
		}
		for _, h := range cg.d.hs {
			if err := h.write(path.Join(cg.dir, "tasks"), tid); err != nil {
				moveBack()
				errc <- fmt.Errorf("starting command: moving the forking thread into group %s: %w", cg.name, err)
				return
			}
		}
		err := cmd.Start()
		moveBack()
		if err != nil {
			err = fmt.Errorf("starting command in group %s: %w", cg.name, err)
		}
		errc <- err
	}()
	return <-errc
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
