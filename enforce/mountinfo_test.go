package enforce

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// hybridFleet is /proc/self/mountinfo of this fleet's machines (Linux
// 6.18): cgroup v1 with separate cpu and cpuacct hierarchies, and an empty
// cgroup2 at /sys/fs/cgroup/unified.
const hybridFleet = `22 1 0:21 / / rw,relatime - rootfs rootfs rw
23 22 0:22 / /sys rw,nosuid,nodev,noexec,relatime - sysfs sysfs rw
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`

// systemdUnified is a typical systemd host on cgroup v2 only.
const systemdUnified = `24 30 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
30 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw,errors=remount-ro
35 24 0:30 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
`

// debianHybridCoMounted is the classic systemd hybrid layout: cpu and
// cpuacct co-mounted, cgroup2 only for systemd.
const debianHybridCoMounted = `25 24 0:23 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:4 - tmpfs tmpfs ro,mode=755
26 25 0:24 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:5 - cgroup2 cgroup2 rw,nsdelegate
30 25 0:28 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:11 - cgroup cgroup rw,cpu,cpuacct
33 25 0:31 /docker/abc /sys/fs/cgroup/cpuset rw,nosuid,nodev,noexec,relatime shared:14 - cgroup cgroup rw,cpuset,clone_children
`

func TestParseMountinfoFleet(t *testing.T) {
	ms, err := ParseMountinfo(strings.NewReader(hybridFleet))
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 9 {
		t.Fatalf("ParseMountinfo: %d mounts, want 9", len(ms))
	}
	want := Mount{ID: 32, ParentID: 31, Major: 0, Minor: 29, Root: "/", Point: "/sys/fs/cgroup/cpu",
		Options: "rw,relatime", FSType: "cgroup", Source: "cgroup", SuperOptions: "rw,cpu"}
	if diff := cmp.Diff(want, ms[3]); diff != "" {
		t.Errorf("cpu mount (-want +got):\n%s", diff)
	}
	v1, missing := findV1(ms)
	if diff := cmp.Diff(V1Mounts{CPUSet: "/sys/fs/cgroup/cpuset", CPU: "/sys/fs/cgroup/cpu",
		CPUAcct: "/sys/fs/cgroup/cpuacct"}, v1); diff != "" || missing != nil {
		t.Errorf("findV1 = %+v, missing %q (-want +got):\n%s", v1, missing, diff)
	}
	if m, ok := findV2(ms); !ok || m.Point != "/sys/fs/cgroup/unified" {
		t.Errorf("findV2 = %q, %v; want /sys/fs/cgroup/unified", m.Point, ok)
	}
	if cs := ms[7].Controllers(); cs != nil {
		t.Errorf("name=systemd Controllers() = %q, want none", cs)
	}
}

func TestParseMountinfoHosts(t *testing.T) {
	ms, err := ParseMountinfo(strings.NewReader(systemdUnified))
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := findV2(ms); !ok || m.Point != "/sys/fs/cgroup" {
		t.Errorf("unified host: findV2 = %q, %v", m.Point, ok)
	}
	if _, missing := findV1(ms); !cmp.Equal(missing, []string{"cpuset", "cpu"}) {
		t.Errorf("unified host: findV1 missing %q, want cpuset, cpu", missing)
	}
	if got := ms[0].Optional; !cmp.Equal(got, []string{"shared:7"}) {
		t.Errorf("Optional = %q", got)
	}

	ms, err = ParseMountinfo(strings.NewReader(debianHybridCoMounted))
	if err != nil {
		t.Fatal(err)
	}
	v1, missing := findV1(ms)
	want := V1Mounts{CPUSet: "/sys/fs/cgroup/cpuset", CPU: "/sys/fs/cgroup/cpu,cpuacct", CPUAcct: "/sys/fs/cgroup/cpu,cpuacct"}
	if diff := cmp.Diff(want, v1); diff != "" || missing != nil {
		t.Errorf("co-mounted: findV1 missing %q (-want +got):\n%s", missing, diff)
	}
	if ms[3].Root != "/docker/abc" || !cmp.Equal(ms[3].Controllers(), []string{"cpuset"}) {
		t.Errorf("cpuset mount = %+v", ms[3])
	}
}

func TestParseMountinfoEscapes(t *testing.T) {
	ms, err := ParseMountinfo(strings.NewReader(
		`40 22 0:40 /a\040b /mnt/with\040space\011tab\134back rw - tmpfs my\012src rw` + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	if m := ms[0]; m.Root != "/a b" || m.Point != "/mnt/with space\ttab\\back" || m.Source != "my\nsrc" || m.Optional != nil {
		t.Errorf("unescaped = %+v", m)
	}
}

func TestParseMountinfoErrors(t *testing.T) {
	for _, line := range []string{
		"garbage",
		"1 2 0:3 / /x rw tmpfs tmpfs rw",         // no separator
		"1 2 0:3 / /x rw - tmpfs tmpfs",          // too few after it
		"1 2 0:3 / /x rw - tmpfs tmpfs rw extra", // too many
		"x 2 0:3 / /x rw - tmpfs tmpfs rw",       // id
		"1 2 03 / /x rw - tmpfs tmpfs rw",        // device
		"1 2 0:3 /\\04 /x rw - tmpfs tmpfs rw",   // truncated escape
		"1 2 0:3 /\\999 /x rw - tmpfs tmpfs rw",  // bad escape
		"1 2 0:3 / /x rw - - tmpfs rw",           // separator as fstype
		"-1 2 0:3 / /x rw - tmpfs tmpfs rw",      // negative
		"1 2 0:3  /x rw - tmpfs tmpfs rw",        // empty root
	} {
		if _, err := ParseMountinfo(strings.NewReader(line + "\n")); !errors.Is(err, errMountLine) {
			t.Errorf("ParseMountinfo(%q) = %v, want errMountLine", line, err)
		}
	}
}

// formatMountinfo writes ms back in the kernel's format, escaping as
// seq_file's mangle_path does.
func formatMountinfo(ms []Mount) string {
	esc := func(s string) string {
		var b strings.Builder
		for i := 0; i < len(s); i++ {
			switch c := s[i]; c {
			case ' ', '\t', '\n', '\\':
				fmt.Fprintf(&b, "\\%03o", c)
			default:
				b.WriteByte(c)
			}
		}
		return b.String()
	}
	var b strings.Builder
	for _, m := range ms {
		fmt.Fprintf(&b, "%d %d %d:%d %s %s %s", m.ID, m.ParentID, m.Major, m.Minor, esc(m.Root), esc(m.Point), m.Options)
		for _, o := range m.Optional {
			b.WriteString(" " + o)
		}
		fmt.Fprintf(&b, " - %s %s %s\n", esc(m.FSType), esc(m.Source), m.SuperOptions)
	}
	return b.String()
}

// FuzzMountinfo checks that ParseMountinfo never panics and that what it
// accepts survives formatting and parsing again unchanged.
func FuzzMountinfo(f *testing.F) {
	for _, s := range []string{hybridFleet, systemdUnified, debianHybridCoMounted,
		`40 22 0:40 /a\040b /mnt/x\134y rw - tmpfs src rw` + "\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ms, err := ParseMountinfo(strings.NewReader(s))
		if err != nil {
			return
		}
		again, err := ParseMountinfo(strings.NewReader(formatMountinfo(ms)))
		if err != nil {
			t.Fatalf("reparsing %q: %v", formatMountinfo(ms), err)
		}
		if diff := cmp.Diff(ms, again); diff != "" {
			t.Errorf("round trip of %q (-first +second):\n%s", s, diff)
		}
		for _, m := range ms {
			m.Controllers()
		}
	})
}
