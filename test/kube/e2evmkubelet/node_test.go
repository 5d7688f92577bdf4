package e2evmkubelet

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
)

// The node as the machine runs it.
const (
	nodeName = "vmnode"
	nodeIP   = "10.0.2.15" // qemu's user network: the guest
	hostIP   = "10.0.2.2"  // the host's loopback, seen from the guest
	reserved = "0-1"       // one whole core of NUMA node 0
)

// initScript is /init: it mounts what a node needs (cgroup v2 with the
// controllers the kubelet asks for), brings up the network, starts
// containerd, imports the two images, attaches corepin nri and starts the
// kubelet, each step marked "@@MARK NAME" on the second serial port
// (fd 3). The components' output goes to the console (the first port).
// Then, every second, the last line of each container log goes to fd 3
// as "@@LOG PATH LINE"; the host ends the machine.
var initScript = `#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/usr/local/bin:/usr/sbin:/bin HOME=/root
mkdir -p /proc /sys /dev /tmp /run /root /var/lib /var/log /etc /opt/cni/bin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
mkdir -p /dev/pts /dev/shm; mount -t devpts devpts /dev/pts; mount -t tmpfs shm /dev/shm
mount -t tmpfs tmp /tmp; mount -t tmpfs run /run
mount -t cgroup2 none /sys/fs/cgroup
echo "+cpuset +cpu +io +memory +hugetlb +pids" > /sys/fs/cgroup/cgroup.subtree_control
exec 3>/dev/ttyS1
mark() { echo "@@MARK $1" >&3; }
mark booted
hostname ` + nodeName + `
for m in ` + strings.Join(netModules, " ") + `; do insmod /lib/modules/$m.ko; done
ip link set lo up; ip link set eth0 up
ip addr add ` + nodeIP + `/24 dev eth0; ip route add default via ` + hostIP + `
echo "@@TOPO $(cat /sys/devices/system/node/node0/cpulist) $(cat /sys/devices/system/node/node1/cpulist) $(cat /sys/devices/system/cpu/cpu*/topology/thread_siblings_list | sort -u | tr '\n' ' ')" >&3
# out NAME copies a component's output to the console, prefixed, less the
# lines that repeat every second (each byte costs the emulated UART).
out() { awk -v p="[$1] " '!/level=info|Housekeeping took longer|device \\"rootfs\\"|mirror pod/ { print p $0; fflush() }' > /dev/ttyS0; }
containerd --config /etc/containerd.toml 2>&1 | out containerd &
until [ -S /run/containerd/containerd.sock ]; do sleep 0.2; done
mark containerd
for i in /images/*.tar; do ctr -n k8s.io images import --local --snapshotter native $i 2>&1 | out ctr; done
mark images
mkdir -p /var/lib/corepin/info
corepin nri --nri-socket /run/nri/nri.sock --config /etc/corepin.yaml --state /var/lib/corepin/state.db \
  --info-dir /var/lib/corepin/info 2>&1 | tee /tmp/nri.log | out nri &
until grep -q msg=synchronized /tmp/nri.log 2>/dev/null; do sleep 0.2; done
mark nri
kubelet --config=/etc/kubelet.yaml --kubeconfig=/etc/kubeconfig --hostname-override=` + nodeName + ` \
  --node-ip=` + nodeIP + ` --root-dir=/var/lib/kubelet 2>&1 | out kubelet &
mark kubelet
while :; do
  for f in /var/log/pods/*/*/*.log; do
    [ -f "$f" ] && echo "@@LOG $f $(tail -n 1 "$f")" >&3
  done
  sleep 1
done
`

// containerdConfig: the CRI on its default socket, the native snapshotter
// (overlay is a module of the cloud kernel, not loaded here), runc with no
// pivot_root (the root is the initramfs, which pivot_root refuses), NRI
// on its default socket with generous timeouts, a loopback network
// configuration so that the CRI reports its network ready (the pods use
// the host network; no plugin runs).
const containerdConfig = `version = 4
root  = '/var/lib/containerd'
state = '/run/containerd'
[plugins]
  'io.containerd.server.v1.grpc'.address = '/run/containerd/containerd.sock'
  'io.containerd.cri.v1.images'.pinned_images.sandbox = '` + pauseImage + `'
  'io.containerd.cri.v1.images'.snapshotter = 'native'
[plugins.'io.containerd.nri.v1.nri']
  socket_path = '/run/nri/nri.sock'
  # The defaults (5 s, 2 s) are for real CPUs: under emulation corepin's
  # answer to a resize takes longer, and containerd would drop the plugin
  # and apply the update without it.
  plugin_registration_timeout = '60s'
  plugin_request_timeout = '60s'
[plugins.'io.containerd.cri.v1.runtime']
  cni = { conf_dir = '/etc/cni/net.d', bin_dirs = ['/opt/cni/bin'] }
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
  runtime_type = 'io.containerd.runc.v2'
  options = { BinaryName = '/usr/sbin/runc', SystemdCgroup = false, NoPivotRoot = true }
`

const cniConfig = `{"cniVersion": "1.0.0", "name": "vm-lo", "plugins": [{"type": "loopback"}]}`

// kubeletConfig: every field differs from the default for the reason
// beside it.
const kubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# containerd runs runc with SystemdCgroup = false; no systemd here.
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
# corepin nri places the CPUs; the static CPU manager would overwrite them
# (and refuses the resize of a pinned pod).
cpuManagerPolicy: none
failSwapOn: false
authentication: {anonymous: {enabled: true}, webhook: {enabled: false}, x509: {}}
authorization: {mode: AlwaysAllow}
readOnlyPort: 0
# No iptables in the machine.
makeIPTablesUtilChains: false
# The root is the initramfs, whose size cadvisor can not measure.
localStorageCapacityIsolation: false
resolvConf: ""
# Under emulation on a loaded host a container's start can take minutes
# (default 2m: the kubelet cancels it and starts again).
runtimeRequestTimeout: 10m
# Faster Ready and pod status under emulation.
nodeStatusUpdateFrequency: 2s
syncFrequency: 10s
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 50Mi}
`

// corepinConfig: CPUs 0-1 (one whole core) stay with the system.
const corepinConfig = "reserved_cpus: \"" + reserved + "\"\npolicy: corepin\n"

// kubeconfig is the kubelet's: the host's admin kubeconfig (kubetest's,
// its API server's self-signed certificate not checked) with the API
// server's address as the machine reaches it, through qemu's user network.
func kubeconfig(hostKubeconfig, api string) (string, error) {
	data, err := os.ReadFile(hostKubeconfig)
	if err != nil {
		return "", err
	}
	u, err := url.Parse(api)
	if err != nil {
		return "", err
	}
	if !strings.Contains(string(data), api) {
		return "", fmt.Errorf("%s does not name the API server %s", hostKubeconfig, api)
	}
	return strings.ReplaceAll(string(data), api, "https://"+net.JoinHostPort(hostIP, u.Port())), nil
}
