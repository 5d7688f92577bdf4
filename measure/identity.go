package measure

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
)

// Identity names one process across pid reuse: its pid and its start time
// in clock ticks since boot (field 22 of /proc/PID/stat, see proc(5)). A
// pid alone may name another process once the first has died; the pair
// never does within one boot.
type Identity struct {
	PID   int
	Start uint64
}

// IdentityOf reads the identity of pid from procRoot ("/proc" for this
// machine). A process that does not exist gives an error matching
// fs.ErrNotExist.
func IdentityOf(procRoot string, pid int) (Identity, error) {
	if pid <= 0 {
		return Identity{}, fmt.Errorf("reading the identity of pid %d: %w", pid, fs.ErrNotExist)
	}
	st, err := ReadTaskStat(procRoot, pid)
	if err != nil {
		if _, ok := errors.AsType[*fs.PathError](err); ok {
			return Identity{}, err // as os.ReadFile said it
		}
		return Identity{}, fmt.Errorf("reading the identity of pid %d: %w", pid, err)
	}
	return Identity{PID: pid, Start: st.StartTime}, nil
}

// ReadTaskStat reads and parses /proc/PID/stat of pid under procRoot
// ("/proc" for this machine). A process that does not exist gives an
// error matching fs.ErrNotExist.
func ReadTaskStat(procRoot string, pid int) (TaskStat, error) {
	b, err := os.ReadFile(path.Join(procRoot, strconv.Itoa(pid), "stat"))
	if err != nil {
		return TaskStat{}, err
	}
	return ParseTaskStat(b)
}

// Self is this process's identity, read once.
var Self = sync.OnceValues(func() (Identity, error) { return IdentityOf("/proc", os.Getpid()) })

// Alive reports whether id still runs: its pid exists with the same start
// time. A zombie still runs in this sense (its pid is not yet reusable).
// A /proc that cannot be read counts as alive, so callers that free what
// a dead process held err on keeping it.
func (id Identity) Alive(procRoot string) bool {
	cur, err := IdentityOf(procRoot, id.PID)
	if err != nil {
		return !errors.Is(err, fs.ErrNotExist)
	}
	return cur == id
}

// String is "PID-START", the form ParseIdentity reads.
func (id Identity) String() string {
	return strconv.Itoa(id.PID) + "-" + strconv.FormatUint(id.Start, 10)
}

// ParseIdentity reads the String form, strictly: a positive pid in
// canonical decimal, a dash, a start time.
func ParseIdentity(s string) (Identity, error) {
	p, st, ok := strings.Cut(s, "-")
	pid, err1 := strconv.Atoi(p)
	start, err2 := strconv.ParseUint(st, 10, 64)
	if !ok || err1 != nil || err2 != nil || pid <= 0 || strconv.Itoa(pid) != p || strconv.FormatUint(start, 10) != st {
		return Identity{}, fmt.Errorf("parsing process identity %.40q: want PID-START", s)
	}
	return Identity{PID: pid, Start: start}, nil
}
