// Package mountinfo parses /proc/PID/mountinfo (proc(5)), the mount
// table corepin reads to find cgroup hierarchies.
package mountinfo

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// Mount is one line of /proc/PID/mountinfo (proc(5), "/proc/pid/mountinfo";
// https://www.kernel.org/doc/Documentation/filesystems/proc.rst section 3.5).
// Paths have their octal escapes (\040 for a space) decoded.
type Mount struct {
	ID, ParentID int
	Major, Minor int
	// Root is the path within the filesystem that forms the mount's
	// root; for a cgroup mount, the cgroup the mount point shows.
	Root string
	// Point is the mount point, relative to the process's root.
	Point string
	// Options are the per-mount options ("rw,relatime").
	Options string
	// Optional are the optional fields ("shared:1", "master:2").
	Optional []string
	FSType   string
	Source   string
	// SuperOptions are the per-superblock options; for cgroup v1 they
	// name the controllers of the hierarchy ("rw,cpu,cpuacct").
	SuperOptions string
}

// Parse reads the mountinfo format. It rejects malformed lines
// instead of skipping them, with the line number in the error.
func Parse(r io.Reader) ([]Mount, error) {
	var ms []Mount
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	sc.Split(scanKernelLines)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" {
			continue
		}
		m, err := parseMountLine(line)
		if err != nil {
			return nil, fmt.Errorf("parsing mountinfo line %d: %w", n, err)
		}
		ms = append(ms, m)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading mountinfo: %w", err)
	}
	return ms, nil
}

// ErrMalformed is wrapped by every error about a line that is not mountinfo.
var ErrMalformed = errors.New("malformed mountinfo line")

func parseMountLine(line string) (Mount, error) {
	f := strings.Split(line, " ")
	sep := slices.Index(f, "-")
	if sep < 6 || len(f) != sep+4 {
		return Mount{}, fmt.Errorf("%w: %q", ErrMalformed, line)
	}
	var m Mount
	var err error
	if m.ID, err = strconv.Atoi(f[0]); err != nil {
		return Mount{}, fmt.Errorf("%w: mount id %q", ErrMalformed, f[0])
	}
	if m.ParentID, err = strconv.Atoi(f[1]); err != nil {
		return Mount{}, fmt.Errorf("%w: parent id %q", ErrMalformed, f[1])
	}
	maj, min, ok := strings.Cut(f[2], ":")
	if !ok {
		return Mount{}, fmt.Errorf("%w: device %q", ErrMalformed, f[2])
	}
	if m.Major, err = strconv.Atoi(maj); err != nil {
		return Mount{}, fmt.Errorf("%w: device %q", ErrMalformed, f[2])
	}
	if m.Minor, err = strconv.Atoi(min); err != nil {
		return Mount{}, fmt.Errorf("%w: device %q", ErrMalformed, f[2])
	}
	if m.ID < 0 || m.ParentID < 0 || m.Major < 0 || m.Minor < 0 {
		return Mount{}, fmt.Errorf("%w: negative number in %q", ErrMalformed, line)
	}
	if m.Root, err = unescapeMount(f[3]); err != nil {
		return Mount{}, err
	}
	if m.Point, err = unescapeMount(f[4]); err != nil {
		return Mount{}, err
	}
	m.Options = f[5]
	m.Optional = slices.Clone(f[6:sep])
	if len(m.Optional) == 0 {
		m.Optional = nil
	}
	if m.FSType, err = unescapeMount(f[sep+1]); err != nil {
		return Mount{}, err
	}
	if m.Source, err = unescapeMount(f[sep+2]); err != nil {
		return Mount{}, err
	}
	m.SuperOptions = f[sep+3]
	if m.Root == "" || m.Point == "" || m.FSType == "" || m.FSType == "-" {
		return Mount{}, fmt.Errorf("%w: empty field in %q", ErrMalformed, line)
	}
	return m, nil
}

// unescapeMount decodes the kernel's octal escapes (\ooo, used for space,
// tab, newline and backslash by seq_file's mangle_path).
func unescapeMount(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		if i+4 > len(s) {
			return "", fmt.Errorf("%w: truncated escape in %q", ErrMalformed, s)
		}
		v, err := strconv.ParseUint(s[i+1:i+4], 8, 8)
		if err != nil {
			return "", fmt.Errorf("%w: bad escape in %q", ErrMalformed, s)
		}
		b.WriteByte(byte(v))
		i += 3
	}
	return b.String(), nil
}

// Controllers returns the cgroup v1 controllers of a "cgroup" mount, from
// its super options ("rw,cpu,cpuacct" -> cpu, cpuacct). Named hierarchies
// ("name=systemd") and mount flags are left out. For any other file system
// it returns nil.
func (m Mount) Controllers() []string {
	if m.FSType != "cgroup" {
		return nil
	}
	var cs []string
	for o := range strings.SplitSeq(m.SuperOptions, ",") {
		switch {
		case o == "rw", o == "ro", strings.Contains(o, "="),
			o == "noprefix", o == "clone_children", o == "xattr", o == "cpuset_v2_mode",
			o == "":
		default:
			cs = append(cs, o)
		}
	}
	return cs
}

// scanKernelLines splits at '\n' only, as the kernel ends each line:
// bufio.ScanLines would also drop a '\r' before it, which the kernel
// prints as it is in a path or an option (it escapes only space, tab,
// newline and backslash).
func scanKernelLines(data []byte, atEOF bool) (advance int, token []byte, err error) {
	if i := bytes.IndexByte(data, '\n'); i >= 0 {
		return i + 1, data[:i], nil
	}
	if atEOF && len(data) > 0 {
		return len(data), data, nil
	}
	return 0, nil, nil
}
