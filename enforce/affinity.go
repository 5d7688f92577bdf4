package enforce

import (
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/corepin/corepin/cpuset"
)

// affinityLimits are what the affinity-only driver cannot do, whatever the
// machine.
var affinityLimits = []string{
	"quota, period and burst cannot be enforced: CFS bandwidth control needs a cpu cgroup",
	"memory nodes (Mems) are not enforced: they need a cpuset cgroup; groups run with any Mems given, on the CPUs given",
	"Weight becomes a nice value on each thread, which ranks threads against every other thread, not groups against groups: a group with more threads gets more CPU",
	"Idle becomes SCHED_IDLE on each thread",
	"settings reach the processes given to AddProc, and their threads, when added and on Update; children they fork inherit the settings of the moment",
	"Stats are not available (no cpuacct); measure per process instead",
}

// NewAffinity returns the affinity-only driver: it confines processes with
// sched_setaffinity(2) and ranks them with sched_setattr(2) (nice for
// Weight, SCHED_IDLE for Idle), on every thread. It needs no cgroup and
// enforces much less; see Limitations. Its CPUs are those this process may
// run on. Where this process may not give a thread the nice a Weight
// asks for (ProbeNice: no CAP_SYS_NICE, as for a user at nice 5), the
// thread keeps the lowest nice it may have, its starter's at most, and
// Limitations says so once; it is never an error.
func NewAffinity(opts ...Option) (Driver, error) {
	allowed, err := ownAffinity()
	if err != nil {
		return nil, err
	}
	d := &affinityDriver{allowed: allowed, limits: slices.Clone(affinityLimits), nice: NiceLimit{Lowest: -20}}
	if l, err := ProbeNice(); err == nil {
		d.nice = l
	}
	if n := d.nice.Note(); n != "" {
		d.limits = append(d.limits, n)
	}
	return d, nil
}

type affinityDriver struct {
	allowed cpuset.CPUSet
	limits  []string
	nice    NiceLimit
}

func (d *affinityDriver) Name() string          { return NameAffinity }
func (d *affinityDriver) Limitations() []string { return slices.Clone(d.limits) }

// Cleanup has nothing to clean: the driver leaves nothing behind.
func (d *affinityDriver) Cleanup() ([]string, error) { return nil, nil }

func (d *affinityDriver) Create(name string, r Resources) (Group, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	p, err := affinityPlanFor(r, d.allowed, d.nice)
	if err != nil {
		return nil, fmt.Errorf("creating group %s: %w", name, err)
	}
	return &affinityGroup{d: d, name: name, plan: p}, nil
}

// affinityPlan is what the affinity driver applies to each thread.
type affinityPlan struct {
	CPUs cpuset.CPUSet
	Nice int
	Idle bool
}

// affinityPlanFor turns r into an affinityPlan, refusing what the driver
// cannot enforce; a nice below what nice allows becomes the lowest it
// allows.
func affinityPlanFor(r Resources, allowed cpuset.CPUSet, nice NiceLimit) (affinityPlan, error) {
	if err := r.Validate(); err != nil {
		return affinityPlan{}, err
	}
	switch {
	case r.Quota != 0 || r.Period != 0:
		return affinityPlan{}, fmt.Errorf("setting quota: %w by the affinity driver", ErrNotSupported)
	case r.NoLoadBalance:
		return affinityPlan{}, fmt.Errorf("%w: %w by the affinity driver (it needs a cpuset cgroup)", ErrLoadBalance, ErrNotSupported)
	case !r.CPUs.IsSubsetOf(allowed):
		return affinityPlan{}, fmt.Errorf("%w: cpus %s outside this process's affinity %s",
			ErrInvalidResources, r.CPUs, allowed)
	}
	p := affinityPlan{CPUs: r.CPUs, Idle: r.Idle}
	if p.CPUs.IsEmpty() {
		p.CPUs = allowed
	}
	if !r.Idle {
		p.Nice = nice.Clamp(NiceFromWeight(r.weight()))
	}
	return p, nil
}

// prioToWeight is the kernel's sched_prio_to_weight table
// (kernel/sched/core.c), nice -20 first.
var prioToWeight = [40]float64{
	88761, 71755, 56483, 46273, 36291,
	29154, 23254, 18705, 14949, 11916,
	9548, 7620, 6100, 4904, 3906,
	3121, 2501, 1991, 1586, 1277,
	1024, 820, 655, 526, 423,
	335, 272, 215, 172, 137,
	110, 87, 70, 56, 45,
	36, 29, 23, 18, 15,
}

// NiceFromWeight returns the nice value whose scheduler weight is closest
// (in ratio) to cpu.weight w: weight 100 is nice 0, 1 is nice 19, 10000 is
// nice -20.
func NiceFromWeight(w uint64) int {
	target := math.Log(float64(w) * 1024 / 100)
	best, bestDist := 0, math.Inf(1)
	for i, pw := range prioToWeight {
		if d := math.Abs(math.Log(pw) - target); d < bestDist {
			best, bestDist = i-20, d
		}
	}
	return best
}

type affinityGroup struct {
	d    *affinityDriver
	name string

	mu   sync.Mutex
	plan affinityPlan
	pids []int
}

func (g *affinityGroup) Name() string { return g.name }

// Update applies r to the processes added so far, on all their threads.
func (g *affinityGroup) Update(r Resources) error {
	p, err := affinityPlanFor(r, g.d.allowed, g.d.nice)
	if err != nil {
		return fmt.Errorf("updating group %s: %w", g.name, err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.plan = p
	var errs []error
	for _, pid := range g.pids {
		if err := applyPlan(pid, p); err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("updating group %s: %w", g.name, err)
	}
	return nil
}

func (g *affinityGroup) AddProc(pid int) error {
	if pid <= 0 {
		return fmt.Errorf("adding pid %d to group %s: %w", pid, g.name, ErrInvalidResources)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := applyPlan(pid, g.plan); err != nil {
		return fmt.Errorf("adding pid %d to group %s: %w", pid, g.name, err)
	}
	g.pids = append(g.pids, pid)
	return nil
}

func (g *affinityGroup) Stats() (Stats, error) {
	return Stats{}, fmt.Errorf("reading stats of group %s: %w by the affinity driver", g.name, ErrNotSupported)
}

// Remove forgets the group; its processes keep their affinity and priority.
func (g *affinityGroup) Remove() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pids = nil
	return nil
}

// applyPlan sets p on every thread of pid. Threads created meanwhile inherit
// from a thread already set, or show up in the next pass; passes repeat
// until one finds no new thread.
func applyPlan(pid int, p affinityPlan) error {
	mask := unix.NewCPUSet(max(p.CPUs.Max(), 0))
	for c := range p.CPUs.All() {
		mask.Set(c)
	}
	attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_NORMAL, Nice: int32(p.Nice)}
	if p.Idle {
		attr = unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_IDLE}
	}
	return eachThread(pid, func(tid int) error {
		if err := unix.SchedSetaffinityDynamic(tid, mask); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("setting affinity of thread %d to %s: %w", tid, p.CPUs, err)
		}
		err := unix.SchedSetAttr(tid, &attr, 0)
		if denied(err) {
			// The plan's nice is already one this process may give
			// (ProbeNice); a thread refused all the same (a policy its
			// starter may not leave, SCHED_RESET_ON_FORK) keeps the
			// scheduling it inherited: a priority is never worth a job.
			err = nil
		}
		if err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("setting scheduling policy of thread %d: %w", tid, err)
		}
		return nil
	})
}

// eachThread calls fn once on every thread of pid. Threads created
// meanwhile inherit from a thread already done, or show up in the next
// pass; passes repeat until one finds no new thread. fn's error stops it.
func eachThread(pid int, fn func(tid int) error) error {
	done := map[int]bool{}
	for pass := 0; ; pass++ {
		tids, err := threads(pid)
		if err != nil {
			return err
		}
		fresh := 0
		for _, tid := range tids {
			if done[tid] {
				continue
			}
			fresh++
			if err := fn(tid); err != nil {
				return err
			}
			done[tid] = true
		}
		if fresh == 0 {
			return nil
		}
		if pass > 100 {
			return fmt.Errorf("visiting the threads of pid %d: threads keep appearing", pid)
		}
	}
}

// threads lists the thread ids of pid.
func threads(pid int) ([]int, error) {
	es, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		if os.IsNotExist(err) {
			return nil, fmt.Errorf("listing threads of pid %d: %w", pid, unix.ESRCH)
		}
		return nil, fmt.Errorf("listing threads: %w", err)
	}
	var ts []int
	for _, e := range es {
		if t, err := strconv.Atoi(e.Name()); err == nil {
			ts = append(ts, t)
		}
	}
	return ts, nil
}

// ownAffinity returns the CPUs this process may run on.
func ownAffinity() (cpuset.CPUSet, error) {
	mask := unix.NewCPUSet(cpuset.MaxCPU)
	if err := unix.SchedGetaffinityDynamic(0, mask); err != nil {
		return cpuset.CPUSet{}, fmt.Errorf("reading own affinity: %w", err)
	}
	var b cpuset.Builder
	for c := 0; c <= cpuset.MaxCPU; c++ {
		if mask.IsSet(c) {
			b.Add(c)
		}
	}
	return b.Result(), nil
}
