package enforce

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"syscall"
	"time"
)

// ProcLister is the optional ability of a group to list the processes in it
// (cgroup.procs). The affinity-only driver has none: a process it was
// given can leave its process group and is not tracked.
type ProcLister interface {
	// Procs returns the pids of the processes in the group.
	Procs() ([]int, error)
}

// Killer is the optional ability to kill every process in a group, forks
// included: cgroup.kill on cgroup v2 (Linux 5.14), otherwise SIGKILL to
// each listed process, pass after pass until none is left.
type Killer interface {
	Kill() error
}

// ControlFiler is the optional ability of a group to show its control
// files ("cpu.stat", "cpu.pressure", "cgroup.procs") read-only, as the
// fs.FS that measure reads. On cgroup v1 each file is read in the
// hierarchy its prefix names.
type ControlFiler interface {
	ControlFS() fs.FS
}

var (
	_ ProcLister   = (*cgGroup)(nil)
	_ Killer       = (*cgGroup)(nil)
	_ ControlFiler = (*cgGroup)(nil)
)

// killPasses bounds the SIGKILL passes of Kill where there is no
// cgroup.kill: a pass can miss a child forked during it, the next one
// finds it.
const killPasses = 200

// Procs reads cgroup.procs of the group's first hierarchy (AddProc puts a
// process in every hierarchy).
func (g *cgGroup) Procs() ([]int, error) {
	ss, err := readProcs(g.d.hs[0], g.dir)
	if err != nil {
		return nil, fmt.Errorf("listing processes of group %s: %w", g.name, err)
	}
	pids, err := atoiPids(ss)
	if err != nil {
		return nil, fmt.Errorf("listing processes of group %s: %w", g.name, err)
	}
	return pids, nil
}

// Kill kills every process in the group and returns once the group lists
// none, or after about 2 s with an error naming who is left.
func (g *cgGroup) Kill() error {
	if g.d.name == NameV2 {
		if ok, _ := g.d.hs[0].exists(path.Join(g.dir, "cgroup.kill")); ok {
			if err := g.d.hs[0].write(path.Join(g.dir, "cgroup.kill"), "1"); err != nil {
				return fmt.Errorf("killing group %s: %w", g.name, err)
			}
		}
	}
	var left []int
	for pass := 0; pass < killPasses; pass++ {
		pids, err := g.Procs()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return fmt.Errorf("killing group %s: %w", g.name, err)
		}
		if len(pids) == 0 {
			return nil
		}
		for _, pid := range pids {
			if pid > 0 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		left = pids
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("killing group %s: %d processes still in it (pids %v)", g.name, len(left), left[:min(len(left), 5)])
}

// ControlFS returns the group's control files, read-only.
func (g *cgGroup) ControlFS() fs.FS { return groupFS{g} }

// groupFS reads a group's control files through the hierarchy holding
// each one. Files are read whole on Open (they are small and change
// between reads, so one read is one snapshot).
type groupFS struct{ g *cgGroup }

func (f groupFS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) || strings.Contains(name, "/") || name == "." {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	h := f.g.d.pick(name)
	if strings.HasPrefix(name, "cgroup.") {
		h = f.g.d.hs[0]
	}
	if h == nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	s, err := h.read(path.Join(f.g.dir, name))
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return &memFile{name: name, r: bytes.NewReader([]byte(s + "\n"))}, nil
}

// memFile is a control file's content read at Open.
type memFile struct {
	name string
	r    *bytes.Reader
}

func (m *memFile) Read(p []byte) (int, error) { return m.r.Read(p) }
func (m *memFile) Close() error               { return nil }
func (m *memFile) Stat() (fs.FileInfo, error) { return memInfo{m}, nil }

var _ io.Reader = (*memFile)(nil)

type memInfo struct{ m *memFile }

func (i memInfo) Name() string       { return i.m.name }
func (i memInfo) Size() int64        { return i.m.r.Size() }
func (i memInfo) Mode() fs.FileMode  { return 0o444 }
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return false }
func (i memInfo) Sys() any           { return nil }
