package store

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corepin/corepin/measure"
)

// NewRun builds the metadata of a run that starts now on this machine: the
// one constructor for every command that records one (run, bench). params
// (the command's flags or experiment parameters) and topology (the
// `corepin topo -o json` document) are stored as JSON; the kernel release,
// host name and this process's identity (Owner) are read here.
func NewRun(command string, params any, version, topologySummary string, topology any) (Run, error) {
	p, err := json.Marshal(params)
	if err != nil {
		return Run{}, fmt.Errorf("encoding run parameters: %w", err)
	}
	t, err := json.Marshal(topology)
	if err != nil {
		return Run{}, fmt.Errorf("encoding run topology: %w", err)
	}
	host, _ := os.Hostname() // an unnamed host is recorded as ""
	var owner string
	if self, err := measure.Self(); err == nil {
		owner = self.String() // without it the run is never marked interrupted
	}
	return Run{
		StartedAt: time.Now(), Command: command, Params: p, CorepinVersion: version,
		Kernel: KernelRelease(), Hostname: host, TopologySummary: topologySummary, Topology: t,
		Owner: owner,
	}, nil
}

// KernelRelease returns uname -r, or "" where uname fails.
func KernelRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}
