package enforce

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/measure"
)

// features are the optional kernel files a driver found under corepin's
// root, probed once when the driver is made.
type features struct {
	cpuset    bool // cpuset controller (always on v1)
	cpu       bool // cpu controller (always on v1)
	bandwidth bool // CFS bandwidth: cpu.cfs_quota_us, cpu.max (CONFIG_CFS_BANDWIDTH)
	burst     bool // cpu.cfs_burst_us, cpu.max.burst (Linux 5.14)
	idle      bool // cpu.idle (Linux 5.15, both versions)
	rt        bool // cpu.rt_runtime_us (v1, CONFIG_RT_GROUP_SCHED)
	// balance: the load-balancing switch (v1 cpuset.sched_load_balance,
	// v2 cpuset.cpus.partition, Linux 5.11).
	balance bool
	// exclusive: cpuset.cpus.exclusive (v2, Linux 6.7).
	exclusive bool
}

// rootSets are the CPUs and memory nodes of corepin's root group, which an
// empty Resources.CPUs or Mems stands for.
type rootSets struct {
	cpus, mems cpuset.CPUSet
	// held are the CPUs corepin's root lists for its groups' isolated
	// partitions (v2 cpuset.cpus.exclusive): gone from its effective
	// CPUs while the partitions hold them, and still a group's to ask for.
	held cpuset.CPUSet
}

// cgDriver is the part of the v1 and v2 drivers that does not depend on
// the version: a list of hierarchies, the corepin root in each, and a
// function turning Resources into writes.
type cgDriver struct {
	name string
	// hs are the distinct hierarchies, in the order a process joins them
	// and groups are created (v1: cpuset first, as cpuset.mems must be set
	// before a task joins); removal goes in reverse.
	hs []cgfs
	// pick returns the hierarchy holding a control file.
	pick func(file string) cgfs
	// base is corepin's root group, relative to each mount point.
	base   string
	feat   features
	writes func(Resources, rootSets, features) ([]Write, error)
	// prepare, when set, readies the hierarchy for r's writes to group
	// dir (v1: room for a real-time share in corepin's root).
	prepare func(dir string, r Resources) error
	// removed, when set, runs after a group is removed (v1: corepin's
	// root gives back the real-time share it no longer needs).
	removed func()
	// bal, when set, takes groups' CPUs out of load balancing
	// (Resources.NoLoadBalance; balance.go).
	bal balancer
	// roots reads the root group's CPUs and memory nodes.
	roots func() (rootSets, error)
	stats func(g *cgGroup) (Stats, error)
	// wrap adds version-specific abilities to a group.
	wrap   func(g *cgGroup) Group
	limits []string
	self   owner
	alive  func(owner) bool
}

func (d *cgDriver) Name() string          { return d.name }
func (d *cgDriver) Limitations() []string { return slices.Clone(d.limits) }

// Writes returns the writes Create and Update make for r, in order.
func (d *cgDriver) Writes(r Resources) ([]Write, error) {
	var rs rootSets
	if d.feat.cpuset {
		var err error
		if rs, err = d.roots(); err != nil {
			return nil, err
		}
		if !r.CPUs.IsSubsetOf(rs.cpus.Union(rs.held)) {
			return nil, fmt.Errorf("%w: cpus %s outside corepin root's %s",
				ErrInvalidResources, r.CPUs, rs.cpus.Union(rs.held))
		}
		if !r.Mems.IsSubsetOf(rs.mems) {
			return nil, fmt.Errorf("%w: mems %s outside corepin root's %s",
				ErrInvalidResources, r.Mems, rs.mems)
		}
	}
	return d.writes(r, rs, d.feat)
}

func (d *cgDriver) Create(name string, r Resources) (Group, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	ws, err := d.Writes(r)
	g := &cgGroup{d: d, name: name, dir: path.Join(d.base, dirName(d.self, name))}
	if err == nil && d.bal != nil {
		err = d.bal.check(g.dir, r)
	}
	if err != nil {
		return nil, fmt.Errorf("creating group %s: %w", name, err)
	}
	for i, h := range d.hs {
		if err := h.mkdir(g.dir); err != nil {
			g.removeFrom(d.hs[:i])
			return nil, fmt.Errorf("creating group %s: %w", name, err)
		}
	}
	if err := d.prep(g.dir, r); err != nil {
		g.removeFrom(d.hs)
		return nil, fmt.Errorf("creating group %s: %w", name, err)
	}
	err = writeAll(d.pick, g.dir, ws)
	if err == nil && d.bal != nil {
		err = d.bal.apply(g.dir, r, true)
	}
	if err != nil {
		g.removeFrom(d.hs)
		return nil, fmt.Errorf("creating group %s: %w", name, err)
	}
	return d.wrap(g), nil
}

// prep runs d.prepare, if any.
func (d *cgDriver) prep(dir string, r Resources) error {
	if d.prepare == nil {
		return nil
	}
	return d.prepare(dir, r)
}

// Cleanup removes, in every hierarchy, the groups under corepin's root
// whose owner has died and which have no tasks. Directories not named by
// corepin are left alone.
func (d *cgDriver) Cleanup() ([]string, error) {
	var removed []string
	var errs []error
	for _, h := range d.hs {
		ds, err := h.subdirs(d.base)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, dn := range ds {
			o, _, ok := parseDirName(dn)
			if !ok || o == d.self || d.alive(o) {
				continue
			}
			dir := path.Join(d.base, dn)
			procs, err := readProcs(h, dir)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if len(procs) > 0 {
				if d.bal != nil {
					d.bal.dissolve(dir)
				}
				errs = append(errs, fmt.Errorf("keeping stale group %s in %s: %d processes still in it (pids %s)",
					dir, h.mount(), len(procs), strings.Join(procs[:min(len(procs), 5)], " ")))
				continue
			}
			if err := h.rmdir(dir); err != nil {
				errs = append(errs, err)
				continue
			}
			removed = append(removed, path.Join(h.mount(), dir))
		}
	}
	if d.bal != nil {
		d.bal.release()
	}
	return removed, errors.Join(errs...)
}

// cgGroup is a group in one or more cgroup hierarchies.
type cgGroup struct {
	d    *cgDriver
	name string
	dir  string // relative to each mount point
}

func (g *cgGroup) Name() string { return g.name }

func (g *cgGroup) Update(r Resources) error {
	ws, err := g.d.Writes(r)
	if err == nil && g.d.bal != nil {
		err = g.d.bal.check(g.dir, r)
	}
	if err == nil {
		err = g.d.prep(g.dir, r)
	}
	if err == nil {
		err = writeAll(g.d.pick, g.dir, ws)
	}
	if err == nil && g.d.bal != nil {
		err = g.d.bal.apply(g.dir, r, false)
	}
	if err != nil {
		return fmt.Errorf("updating group %s: %w", g.name, err)
	}
	return nil
}

// AddProc writes pid to cgroup.procs in every hierarchy, cpuset first, which
// moves all of its threads.
func (g *cgGroup) AddProc(pid int) error {
	if pid <= 0 {
		return fmt.Errorf("adding pid %d to group %s: %w", pid, g.name, ErrInvalidResources)
	}
	for _, h := range g.d.hs {
		if err := h.write(path.Join(g.dir, "cgroup.procs"), strconv.Itoa(pid)); err != nil {
			return fmt.Errorf("adding pid %d to group %s: %w", pid, g.name, err)
		}
	}
	return nil
}

func (g *cgGroup) Stats() (Stats, error) {
	s, err := g.d.stats(g)
	if err != nil {
		return Stats{}, fmt.Errorf("reading stats of group %s: %w", g.name, err)
	}
	return s, nil
}

// Remove removes the group's directory from every hierarchy, last joined
// first. A directory already gone is not an error.
func (g *cgGroup) Remove() error {
	if err := g.removeFrom(g.d.hs); err != nil {
		return fmt.Errorf("removing group %s: %w", g.name, err)
	}
	if g.d.removed != nil {
		g.d.removed()
	}
	if g.d.bal != nil {
		g.d.bal.release()
	}
	return nil
}

func (g *cgGroup) removeFrom(hs []cgfs) error {
	var errs []error
	for _, h := range slices.Backward(hs) {
		if err := h.rmdir(g.dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// readSet reads a cpuset list file.
func readSet(h cgfs, file string) (cpuset.CPUSet, error) {
	s, err := h.read(file)
	if err != nil {
		return cpuset.CPUSet{}, err
	}
	set, err := cpuset.Parse(s)
	if err != nil {
		return cpuset.CPUSet{}, fmt.Errorf("reading %s in %s: %w", file, h.mount(), err)
	}
	return set, nil
}

// statsOf takes the bandwidth counters of a parsed cpu.stat (both
// versions; measure owns the format).
func statsOf(st measure.CPUStat) Stats {
	return Stats{
		NrPeriods: uint64(st.Periods), NrThrottled: uint64(st.ThrottledPeriods), ThrottledTime: st.ThrottledTime,
		NrBursts: uint64(st.Bursts), BurstTime: st.BurstTime,
	}
}
