package e2enode

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/internal/testutil"
	"github.com/corepin/corepin/kube/nri"
	"github.com/corepin/corepin/nodecore"
	"github.com/corepin/corepin/topology"
)

const (
	busyboxImage = "localhost/corepin/busybox:1"
	pauseImage   = "localhost/corepin/pause:1"
	cgroupParent = "/corepin-test"
)

// engine is the container runtime a node runs: containerd or CRI-O. The
// scenarios drive either through the CRI alone; what differs is how each is
// configured, started and handed the test's images.
type engine interface {
	// name is the runtime's name in messages.
	name() string
	// configure writes the runtime's configuration under n.dir.
	configure(n *node)
	// command is the runtime's daemon as configured under dir.
	command(dir string) *exec.Cmd
	// sock is the path of the runtime's CRI socket under dir.
	sock(dir string) string
	// load gives the running runtime the images of these archives
	// (docker-archives, each naming its image).
	load(n *node, archives ...string)
}

// node is one private container runtime with the corepin plugin.
type node struct {
	t       *testing.T
	dir     string // short: unix socket paths stay under 108 bytes
	bin     string // the runtime's binaries, first on its PATH
	eng     engine
	corepin string
	ctd     *exec.Cmd // the runtime's daemon
	plugin  *exec.Cmd
	plugLog string
	rt      runtimeapi.RuntimeServiceClient
	conn    *grpc.ClientConn
	pods    []string
}

func (n *node) sock() string { return n.eng.sock(n.dir) }

func (n *node) run(name string, args ...string) string {
	n.t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "PATH="+n.bin+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		n.t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// images builds the busybox and pause images into cache (once).
func (n *node) images(cache string) (busybox, pause string) {
	n.t.Helper()
	busybox, pause = filepath.Join(cache, "busybox.tar"), filepath.Join(cache, "pause.tar")
	if _, err := os.Stat(pause); err == nil {
		return busybox, pause
	}
	w := n.t.TempDir()
	sh := fmt.Sprintf(`set -e
cd %s
umoci init --layout oci
umoci new --image oci:base
umoci unpack --image oci:base bundle
mkdir -p bundle/rootfs/bin bundle/rootfs/etc bundle/rootfs/tmp
cp /bin/busybox bundle/rootfs/bin/busybox
chroot bundle/rootfs /bin/busybox --install -s /bin
echo 'root:x:0:0:root:/:/bin/sh' > bundle/rootfs/etc/passwd
echo 'root:x:0:' > bundle/rootfs/etc/group
umoci repack --image oci:busybox bundle
umoci config --image oci:busybox --config.cmd /bin/sh --config.env PATH=/bin
umoci config --image oci:busybox --tag pause --config.cmd /bin/sleep --config.cmd infinity
skopeo copy oci:oci:pause docker-archive:pause.tar:%s
skopeo copy oci:oci:busybox docker-archive:busybox.tar:%s
mkdir -p %s
cp busybox.tar pause.tar %s/
`, w, pauseImage, busyboxImage, cache, cache)
	n.run("sh", "-c", sh)
	return busybox, pause
}

// containerd is the private containerd of make e2e-node: bin holds
// containerd, ctr and containerd-shim-runc-v2 (and runc, see testutil.Runc).
type containerd struct{ bin string }

func (containerd) name() string { return "containerd" }

func (containerd) sock(dir string) string { return filepath.Join(dir, "run", "containerd.sock") }

func (containerd) configure(n *node) {
	n.t.Helper()
	cfg := testutil.ContainerdConfig(n.dir, pauseImage)
	if err := os.WriteFile(filepath.Join(n.dir, "containerd.toml"), []byte(cfg), 0o600); err != nil {
		n.t.Fatal(err)
	}
}

func (c containerd) command(dir string) *exec.Cmd {
	return exec.Command(filepath.Join(c.bin, "containerd"), "--config", filepath.Join(dir, "containerd.toml"))
}

func (c containerd) load(n *node, archives ...string) {
	n.t.Helper()
	for _, a := range archives {
		n.run(filepath.Join(c.bin, "ctr"), "--address", n.sock(), "-n", "k8s.io", "images", "import", a)
	}
}

// startRuntime starts the runtime and waits for its CRI.
func (n *node) startRuntime() {
	n.t.Helper()
	logPath := filepath.Join(n.dir, n.eng.name()+".log")
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		n.t.Fatal(err)
	}
	cmd := n.eng.command(n.dir)
	cmd.Env = append(os.Environ(), "PATH="+n.bin+":"+os.Getenv("PATH"))
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		n.t.Fatal(err)
	}
	log.Close()
	n.ctd = cmd
	if n.conn == nil {
		conn, err := grpc.NewClient("unix://"+n.sock(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			n.t.Fatal(err)
		}
		n.conn, n.rt = conn, runtimeapi.NewRuntimeServiceClient(conn)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := n.rt.Version(ctx, &runtimeapi.VersionRequest{})
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("%s's CRI did not answer in 30s: %v (log %s)", n.eng.name(), err, logPath)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (n *node) stopRuntime() {
	n.t.Helper()
	if n.ctd == nil {
		return
	}
	n.ctd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { n.ctd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		n.ctd.Process.Kill()
		<-done
	}
	n.ctd = nil
}

// startPlugin starts `corepin nri` and waits for its first Synchronize.
func (n *node) startPlugin() {
	n.t.Helper()
	n.plugLog = filepath.Join(n.dir, fmt.Sprintf("nri-%d.log", time.Now().UnixNano()))
	log, err := os.Create(n.plugLog)
	if err != nil {
		n.t.Fatal(err)
	}
	cmd := exec.Command(n.corepin, "nri", "--nri-socket", filepath.Join(n.dir, "run", "nri.sock"),
		"--config", filepath.Join(n.dir, "corepin.yaml"), "--state", filepath.Join(n.dir, "state.db"))
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		n.t.Fatal(err)
	}
	log.Close()
	n.plugin = cmd
	n.waitSyncs(1)
}

// waitSyncs waits until the current plugin has synchronised k times.
func (n *node) waitSyncs(k int) {
	n.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, _ := os.ReadFile(n.plugLog)
		if bytes.Count(b, []byte("msg=synchronized")) >= k {
			return
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("the plugin did not synchronise %d times in 30s:\n%s", k, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (n *node) killPlugin() {
	if n.plugin != nil {
		n.plugin.Process.Kill()
		n.plugin.Wait()
		n.plugin = nil
	}
}

// pod asks for a pod with one busybox container.
type pod struct {
	name        string
	labels      map[string]string
	annotations map[string]string
	shares      int64
	quota       int64
}

func (n *node) startPod(p pod) (ctrID string, took time.Duration) {
	n.t.Helper()
	ctrID, took, err := n.tryPod(p)
	if err != nil {
		n.t.Fatal(err)
	}
	return ctrID, took
}

// tryPod runs p's sandbox (failing the test if it can not) and returns
// the error of creating or starting its container.
func (n *node) tryPod(p pod) (ctrID string, took time.Duration, err error) {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	uid := fmt.Sprintf("%s-%d", p.name, time.Now().UnixNano())
	logDir := filepath.Join(n.dir, "logs", uid)
	os.MkdirAll(logDir, 0o755)
	// The kubelet's defaults but the host network (no CNI): a PID namespace
	// per container, so CRI-O runs no pause container (whose oom_score_adj
	// -998 needs CAP_SYS_RESOURCE, which these machines lack).
	ns := &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE, Pid: runtimeapi.NamespaceMode_CONTAINER}
	sc := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: p.name, Namespace: "default", Uid: uid},
		Labels:   p.labels, Annotations: p.annotations, LogDirectory: logDir,
		Linux: &runtimeapi.LinuxPodSandboxConfig{CgroupParent: cgroupParent + "/pod" + uid,
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{NamespaceOptions: ns}},
	}
	t0 := time.Now()
	rp, err := n.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sc})
	if err != nil {
		n.t.Fatalf("RunPodSandbox %s: %v", p.name, err)
	}
	n.pods = append(n.pods, rp.PodSandboxId)
	res := &runtimeapi.LinuxContainerResources{CpuShares: p.shares, CpuQuota: p.quota}
	if p.quota > 0 {
		res.CpuPeriod = 100000
	}
	rc, err := n.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: rp.PodSandboxId, SandboxConfig: sc,
		Config: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "main"}, Image: &runtimeapi.ImageSpec{Image: busyboxImage, UserSpecifiedImage: busyboxImage}, // as the kubelet sends (CRI-O requires it)
			Command: []string{"/bin/sleep", "3600"}, LogPath: "main.log", Labels: p.labels,
			Linux: &runtimeapi.LinuxContainerConfig{Resources: res,
				SecurityContext: &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: ns}}}})
	if err != nil {
		return "", 0, fmt.Errorf("CreateContainer %s: %w", p.name, err)
	}
	if _, err := n.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: rc.ContainerId}); err != nil {
		return "", 0, fmt.Errorf("StartContainer %s: %w", p.name, err)
	}
	return rc.ContainerId, time.Since(t0), nil
}

func (n *node) removePod(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Each container is killed first, as the kubelet stops them after their
	// grace period: the container's command is its PID 1, which ignores
	// SIGTERM, and CRI-O's StopPodSandbox waits for the container's stop
	// timeout before it kills it.
	cs, _ := n.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{PodSandboxId: id}})
	for _, c := range cs.GetContainers() {
		n.rt.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: c.Id, Timeout: 0})
	}
	n.rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id})
	n.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id})
	n.pods = slices.DeleteFunc(n.pods, func(p string) bool { return p == id })
}

// live is what the kernel says about a container: its process's affinity
// and scheduling policy (/proc/PID/sched: 0 fair, 5 SCHED_IDLE), its
// cgroup's cpuset, CPU shares and CFS quota.
type live struct{ Affinity, CPUs, Mems, Shares, Quota, Policy string }

// pidOf is the pid of a container's first process, which both runtimes
// give in the verbose ContainerStatus's "info" JSON.
func (n *node) pidOf(ctrID string) int {
	n.t.Helper()
	st, err := n.rt.ContainerStatus(context.Background(), &runtimeapi.ContainerStatusRequest{ContainerId: ctrID, Verbose: true})
	if err != nil {
		n.t.Fatalf("ContainerStatus: %v", err)
	}
	var info struct {
		Pid int `json:"pid"`
	}
	if err := json.Unmarshal([]byte(st.Info["info"]), &info); err != nil || info.Pid == 0 {
		n.t.Fatalf("ContainerStatus info: %v", err)
	}
	return info.Pid
}

func (n *node) liveOf(ctrID string) live {
	n.t.Helper()
	pid := n.pidOf(ctrID)
	var l live
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/sched", pid)); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "policy" {
				l.Policy = strings.TrimSpace(v)
			}
		}
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		n.t.Fatal(err)
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Cpus_allowed_list:"); ok {
			l.Affinity = strings.TrimSpace(v)
		}
	}
	f.Close()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		n.t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 && slices.Contains(strings.Split(parts[1], ","), "cpu") {
			b, _ := os.ReadFile(filepath.Join("/sys/fs/cgroup", parts[1], parts[2], "cpu.shares"))
			l.Shares = strings.TrimSpace(string(b))
			q, _ := os.ReadFile(filepath.Join("/sys/fs/cgroup", parts[1], parts[2], "cpu.cfs_quota_us"))
			l.Quota = strings.TrimSpace(string(q))
		}
		if len(parts) == 3 && slices.Contains(strings.Split(parts[1], ","), "cpuset") {
			dir := filepath.Join("/sys/fs/cgroup/cpuset", parts[2])
			c, _ := os.ReadFile(filepath.Join(dir, "cpuset.cpus"))
			m, _ := os.ReadFile(filepath.Join(dir, "cpuset.mems"))
			l.CPUs, l.Mems = strings.TrimSpace(string(c)), strings.TrimSpace(string(m))
		}
	}
	return l
}

// assigned is what corepin's state says, per container id.
func (n *node) assigned() map[string]nodecore.ContainerAssignment {
	n.t.Helper()
	topo, err := topology.Open("/")
	if err != nil {
		n.t.Fatal(err)
	}
	c, err := nodecore.OpenContainers(filepath.Join(n.dir, "state.db"), topo, alloc.NodeSettings{Reserved: cpuset.New(0)})
	if err != nil {
		n.t.Fatal(err)
	}
	defer c.Close()
	all, err := c.List()
	if err != nil {
		n.t.Fatal(err)
	}
	m := map[string]nodecore.ContainerAssignment{}
	for _, a := range all {
		m[a.Ref.ID] = a
	}
	return m
}

// check asserts that every container runs where corepin assigned it and
// that no CPU is held by two exclusive containers; it returns the live view.
func (n *node) check(ids map[string]string) map[string]live {
	n.t.Helper()
	as := n.assigned()
	out := map[string]live{}
	var held cpuset.CPUSet
	for name, id := range ids {
		a, ok := as[id]
		if !ok {
			n.t.Errorf("%s (%s) holds no assignment", name, id)
			continue
		}
		l := n.liveOf(id)
		out[name] = l
		r := nri.ResourcesOf(a)
		// corepin sets the quota of shared (LS) containers only; a BE
		// container runs SCHED_IDLE (the runtime's, or the plugin's).
		want := live{Affinity: a.CPUs.String(), CPUs: a.CPUs.String(), Mems: a.Mems.String(),
			Shares: fmt.Sprint(r.Shares), Quota: l.Quota, Policy: "0"}
		if r.Quota > 0 {
			want.Quota = fmt.Sprint(r.Quota)
		}
		if a.QoS == alloc.BE {
			want.Policy = "5"
		}
		if l != want {
			n.t.Errorf("%s: live %+v, corepin assigned %+v (%s)", name, l, want, a.QoS)
		}
		if a.QoS == alloc.LSE || a.QoS == alloc.LSR {
			if !held.Intersection(a.CPUs).IsEmpty() {
				n.t.Errorf("%s: CPUs %s doubled (exclusive CPUs held: %s)", name, a.CPUs, held)
			}
			held = held.Union(a.CPUs)
		}
	}
	return out
}

func rssKB(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}

func percentiles(ds []time.Duration) (p50, p99 time.Duration) {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)*50/100], s[min(len(s)-1, len(s)*99/100)]
}

// missing skips the test for a prerequisite it lacks, or fails it where
// the test must run: make e2e-node sets COREPIN_E2E_REQUIRED=1, so a
// runner without root or a tool fails instead of passing empty.
func missing(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("COREPIN_E2E_REQUIRED") == "1" {
		t.Fatalf("COREPIN_E2E_REQUIRED=1 and a prerequisite is missing: "+format, args...)
	}
	t.Skipf("skipping: "+format, args...)
}

// newNode starts a private runtime in a new directory, stopped and removed
// (kept when the test failed) with everything it ran at the end. bin holds
// the runtime's binaries.
func newNode(t *testing.T, eng engine, bin, corepin string) *node {
	t.Helper()
	dir, err := os.MkdirTemp("", "cpe-")
	if err != nil {
		t.Fatal(err)
	}
	n := &node{t: t, dir: dir, bin: bin, eng: eng, corepin: corepin}
	t.Cleanup(func() {
		for _, id := range slices.Clone(n.pods) {
			n.removePod(id)
		}
		n.killPlugin()
		n.stopRuntime()
		if n.conn != nil {
			n.conn.Close()
		}
		exec.Command("sh", "-c", "find /sys/fs/cgroup/*"+cgroupParent+" -depth -type d -exec rmdir {} \\; 2>/dev/null").Run()
		// What a pod the runtime could not remove left mounted under dir
		// (CRI-O's pinned namespaces and shm), deepest first.
		exec.Command("sh", "-c", "awk '$2 ~ \"^"+dir+"/\" {print $2}' /proc/mounts | sort -r | xargs -r -n1 umount").Run()
		if !t.Failed() {
			os.RemoveAll(dir)
		} else {
			t.Logf("kept %s for inspection", dir)
		}
	})
	eng.configure(n)
	n.startRuntime()
	return n
}

func TestNodeWithContainerd(t *testing.T) {
	bin, corepin := os.Getenv("COREPIN_E2E_BIN"), os.Getenv("COREPIN_BIN")
	if os.Geteuid() != 0 || bin == "" || corepin == "" {
		missing(t, "needs root, COREPIN_E2E_BIN (containerd, ctr, shim) and COREPIN_BIN; run make e2e-node")
	}
	for _, tool := range []string{"/usr/sbin/runc", "/bin/busybox"} {
		if _, err := os.Stat(tool); err != nil {
			missing(t, "%s missing (apt-get install runc busybox-static umoci skopeo)", tool)
		}
	}
	scenarios(t, newNode(t, containerd{bin: bin}, bin, corepin))
}

// scenarios runs pods of each class on n through the CRI with the real
// corepin plugin attached, and checks after each step that every container
// runs where corepin assigned it: after a restart of the plugin, of the
// runtime, and the removal of the pinned pod. Then it reports pod-start
// latency with and without the plugin.
func scenarios(t *testing.T, n *node) {
	if err := os.WriteFile(filepath.Join(n.dir, "corepin.yaml"), []byte("reserved_cpus: \"0\"\npolicy: corepin\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	busybox, pause := n.images(filepath.Join(filepath.Dir(n.bin), "..", "images"))
	n.eng.load(n, pause, busybox)
	n.startPlugin()

	ids := map[string]string{}
	ids["lse"], _ = n.startPod(pod{name: "lse", labels: map[string]string{"koordinator.sh/qosClass": "LSE"}, shares: 1024, quota: 100000})
	lsePod := n.pods[len(n.pods)-1]
	ids["ls"], _ = n.startPod(pod{name: "ls", shares: 512, quota: 50000})
	ids["be"], _ = n.startPod(pod{name: "be", shares: 2})
	before := n.check(ids)
	t.Logf("assigned and live: %+v", before)
	if got := before["lse"].CPUs; got != "1" {
		t.Errorf("LSE pod runs on %q, want CPU 1 (CPU 0 is reserved)", got)
	}
	// Both runtimes run runc >= 1.2, which applies the SCHED_IDLE the BE
	// container's adjustment asks for: the plugin finds it done.
	if r := n.assigned()[ids["be"]].BERoute; r != string(nri.RouteRuntimeIdle) {
		t.Errorf("the BE container's route is %q, want %q (%s applied NRI's SetLinuxScheduler)", r, nri.RouteRuntimeIdle, n.eng.name())
	}

	t.Run("plugin killed and restarted", func(t *testing.T) {
		n.t = t
		n.killPlugin()
		// Meanwhile a pod that requires corepin is refused by the
		// runtime's NRI default validator, not started unpinned.
		_, _, err := n.tryPod(pod{name: "required", shares: 512, quota: 50000,
			annotations: map[string]string{"required-plugins.noderesource.dev": `["corepin"]`}})
		if err == nil || !strings.Contains(err.Error(), `required plugin "corepin" not present`) {
			t.Errorf("a pod requiring corepin, created while it is down: %v; want the validator's refusal", err)
		}
		n.removePod(n.pods[len(n.pods)-1])
		n.startPlugin()
		if after := n.check(ids); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Errorf("after a plugin restart: %+v, before %+v", after, before)
		}
	})
	t.Run(n.eng.name()+" restarted", func(t *testing.T) {
		n.t = t
		n.stopRuntime()
		n.startRuntime()
		n.waitSyncs(2) // the plugin reconnected by itself
		if after := n.check(ids); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Errorf("after a %s restart: %+v, before %+v", n.eng.name(), after, before)
		}
	})
	t.Run("shared pod resized in place", func(t *testing.T) {
		n.t = t
		// The kubelet's in-place resize of the LS pod from 500m to 800m
		// (cpuManagerPolicy none: no cpuset in the request).
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if _, err := n.rt.UpdateContainerResources(ctx, &runtimeapi.UpdateContainerResourcesRequest{ContainerId: ids["ls"],
			Linux: &runtimeapi.LinuxContainerResources{CpuShares: 819, CpuQuota: 80000, CpuPeriod: 100000}}); err != nil {
			t.Fatalf("UpdateContainerResources: %v", err)
		}
		if a := n.assigned()[ids["ls"]]; a.MilliCPUs != 800 {
			t.Errorf("after the resize corepin holds %d milli-CPUs for the LS container, want 800", a.MilliCPUs)
		}
		after := n.check(ids) // the quota and shares of the new size, the cpuset kept
		t.Logf("after the resize: %+v", after)
		for _, name := range []string{"lse", "be"} {
			if after[name] != before[name] {
				t.Errorf("%s moved with the LS pod's resize: %+v, before %+v", name, after[name], before[name])
			}
		}
		if after["ls"].CPUs != before["ls"].CPUs {
			t.Errorf("the LS pod's cpuset went from %s to %s with its resize", before["ls"].CPUs, after["ls"].CPUs)
		}
	})
	t.Run("pinned pod removed: shared pools regrow", func(t *testing.T) {
		n.t = t
		freed := cpuset.MustParse(before["lse"].CPUs)
		for _, name := range []string{"ls", "be"} {
			if s := cpuset.MustParse(before[name].CPUs); s.Intersects(freed) {
				t.Fatalf("%s runs on %s beside the LSE pod's %s", name, s, freed)
			}
		}
		lseID := ids["lse"]
		n.removePod(lsePod)
		delete(ids, "lse")
		// The plugin answers the stop with the regrown pools, or sends
		// them after a remove: poll until the kernel shows them.
		deadline := time.Now().Add(60 * time.Second)
		for {
			grown := true
			for _, name := range []string{"ls", "be"} {
				l := n.liveOf(ids[name])
				s, err := cpuset.Parse(l.CPUs)
				a, aerr := cpuset.Parse(l.Affinity)
				if err != nil || aerr != nil || !freed.IsSubsetOf(s) || !freed.IsSubsetOf(a) {
					grown = false
					if time.Now().After(deadline) {
						t.Fatalf("%s still runs on cpuset %q, affinity %q 60s after the LSE pod (CPUs %s) was removed; want them back", name, l.CPUs, l.Affinity, freed)
					}
				}
			}
			if grown {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if _, ok := n.assigned()[lseID]; ok {
			t.Errorf("the removed LSE container still holds an assignment")
		}
		after := n.check(ids)
		t.Logf("after the LSE pod was removed: %+v", after)
	})
	n.t = t

	// Pod-start latency (RunPodSandbox + CreateContainer + StartContainer),
	// one pod at a time, each removed before the next: reported, not asserted.
	const pods = 50
	measure := func() []time.Duration {
		var ds []time.Duration
		for i := range pods {
			_, took := n.startPod(pod{name: fmt.Sprintf("lat%d", i), shares: 512, quota: 50000})
			ds = append(ds, took)
			n.removePod(n.pods[len(n.pods)-1])
		}
		return ds
	}
	with := measure()
	rss := rssKB(n.plugin.Process.Pid)
	n.killPlugin()
	without := measure()
	w50, w99 := percentiles(with)
	o50, o99 := percentiles(without)
	report := fmt.Sprintf("pod start over %d pods: with corepin p50 %v p99 %v; without p50 %v p99 %v; plugin RSS %s\n",
		pods, w50.Round(time.Millisecond), w99.Round(time.Millisecond), o50.Round(time.Millisecond), o99.Round(time.Millisecond), rss)
	t.Log(report)
	if out := os.Getenv("COREPIN_E2E_REPORT"); out != "" {
		os.WriteFile(out, []byte(report), 0o644)
	}
}
