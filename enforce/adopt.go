package enforce

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"

	"github.com/corepin/corepin/cpuset"
)

// Listed is one group directory found under corepin's root by a Lister.
type Listed struct {
	// Name is the name the group was created with.
	Name string
	// Dir is the directory under corepin's root ("run-<pid>-<start>-<name>").
	Dir string
	// OwnerPID is the pid of the process that created the group, and
	// OwnerAlive whether that process still runs (same pid, same start time).
	OwnerPID   int
	OwnerAlive bool
	// Pids are the processes in the group, read from its first hierarchy
	// (cpuset on cgroup v1).
	Pids []int
	// CPUs is the group's cpuset.cpus; empty without a cpuset controller.
	CPUs cpuset.CPUSet
}

// Lister is the optional ability of a cgroup driver to find and reopen the
// groups under corepin's root, for a daemon whose groups outlive the
// process that created them (the agent after a restart). Found with
// `if l, ok := d.(Lister); ok`.
type Lister interface {
	// List returns every group directory under corepin's root that
	// carries a corepin group name, by directory name. Directories not
	// named by corepin are left out.
	List() ([]Listed, error)
	// Reopen returns the group l names as Create returned it, creating its
	// directory in a hierarchy where a crash left it missing.
	Reopen(l Listed) (Group, error)
	// OpenExisting returns the group at cgroup path p (relative to each
	// hierarchy's mount point, such as a container's cgroup), which must
	// exist in every hierarchy. Its Remove leaves the directory in place:
	// corepin did not make it.
	OpenExisting(p string) (Group, error)
}

var _ Lister = (*cgDriver)(nil)

func (d *cgDriver) List() ([]Listed, error) {
	h := d.hs[0]
	ds, err := h.subdirs(d.base)
	if err != nil {
		return nil, fmt.Errorf("listing groups: %w", err)
	}
	var out []Listed
	for _, dn := range ds {
		o, name, ok := parseDirName(dn)
		if !ok {
			continue
		}
		dir := path.Join(d.base, dn)
		l := Listed{Name: name, Dir: dn, OwnerPID: o.PID, OwnerAlive: o == d.self || d.alive(o)}
		procs, err := readProcs(h, dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed while listing
		}
		if err != nil {
			return nil, fmt.Errorf("listing groups: %w", err)
		}
		if l.Pids, err = atoiPids(procs); err != nil {
			return nil, fmt.Errorf("listing groups: reading %s/cgroup.procs: %w", dir, err)
		}
		if d.feat.cpuset {
			if l.CPUs, err = readSet(d.pick("cpuset.cpus"), path.Join(dir, "cpuset.cpus")); err != nil {
				return nil, fmt.Errorf("listing groups: %w", err)
			}
		}
		out = append(out, l)
	}
	return out, nil
}

func (d *cgDriver) Reopen(l Listed) (Group, error) {
	o, name, ok := parseDirName(l.Dir)
	if !ok || name != l.Name || o.PID != l.OwnerPID {
		return nil, fmt.Errorf("reopening group %q: %w: directory %q is not a corepin group of that name", l.Name, ErrInvalidName, l.Dir)
	}
	g := &cgGroup{d: d, name: name, dir: path.Join(d.base, l.Dir)}
	for _, h := range d.hs {
		// A stat first: ensureDir lists the parent, which costs O(groups).
		if ok, err := h.exists(path.Join(g.dir, "cgroup.procs")); err == nil && ok {
			continue
		}
		if err := ensureDir(h, g.dir); err != nil {
			return nil, fmt.Errorf("reopening group %s: %w", name, err)
		}
	}
	return d.wrap(g), nil
}

func (d *cgDriver) OpenExisting(p string) (Group, error) {
	rel, err := cleanParent(p)
	if err != nil {
		return nil, fmt.Errorf("opening cgroup %q: %w", p, err)
	}
	if rel == "." {
		return nil, fmt.Errorf("opening cgroup %q: %w: the root cgroup cannot be adopted", p, ErrInvalidName)
	}
	for _, h := range d.hs {
		if _, err := h.read(path.Join(rel, "cgroup.procs")); err != nil {
			return nil, fmt.Errorf("opening cgroup %q: %w", p, err)
		}
	}
	return foreignGroup{d.wrap(&cgGroup{d: d, name: path.Base(rel), dir: rel})}, nil
}

// foreignGroup is a cgroup corepin adopted but did not create: Remove
// leaves its directory alone.
type foreignGroup struct{ Group }

func (foreignGroup) Remove() error { return nil }

// Pids returns the processes in g (cgroup.procs of its first hierarchy).
// It works for the groups of the cgroup drivers; for others it fails with
// ErrNotSupported.
func Pids(g Group) ([]int, error) {
	if f, ok := g.(foreignGroup); ok {
		g = f.Group
	}
	var cg *cgGroup
	switch v := g.(type) {
	case *cgGroup:
		cg = v
	case v2Group:
		cg = v.cgGroup
	default:
		return nil, fmt.Errorf("listing processes of group %s: %w", g.Name(), ErrNotSupported)
	}
	procs, err := readProcs(cg.d.hs[0], cg.dir)
	if err != nil {
		return nil, fmt.Errorf("listing processes of group %s: %w", g.Name(), err)
	}
	pids, err := atoiPids(procs)
	if err != nil {
		return nil, fmt.Errorf("listing processes of group %s: %w", g.Name(), err)
	}
	return pids, nil
}

// atoiPids parses the lines of a cgroup.procs file.
func atoiPids(procs []string) ([]int, error) {
	var out []int
	for _, p := range procs {
		pid, err := strconv.Atoi(p)
		if err != nil {
			return nil, fmt.Errorf("pid %q: %w", p, err)
		}
		out = append(out, pid)
	}
	return out, nil
}
