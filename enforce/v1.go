package enforce

import (
	"errors"
	"fmt"
	"math"
	"path"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/corepin/corepin/measure"
)

// Control files of cgroup v1, from
// https://docs.kernel.org/admin-guide/cgroup-v1/cpusets.html,
// https://docs.kernel.org/scheduler/sched-bwc.html and
// https://docs.kernel.org/admin-guide/cgroup-v1/cpuacct.html.
const (
	v1CPUs   = "cpuset.cpus"
	v1Mems   = "cpuset.mems"
	v1Period = "cpu.cfs_period_us"
	v1Quota  = "cpu.cfs_quota_us" // -1: no limit
	v1Burst  = "cpu.cfs_burst_us" // Linux 5.14
	v1Shares = "cpu.shares"
	v1Idle   = "cpu.idle" // Linux 5.15
	// Real-time group scheduling (CONFIG_RT_GROUP_SCHED): the time of
	// each period the group's real-time tasks may use on each CPU; a new
	// group has 0, and no real-time task may join it.
	v1RTPeriod  = "cpu.rt_period_us"
	v1RTRuntime = "cpu.rt_runtime_us"
	v1Stat      = "cpu.stat"
	v1Usage     = "cpuacct.usage"      // ns
	v1User      = "cpuacct.usage_user" // ns, Linux 4.11
	v1Sys       = "cpuacct.usage_sys"  // ns, Linux 4.11
)

// V1Mounts are the mount points of the cgroup v1 hierarchies corepin uses.
// CPU and CPUAcct may be the same directory (co-mounted "cpu,cpuacct").
type V1Mounts struct {
	CPUSet, CPU, CPUAcct string
}

// NewV1 returns the cgroup v1 driver for the hierarchies at m, creating
// corepin's root group in each (see WithRoot, WithParent). A new cpuset
// root starts with empty cpuset.cpus and cpuset.mems, in which no task may
// run, so NewV1 copies its parent's into it; it leaves a root that already
// has CPUs alone. CPUAcct may be empty: Stats then lacks Usage.
func NewV1(m V1Mounts, opts ...Option) (Driver, error) {
	c := newConfig(opts)
	var hs v1Hierarchies
	var err error
	if hs.cpuset, err = openRootFS(m.CPUSet); err != nil {
		return nil, err
	}
	if hs.cpu, err = openRootFS(m.CPU); err != nil {
		return nil, err
	}
	switch m.CPUAcct {
	case "":
	case m.CPU:
		hs.cpuacct = hs.cpu
	default:
		if hs.cpuacct, err = openRootFS(m.CPUAcct); err != nil {
			return nil, err
		}
	}
	return newV1(hs, c)
}

// inheritCPUSets gives dir, a group of a cgroup v1 cpuset hierarchy, its
// parent's cpuset.cpus, then its cpuset.mems, where its own are empty: a
// new v1 cpuset starts with both empty, and no task may join it until
// both are set (cpusets.html, 1.9 and 2.1). A set already there is kept.
func inheritCPUSets(h cgfs, dir string) error {
	for _, f := range []string{v1CPUs, v1Mems} {
		cur, err := h.read(path.Join(dir, f))
		if err != nil {
			return err
		}
		if cur != "" {
			continue
		}
		p, err := h.read(path.Join(path.Dir(dir), f))
		if err != nil {
			return err
		}
		if err := h.write(path.Join(dir, f), p); err != nil {
			return fmt.Errorf("copying the parent's %s: %w", f, err)
		}
	}
	return nil
}

type v1Hierarchies struct {
	cpuset, cpu, cpuacct cgfs
}

func newV1(hs v1Hierarchies, c config) (*cgDriver, error) {
	base, self, err := c.rootAndOwner()
	if err != nil {
		return nil, err
	}
	d := &cgDriver{
		name:   NameV1,
		base:   base,
		writes: v1Writes,
		self:   self,
		alive:  c.alive,
		feat:   features{cpuset: true, cpu: true},
		wrap:   func(g *cgGroup) Group { return g },
	}
	d.hs = []cgfs{hs.cpuset, hs.cpu}
	if hs.cpuacct != nil && hs.cpuacct != hs.cpu {
		d.hs = append(d.hs, hs.cpuacct)
	}
	d.pick = func(file string) cgfs {
		switch {
		case strings.HasPrefix(file, "cpuset."):
			return hs.cpuset
		case strings.HasPrefix(file, "cpu."):
			return hs.cpu
		case strings.HasPrefix(file, "cpuacct."):
			return hs.cpuacct
		}
		return nil
	}
	d.roots = func() (rootSets, error) {
		cpus, err := readSet(hs.cpuset, path.Join(d.base, v1CPUs))
		if err != nil {
			return rootSets{}, err
		}
		mems, err := readSet(hs.cpuset, path.Join(d.base, v1Mems))
		return rootSets{cpus: cpus, mems: mems}, err
	}
	d.stats = func(g *cgGroup) (Stats, error) { return v1Stats(hs, g.dir) }

	for _, h := range d.hs {
		if err := ensureDir(h, d.base); err != nil {
			return nil, fmt.Errorf("creating corepin root: %w", err)
		}
	}
	if err := inheritCPUSets(hs.cpuset, d.base); err != nil {
		return nil, fmt.Errorf("initializing corepin root: %w", err)
	}
	if d.feat.balance, err = hs.cpuset.exists(path.Join(d.base, v1LoadBalance)); err != nil {
		return nil, err
	}
	if d.feat.balance {
		d.bal = v1Balance{h: hs.cpuset, base: d.base}
	}
	for _, p := range []struct {
		file string
		on   *bool
	}{{v1Quota, &d.feat.bandwidth}, {v1Burst, &d.feat.burst}, {v1Idle, &d.feat.idle}, {v1RTRuntime, &d.feat.rt}} {
		if *p.on, err = hs.cpu.exists(path.Join(d.base, p.file)); err != nil {
			return nil, err
		}
	}
	d.prepare = func(dir string, r Resources) error {
		if r.RTShare == 0 || !d.feat.rt {
			return nil
		}
		return settleRT(hs.cpu, d.base, dir, r.RTShare)
	}
	d.removed = func() {
		if d.feat.rt {
			shrinkRT(hs.cpu, d.base)
		}
	}
	d.limits = featureLimits(d.feat, v1Quota, v1Burst, v1Idle, "cpu.shares=2")
	if hs.cpuacct == nil {
		d.limits = append(d.limits, "no cpuacct hierarchy: Stats reports no CPU usage")
	}
	return d, nil
}

// featureLimits describes what missing optional files cost.
func featureLimits(f features, quota, burst, idle, idleFallback string) []string {
	var l []string
	if !f.bandwidth {
		l = append(l, fmt.Sprintf("no %s (kernel without CONFIG_CFS_BANDWIDTH): quota and burst cannot be enforced", quota))
	} else if !f.burst {
		l = append(l, fmt.Sprintf("no %s (Linux < 5.14): burst cannot be enforced", burst))
	}
	if !f.idle {
		l = append(l, fmt.Sprintf("no %s (Linux < 5.15): Idle is approximated by %s, the lowest weight, without idle's wakeup preemption", idle, idleFallback))
	}
	return l
}

// v1Writes turns r into cgroup v1 writes, in this order:
//
//	cpuset.cpus, cpuset.mems            (before any task joins)
//	cpuset.sched_load_balance           (0 for NoLoadBalance, else 1; where the kernel has it)
//	cpu.cfs_burst_us 0                  (so neither write below can fail on an old burst above the new quota)
//	cpu.cfs_period_us, cpu.cfs_quota_us
//	cpu.cfs_burst_us                    (only a non-zero burst)
//	cpu.rt_period_us, cpu.rt_runtime_us (only a real-time share, where the kernel has real-time group scheduling)
//	cpu.idle                            (0 before the shares: the kernel refuses shares on an idle group)
//	cpu.shares                          (not on an idle group)
//
// Empty CPUs and Mems become the root's. Files the kernel lacks are left
// out when r does not need them and are an ErrNotSupported error when it
// does, except cpu.idle, which falls back to cpu.shares=2.
func v1Writes(r Resources, root rootSets, f features) ([]Write, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	cpus, mems := r.CPUs, r.Mems
	if cpus.IsEmpty() {
		cpus = root.cpus
	}
	if mems.IsEmpty() {
		mems = root.mems
	}
	ws := []Write{{v1CPUs, cpus.String()}, {v1Mems, mems.String()}}
	switch {
	case f.balance && r.NoLoadBalance:
		ws = append(ws, Write{v1LoadBalance, "0"})
	case f.balance:
		ws = append(ws, Write{v1LoadBalance, "1"})
	case r.NoLoadBalance:
		return nil, fmt.Errorf("%w: %w: no %s", ErrLoadBalance, ErrNotSupported, v1LoadBalance)
	}
	switch {
	case f.bandwidth:
		if f.burst {
			ws = append(ws, Write{v1Burst, "0"})
		}
		quota := "-1"
		if r.Quota > 0 {
			quota = usec(r.Quota)
		}
		ws = append(ws, Write{v1Period, usec(r.period())}, Write{v1Quota, quota})
		if r.Burst > 0 {
			if !f.burst {
				return nil, fmt.Errorf("setting burst: %w: no %s (Linux < 5.14)", ErrNotSupported, v1Burst)
			}
			ws = append(ws, Write{v1Burst, usec(r.Burst)})
		}
	case r.Quota > 0:
		return nil, fmt.Errorf("setting quota: %w: no %s (CONFIG_CFS_BANDWIDTH)", ErrNotSupported, v1Quota)
	}
	if r.RTShare > 0 && f.rt {
		ws = append(ws, Write{v1RTPeriod, usec(rtPeriod)}, Write{v1RTRuntime, usec(rtRuntime(r.RTShare))})
	}
	switch {
	case f.idle && r.Idle:
		ws = append(ws, Write{v1Idle, "1"})
	case f.idle:
		ws = append(ws, Write{v1Idle, "0"}, Write{v1Shares, fmt.Sprint(SharesFromWeight(r.weight()))})
	case r.Idle:
		ws = append(ws, Write{v1Shares, "2"})
	default:
		ws = append(ws, Write{v1Shares, fmt.Sprint(SharesFromWeight(r.weight()))})
	}
	return ws, nil
}

func v1Stats(hs v1Hierarchies, dir string) (Stats, error) {
	var s Stats
	if hs.cpuacct != nil {
		for _, p := range []struct {
			file     string
			to       *time.Duration
			optional bool
		}{{v1Usage, &s.Usage, false}, {v1User, &s.User, true}, {v1Sys, &s.System, true}} {
			f := path.Join(dir, p.file)
			if ok, err := hs.cpuacct.exists(f); err != nil || (!ok && p.optional) {
				if err != nil {
					return Stats{}, err
				}
				continue
			}
			v, err := hs.cpuacct.read(f)
			if err != nil {
				return Stats{}, err
			}
			n, err := strconv.ParseUint(v, 10, 63)
			if err != nil {
				return Stats{}, fmt.Errorf("parsing %s: %w", p.file, err)
			}
			*p.to = time.Duration(n)
		}
	}
	v, err := hs.cpu.read(path.Join(dir, v1Stat))
	if err != nil {
		return Stats{}, err
	}
	st, err := measure.ParseCPUStat([]byte(v))
	if err != nil {
		return Stats{}, fmt.Errorf("parsing %s: %w", v1Stat, err)
	}
	t := statsOf(st)
	s.NrPeriods, s.NrThrottled, s.ThrottledTime, s.NrBursts, s.BurstTime = t.NrPeriods, t.NrThrottled, t.ThrottledTime, t.NrBursts, t.BurstTime
	return s, nil
}

// rtPeriod is the real-time period corepin's groups use, the kernel's
// default (kernel.sched_rt_period_us).
const rtPeriod = time.Second

// rtRuntime is share of rtPeriod, in whole microseconds.
func rtRuntime(share float64) time.Duration {
	return time.Duration(share*float64(rtPeriod/time.Microsecond)) * time.Microsecond
}

// rtRatio reads a group's real-time share (runtime over period; -1 runtime
// is the whole period).
func rtRatio(h cgfs, dir string) (float64, error) {
	var v [2]int64
	for i, f := range []string{v1RTRuntime, v1RTPeriod} {
		s, err := h.read(path.Join(dir, f))
		if err != nil {
			return 0, err
		}
		if v[i], err = strconv.ParseInt(s, 10, 64); err != nil {
			return 0, fmt.Errorf("parsing %s: %w", path.Join(dir, f), err)
		}
	}
	if v[1] <= 0 {
		return 0, fmt.Errorf("parsing %s: period %d", path.Join(dir, v1RTPeriod), v[1])
	}
	if v[0] < 0 {
		return 1, nil
	}
	return float64(v[0]) / float64(v[1]), nil
}

// growRT makes room for share in group dir under corepin's root base: the
// kernel refuses a group a real-time share above what its parent holds
// less its other children's (kernel/sched/rt.c, tg_rt_schedulable), so
// base (and, where base is nested, each ancestor below the mount's root,
// which holds the kernel's own 95%) grows to the sum. corepin's root
// never shrinks back: a share it holds lets nothing run by itself.
func growRT(h cgfs, base, dir string, share float64) error {
	others, err := childrenRT(h, base, dir)
	if err != nil {
		return fmt.Errorf("reading the real-time shares under %s: %w", base, err)
	}
	need := share + others
	if err := ensureRT(h, base, need); err != nil {
		return fmt.Errorf("making room for a real-time share of %.2f of each CPU (the groups under %s hold %.2f): %w",
			share, base, need-share, err)
	}
	return nil
}

// ensureRT raises group dir's real-time share to at least need, its
// ancestors first.
func ensureRT(h cgfs, dir string, need float64) error {
	cur, err := rtRatio(h, dir)
	if err != nil {
		return err
	}
	if cur >= need {
		return nil
	}
	if need > MaxRTShare {
		return fmt.Errorf("%w: %.2f of each CPU above the %.2f real-time tasks may have in all", ErrInvalidResources, need, MaxRTShare)
	}
	if parent := path.Dir(dir); parent != "." && parent != "/" && parent != "" {
		if err := growRT(h, parent, dir, need); err != nil {
			return err
		}
	}
	return writeRTShare(h, dir, need)
}

// writeRTShare sets group dir's real-time runtime to share of its own
// period, rounded up (the kernel compares shares, not times).
func writeRTShare(h cgfs, dir string, share float64) error {
	ps, err := h.read(path.Join(dir, v1RTPeriod))
	if err != nil {
		return err
	}
	period, err := strconv.ParseInt(ps, 10, 64)
	if err != nil || period <= 0 {
		return fmt.Errorf("parsing %s: %q", path.Join(dir, v1RTPeriod), ps)
	}
	return h.write(path.Join(dir, v1RTRuntime), strconv.FormatInt(int64(math.Ceil(share*float64(period))), 10))
}

// childrenRT sums the real-time shares of the groups under base, but
// except's.
func childrenRT(h cgfs, base, except string) (float64, error) {
	kids, err := h.subdirs(base)
	if err != nil {
		return 0, err
	}
	sum := 0.0
	for _, k := range kids {
		kd := path.Join(base, k)
		if kd == except {
			continue
		}
		r, err := rtRatio(h, kd)
		if err != nil {
			return 0, err
		}
		sum += r
	}
	return sum, nil
}

// rtSettle bounds how long settleRT and shrinkRT wait for the kernel to
// give back the real-time time of groups removed just before.
const rtSettle = 2 * time.Second

// settleRT makes room for share in corepin's root base (growRT) and writes
// group dir's share, again while the kernel refuses it: a group removed a
// moment ago still holds its share until the kernel frees it (after an
// RCU grace period), though it is no longer listed, and another corepin
// process may shrink base between the two writes (shrinkRT).
func settleRT(h cgfs, base, dir string, share float64) error {
	deadline := time.Now().Add(rtSettle)
	for {
		err := growRT(h, base, dir, share)
		if err == nil {
			err = h.write(path.Join(dir, v1RTPeriod), usec(rtPeriod))
		}
		if err == nil {
			err = h.write(path.Join(dir, v1RTRuntime), usec(rtRuntime(share)))
		}
		if err == nil || !errors.Is(err, syscall.EINVAL) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// shrinkRT gives back what corepin's root base holds beyond its groups'
// real-time shares, so that no share outlives the workloads that needed
// it (other groups of the machine may want the time). Best effort: the
// kernel refuses while a group removed a moment ago still holds its
// share; a root holding nothing, or no more than it needs, is left alone.
func shrinkRT(h cgfs, base string) {
	deadline := time.Now().Add(rtSettle)
	for {
		cur, err := rtRatio(h, base)
		if err != nil || cur == 0 {
			return
		}
		need, err := childrenRT(h, base, "")
		if err != nil || need >= cur {
			return
		}
		err = writeRTShare(h, base, need)
		if err == nil || !errors.Is(err, syscall.EINVAL) || time.Now().After(deadline) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
