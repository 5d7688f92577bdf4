package topology

import (
	"bufio"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/corepin/corepin/cpuset"
)

// Mount is one line of /proc/self/mountinfo that matters here.
type Mount struct {
	Root       string // path within the mounted file system (field 4)
	MountPoint string // field 5
	FSType     string // after the " - " separator
	SuperOpts  []string
}

// ParseMountinfo parses the proc(5) mountinfo format
// (https://man7.org/linux/man-pages/man5/proc_pid_mountinfo.5.html),
// unescaping octal sequences (\040 for a space) in paths. Malformed lines
// are an error quoting the line.
func ParseMountinfo(s string) ([]Mount, error) {
	var out []Mount
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			continue
		}
		pre, post, ok := strings.Cut(line, " - ")
		f := strings.Fields(pre)
		g := strings.Fields(post)
		if !ok || len(f) < 6 || len(g) < 2 {
			return nil, fmt.Errorf("%w: parsing mountinfo line %q", ErrBadSysfs, line)
		}
		m := Mount{Root: unescapeOctal(f[3]), MountPoint: unescapeOctal(f[4]), FSType: g[0]}
		if len(g) >= 3 {
			m.SuperOpts = strings.Split(g[2], ",")
		}
		out = append(out, m)
	}
	return out, sc.Err()
}

func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) && isOctal(s[i+1:i+4]) {
			v := (s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0')
			b.WriteByte(v)
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(s string) bool {
	if len(s) != 3 {
		return false
	}
	for i := range 3 {
		if s[i] < '0' || s[i] > '7' {
			return false
		}
	}
	return s[0] <= '3'
}

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
	mounts, err := ParseMountinfo(mi)
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
		case m.FSType == "cgroup" && v1Path != "" && slices.Contains(m.SuperOpts, "cpuset"):
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
func (d *discoverer) readCgroupCPUs(m Mount, cgPath string, names ...string) (cpuset.CPUSet, bool) {
	rel := cgPath
	if m.Root != "/" {
		if r, ok := strings.CutPrefix(cgPath, m.Root); ok {
			rel = r
		}
	}
	dir := path.Join(strings.TrimPrefix(m.MountPoint, "/"), rel)
	base := strings.TrimPrefix(m.MountPoint, "/")
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
