package e2enode

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// crio is a private CRI-O (make e2e-node-crio): bin holds crio, pinns and
// runc (make crio-bin), conmon is Debian's. Everything it keeps, its
// sockets, its containers/storage (vfs: no overlay mounts to clean up) and
// the files it would otherwise keep under /var/lib/crio, /var/run/crio and
// /etc/sysconfig, lies under the node's directory.
type crio struct{ bin string }

func (crio) name() string { return "crio" }

func (crio) sock(dir string) string { return filepath.Join(dir, "run", "crio.sock") }

// crioConfig is CRI-O's configuration for a node in dir: cgroupfs (no
// systemd here), runc of make runc-bin under conmon with its monitor in the
// pod's cgroup (the one place cgroupfs allows), NRI on with its socket
// under dir and the default validator enabled (as the containerd of
// testutil.ContainerdConfig), the sandbox image pauseImage run by its own
// command, no host port mapping (no iptables) and no irqbalance file
// restored at start.
func crioConfig(dir, bin, pauseImage string) string {
	return fmt.Sprintf(`[crio]
root = '%[1]s/storage'
runroot = '%[1]s/run/storage'
storage_driver = 'vfs'
log_dir = '%[1]s/logs'
version_file = '%[1]s/run/version'
version_file_persist = '%[1]s/lib/version'
clean_shutdown_file = '%[1]s/lib/clean.shutdown'

[crio.api]
listen = '%[1]s/run/crio.sock'
stream_address = '127.0.0.1'
stream_port = '0'

[crio.runtime]
cgroup_manager = 'cgroupfs'
default_runtime = 'runc'
selinux = false
hooks_dir = []
container_exits_dir = '%[1]s/run/exits'
container_attach_socket_dir = '%[1]s/run'
namespaces_dir = '%[1]s/run/ns'
pinns_path = '%[2]s/pinns'
irqbalance_config_file = '%[1]s/irqbalance'
irqbalance_config_restore_file = ''
disable_hostport_mapping = true

[crio.runtime.runtimes.runc]
runtime_path = '%[2]s/runc'
runtime_type = 'oci'
runtime_root = '%[1]s/run/runc'
monitor_path = '/usr/bin/conmon'
monitor_cgroup = 'pod'

[crio.image]
pause_image = '%[3]s'
pause_command = ''
signature_policy = '%[1]s/policy.json'

[crio.network]
network_dir = '%[1]s/cni/net.d'
plugin_dirs = ['/usr/lib/cni']

[crio.nri]
enable_nri = true
nri_listen = '%[1]s/run/nri.sock'
nri_plugin_dir = '%[1]s/nri/plugins'
nri_plugin_config_dir = '%[1]s/nri/conf.d'

[crio.nri.default_validator]
nri_enable_default_validator = true
`, dir, bin, pauseImage)
}

func (c crio) configure(n *node) {
	n.t.Helper()
	files := map[string]string{
		"crio.conf": crioConfig(n.dir, c.bin, pauseImage),
		// Only local images: nothing is pulled, nothing to verify.
		"policy.json": `{"default": [{"type": "insecureAcceptAnything"}]}`,
	}
	for _, d := range []string{"crio.conf.d", "cni/net.d", "nri/plugins", "nri/conf.d", "lib", "run"} {
		if err := os.MkdirAll(filepath.Join(n.dir, d), 0o700); err != nil {
			n.t.Fatal(err)
		}
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(n.dir, name), []byte(body), 0o600); err != nil {
			n.t.Fatal(err)
		}
	}
}

func (c crio) command(dir string) *exec.Cmd {
	// An empty drop-in directory: /etc/crio/crio.conf.d is not read.
	return exec.Command(filepath.Join(c.bin, "crio"), "--config", filepath.Join(dir, "crio.conf"),
		"--config-dir", filepath.Join(dir, "crio.conf.d"))
}

// load copies each archive's image into CRI-O's containers/storage with
// skopeo, as a registry pull would (CRI-O's CRI has no import).
func (c crio) load(n *node, archives ...string) {
	n.t.Helper()
	store := fmt.Sprintf("containers-storage:[vfs@%s+%s]", filepath.Join(n.dir, "storage"), filepath.Join(n.dir, "run", "storage"))
	for _, a := range archives {
		name := map[string]string{"pause.tar": pauseImage, "busybox.tar": busyboxImage}[filepath.Base(a)]
		if name == "" {
			n.t.Fatalf("no image name for %s", a)
		}
		n.run("skopeo", "copy", "--quiet", "docker-archive:"+a, store+name)
	}
}

// TestNodeWithCRIO runs the scenarios of TestNodeWithContainerd under a
// private CRI-O.
func TestNodeWithCRIO(t *testing.T) {
	bin, corepin := os.Getenv("COREPIN_CRIO_BIN"), os.Getenv("COREPIN_BIN")
	if os.Geteuid() != 0 || bin == "" || corepin == "" {
		missing(t, "needs root, COREPIN_CRIO_BIN (crio, pinns, runc) and COREPIN_BIN; run make e2e-node-crio")
	}
	for _, tool := range []string{"/usr/bin/conmon", "/bin/busybox", filepath.Join(bin, "crio"), filepath.Join(bin, "pinns"), filepath.Join(bin, "runc")} {
		if _, err := os.Stat(tool); err != nil {
			missing(t, "%s missing (make crio-bin; apt-get install conmon busybox-static umoci skopeo)", tool)
		}
	}
	scenarios(t, newNode(t, crio{bin: bin}, bin, corepin))
}
