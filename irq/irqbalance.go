package irq

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/corepin/corepin/cpuset"
)

// DefaultBannedFile is where corepin keeps irqbalance's banned CPUs: a
// file of corepin's own, never irqbalance's configuration.
const DefaultBannedFile = "/run/corepin/irqbalance.env"

// WriteBanned writes the CPUs kept clear as irqbalance reads them from
// its environment (irqbalance(1)): IRQBALANCE_BANNED_CPULIST (list
// format, irqbalance >= 1.8) and IRQBALANCE_BANNED_CPUS (hex mask, older
// ones), replacing the file atomically; with no CPU it removes the file.
func WriteBanned(path string, kept cpuset.CPUSet) error {
	if kept.IsEmpty() {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	body := "# Written by corepin (irq_isolate): the CPUs its exclusive workloads keep clear of interrupts.\n" +
		"# Use as irqbalance's EnvironmentFile and restart irqbalance; docs/reference/irq.md.\n" +
		"IRQBALANCE_BANNED_CPULIST=" + kept.String() + "\n" +
		"IRQBALANCE_BANNED_CPUS=" + kept.Mask() + "\n"
	tmp, err := os.CreateTemp(filepath.Dir(path), ".irqbalance-*.env")
	if err != nil {
		return err
	}
	_, werr := tmp.WriteString(body)
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Chmod(tmp.Name(), 0o644)
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), path)
	}
	if werr != nil {
		os.Remove(tmp.Name())
	}
	return werr
}

// maxProcs bounds the processes Irqbalance looks at.
const maxProcs = 1 << 22

// Irqbalance returns the pid of a running irqbalance (a process whose
// comm is "irqbalance") under proc ("" is /proc), or 0.
func Irqbalance(proc string) (int, error) {
	if proc == "" {
		proc = "/proc"
	}
	d, err := os.Open(proc)
	if err != nil {
		return 0, fmt.Errorf("looking for irqbalance: %w", err)
	}
	defer d.Close()
	seen := 0
	for {
		names, err := d.Readdirnames(1024)
		for _, n := range names {
			pid, err := strconv.Atoi(n)
			if err != nil || pid <= 0 {
				continue
			}
			if seen++; seen > maxProcs {
				return 0, fmt.Errorf("looking for irqbalance: more than %d processes", maxProcs)
			}
			if comm(filepath.Join(proc, n, "comm")) == "irqbalance" {
				return pid, nil
			}
		}
		if err == io.EOF {
			return 0, nil
		}
		if err != nil {
			return 0, fmt.Errorf("looking for irqbalance: %w", err)
		}
	}
}

// comm reads a process's comm (at most 64 bytes), "" if it cannot.
func comm(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	b := make([]byte, 64)
	n, _ := io.ReadFull(f, b)
	return strings.TrimSpace(string(b[:n]))
}
