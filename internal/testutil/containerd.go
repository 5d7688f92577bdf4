package testutil

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Runc is the runc the private containerd runs: the one make runc-bin
// links beside containerd ($COREPIN_E2E_BIN/runc, a pinned release that
// applies the OCI process.scheduler, which NRI's SetLinuxScheduler sets),
// else Debian's /usr/sbin/runc (1.1 on bookworm, which ignores it).
func Runc() string {
	if dir := os.Getenv("COREPIN_E2E_BIN"); dir != "" {
		if p, err := filepath.EvalSymlinks(filepath.Join(dir, "runc")); err == nil {
			if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
				return p
			}
		}
	}
	return "/usr/sbin/runc"
}

// ContainerdConfig is the private containerd of the end-to-end tests
// (../shared/kube-testing.md §2): every socket, state and runc root under
// dir, the CRI's sandbox image sandbox, NRI on with its socket under dir
// and its default validator enabled (so a pod can require a plugin),
// oom_score_adj restricted (these machines lack CAP_SYS_RESOURCE), and the
// CNI configuration under dir, with its plugins looked for in cniBinDirs
// (none: containerd's default).
func ContainerdConfig(dir, sandbox string, cniBinDirs ...string) string {
	cni := fmt.Sprintf("conf_dir = '%s/cni/net.d'", dir)
	if len(cniBinDirs) > 0 {
		cni += ", bin_dirs = ['" + strings.Join(cniBinDirs, "', '") + "']"
	}
	return fmt.Sprintf(`version = 4
root  = '%[1]s/root'
state = '%[1]s/state'
imports = []
[plugins]
  'io.containerd.server.v1.grpc'.address = '%[1]s/run/containerd.sock'
  'io.containerd.server.v1.ttrpc'.address = '%[1]s/run/containerd.sock.ttrpc'
  'io.containerd.internal.v1.opt'.path = '%[1]s/opt'
  'io.containerd.shim.v1.manager'.socket_dir = '%[1]s/run/s'
  'io.containerd.cri.v1.images'.pinned_images.sandbox = '%[2]s'
[plugins.'io.containerd.nri.v1.nri']
  socket_path = '%[1]s/run/nri.sock'
  plugin_path = '%[1]s/nri/plugins'
  plugin_config_path = '%[1]s/nri/conf.d'
  default_validator = { enable = true }
[plugins.'io.containerd.cri.v1.runtime']
  netns_mounts_under_state_dir = true
  restrict_oom_score_adj = true
  cni = { %[3]s }
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
  runtime_type = 'io.containerd.runc.v2'
  options = { BinaryName = '%[4]s', SystemdCgroup = false, Root = '%[1]s/run/runc' }
`, dir, sandbox, cni, Runc())
}
