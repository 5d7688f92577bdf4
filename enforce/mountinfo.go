package enforce

import (
	"io"

	"github.com/corepin/corepin/internal/mountinfo"
)

// Mount is one line of /proc/PID/mountinfo; see package mountinfo.
type Mount = mountinfo.Mount

// ParseMountinfo reads the mountinfo format; see mountinfo.Parse.
func ParseMountinfo(r io.Reader) ([]Mount, error) { return mountinfo.Parse(r) }

// errMountLine is wrapped by ParseMountinfo's errors about malformed lines.
var errMountLine = mountinfo.ErrMalformed
