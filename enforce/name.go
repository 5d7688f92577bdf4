package enforce

import (
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/corepin/corepin/measure"
)

// MaxNameLen bounds a group or root name. The directory name adds the
// owner's pid and start time, and stays well below NAME_MAX (255).
const MaxNameLen = 64

// ValidateName reports whether name may name a group or corepin's root:
// 1 to MaxNameLen ASCII letters, digits, '-', '_' or '.', not starting with
// '.' or '-', and not containing "..". Such a name is a single path element
// that cannot climb out of its parent; all cgroup paths are opened through
// os.Root besides, so even a bug here cannot write outside a mount. The
// error wraps ErrInvalidName.
func ValidateName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: empty", ErrInvalidName)
	}
	if len(name) > MaxNameLen {
		return fmt.Errorf("%w: %q longer than %d bytes", ErrInvalidName, name, MaxNameLen)
	}
	if name[0] == '.' || name[0] == '-' {
		return fmt.Errorf("%w: %q starts with %q", ErrInvalidName, name, name[0])
	}
	if strings.Contains(name, "..") {
		return fmt.Errorf("%w: %q contains \"..\"", ErrInvalidName, name)
	}
	for _, c := range []byte(name) {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
			c == '-', c == '_', c == '.':
		default:
			return fmt.Errorf("%w: %q has byte %q (allowed: letters, digits, '-', '_', '.')",
				ErrInvalidName, name, c)
		}
	}
	return nil
}

// cleanParent turns a parent path given by the user ("/", "",
// "/system.slice/corepin.service") into a path relative to the mount point
// ("." or "system.slice/corepin.service"). It refuses anything that would
// leave the mount.
func cleanParent(p string) (string, error) {
	rel := path.Clean("/" + p)[1:]
	if rel == "" {
		return ".", nil
	}
	for _, el := range strings.Split(rel, "/") {
		if el == ".." || strings.ContainsRune(el, 0) {
			return "", fmt.Errorf("%w: parent %q leaves the mount", ErrInvalidName, p)
		}
	}
	return rel, nil
}

// owner identifies a corepin process across pid reuse (see
// measure.Identity): the creator of a group, named in its directory.
type owner = measure.Identity

// groupPrefix starts every group directory corepin creates.
const groupPrefix = "run-"

// dirName is the directory of group name owned by o:
// "run-<pid>-<start>-<name>".
func dirName(o owner, name string) string {
	return groupPrefix + o.String() + "-" + name
}

// parseDirName splits a directory name made by dirName; ok is false for
// anything else, which Cleanup then leaves alone.
func parseDirName(dir string) (o owner, name string, ok bool) {
	rest, ok := strings.CutPrefix(dir, groupPrefix)
	if !ok {
		return owner{}, "", false
	}
	pidStr, rest, ok1 := strings.Cut(rest, "-")
	startStr, name, ok2 := strings.Cut(rest, "-")
	if !ok1 || !ok2 || ValidateName(name) != nil {
		return owner{}, "", false
	}
	pid, err1 := strconv.Atoi(pidStr)
	start, err2 := strconv.ParseUint(startStr, 10, 64)
	if err1 != nil || err2 != nil || pid <= 0 || strconv.Itoa(pid) != pidStr {
		return owner{}, "", false
	}
	return owner{PID: pid, Start: start}, name, true
}

// self is this process as an owner, read once.
var self = measure.Self
