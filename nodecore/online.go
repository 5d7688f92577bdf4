package nodecore

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strings"

	"github.com/corepin/corepin/cpuset"
)

// onlinePath is the kernel's list of online CPUs
// (https://docs.kernel.org/admin-guide/cputopology.html).
const onlinePath = "sys/devices/system/cpu/online"

// OnlineFrom returns an Options.Online that reads the online CPUs from
// fsys (os.DirFS("/") on a live machine).
func OnlineFrom(fsys fs.FS) func() (cpuset.CPUSet, error) {
	return func() (cpuset.CPUSet, error) {
		b, err := fs.ReadFile(fsys, onlinePath)
		if err != nil {
			return cpuset.CPUSet{}, fmt.Errorf("reading online cpus: %w", err)
		}
		s, err := cpuset.Parse(strings.TrimRight(string(b), "\x00\n "))
		if err != nil {
			return cpuset.CPUSet{}, fmt.Errorf("parsing %s: %w", onlinePath, err)
		}
		return s, nil
	}
}

// CheckOnline compares the exclusive CPUs of every workload (LSE, LSR)
// with the CPUs online now (Options.Online) and records, logs and counts
// each change: a workload whose CPUs went offline keeps them (they stay
// reserved for it and are never handed to another workload, which the
// allocator state guarantees since it still holds them) and is reported
// in its view (offline_cpus), in the corepin_workload_offline_cpus metric
// and in the log; when they come back it is reported again. It returns
// the CPUs held by workloads that are offline now. Without Options.Online
// it does nothing.
func (n *Node) CheckOnline() (cpuset.CPUSet, error) {
	if n.opts.Online == nil {
		return cpuset.CPUSet{}, nil
	}
	online, err := n.opts.Online()
	if err != nil {
		return cpuset.CPUSet{}, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return cpuset.CPUSet{}, nil
	}
	var held cpuset.CPUSet
	var errs []error
	counts := make(map[string]OfflineCount, len(n.wl))
	for _, name := range slices.Sorted(maps.Keys(n.wl)) {
		e := n.wl[name]
		set, err := cpuset.Parse(e.a.Cpuset)
		if err != nil {
			errs = append(errs, fmt.Errorf("workload %q: %w", name, err))
			continue
		}
		off := set.Difference(online)
		if !off.Equals(e.offline) {
			switch {
			case off.IsEmpty():
				n.log.Info("workload's cpus are online again", "name", name, "cpuset", e.a.Cpuset, "cpus", e.offline.String())
			case e.offline.IsEmpty():
				n.log.Warn("workload's cpus went offline; they stay reserved for it and are not given to another workload",
					"name", name, "qos", e.a.QoS, "cpuset", e.a.Cpuset, "offline", off.String())
			default:
				n.log.Warn("workload's offline cpus changed", "name", name, "cpuset", e.a.Cpuset, "offline", off.String())
			}
			e.offline = off
		}
		counts[name] = OfflineCount{QoS: e.a.QoS, CPUs: off.Size()}
		held = held.Union(off)
	}
	n.obs.Offline(counts)
	return held, errors.Join(errs...)
}
