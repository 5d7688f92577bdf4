package nodecore

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/store"
	"github.com/corepin/corepin/topology"
)

// CheckPlace refuses, before anything is created, a state file or socket
// path (flag names which) on a kernel file system or below /sys or /proc:
// a directory made in cgroupfs is a cgroup, and /sys/fs/cgroup itself is
// often a tmpfs holding the cgroup mounts. The error suggests example
// instead. Errors wrap ErrInvalid.
func CheckPlace(flag, path, example string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("%w: %s %s: %v", ErrInvalid, flag, path, err)
	}
	for _, k := range []string{"/sys", "/proc"} {
		if within(abs, k) {
			return fmt.Errorf("%w: %s %s is below %s, the kernel's interface, not storage (a directory made under /sys/fs/cgroup is a cgroup); "+
				"give a path on a disk, such as %s", ErrInvalid, flag, path, k, example)
		}
	}
	dir, name, err := store.KernelFS(abs)
	if err != nil {
		return fmt.Errorf("%w: %s %s: %v", ErrInvalid, flag, path, err)
	}
	if name != "" {
		return fmt.Errorf("%w: %s %s: %s is on %s, a kernel file system, not storage; give a path on a disk, such as %s",
			ErrInvalid, flag, path, dir, name, example)
	}
	return nil
}

// DefaultState is the node's state file, shared by the agent, the NRI
// plugin and local runs, when no flag or config names another.
const DefaultState = "/var/lib/corepin/agent.db"

// OpenState opens the state file at path, which names every workload and
// command: it is made 0600 from its creation (SQLite gives its -wal and
// -shm files the database's mode), and an existing file, -wal or -shm
// readable by others (made by an older corepin) is made 0600.
func OpenState(path string) (*store.DB, error) {
	// Not made where it must not be: store.Open refuses that (ErrPlace).
	if CheckPlace("state", path, "") == nil {
		if f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
			f.Close() // SQLite takes an empty file for an empty database
		}
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := private(p); err != nil {
			return nil, err
		}
	}
	return store.Open(path)
}

// private makes the regular file p 0600 if others or its group may read
// it; a missing file, or one another user owns, is left alone.
func private(p string) error {
	fi, err := os.Lstat(p)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o077 == 0 {
		return nil
	}
	if err := os.Chmod(p, fi.Mode().Perm()&0o600); err != nil && !errors.Is(err, fs.ErrPermission) {
		return fmt.Errorf("making the state file private: %w", err)
	}
	return nil
}

// LoadState builds the allocator state of the assignments as under the
// node settings cfg on machine t, with the record of each by name.
func LoadState(t *topology.Topology, cfg alloc.NodeSettings, as []store.Assignment) (*alloc.State, map[string]Record, error) {
	st, err := alloc.NewState(t, cfg)
	if err != nil {
		return nil, nil, err
	}
	recs := make(map[string]Record, len(as))
	for _, a := range as {
		rec, aa, err := DecodeAssignment(a)
		if err != nil {
			return nil, nil, err
		}
		recs[a.Name] = rec
		if (aa.QoS == alloc.LSE || aa.QoS == alloc.LSR) && !aa.CPUs.IsSubsetOf(t.Online()) {
			// CPUs the kernel took offline after they were placed (an
			// agent restarted meanwhile discovered t without them): the
			// allocator holds the online part, never places CPUs t does
			// not have online, and the agent's CheckOnline reports the rest.
			if aa.CPUs = aa.CPUs.Intersection(t.Online()); aa.CPUs.IsEmpty() {
				continue
			}
			var added []int
			for _, c := range aa.Added {
				if aa.CPUs.Contains(c) {
					added = append(added, c)
				}
			}
			if aa.Added = added; len(added) == aa.CPUs.Size() {
				aa.Added = nil // its promised CPUs all offline: what is online is what it holds
			}
		}
		if err := st.Assign(aa); err != nil {
			return nil, nil, fmt.Errorf("loading assignment %q: %w", a.Name, err)
		}
	}
	return st, recs, nil
}

// stateFrom is the allocator state holding as.
func stateFrom(t *topology.Topology, cfg alloc.NodeSettings, as []store.Assignment) (*alloc.State, error) {
	st, _, err := LoadState(t, cfg, as)
	return st, err
}

// DecodeAssignment reads a stored assignment's record and its allocator
// form: the one place the state file's request documents and cpuset
// strings are read back.
func DecodeAssignment(a store.Assignment) (Record, alloc.Assignment, error) {
	var rec Record
	if len(a.Request) > 0 {
		if err := json.Unmarshal(a.Request, &rec); err != nil {
			return rec, alloc.Assignment{}, fmt.Errorf("reading assignment %q: %w", a.Name, err)
		}
	}
	set, err := cpuset.Parse(a.Cpuset)
	if err != nil {
		return rec, alloc.Assignment{}, fmt.Errorf("reading assignment %q: %w", a.Name, err)
	}
	return rec, alloc.Assignment{ID: a.Name, QoS: alloc.QoS(a.QoS), CPUs: set, MilliCPUs: rec.MilliCPUs,
		Exclusive: alloc.Exclusive(rec.Excl), Added: rec.Added}, nil
}
