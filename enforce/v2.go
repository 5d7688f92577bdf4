package enforce

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/corepin/corepin/measure"
)

// Control files of cgroup v2, from
// https://docs.kernel.org/admin-guide/cgroup-v2.html ("Core Interface
// Files", "CPU", "Cpuset").
const (
	v2Controllers = "cgroup.controllers"
	v2Subtree     = "cgroup.subtree_control"
	v2CPUs        = "cpuset.cpus"
	v2Mems        = "cpuset.mems"
	v2EffCPUs     = "cpuset.cpus.effective"
	v2EffMems     = "cpuset.mems.effective"
	// v2Max is "$MAX $PERIOD" in microseconds; "max" for no limit.
	v2Max    = "cpu.max"
	v2Burst  = "cpu.max.burst" // Linux 5.14
	v2Weight = "cpu.weight"    // 1..10000, default 100
	v2Idle   = "cpu.idle"      // Linux 5.15
	v2Stat   = "cpu.stat"
)

// v2Want are the controllers the v2 driver enables for corepin's groups.
var v2Want = []string{"cpuset", "cpu"}

// NewV2 returns the cgroup v2 driver for the unified hierarchy mounted at
// mount. It enables the cpuset and cpu controllers in the parent's
// cgroup.subtree_control (see WithParent), creates corepin's root group and
// enables them again in the root's, so that every group gets cpuset.* and
// cpu.* files. It fails with ErrNotSupported when the parent does not
// offer both controllers (on a hybrid host they are bound to v1).
func NewV2(mount string, opts ...Option) (Driver, error) {
	h, err := openRootFS(mount)
	if err != nil {
		return nil, err
	}
	return newV2(h, newConfig(opts), v2Want)
}

// newV2 makes the driver with the controllers in want; tests pass fewer to
// use a cgroup2 mount that has none (the hybrid layout of this fleet).
func newV2(h cgfs, c config, want []string) (*cgDriver, error) {
	base, self, err := c.rootAndOwner()
	if err != nil {
		return nil, err
	}
	parent := path.Dir(base)
	d := &cgDriver{
		name:   NameV2,
		hs:     []cgfs{h},
		pick:   func(string) cgfs { return h },
		base:   base,
		writes: v2Writes,
		self:   self,
		alive:  c.alive,
		stats:  func(g *cgGroup) (Stats, error) { return v2Stats(h, g.dir) },
		wrap:   func(g *cgGroup) Group { return v2Group{g} },
	}
	d.roots = func() (rootSets, error) {
		cpus, err := readSet(h, path.Join(d.base, v2EffCPUs))
		if err != nil {
			return rootSets{}, err
		}
		mems, err := readSet(h, path.Join(d.base, v2EffMems))
		if err != nil || !d.feat.exclusive {
			return rootSets{cpus: cpus, mems: mems}, err
		}
		held, err := readSet(h, path.Join(d.base, v2Exclusive))
		return rootSets{cpus: cpus, mems: mems, held: held}, err
	}

	avail, err := h.read(path.Join(parent, v2Controllers))
	if err != nil {
		return nil, err
	}
	var missing []string
	for _, w := range want {
		if !slices.Contains(strings.Fields(avail), w) {
			missing = append(missing, w)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: cgroup v2 at %s offers controllers %q, lacking %s",
			ErrNotSupported, path.Join(h.mount(), parent), avail, strings.Join(missing, ", "))
	}
	if err := enableControllers(h, parent, want); err != nil {
		return nil, err
	}
	if err := ensureDir(h, d.base); err != nil {
		return nil, fmt.Errorf("creating corepin root: %w", err)
	}
	if err := enableControllers(h, d.base, want); err != nil {
		return nil, err
	}
	d.feat.cpuset = slices.Contains(want, "cpuset")
	d.feat.cpu = slices.Contains(want, "cpu")
	if d.feat.cpuset {
		for _, p := range []struct {
			file string
			on   *bool
		}{{v2Partition, &d.feat.balance}, {v2Exclusive, &d.feat.exclusive}} {
			if *p.on, err = h.exists(path.Join(d.base, p.file)); err != nil {
				return nil, err
			}
		}
		if d.feat.balance {
			d.bal = v2Balance{h: h, base: d.base, exclusive: d.feat.exclusive}
		}
	}
	if d.feat.cpu {
		for _, p := range []struct {
			file string
			on   *bool
		}{{v2Max, &d.feat.bandwidth}, {v2Burst, &d.feat.burst}, {v2Idle, &d.feat.idle}} {
			if *p.on, err = h.exists(path.Join(d.base, p.file)); err != nil {
				return nil, err
			}
		}
		d.limits = featureLimits(d.feat, v2Max, v2Burst, v2Idle, "cpu.weight=1")
	}
	return d, nil
}

// enableControllers writes "+c" for each controller of want not yet in
// dir's cgroup.subtree_control, in one write.
func enableControllers(h cgfs, dir string, want []string) error {
	file := path.Join(dir, v2Subtree)
	cur, err := h.read(file)
	if err != nil {
		return err
	}
	var add []string
	for _, w := range want {
		if !slices.Contains(strings.Fields(cur), w) {
			add = append(add, "+"+w)
		}
	}
	if len(add) == 0 {
		return nil
	}
	if err := h.write(file, strings.Join(add, " ")); err != nil {
		return fmt.Errorf("enabling controllers in %s (a v2 cgroup with processes cannot have child controllers; see WithParent): %w",
			path.Join(h.mount(), dir), err)
	}
	return nil
}

// v2Group is a cgroup v2 group; it can be the target of CLONE_INTO_CGROUP.
type v2Group struct{ *cgGroup }

// OpenDir opens the group's directory for CLONE_INTO_CGROUP.
func (g v2Group) OpenDir() (dirFile, error) { return g.d.hs[0].openDir(g.dir) }

// v2Writes turns r into cgroup v2 writes, in this order:
//
//	cpuset.cpus, cpuset.mems
//	cpu.max.burst 0            (so cpu.max cannot fail on an old burst above the new quota)
//	cpu.max "$QUOTA $PERIOD"   ("max $PERIOD" without a quota)
//	cpu.max.burst              (only a non-zero burst)
//	cpu.idle                   (0 before the weight: the kernel refuses a weight on an idle group)
//	cpu.weight                 (not on an idle group)
//
// NoLoadBalance is not a write of this list: the partition is made after
// it (v2Balance.apply), where the kernel's answer is read back.
//
// Empty CPUs and Mems become the root's effective sets. Files of a
// controller that is not enabled, or that the kernel lacks, are left out
// when r does not need them and are an ErrNotSupported error when it does,
// except cpu.idle, which falls back to cpu.weight=1.
func v2Writes(r Resources, root rootSets, f features) ([]Write, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	var ws []Write
	if f.cpuset {
		cpus, mems := r.CPUs, r.Mems
		if cpus.IsEmpty() {
			cpus = root.cpus
		}
		if mems.IsEmpty() {
			mems = root.mems
		}
		ws = append(ws, Write{v2CPUs, cpus.String()}, Write{v2Mems, mems.String()})
		if r.NoLoadBalance && !f.balance {
			return nil, fmt.Errorf("%w: %w: no %s (Linux < 5.11)", ErrLoadBalance, ErrNotSupported, v2Partition)
		}
	} else if !r.CPUs.IsEmpty() || !r.Mems.IsEmpty() || r.NoLoadBalance {
		return nil, fmt.Errorf("setting cpus: %w: cpuset controller not enabled", ErrNotSupported)
	}
	if !f.cpu {
		if r.Quota != 0 || r.Weight != 0 || r.Idle {
			return nil, fmt.Errorf("setting quota, weight or idle: %w: cpu controller not enabled", ErrNotSupported)
		}
		return ws, nil
	}
	switch {
	case f.bandwidth:
		if f.burst {
			ws = append(ws, Write{v2Burst, "0"})
		}
		quota := "max"
		if r.Quota > 0 {
			quota = usec(r.Quota)
		}
		ws = append(ws, Write{v2Max, quota + " " + usec(r.period())})
		if r.Burst > 0 {
			if !f.burst {
				return nil, fmt.Errorf("setting burst: %w: no %s (Linux < 5.14)", ErrNotSupported, v2Burst)
			}
			ws = append(ws, Write{v2Burst, usec(r.Burst)})
		}
	case r.Quota > 0:
		return nil, fmt.Errorf("setting quota: %w: no %s (CONFIG_CFS_BANDWIDTH)", ErrNotSupported, v2Max)
	}
	switch {
	case f.idle && r.Idle:
		ws = append(ws, Write{v2Idle, "1"})
	case f.idle:
		ws = append(ws, Write{v2Idle, "0"}, Write{v2Weight, fmt.Sprint(r.weight())})
	case r.Idle:
		ws = append(ws, Write{v2Weight, "1"})
	default:
		ws = append(ws, Write{v2Weight, fmt.Sprint(r.weight())})
	}
	return ws, nil
}

func v2Stats(h cgfs, dir string) (Stats, error) {
	v, err := h.read(path.Join(dir, v2Stat))
	if err != nil {
		return Stats{}, err
	}
	st, err := measure.ParseCPUStat([]byte(v))
	if err != nil {
		return Stats{}, fmt.Errorf("parsing %s: %w", v2Stat, err)
	}
	s := statsOf(st)
	s.Usage, s.User, s.System = st.Usage, st.User, st.System
	return s, nil
}
