package e2ekubelet

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/corepin/corepin/internal/testutil"
	"github.com/corepin/corepin/test/kube/kubetest"
)

// Images of the node, built without a registry (umoci, skopeo) and
// imported into the private containerd's k8s.io namespace.
const (
	pauseImage   = "localhost/corepin/pause:1"
	corepinImage = "localhost/corepin/corepin:e2e"
)

// buildImages builds the sandbox image and a busybox image with the
// corepin binary at /bin/corepin, as docker archives in dir.
func buildImages(t *testing.T, dir, corepin string) (pause, image string) {
	t.Helper()
	w := filepath.Join(dir, "img")
	if err := os.MkdirAll(w, 0o755); err != nil {
		t.Fatal(err)
	}
	sh := fmt.Sprintf(`set -e
cd %[1]s
umoci init --layout oci
umoci new --image oci:base
umoci unpack --image oci:base bundle
mkdir -p bundle/rootfs/bin bundle/rootfs/etc bundle/rootfs/tmp
chmod 1777 bundle/rootfs/tmp
cp /bin/busybox bundle/rootfs/bin/busybox
chroot bundle/rootfs /bin/busybox --install -s /bin
echo 'root:x:0:0:root:/:/bin/sh' > bundle/rootfs/etc/passwd
echo 'root:x:0:' > bundle/rootfs/etc/group
umoci repack --image oci:busybox bundle
umoci config --image oci:busybox --tag pause --config.cmd /bin/sleep --config.cmd infinity
umoci unpack --image oci:busybox bundle2
cp %[2]s bundle2/rootfs/bin/corepin
umoci repack --image oci:corepin bundle2
umoci config --image oci:corepin --config.cmd /bin/sh --config.env PATH=/bin
skopeo copy oci:oci:pause docker-archive:pause.tar:%[3]s
skopeo copy oci:oci:corepin docker-archive:corepin.tar:%[4]s
rm -rf bundle bundle2 oci
`, w, corepin, pauseImage, corepinImage)
	run(t, os.Environ(), "sh", "-c", sh)
	return filepath.Join(w, "pause.tar"), filepath.Join(w, "corepin.tar")
}

// containerdConfig is ../shared/kube-testing.md §2's private containerd:
// every socket, state and runc root under dir, NRI on with its socket
// under dir, oom_score_adj restricted (this machine lacks
// CAP_SYS_RESOURCE). The pods use the host network, so no CNI plugin ever
// runs, but the CRI reports NetworkReady=false ("cni plugin not
// initialized") without a network configuration, and the kubelet keeps
// the node NotReady: cniConfig gives it one.
func containerdConfig(dir string) string {
	return testutil.ContainerdConfig(dir, pauseImage, "/usr/lib/cni")
}

// cniConfig is the node's network configuration: loopback only, which
// would give a pod without the host network a network namespace holding
// lo and nothing else. It is never invoked here (all pods use the host
// network); it exists so that the runtime reports its network ready.
const cniConfig = `{"cniVersion": "1.0.0", "name": "corepin-e2e-lo", "plugins": [{"type": "loopback"}]}`

// cri is a client of the private containerd's CRI, for readiness and for
// removing every pod sandbox at teardown (the kubelet is stopped by then).
type cri struct {
	conn *grpc.ClientConn
	rt   runtimeapi.RuntimeServiceClient
}

func dialCRI(t *testing.T, sock string) *cri {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	return &cri{conn: conn, rt: runtimeapi.NewRuntimeServiceClient(conn)}
}

// waitUp polls the CRI Version every 50 ms.
func (c *cri) waitUp(t *testing.T, p *kubetest.Proc, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := c.rt.Version(ctx, &runtimeapi.VersionRequest{})
		cancel()
		if err == nil {
			return time.Since(start)
		}
		select {
		case <-p.Done:
			t.Fatalf("containerd exited while starting:\n%s", kubetest.Tail(p.Log.String(), 6<<10))
		default:
		}
		if time.Since(start) > limit {
			t.Fatalf("containerd's CRI did not answer in %v: %v\n%s", limit, err, kubetest.Tail(p.Log.String(), 6<<10))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// removeAll stops and removes every pod sandbox (and so its containers
// and their shims); it returns how many it removed.
func (c *cri) removeAll(t *testing.T) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l, err := c.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		t.Errorf("listing pod sandboxes: %v", err)
		return 0
	}
	for _, s := range l.Items {
		if _, err := c.rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: s.Id}); err != nil {
			t.Errorf("stopping sandbox %s: %v", s.Metadata.GetName(), err)
		}
		if _, err := c.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: s.Id}); err != nil {
			t.Errorf("removing sandbox %s: %v", s.Metadata.GetName(), err)
		}
	}
	return len(l.Items)
}

// nodeIP is the first IPv4 address of an up, non-loopback interface: the
// kubelet refuses a loopback --node-ip, and kube-apiserver reaches the
// kubelet (pod logs) there. A machine without one (a runner with IPv6
// only, or none at all) gets one of the test's own (addNodeIP), as does
// every run with COREPIN_E2E_OWN_NODE_IP=1, which tries that path here.
func nodeIP(t *testing.T) string {
	t.Helper()
	if os.Getenv("COREPIN_E2E_OWN_NODE_IP") != "1" {
		ifs, err := net.Interfaces()
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range ifs {
			if i.Flags&net.FlagUp == 0 || i.Flags&net.FlagLoopback != 0 {
				continue
			}
			addrs, _ := i.Addrs()
			for _, a := range addrs {
				if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil {
					return n.IP.String()
				}
			}
		}
	}
	if os.Geteuid() != 0 {
		missing(t, "no up, non-loopback IPv4 interface for the kubelet's node IP (the kubelet refuses loopback), and no root to add one")
	}
	return addNodeIP(t)
}

// The address addNodeIP adds: one of TEST-NET-1 (RFC 5737), routed
// nowhere; not link-local or loopback, which the kubelet refuses.
const (
	ownLink = "corepin0"
	ownIP   = "192.0.2.10"
)

// addNodeIP gives the machine ownIP until the test ends: on a dummy
// interface of its own, else (a kernel without the dummy driver) on the
// loopback interface, where it is still not a loopback address. Nothing
// outside the machine reaches it; the apiserver reaches the kubelet there
// as on any node IP.
func addNodeIP(t *testing.T) string {
	t.Helper()
	ip := func(args ...string) error {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
		}
		return nil
	}
	if _, err := net.InterfaceByName(ownLink); err == nil {
		ip("link", "del", ownLink) // left by a killed run
	}
	ip("addr", "del", ownIP+"/32", "dev", "lo")
	err := ip("link", "add", ownLink, "type", "dummy")
	if err == nil {
		if err = ip("addr", "add", ownIP+"/32", "dev", ownLink); err == nil {
			err = ip("link", "set", ownLink, "up")
		}
		if err != nil {
			ip("link", "del", ownLink)
			missing(t, "adding node IP %s on %s: %v", ownIP, ownLink, err)
		}
		t.Cleanup(func() {
			if err := ip("link", "del", ownLink); err != nil {
				t.Errorf("removing the node IP: %v", err)
			}
		})
		t.Logf("node IP %s on dummy interface %s", ownIP, ownLink)
		return ownIP
	}
	if err2 := ip("addr", "add", ownIP+"/32", "dev", "lo"); err2 != nil {
		missing(t, "no interface for a node IP: %v; %v", err, err2)
	}
	t.Cleanup(func() {
		if err := ip("addr", "del", ownIP+"/32", "dev", "lo"); err != nil {
			t.Errorf("removing the node IP: %v", err)
		}
	})
	t.Logf("node IP %s on the loopback interface (%v)", ownIP, err)
	return ownIP
}

// missing skips the test for a prerequisite it lacks, or fails it where
// the test must run: make e2e-kubelet sets COREPIN_E2E_REQUIRED=1, so a
// runner without root, a tool or a node IP fails instead of passing empty.
func missing(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("COREPIN_E2E_REQUIRED") == "1" {
		t.Fatalf("COREPIN_E2E_REQUIRED=1 and a prerequisite is missing: "+format, args...)
	}
	t.Skipf("skipping: "+format, args...)
}

// live is what the kernel said about a running container of a sweep pod:
// its first process's affinity (Cpus_allowed_list) and its cpuset
// cgroup's cpuset.cpus.
type live struct{ Affinity, CPUs string }

// span is a container's lifetime as the runtime saw it: from its creation
// (when corepin nri's CreateContainer gave it CPUs) to its exit (when
// StopContainer gives them back); Finished is the last time the watcher
// saw it where the runtime no longer reported its exit.
type span struct{ Created, Finished time.Time }

// watched is what the watcher saw: the kernel's view of each sweep
// container it saw running, and each one's lifetime, keyed by pod name.
type watched struct {
	lives map[string]live
	spans map[string]span
}

// watch polls the CRI every interval until ctx ends and records, for
// each sweep container, the kernel's view of it while it ran and its
// lifetime; the returned function waits for the poller and hands both
// over. Containers that end between listing and reading are skipped.
func (c *cri) watch(ctx context.Context, interval time.Duration) func() watched {
	w := watched{lives: map[string]live{}, spans: map[string]span{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		read, ended := map[string]bool{}, map[string]bool{}
		for {
			l, err := c.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
			now := time.Now()
			if err == nil {
				for _, ctr := range l.Containers {
					pod := ctr.Labels["io.kubernetes.pod.name"]
					if pod == "" {
						continue
					}
					s, ok := w.spans[pod]
					if !ok {
						s.Created = time.Unix(0, ctr.CreatedAt)
					}
					if !ended[ctr.Id] {
						s.Finished = now
					}
					switch ctr.State {
					case runtimeapi.ContainerState_CONTAINER_RUNNING:
						if !read[ctr.Id] {
							if v, ok := c.liveOf(ctx, ctr.Id); ok {
								read[ctr.Id] = true
								w.lives[pod] = v
							}
						}
					case runtimeapi.ContainerState_CONTAINER_EXITED:
						if ended[ctr.Id] {
							break
						}
						st, err := c.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: ctr.Id})
						if err == nil && st.Status.GetFinishedAt() > 0 {
							ended[ctr.Id] = true
							s.Finished = time.Unix(0, st.Status.FinishedAt)
						}
					}
					w.spans[pod] = s
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return func() watched { <-done; return w }
}

func (c *cri) liveOf(ctx context.Context, id string) (live, bool) {
	st, err := c.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id, Verbose: true})
	if err != nil {
		return live{}, false
	}
	var info struct {
		Pid int `json:"pid"`
	}
	if err := json.Unmarshal([]byte(st.Info["info"]), &info); err != nil || info.Pid == 0 {
		return live{}, false
	}
	return liveOfPid(info.Pid)
}

// liveOfPid is the kernel's view of process pid: its affinity and its
// cpuset cgroup's cpuset.cpus.
func liveOfPid(pid int) (live, bool) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return live{}, false
	}
	cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return live{}, false
	}
	var v live
	for _, line := range strings.Split(string(status), "\n") {
		if s, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			v.Affinity = strings.TrimSpace(s)
		}
	}
	for _, line := range strings.Split(string(cg), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 && slices.Contains(strings.Split(parts[1], ","), "cpuset") {
			b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/cpuset", parts[2], "cpuset.cpus"))
			if err != nil {
				return live{}, false
			}
			v.CPUs = strings.TrimSpace(string(b))
		}
	}
	return v, v.Affinity != "" && v.CPUs != ""
}
