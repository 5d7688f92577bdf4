package topology

import (
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/internal/mountinfo"
)

// cgroupAllowed returns the CPUs allowed by the process's own cpuset cgroup
// (cgroup v1 cpuset.effective_cpus, v2 cpuset.cpus.effective), read through
// proc/self/cgroup and proc/self/mountinfo. ok=false when it can't be told
// (no procfs in a dump, no cpuset controller): then every online CPU counts
// as allowed.
func (d *discoverer) cgroupAllowed() (cpuset.CPUSet, bool) {
	cg, ok, err := d.readOptional("proc/self/cgroup")
	if err != nil || !ok {
		return cpuset.CPUSet{}, false
	}
	mi, ok, err := d.readOptional("proc/self/mountinfo")
	if err != nil || !ok {
		return cpuset.CPUSet{}, false
	}
	mounts, err := mountinfo.Parse(strings.NewReader(mi))
	if err != nil {
		d.warnf("reading corepin's cpuset cgroup: %v", err)
		return cpuset.CPUSet{}, false
	}
	var v1Path, v2Path string
	hasV2 := false
	for line := range strings.SplitSeq(cg, "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			v2Path, hasV2 = parts[2], true
		}
		for c := range strings.SplitSeq(parts[1], ",") {
			if c == "cpuset" {
				v1Path = parts[2]
			}
		}
	}
	for _, m := range mounts {
		switch {
		case m.FSType == "cgroup" && v1Path != "" && slices.Contains(m.Controllers(), "cpuset"):
			if set, ok := d.readCgroupCPUs(m, v1Path, "cpuset.effective_cpus", "cpuset.cpus"); ok {
				return set, true
			}
		case m.FSType == "cgroup2" && hasV2 && v1Path == "":
			if set, ok := d.readCgroupCPUs(m, v2Path, "cpuset.cpus.effective"); ok {
				return set, true
			}
		}
	}
	return cpuset.CPUSet{}, false
}

// readCgroupCPUs reads the first existing file of names in the process's
// group under mount m, walking up to the mount root where the controller is
// not enabled in the leaf (cgroup v2).
func (d *discoverer) readCgroupCPUs(m mountinfo.Mount, cgPath string, names ...string) (cpuset.CPUSet, bool) {
	rel := cgPath
	if m.Root != "/" {
		if r, ok := strings.CutPrefix(cgPath, m.Root); ok {
			rel = r
		}
	}
	dir := path.Join(strings.TrimPrefix(m.Point, "/"), rel)
	base := strings.TrimPrefix(m.Point, "/")
	for {
		for _, n := range names {
			set, ok, err := d.readSet(path.Join(dir, n), false)
			if err != nil {
				d.warnf("reading corepin's cpuset cgroup: %v", err)
				return cpuset.CPUSet{}, false
			}
			if ok && !set.IsEmpty() {
				return set, true
			}
		}
		if dir == base || dir == "." || dir == "" {
			return cpuset.CPUSet{}, false
		}
		dir = path.Dir(dir)
		if _, err := fs.Stat(d.fsys, dir); err != nil {
			return cpuset.CPUSet{}, false
		}
	}
}
