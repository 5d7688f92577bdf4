package nodecore

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/corepin/corepin/enforce"
)

// ErrTaken means what a request would adopt is already run by corepin: a
// process in one of corepin's groups, or a cgroup another workload
// adopted (HTTP 409). It may succeed once that workload is deleted.
var ErrTaken = errors.New("already run by corepin")

// BERunRoot is the root group of `corepin run --qos BE` batches (the CLI
// takes its name from here), beside enforce.DefaultRoot, the root of the
// other runs.
const BERunRoot = "corepin-be"

// Guard refuses to adopt what corepin already runs: the agent's checks
// of a Spec's PID or Cgroup before an admission adopts it.
type Guard struct {
	// Root is the agent's root group name (the one its driver makes its
	// groups in).
	Root string
	// Adopted are the cgroups workloads adopted, by workload name.
	Adopted map[string]string
}

// maxProcFile bounds what the guard reads of one /proc file.
const maxProcFile = 64 << 10

// PF_KTHREAD is the per-process flag of a kernel thread (include/linux/sched.h),
// field 9 of /proc/PID/stat.
const pfKthread = 0x00200000

// Roots are the cgroup paths (relative to each hierarchy's mount point,
// "/"-rooted) of every root group corepin makes: the agent's own, a
// local run's and a best-effort batch's. Nothing below them, and none
// of them, may be adopted: their groups are corepin's workloads.
func (g Guard) Roots() []string {
	out := []string{"/" + g.Root}
	for _, r := range []string{enforce.DefaultRoot, BERunRoot} {
		if !slices.Contains(out, "/"+r) {
			out = append(out, "/"+r)
		}
	}
	return out
}

// within reports whether path p is dir or below it (both clean and
// "/"-rooted).
func within(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

// related reports whether cgroup paths a and b are the same, or one holds
// the other.
func related(a, b string) bool { return within(a, b) || within(b, a) }

// InRoots reports whether cgroup p is one of corepin's roots, or below or
// above one, and which.
func (g Guard) InRoots(p string) (string, bool) {
	c := path.Clean("/" + p)
	for _, r := range g.Roots() {
		if related(c, r) {
			return r, true
		}
	}
	return "", false
}

// CheckCgroup refuses to adopt cgroup p (a Spec.Cgroup, checked by
// Validate) for workload name when it is one of corepin's roots, below or
// above one (ErrInvalid), holds this process itself (ErrInvalid), or is,
// holds or lies in a cgroup another workload adopted (ErrTaken).
func (g Guard) CheckCgroup(name, p string) error {
	c := path.Clean("/" + p)
	if r, ok := g.InRoots(c); ok {
		return fmt.Errorf("%w: workload %q: cgroup %s is corepin's own (root %s holds its workloads' groups); "+
			"give a cgroup of your own, outside %s", ErrInvalid, name, c, r, strings.Join(g.Roots(), ", "))
	}
	self, err := procCgroups(os.Getpid())
	if err != nil {
		return fmt.Errorf("reading the agent's own cgroups: %w", err)
	}
	for _, s := range self {
		if within(s, c) {
			return fmt.Errorf("%w: workload %q: cgroup %s holds the agent itself (%s)", ErrInvalid, name, c, s)
		}
	}
	for _, other := range slices.Sorted(maps.Keys(g.Adopted)) {
		if oc := path.Clean("/" + g.Adopted[other]); related(c, oc) {
			return fmt.Errorf("%w: workload %q: cgroup %s overlaps cgroup %s, adopted by workload %q; delete %q first",
				ErrTaken, name, c, oc, other, other)
		}
	}
	return nil
}

// CheckPID refuses to adopt pid for workload name when it is a thread of
// this process, a zombie or a kernel thread, a thread other than its
// process's leader (a cgroup holds whole processes; give the process)
// (ErrInvalid), or a process already in a corepin group: below one of
// corepin's roots, or in a cgroup another workload adopted (ErrTaken). It
// reads /proc/PID/status, stat and cgroup, each bounded.
func (g Guard) CheckPID(name string, pid int) error {
	st, err := readProcStatus(pid)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%w: workload %q: no process %d to adopt", ErrInvalid, name, pid)
		}
		return fmt.Errorf("reading process %d: %w", pid, err)
	}
	switch {
	case st.tgid == os.Getpid():
		return fmt.Errorf("%w: workload %q: pid %d is the agent itself (thread of process %d)", ErrInvalid, name, pid, st.tgid)
	case st.state == 'Z' || st.state == 'X':
		return fmt.Errorf("%w: workload %q: process %d is a zombie (exited, not yet reaped); nothing runs to adopt", ErrInvalid, name, pid)
	case st.kthread:
		return fmt.Errorf("%w: workload %q: pid %d is a kernel thread; corepin adopts user processes", ErrInvalid, name, pid)
	case st.tgid != pid:
		return fmt.Errorf("%w: workload %q: pid %d is a thread of process %d; a group holds whole processes, give pid %d",
			ErrInvalid, name, pid, st.tgid, st.tgid)
	}
	cgs, err := procCgroups(pid)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%w: workload %q: no process %d to adopt", ErrInvalid, name, pid)
		}
		return fmt.Errorf("reading the cgroups of process %d: %w", pid, err)
	}
	for _, c := range cgs {
		for _, r := range g.Roots() {
			if within(c, r) {
				return fmt.Errorf("%w: workload %q: process %d runs in corepin's group %s; delete its workload or run first",
					ErrTaken, name, pid, c)
			}
		}
		for _, other := range slices.Sorted(maps.Keys(g.Adopted)) {
			if oc := path.Clean("/" + g.Adopted[other]); within(c, oc) {
				return fmt.Errorf("%w: workload %q: process %d runs in cgroup %s, adopted by workload %q", ErrTaken, name, pid, c, other)
			}
		}
	}
	return nil
}

// procStatus is what checkPID reads of a process.
type procStatus struct {
	tgid    int
	state   byte
	kthread bool
}

// readProcStatus reads Tgid and State from /proc/PID/status and the
// kernel-thread flag from /proc/PID/stat (PID may be a thread id).
func readProcStatus(pid int) (procStatus, error) {
	b, err := readBounded(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return procStatus{}, err
	}
	var st procStatus
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch k {
		case "Tgid":
			if st.tgid, err = strconv.Atoi(v); err != nil {
				return procStatus{}, fmt.Errorf("reading /proc/%d/status: Tgid %q: %w", pid, v, err)
			}
		case "State":
			if v != "" {
				st.state = v[0]
			}
		}
	}
	if st.tgid <= 0 || st.state == 0 {
		return procStatus{}, fmt.Errorf("reading /proc/%d/status: no Tgid or State line", pid)
	}
	b, err = readBounded(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStatus{}, err
	}
	// The command name (field 2) may hold spaces and parentheses: the
	// fields that follow start after its last ')'.
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	if i < 0 || len(f) < 7 {
		return procStatus{}, fmt.Errorf("reading /proc/%d/stat: %d fields after the name", pid, len(f))
	}
	flags, err := strconv.ParseUint(f[6], 10, 64)
	if err != nil {
		return procStatus{}, fmt.Errorf("reading /proc/%d/stat: flags %q: %w", pid, f[6], err)
	}
	st.kthread = flags&pfKthread != 0
	return st, nil
}

// procCgroups returns the cgroup paths of process pid in every hierarchy
// (/proc/PID/cgroup: "ID:CONTROLLERS:PATH" per line), cleaned.
func procCgroups(pid int) ([]string, error) {
	b, err := readBounded(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.SplitN(l, ":", 3)
		if len(f) != 3 {
			continue
		}
		out = append(out, path.Clean("/"+strings.TrimSuffix(f[2], " (deleted)")))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("reading /proc/%d/cgroup: no cgroup lines", pid)
	}
	return out, nil
}

// readBounded reads at most maxProcFile bytes of file.
func readBounded(file string) ([]byte, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxProcFile))
}
