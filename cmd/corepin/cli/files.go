package cli

import (
	"os"

	"github.com/corepin/corepin/internal/userfile"
)

// maxSpecBytes bounds a --spec file (bench, kube jobs, kube run).
const maxSpecBytes = 1 << 20

// readFlagFile reads the file named by flag: a regular file (a named pipe
// or a device is refused at once, never waited on or read without end) of
// at most limit bytes. Any problem with it is bad input naming the flag.
func readFlagFile(flag, path string, limit int64) ([]byte, error) {
	b, err := userfile.Read(path, limit)
	if err != nil {
		return nil, Usagef("reading %s: %w", flag, err)
	}
	return b, nil
}

// openFlagFile opens the regular file named by flag for a reader that caps
// what it reads itself (userfile.Open); any problem is bad input naming
// the flag.
func openFlagFile(flag, path string) (*os.File, error) {
	f, err := userfile.Open(path)
	if err != nil {
		return nil, Usagef("%s: %w", flag, err)
	}
	return f, nil
}
