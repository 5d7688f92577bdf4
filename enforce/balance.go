package enforce

import (
	"errors"
	"fmt"
	"path"

	"github.com/corepin/corepin/cpuset"
)

// Control files of the scheduler's load balancing, from
// https://docs.kernel.org/admin-guide/cgroup-v1/cpusets.html (1.7,
// "What is sched_load_balance?") and
// https://docs.kernel.org/admin-guide/cgroup-v2.html ("Cpuset Interface
// Files").
const (
	// v1LoadBalance is 1 (a new cpuset's default) or 0. The kernel
	// balances the CPUs of a cpuset whose flag is 1 as one scheduling
	// domain, whatever the cpusets below it say: a 0 takes effect only
	// where every enclosing and every overlapping cpuset is 0 too.
	v1LoadBalance = "cpuset.sched_load_balance"
	// v2Partition is "member", "root" or "isolated" on write; on read an
	// invalid partition shows "isolated invalid (<the kernel's reason>)".
	// "isolated" takes the partition's CPUs out of load balancing.
	v2Partition = "cpuset.cpus.partition"
	// v2Exclusive lists the CPUs a cgroup may give a partition below it
	// (Linux 6.7). A partition whose parent is no partition (a remote
	// one, as corepin's groups are: corepin's root is a member) forms
	// only where every ancestor below the root lists its CPUs here.
	v2Exclusive = "cpuset.cpus.exclusive"
	// V2IsolatedCPUs, in the root cgroup only (Linux 6.8), lists the
	// CPUs of every valid isolated partition.
	V2IsolatedCPUs = "cpuset.cpus.isolated"
)

// Partition states corepin writes.
const (
	partMember   = "member"
	partIsolated = "isolated"
)

// ErrLoadBalance means a group's CPUs could not be taken out of the
// scheduler's load balancing (Resources.NoLoadBalance): the kernel or the
// cgroup layout cannot do it. Its error says why, in the kernel's words
// where the kernel gave a reason, and nothing of the request stays.
var ErrLoadBalance = errors.New("cannot take the CPUs out of load balancing")

// maxBalanceWalk bounds the cgroup v1 cpusets checkV1Balance reads.
const maxBalanceWalk = 4096

// balancer is the version-specific part of Resources.NoLoadBalance.
type balancer interface {
	// check runs before anything is written for group dir (v1: the
	// layout must let a 0 take effect).
	check(dir string, r Resources) error
	// apply runs after the group's writes (v2: the partition made or
	// dissolved and read back; v1: corepin's root flag). fresh is true for
	// a group made a moment ago (a member with nothing exclusive).
	apply(dir string, r Resources, fresh bool) error
	// dissolve gives group dir's CPUs back to load balancing (a stale
	// group of a dead run kept for its processes).
	dissolve(dir string)
	// release drops what ancestors hold for partitions that are gone
	// (v2: cpuset.cpus.exclusive shrunk to what their children list).
	// Best effort.
	release()
}

// v1Balance is the cgroup v1 balancer: a cpuset's sched_load_balance.
type v1Balance struct {
	h    cgfs
	base string
}

// check refuses r.NoLoadBalance where a cpuset whose flag is 1 would still
// balance r.CPUs with others: the kernel builds one scheduling domain per
// cpuset with the flag set whose enclosing cpusets all have it clear
// (cpusets.html 1.7), so it walks down from the hierarchy's root through
// the cpusets whose flag is 0. Corepin's own root is the exception: where
// every cpuset above it is 0, apply clears it.
func (b v1Balance) check(dir string, r Resources) error {
	if !r.NoLoadBalance {
		return nil
	}
	seen := 0
	var walk func(d string) error
	walk = func(d string) error {
		if seen++; seen > maxBalanceWalk {
			return fmt.Errorf("%w: more than %d cpusets to check in %s", ErrLoadBalance, maxBalanceWalk, b.h.mount())
		}
		if d == dir {
			return nil // the group's own flag is the one written
		}
		flag, err := b.h.read(path.Join(d, v1LoadBalance))
		if err != nil {
			return err
		}
		if flag != "0" && d != b.base {
			cpus, err := readSet(b.h, path.Join(d, "cpuset.effective_cpus"))
			if err != nil {
				return err
			}
			if both := cpus.Intersection(r.CPUs); !both.IsEmpty() {
				return fmt.Errorf("%w: cgroup v1 cpuset %s has %s 1, so the kernel balances its CPUs %s as one scheduling domain (CPUs %s of this group among them) whatever the cpusets below it say: "+
					"set %s to 0 there, and to 1 on the cpusets below it whose CPUs should stay balanced, or use cgroup v2 (an isolated partition); see https://docs.kernel.org/admin-guide/cgroup-v1/cpusets.html, 1.7",
					ErrLoadBalance, cpusetPath(b.h, d), v1LoadBalance, cpus, both, v1LoadBalance)
			}
			return nil
		}
		kids, err := b.h.subdirs(d)
		if err != nil {
			return err
		}
		for _, k := range kids {
			if err := walk(path.Join(d, k)); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk("."); err != nil {
		return fmt.Errorf("checking the cpuset layout: %w", err)
	}
	return nil
}

// cpusetPath names cpuset d of hierarchy h for a person.
func cpusetPath(h cgfs, d string) string {
	if d == "." {
		return h.mount() + " (the hierarchy's root)"
	}
	return path.Join(h.mount(), d)
}

// apply clears corepin's root's flag for a group that asks (check made
// sure every cpuset above it is 0): corepin's root holds no task, and each
// group below it keeps its own flag.
func (b v1Balance) apply(_ string, r Resources, _ bool) error {
	if !r.NoLoadBalance {
		return nil
	}
	cur, err := b.h.read(path.Join(b.base, v1LoadBalance))
	if err != nil || cur == "0" {
		return err
	}
	if err := b.h.write(path.Join(b.base, v1LoadBalance), "0"); err != nil {
		return fmt.Errorf("%w: clearing corepin root's %s: %w", ErrLoadBalance, v1LoadBalance, err)
	}
	return nil
}

func (b v1Balance) dissolve(dir string) { _ = b.h.write(path.Join(dir, v1LoadBalance), "1") }
func (b v1Balance) release()            {}

// v2Balance is the cgroup v2 balancer: the group an isolated partition.
type v2Balance struct {
	h    cgfs
	base string
	// exclusive: the kernel has cpuset.cpus.exclusive (Linux 6.7).
	exclusive bool
}

func (b v2Balance) check(string, Resources) error { return nil }

// ancestors are the groups from just below the mount's root down to
// corepin's root, top first.
func (b v2Balance) ancestors() []string {
	var as []string
	for d := b.base; d != "." && d != "/" && d != ""; d = path.Dir(d) {
		as = append([]string{d}, as...)
	}
	return as
}

// apply makes group dir an isolated partition of r.CPUs, or a member. A
// partition first gets every ancestor's cpuset.cpus.exclusive to list its
// CPUs (top first, as the kernel takes a child's exclusive CPUs only from
// its parent's), then its own, then "isolated"; the state is read back
// and anything but "isolated" is a refusal that quotes it (the kernel's
// reason in parentheses) and leaves the group a member.
func (b v2Balance) apply(dir string, r Resources, fresh bool) error {
	if !r.NoLoadBalance {
		if fresh {
			return nil
		}
		return b.member(dir)
	}
	if b.exclusive {
		for _, a := range b.ancestors() {
			if err := b.grow(a, r.CPUs); err != nil {
				b.release()
				return err
			}
		}
		if err := b.h.write(path.Join(dir, v2Exclusive), r.CPUs.String()); err != nil {
			b.release()
			return fmt.Errorf("%w: giving the group CPUs %s exclusively (%s): %w", ErrLoadBalance, r.CPUs, v2Exclusive, err)
		}
	}
	werr := b.h.write(path.Join(dir, v2Partition), partIsolated)
	got, rerr := b.h.read(path.Join(dir, v2Partition))
	if werr == nil && rerr == nil && got == partIsolated {
		return nil
	}
	b.dissolve(dir)
	b.release()
	switch {
	case rerr != nil:
		return fmt.Errorf("%w: reading back %s: %w", ErrLoadBalance, v2Partition, rerr)
	case got == partMember && werr != nil:
		return fmt.Errorf("%w: CPUs %s: writing %s %q: %w", ErrLoadBalance, r.CPUs, v2Partition, partIsolated, werr)
	}
	hint := ""
	if !b.exclusive {
		hint = "; this kernel has no " + v2Exclusive + " (Linux 6.7), without which no partition forms below corepin's root, which is no partition itself"
	}
	return fmt.Errorf("%w: CPUs %s: the kernel left %s %q%s", ErrLoadBalance, r.CPUs, v2Partition, got, hint)
}

// grow adds cpus to ancestor a's cpuset.cpus.exclusive.
func (b v2Balance) grow(a string, cpus cpuset.CPUSet) error {
	file := path.Join(a, v2Exclusive)
	cur, err := readSet(b.h, file)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrLoadBalance, err)
	}
	if cpus.IsSubsetOf(cur) {
		return nil
	}
	if err := b.h.write(file, cur.Union(cpus).String()); err != nil {
		return fmt.Errorf("%w: adding CPUs %s to %s of %s (the kernel refuses CPUs a sibling lists there, or all of a sibling's cpuset.cpus): %w",
			ErrLoadBalance, cpus, v2Exclusive, path.Join(b.h.mount(), a), err)
	}
	return nil
}

// member makes group dir a member without exclusive CPUs, where it is
// not, and shrinks the ancestors.
func (b v2Balance) member(dir string) error {
	got, err := b.h.read(path.Join(dir, v2Partition))
	if err != nil {
		return err
	}
	ex := ""
	if b.exclusive {
		if ex, err = b.h.read(path.Join(dir, v2Exclusive)); err != nil {
			return err
		}
	}
	if got == partMember && ex == "" {
		return nil
	}
	if got != partMember {
		if err := b.h.write(path.Join(dir, v2Partition), partMember); err != nil {
			return fmt.Errorf("giving CPUs back to load balancing: %w", err)
		}
	}
	if ex != "" {
		// An empty write does not reach the kernel: a newline clears.
		if err := b.h.write(path.Join(dir, v2Exclusive), "\n"); err != nil {
			return fmt.Errorf("clearing %s: %w", v2Exclusive, err)
		}
	}
	b.release()
	return nil
}

func (b v2Balance) dissolve(dir string) {
	_ = b.h.write(path.Join(dir, v2Partition), partMember)
	if b.exclusive {
		_ = b.h.write(path.Join(dir, v2Exclusive), "\n")
	}
}

// release shrinks each ancestor's cpuset.cpus.exclusive, bottom first, to
// what its children list, so that CPUs of partitions gone are no longer
// held from corepin root's siblings. Ancestors listing nothing are left
// alone.
func (b v2Balance) release() {
	if !b.exclusive {
		return
	}
	as := b.ancestors()
	for i := len(as) - 1; i >= 0; i-- {
		a := as[i]
		cur, err := readSet(b.h, path.Join(a, v2Exclusive))
		if err != nil || cur.IsEmpty() {
			continue
		}
		kids, err := b.h.subdirs(a)
		if err != nil {
			return
		}
		var want cpuset.CPUSet
		for _, k := range kids {
			s, err := readSet(b.h, path.Join(a, k, v2Exclusive))
			if err != nil {
				continue // removed meanwhile, or no cpuset controller
			}
			want = want.Union(s)
		}
		if want.Equals(cur) {
			continue
		}
		v := want.Intersection(cur).String()
		if v == "" {
			v = "\n"
		}
		_ = b.h.write(path.Join(a, v2Exclusive), v)
	}
}
