package enforce

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"strings"
)

// ErrNoCPUIdle is a kernel without cpu.idle (Linux < 5.15): an idle
// parent can not be made idle.
var ErrNoCPUIdle = errors.New("the kernel has no cpu.idle (Linux >= 5.15 has it)")

// IdleParents makes, repairs and cleans idle parents in a cgroup mount
// that is not corepin's own (the host's /sys/fs/cgroup as the NRI plugin
// sees it): groups of one name (the caller's, such as kube/nri's
// IdleGroup under the kubelet's kubepods) with cpu.idle 1, which make the
// groups below them one idle entity among their own siblings. The mount
// is cgroup v2, or v1 with one directory per hierarchy. Every path is
// opened through an os.Root on the mount, so nothing outside it is read
// or written. It chooses no group's place; the caller does.
type IdleParents struct {
	h cgfs
	// group is the name every idle parent has (its last path element).
	group string
	// cpu is the cpu controller's hierarchy directory (v2: ".", the
	// unified one); cpuset that of v1's cpuset controller ("" on v2,
	// where a new group's cpuset needs no setting).
	cpu, cpuset string
	// all are the directories of every hierarchy (v2: ".").
	all []string
}

// OpenIdleParents opens the cgroup mount dir and finds its hierarchies;
// the idle parents it keeps are named group (see ValidateName).
func OpenIdleParents(dir, group string) (*IdleParents, error) {
	if err := ValidateName(group); err != nil {
		return nil, fmt.Errorf("naming the idle parents: %w", err)
	}
	r, err := openRootFS(dir)
	if err != nil {
		return nil, err
	}
	ip, err := openIdleParents(r, group)
	if err != nil {
		r.close()
		return nil, err
	}
	return ip, nil
}

// openIdleParents finds the hierarchies of the mount h.
func openIdleParents(h cgfs, group string) (*IdleParents, error) {
	ip := &IdleParents{h: h, group: group}
	if ok, err := h.exists(v2Controllers); err != nil {
		return nil, err
	} else if ok {
		ip.cpu, ip.all = ".", []string{"."}
		return ip, nil
	}
	dirs, err := h.subdirs(".") // cpu -> cpu,cpuacct is a link: the hierarchy once
	if err != nil {
		return nil, err
	}
	for _, d := range dirs {
		ip.all = append(ip.all, d)
		for _, c := range strings.Split(d, ",") {
			switch c {
			case "cpu":
				ip.cpu = d
			case "cpuset":
				ip.cpuset = d
			}
		}
	}
	if ip.cpu == "" {
		return nil, fmt.Errorf("%s: neither a cgroup v2 mount nor a v1 mount with a cpu hierarchy", h.mount())
	}
	return ip, nil
}

// Close closes the mount.
func (ip *IdleParents) Close() error {
	if c, ok := ip.h.(interface{ close() error }); ok {
		return c.close()
	}
	return nil
}

// V1CPUMount is the directory of the mount's cgroup v1 cpu hierarchy
// (where MakeRTRoom makes room for a real-time share), "" on cgroup v2.
func (ip *IdleParents) V1CPUMount() string {
	if ip.cpu == "." {
		return ""
	}
	return filepath.Join(ip.h.mount(), ip.cpu)
}

// cpuDir is parent's directory in the cpu controller's hierarchy.
func (ip *IdleParents) cpuDir(parent string) string {
	return path.Join(ip.cpu, parent)
}

// Ensure makes the idle parent (an absolute clean path in the mount's
// hierarchies ending in the group name) and sets its cpu.idle to 1 where
// it is not, reading it back; on cgroup v1 it also gives its cpuset group
// its own parent's CPUs and memory nodes where they are empty (the groups
// below change their cpusets, always within their grandparent's). It
// makes one level only: the idle parent's own parent must exist.
func (ip *IdleParents) Ensure(parent string) error {
	if path.Base(parent) != ip.group || !path.IsAbs(parent) || path.Clean(parent) != parent {
		return fmt.Errorf("idle parent %q: want an absolute clean path ending in %s", parent, ip.group)
	}
	if ip.cpuset != "" {
		dir := path.Join(ip.cpuset, parent)
		if err := ensureDir(ip.h, dir); err != nil {
			return fmt.Errorf("making the idle parent: %w", err)
		}
		if err := inheritCPUSets(ip.h, dir); err != nil {
			return fmt.Errorf("setting the idle parent's cpuset: %w", err)
		}
	}
	dir := ip.cpuDir(parent)
	if err := ensureDir(ip.h, dir); err != nil {
		return fmt.Errorf("making the idle parent: %w", err)
	}
	if err := ip.Holds(parent); err == nil || errors.Is(err, ErrNoCPUIdle) {
		return err
	}
	if err := ip.h.write(path.Join(dir, v1Idle), "1"); err != nil {
		return fmt.Errorf("setting cpu.idle of the idle parent: %w", err)
	}
	return ip.Holds(parent)
}

// Holds reports (nil) whether the idle parent exists with cpu.idle 1.
func (ip *IdleParents) Holds(parent string) error {
	v, err := ip.h.read(path.Join(ip.cpuDir(parent), v1Idle))
	if errors.Is(err, fs.ErrNotExist) {
		if ok, _ := ip.h.exists(ip.cpuDir(parent)); ok {
			return ErrNoCPUIdle
		}
	}
	if err != nil {
		return fmt.Errorf("reading cpu.idle of the idle parent: %w", err)
	}
	if v != "1" {
		return fmt.Errorf("the idle parent %s has cpu.idle %s, want 1", parent, v)
	}
	return nil
}

// Pods lists the pod groups (pod<uid>) under the idle parent.
func (ip *IdleParents) Pods(parent string) ([]string, error) {
	dirs, err := ip.h.subdirs(ip.cpuDir(parent))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing the idle parent: %w", err)
	}
	var out []string
	for _, d := range dirs {
		if strings.HasPrefix(d, "pod") {
			out = append(out, d)
		}
	}
	return out, nil
}

// RemovePod removes the group of pod (pod<uid>) under the idle parent in
// every hierarchy. It only calls rmdir(2): the runtime removes the
// containers' groups inside it when it deletes them, and a group still
// holding one is left (the error says which) for a later call.
func (ip *IdleParents) RemovePod(parent, pod string) error {
	if !strings.HasPrefix(pod, "pod") || strings.ContainsAny(pod, "/.") {
		return fmt.Errorf("pod group %q: want pod<uid>", pod)
	}
	var errs []error
	for _, h := range ip.all {
		d := path.Join(h, parent, pod)
		if err := ip.h.rmdir(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("removing pod group %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}

// Contains reports (nil) whether the container group moved
// (<idle parent>/pod<uid>/<container>) exists in the cpu hierarchy under
// an idle parent that holds.
func (ip *IdleParents) Contains(moved string) error {
	if err := ip.Holds(path.Dir(path.Dir(moved))); err != nil {
		return err
	}
	if ok, err := ip.h.exists(ip.cpuDir(moved)); err != nil || !ok {
		return fmt.Errorf("the container's group %s under the idle parent: %w", moved, cmp.Or(err, fs.ErrNotExist))
	}
	return nil
}
