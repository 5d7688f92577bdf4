package nri

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/containerd/nri/pkg/api"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/nodecore"
)

// InfoMount is where a container finds the files of Options.InfoDir: its
// cpuset (InfoCPUSet) and thread count (InfoThreads), current across
// resizes and pool changes.
const (
	InfoMount   = "/run/corepin"
	InfoCPUSet  = "cpuset"
	InfoThreads = "threads"
)

// infoDir is the directory of container id's files under p's InfoDir
// (named as its workload, a safe path element), "" without an InfoDir.
func (p *Plugin) infoDir(id string) string {
	if p.info == "" {
		return ""
	}
	return filepath.Join(p.info, nodecore.ContainerName(id))
}

// threadsOf is the thread count ca's CPUs are worth now: a BE container's
// follows its pool.
func threadsOf(ca nodecore.ContainerAssignment) int {
	if ca.QoS == alloc.BE {
		return max(1, ca.CPUs.Size())
	}
	return max(1, ca.Threads)
}

// writeInfo writes ca's files into its directory, each replaced whole (a
// rename), so that a reader never sees half a file. Without an InfoDir it
// does nothing.
func (p *Plugin) writeInfo(ca nodecore.ContainerAssignment) error {
	dir := p.infoDir(ca.Ref.ID)
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("writing container %s's cpuset file: %w", ca.Ref.ID, err)
	}
	for name, v := range map[string]string{InfoCPUSet: ca.CPUs.String(), InfoThreads: strconv.Itoa(threadsOf(ca))} {
		tmp := filepath.Join(dir, "."+name)
		if err := os.WriteFile(tmp, []byte(v+"\n"), 0o644); err != nil {
			return fmt.Errorf("writing container %s's %s file: %w", ca.Ref.ID, name, err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("writing container %s's %s file: %w", ca.Ref.ID, name, err)
		}
	}
	return nil
}

// noteInfo is writeInfo, logged instead of failing: the files are a
// courtesy, the pin is what counts.
func (p *Plugin) noteInfo(ca nodecore.ContainerAssignment) {
	if err := p.writeInfo(ca); err != nil {
		p.log.Warn("keeping a container's cpuset file", "id", ca.Ref.ID, "err", err)
	}
}

// removeInfo removes container id's files.
func (p *Plugin) removeInfo(id string) {
	if dir := p.infoDir(id); dir != "" {
		if err := os.RemoveAll(dir); err != nil {
			p.log.Warn("removing a container's cpuset file", "id", id, "err", err)
		}
	}
}

// infoMount is the read-only bind mount of ca's directory at InfoMount,
// once its files are written; nil without an InfoDir or when they could
// not be written (the container then starts without them).
func (p *Plugin) infoMount(ca nodecore.ContainerAssignment) *api.Mount {
	dir := p.infoDir(ca.Ref.ID)
	if dir == "" {
		return nil
	}
	if err := p.writeInfo(ca); err != nil {
		p.log.Warn("starting a container without its cpuset file", "id", ca.Ref.ID, "err", err)
		return nil
	}
	return &api.Mount{Destination: InfoMount, Type: "bind", Source: dir, Options: []string{"rbind", "ro"}}
}
