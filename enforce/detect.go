package enforce

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Detect returns the best driver this machine allows, trying in order:
//
//  1. cgroup v2, when a cgroup2 mount offers the cpuset and cpu
//     controllers at the parent (WithParent) and corepin's root can be
//     made there;
//  2. cgroup v1, when cpuset and cpu hierarchies are mounted and
//     corepin's root can be made in both (cpuacct is used when mounted);
//  3. affinity-only, which always works and whose Limitations begin with
//     why no cgroup driver could be used.
//
// The mount table is read once per process and cached (unless
// WithMountinfo names another file). Detect creates corepin's root groups
// as a side effect; call it once at start, then call Cleanup on the result
// to remove the groups a crashed run left behind.
func Detect(opts ...Option) (Driver, error) {
	mounts, err := mountsOf(newConfig(opts))
	if err != nil {
		return nil, err
	}
	var reasons []string
	for _, probe := range []func([]Mount, []Option) (Driver, string){probeV2, probeV1} {
		d, why := probe(mounts, opts)
		if d != nil {
			return d, nil
		}
		reasons = append(reasons, why)
	}
	d, err := NewAffinity(opts...)
	if err != nil {
		return nil, err
	}
	a := d.(*affinityDriver)
	a.limits = append([]string{"no usable cgroup (" + strings.Join(reasons, "; ") + ")"}, a.limits...)
	return a, nil
}

// ErrUnusable is wrapped by DetectNamed's refusal of a cgroup driver this
// machine can not give.
var ErrUnusable = errors.New("not usable here")

// DetectNamed returns the driver called name (NameV1, NameV2 or
// NameAffinity) as Detect would make it, or an error wrapping ErrUnusable
// that says why this machine can not give it (not mounted, a controller
// missing, not writable) and which drivers it can. An unknown name is an
// error too.
func DetectNamed(name string, opts ...Option) (Driver, error) {
	probes := map[string]func([]Mount, []Option) (Driver, string){NameV2: probeV2, NameV1: probeV1}
	if name == NameAffinity {
		return NewAffinity(opts...)
	}
	probe, ok := probes[name]
	if !ok {
		return nil, fmt.Errorf("unknown driver %q (want %s, %s or %s)", name, NameV2, NameV1, NameAffinity)
	}
	mounts, err := mountsOf(newConfig(opts))
	if err != nil {
		return nil, err
	}
	d, why := probe(mounts, opts)
	if d != nil {
		return d, nil
	}
	usable := []string{"auto"}
	for _, other := range []string{NameV2, NameV1} {
		if other == name {
			continue
		}
		if od, _ := probes[other](mounts, opts); od != nil {
			usable = append(usable, other)
		}
	}
	usable = append(usable, NameAffinity)
	return nil, fmt.Errorf("%s is %w (%s); drivers that work here: %s", name, ErrUnusable, why, strings.Join(usable, ", "))
}

// mountsOf is the mount table c names: this process's, cached, unless
// WithMountinfo named another file.
func mountsOf(c config) ([]Mount, error) {
	if c.mountinfo == defaultMountinfo {
		return selfMounts()
	}
	return readMounts(c.mountinfo)
}

// probeV2 returns the cgroup v2 driver on mounts, or nil and why not.
func probeV2(mounts []Mount, opts []Option) (Driver, string) {
	m, ok := findV2(mounts)
	if !ok {
		return nil, "cgroup v2: not mounted"
	}
	d, err := NewV2(m.Point, opts...)
	if err != nil {
		return nil, "cgroup v2: " + err.Error()
	}
	if err := d.(*cgDriver).writable(); err != nil {
		return nil, "cgroup v2: " + err.Error()
	}
	return d, ""
}

// probeV1 returns the cgroup v1 driver on mounts, or nil and why not.
func probeV1(mounts []Mount, opts []Option) (Driver, string) {
	m, missing := findV1(mounts)
	if len(missing) > 0 {
		return nil, "cgroup v1: no " + strings.Join(missing, ", ") + " hierarchy mounted"
	}
	d, err := NewV1(m, opts...)
	if err != nil {
		return nil, "cgroup v1: " + err.Error()
	}
	if err := d.(*cgDriver).writable(); err != nil {
		return nil, "cgroup v1: " + err.Error()
	}
	return d, ""
}

const defaultMountinfo = "/proc/self/mountinfo"

// writable reports whether this process may create groups in corepin's
// root in every hierarchy. A root made earlier by another user (root)
// exists, so making it succeeds, yet every job's group would then fail
// with EACCES (issue 8 §3: non-root runs); access(2) with W_OK answers
// for the caller's credentials without creating anything.
func (d *cgDriver) writable() error {
	for _, h := range d.hs {
		dir := filepath.Join(h.mount(), d.base)
		if err := unix.Access(dir, unix.W_OK|unix.X_OK); err != nil {
			return fmt.Errorf("creating groups in %s: %w", dir, err)
		}
	}
	return nil
}

// selfMounts is this process's mount table, read once.
var selfMounts = sync.OnceValues(func() ([]Mount, error) { return readMounts(defaultMountinfo) })

func readMounts(file string) ([]Mount, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("reading mount table: %w", err)
	}
	defer f.Close()
	return ParseMountinfo(f)
}

// findV2 returns the cgroup2 mount, preferring /sys/fs/cgroup (a
// unified host) over the first listed (a hybrid host's
// /sys/fs/cgroup/unified).
func findV2(ms []Mount) (Mount, bool) {
	var found []Mount
	for _, m := range ms {
		if m.FSType == "cgroup2" {
			found = append(found, m)
		}
	}
	if len(found) == 0 {
		return Mount{}, false
	}
	if i := slices.IndexFunc(found, func(m Mount) bool { return m.Point == "/sys/fs/cgroup" }); i >= 0 {
		return found[i], true
	}
	return found[0], true
}

// findV1 returns the mount points of the cpuset, cpu and cpuacct
// hierarchies (the first mount of each), and which of cpuset and cpu are
// missing.
func findV1(ms []Mount) (V1Mounts, []string) {
	var v V1Mounts
	for _, m := range ms {
		for _, c := range m.Controllers() {
			switch {
			case c == "cpuset" && v.CPUSet == "":
				v.CPUSet = m.Point
			case c == "cpu" && v.CPU == "":
				v.CPU = m.Point
			case c == "cpuacct" && v.CPUAcct == "":
				v.CPUAcct = m.Point
			}
		}
	}
	var missing []string
	if v.CPUSet == "" {
		missing = append(missing, "cpuset")
	}
	if v.CPU == "" {
		missing = append(missing, "cpu")
	}
	return v, missing
}

// cloneIntoCgroup reports whether clone3(2) takes CLONE_INTO_CGROUP, probed
// once: the kernel must be Linux 5.7 or later (from its release string),
// and clone3 must be callable — a container's seccomp profile may answer
// ENOSYS for it, and os/exec does not fall back to clone(2) then. The
// probe calls clone3 with a zero-sized argument, which a kernel that has
// it rejects with EINVAL before doing anything. Any other answer, or an
// unparsable release, counts as no: Start then uses the shim, which works
// everywhere.
var cloneIntoCgroup = sync.OnceValue(func() bool {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return false
	}
	if !kernelAtLeast(unix.ByteSliceToString(u.Release[:]), 5, 7) {
		return false
	}
	_, _, errno := unix.Syscall(unix.SYS_CLONE3, 0, 0, 0)
	return errno == unix.EINVAL
})

// kernelAtLeast reports whether release ("6.18.44-fc-v657") is at least
// major.minor; false when it does not parse.
func kernelAtLeast(release string, major, minor int) bool {
	f := strings.FieldsFunc(release, func(r rune) bool { return r < '0' || r > '9' })
	if len(f) < 2 {
		return false
	}
	ma, err1 := strconv.Atoi(f[0])
	mi, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil {
		return false
	}
	return ma > major || ma == major && mi >= minor
}
