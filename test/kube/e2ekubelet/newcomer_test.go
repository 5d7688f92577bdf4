package e2ekubelet

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/test/kube/kubetest"
)

// What make e2e-newcomer hands TestNewcomerCommands besides make
// e2e-kubelet's and e2e-deploy's statefile.
const (
	envHelm           = "COREPIN_HELM"            // Helm's CLI (helm.sh/helm/v4/cmd/helm)
	envKubectl        = "COREPIN_KUBECTL"         // kubectl's main
	envRepo           = "COREPIN_REPO"            // the repository whose HEAD is cloned
	envNewcomerReport = "COREPIN_NEWCOMER_REPORT" // the commands' table, as text
)

const (
	newcomerDoc     = "docs/kubernetes.md"
	newcomerHeading = "## From a clone to a pinned pod"
	// ctr's default address, where the docs' `ctr images import` goes.
	standardContainerdSock = "/run/containerd/containerd.sock"
	// The image docs/examples/pinned-pod.yaml names (busybox:1.36), as
	// the CRI normalises it: the locally built busybox tagged so.
	newcomerBusybox = "docker.io/library/busybox:1.36"
	// The pod network: the bridge CNI plugin on a bridge of the test's
	// own with no address (no gateway, no masquerade: nothing of the
	// host's routes or iptables changes), pods addressed in TEST-NET-2
	// (RFC 5737), routed nowhere. Every pod gets an interface, the
	// plugin's and the docs' pod alike.
	newcomerBridge = "cpnc0"
	newcomerSubnet = "198.51.100.0/24"
	// What the docs' pod is called, in the namespace kubectl defaults to.
	newcomerPod = "pinned"
	newcomerNS  = "default"
	// The release the docs install, for the uninstall after them.
	newcomerRelease = "corepin"
)

func newcomerCNI(ipamDir string) string {
	return fmt.Sprintf(`{"cniVersion": "1.0.0", "name": "corepin-e2e-bridge", "plugins": [
  {"type": "bridge", "bridge": %q, "isGateway": false, "ipMasq": false,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": %q}]], "dataDir": %q}}]}`, newcomerBridge, newcomerSubnet, ipamDir)
}

// chartValues are the chart's defaults the node must match for the
// docs' commands to run unchanged.
type chartValues struct {
	NRISocket        string `json:"nriSocket"`
	StateDir         string `json:"stateDir"`
	ContainerInfoDir string `json:"containerInfoDir"`
	ReservedCPUs     string `json:"reservedCPUs"`
}

// step is one command run as the newcomer runs it.
type step struct {
	cmd  string
	wall time.Duration
	code int
	out  string // stdout and stderr, interleaved
}

// newcomer is what the docs' run adds to the cluster.
type newcomer struct {
	*deploy
	clone  string
	commit string
	env    []string
	steps  []step
	host   []hostChange
	values chartValues
	sudo   string // how sudo was provided
	tools  []string
}

// TestNewcomerCommands runs the shell commands of docs/kubernetes.md's
// "From a clone to a pinned pod", read from the doc of a fresh git clone
// of HEAD, in that clone, each through bash -c, on the real kubelet and
// containerd made to look like a standard node (the sockets at their
// standard paths, the chart's default state directory, a pod network,
// busybox:1.36 present). Each command must exit 0; the docs' pod must
// run, its own Cpus_allowed_list (command 5) must equal the cpuset
// corepin ctl list (command 6) shows for its container, and miss the
// chart's reserved CPU. Then the release is uninstalled and the host
// left as it was.
func TestNewcomerCommands(t *testing.T) {
	c := need(t)
	helm, kubectl, repo, statefile := os.Getenv(envHelm), os.Getenv(envKubectl), os.Getenv(envRepo), os.Getenv(envStatefile)
	if helm == "" || kubectl == "" || repo == "" || statefile == "" {
		missing(t, "run through make e2e-newcomer (%s, %s, %s or %s unset)", envHelm, envKubectl, envRepo, envStatefile)
	}
	for _, tool := range []string{"git", "bash", "ip", "/usr/lib/cni/bridge", "/usr/lib/cni/host-local", "/usr/lib/cni/loopback"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing(t, "%s missing (apt-get install git bash iproute2 containernetworking-plugins)", tool)
		}
	}
	before := takeSnapshot(t)
	dir, err := os.MkdirTemp("", "nc-")
	if err != nil {
		t.Fatal(err)
	}
	c.dir, c.cgroupRoot, c.ps = dir, "/"+filepath.Base(dir), &kubetest.Procs{T: t}
	n := &newcomer{deploy: &deploy{cluster: c, statefile: statefile}}
	t.Cleanup(func() {
		// The links first: teardown compares /run/containerd with the
		// snapshot, and nothing of the teardown goes through them.
		n.undoHost(true)
		c.teardown(before, n.rt)
		n.undoHost(false)
		n.report()
	})

	cmds := n.cloneRepo(repo)
	n.stateDir = n.values.StateDir
	n.standardPaths(func() {
		c.startControlPlaneWith("job,podgc,daemonset,garbagecollector")
		n.rt = c.startRuntime(newcomerCNI(c.path("cni-ipam")))
	})
	c.ctr("images", "tag", corepinImage, newcomerBusybox)
	c.startKubelet()
	n.tools = n.binDir(helm, kubectl)

	for i, cmd := range cmds {
		limit := 3 * time.Minute
		if i == 0 {
			limit = 12 * time.Minute // make image: two static binaries and the image
		}
		// The next commands run even after one fails: the report shows
		// what each of them does then.
		if s := n.run(cmd, limit); s.code != 0 {
			t.Errorf("command %d of %s exited %d: %s\n%s", i+1, newcomerDoc, s.code, cmd, kubetest.Tail(s.out, 4096))
		}
	}
	if !t.Failed() {
		n.checkPinned()
	}
	n.uninstall()
}

// cloneRepo clones repo's HEAD into the run's directory and returns the
// commands of the clone's docs; it reads the chart's default values there.
func (n *newcomer) cloneRepo(repo string) []string {
	t := n.t
	n.clone = n.path("clone")
	head := strings.TrimSpace(run(t, nil, "git", "-C", repo, "rev-parse", "HEAD"))
	run(t, nil, "git", "clone", "--quiet", repo, n.clone)
	run(t, nil, "git", "-C", n.clone, "checkout", "--quiet", "--detach", head)
	n.commit = head
	doc, err := os.ReadFile(filepath.Join(n.clone, newcomerDoc))
	if err != nil {
		t.Fatal(err)
	}
	cmds, err := docCommands(string(doc), newcomerHeading)
	if err != nil {
		t.Fatalf("%s: %v", newcomerDoc, err)
	}
	b, err := os.ReadFile(filepath.Join(n.clone, "deploy/helm/corepin/values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &n.values); err != nil {
		t.Fatalf("the chart's values.yaml: %v", err)
	}
	if n.values.NRISocket == "" || n.values.StateDir == "" {
		t.Fatalf("the chart's values.yaml names no nriSocket or stateDir: %+v", n.values)
	}
	n.note("fresh clone of %s at %s; %d commands in %s %q", repo, head, len(cmds), newcomerDoc, newcomerHeading)
	return cmds
}

// hostChange is one thing the test changed on the host, undone at the
// end: before the teardown (early) or after it.
type hostChange struct {
	what  string
	early bool
	undo  func() error
}

// standardPaths makes the node look like a standard one around start
// (which starts the private containerd): containerd's and NRI's sockets
// reachable at their standard paths, a link each where nothing is yet
// (the directory where it is missing, else the socket); the chart's state
// directory holding no state file, and what the plugin adds there and in
// its container-info directory removed at the end; no bridge of the
// pod network left by a killed run.
func (n *newcomer) standardPaths(start func()) {
	t := n.t
	state := filepath.Join(n.values.StateDir, "agent.db")
	if _, err := os.Lstat(state); err == nil {
		// A state file recording nothing (left by an earlier corepin on
		// this host) is set aside for the run and put back after it; one
		// that records workloads is this host's own, never touched.
		var as []assignment
		if out := run(t, nil, n.statefile, state); json.Unmarshal([]byte(out), &as) != nil || len(as) > 0 {
			t.Fatalf("%s already holds a state file recording workloads (%s): the docs' commands would run on that node's state. "+
				"Move it aside (and back after the run); the test removes what it adds there", state, kubetest.Tail(out, 512))
		}
		aside := state + ".e2e-newcomer-aside"
		if err := os.Rename(state, aside); err != nil {
			t.Fatalf("setting the empty state file %s aside: %v", state, err)
		}
		n.note("set the empty state file %s aside for the run", state)
		n.host = append(n.host, hostChange{what: "state file " + state, undo: func() error { return os.Rename(aside, state) }})
	}
	socks := map[string]string{standardContainerdSock: n.path("run/containerd.sock"), n.values.NRISocket: n.path("run/nri.sock")}
	for std := range socks {
		if _, err := os.Lstat(std); err == nil {
			t.Fatalf("%s exists: the docs' commands would reach this host's own runtime, not the test's", std)
		}
	}
	for _, d := range []string{n.values.StateDir, n.values.ContainerInfoDir} {
		if d != "" {
			n.keepDir(d)
		}
	}
	delBridge(t)
	n.host = append(n.host, hostChange{what: "bridge " + newcomerBridge, undo: func() error { delBridge(t); return nil }})
	start()
	for std, target := range socks {
		n.linkStandard(std, target)
	}
	for std := range socks {
		if st, err := os.Stat(std); err != nil || st.Mode()&fs.ModeSocket == 0 {
			t.Fatalf("%s does not resolve to a socket (%v): the chart's hostPath (type Socket) would not mount", std, err)
		}
	}
}

// linkStandard makes std resolve to target: a link at std's directory
// where that is missing (to target's directory), else at std itself.
func (n *newcomer) linkStandard(std, target string) {
	t := n.t
	link, to := std, target
	if _, err := os.Stat(filepath.Dir(std)); errors.Is(err, fs.ErrNotExist) {
		link, to = filepath.Dir(std), filepath.Dir(target)
	}
	if err := os.Symlink(to, link); err != nil {
		t.Fatalf("linking the standard path: %v", err)
	}
	n.note("%s -> %s", link, to)
	n.host = append(n.host, hostChange{what: "link " + link, early: true, undo: func() error {
		if got, err := os.Readlink(link); err != nil || got != to {
			return fmt.Errorf("%s no longer links to %s (%q, %v): left alone", link, to, got, err)
		}
		return os.Remove(link)
	}})
}

// keepDir records what dir holds (or that it, and which of its parents,
// are missing) so that undoHost removes what the run added: kubelet
// e2e runs are serialised (make's callers hold a lock), so what appears
// there meanwhile is this run's.
func (n *newcomer) keepDir(dir string) {
	var absent []string
	for d := dir; d != "/"; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil {
			break
		}
		absent = append(absent, d)
	}
	had := map[string]bool{}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		had[e.Name()] = true
	}
	n.host = append(n.host, hostChange{what: "directory " + dir, undo: func() error {
		ents, _ := os.ReadDir(dir)
		var errs []error
		for _, e := range ents {
			if !had[e.Name()] {
				errs = append(errs, os.RemoveAll(filepath.Join(dir, e.Name())))
			}
		}
		for _, d := range absent { // deepest first
			if err := os.Remove(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	}})
}

// undoHost undoes the host changes made early or not, last first.
func (n *newcomer) undoHost(early bool) {
	for i := len(n.host) - 1; i >= 0; i-- {
		if n.host[i].early != early {
			continue
		}
		if err := n.host[i].undo(); err != nil {
			n.t.Errorf("undoing %s: %v", n.host[i].what, err)
		}
	}
}

// delBridge removes the pod network's bridge where it exists.
func delBridge(t *testing.T) {
	if _, err := net.InterfaceByName(newcomerBridge); err != nil {
		return
	}
	if out, err := exec.Command("ip", "link", "del", newcomerBridge).CombinedOutput(); err != nil {
		t.Errorf("removing bridge %s: %v: %s", newcomerBridge, err, out)
	}
}

// binDir puts the docs' tools on a PATH of the run's own and sets the
// environment the commands run in; it returns the tools' versions.
func (n *newcomer) binDir(helm, kubectl string) []string {
	t := n.t
	bin := n.path("bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, path := range map[string]string{"helm": helm, "kubectl": kubectl, "ctr": filepath.Join(n.ctdBin, "ctr"), "corepin": n.corepin} {
		if err := os.Symlink(path, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	n.sudo = "the host's"
	if _, err := exec.LookPath("sudo"); err != nil {
		// Root already: sudo only has to run its arguments.
		writeFile(t, filepath.Join(bin, "sudo"), []byte("#!/bin/sh\n# sudo is absent on this host; the test runs as root.\nexec \"$@\"\n"))
		if err := os.Chmod(filepath.Join(bin, "sudo"), 0o755); err != nil {
			t.Fatal(err)
		}
		n.sudo = "a shim (exec \"$@\"): sudo is absent on this host, the test runs as root"
	}
	// The commands' environment: the user's, but for a kubeconfig of the
	// cluster and the tools first on PATH; kubectl's and Helm's caches in
	// the run's directory (not $HOME); none of the make that runs this
	// test (make image runs as a user's make would).
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "PATH", "KUBECONFIG", "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "MAKE_TERMOUT", "MAKE_TERMERR":
			continue
		}
		n.env = append(n.env, kv)
	}
	n.env = append(n.env, "PATH="+bin+":"+os.Getenv("PATH"), "KUBECONFIG="+n.kubeconfig, "KUBECACHEDIR="+n.path("kube-cache"),
		"HELM_CACHE_HOME="+n.path("helm/cache"), "HELM_CONFIG_HOME="+n.path("helm/config"), "HELM_DATA_HOME="+n.path("helm/data"))
	var versions []string
	for _, v := range []string{"helm version --short", "kubectl version --client", "ctr --version", "corepin version", "go env GOCACHE"} {
		out, err := n.command(v, time.Minute)
		if err != nil {
			t.Fatalf("%s: %v\n%s", v, err, out)
		}
		versions = append(versions, v+": "+strings.Join(strings.Fields(firstLine(out)), " "))
	}
	return versions
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return l
}

// command runs line through bash -c in the clone with the newcomer's
// environment, returning its output (stdout and stderr interleaved).
func (n *newcomer) command(line string, limit time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", line)
	cmd.Dir, cmd.Env, cmd.WaitDelay = n.clone, n.env, 10*time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// run runs one command of the docs (or of the uninstall) and records it.
func (n *newcomer) run(line string, limit time.Duration) step {
	begin := time.Now()
	out, err := n.command(line, limit)
	s := step{cmd: line, wall: time.Since(begin), out: out}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		s.code = ee.ExitCode()
	case err != nil:
		s.code, s.out = -1, out+"\n"+err.Error()
	}
	n.steps = append(n.steps, s)
	n.t.Logf("$ %s\n(%s, exit %d)\n%s", line, fmtDur(s.wall), s.code, kubetest.Tail(out, 2048))
	return s
}

// checkPinned checks the docs' pod after the commands: Running, its own
// Cpus_allowed_list (command 5) the cpuset corepin ctl list (command 6)
// shows for its container, which is what the kernel and the state file
// say too, and not the chart's reserved CPUs.
func (n *newcomer) checkPinned() {
	t := n.t
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := n.cs.CoreV1().Pods(newcomerNS).Get(ctx, newcomerPod, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the docs' pod: %v", err)
	}
	if p.Status.Phase != corev1.PodRunning || len(p.Status.ContainerStatuses) != 1 {
		t.Fatalf("the docs' pod is %s with %d container statuses, want Running", p.Status.Phase, len(p.Status.ContainerStatuses))
	}
	_, id, _ := strings.Cut(p.Status.ContainerStatuses[0].ContainerID, "://")
	if len(n.steps) < 6 {
		t.Fatalf("%d commands ran, want 6 (5: kubectl exec, 6: corepin ctl list)", len(n.steps))
	}
	allowed, err := cpusAllowed(n.steps[4].out)
	if err != nil {
		t.Fatalf("command 5 (%s): %v", n.steps[4].cmd, err)
	}
	a, ok := n.recorded(id)
	if !ok {
		t.Fatalf("the state file %s records no assignment for the docs' pod's container %s: %+v", n.stateFile(), id, n.assignments())
	}
	listed, err := ctlListCpuset(n.steps[5].out, a.Name)
	if err != nil {
		t.Fatalf("command 6 (%s): %v", n.steps[5].cmd, err)
	}
	if !listed.Equals(allowed) {
		t.Errorf("the pod's Cpus_allowed_list is %s, corepin ctl list shows %s for its container (%s)", allowed, listed, a.Name)
	}
	if a.QoS != "LSE" || a.Cpuset != listed.String() {
		t.Errorf("the state file records %s %s for the pod's container, corepin ctl list shows %s", a.QoS, a.Cpuset, listed)
	}
	if v, ok := n.rt.liveOf(ctx, id); !ok || v.Affinity != allowed.String() || v.CPUs != allowed.String() {
		t.Errorf("the kernel shows affinity %q cpuset %q (found %v) for the pod's container, the pod read %s", v.Affinity, v.CPUs, ok, allowed)
	}
	reserved, err := cpuset.Parse(n.values.ReservedCPUs)
	if err != nil {
		t.Fatalf("the chart's reservedCPUs %q: %v", n.values.ReservedCPUs, err)
	}
	if allowed.IsEmpty() || allowed.Intersects(reserved) {
		t.Errorf("the pod runs on %s, which holds the chart's reserved CPUs %s", allowed, reserved)
	}
	n.note("the docs' pod %s Running on Cpus_allowed_list %s; corepin ctl list shows %s %s for its container (%s), the state file and the kernel alike; reserved %s",
		newcomerPod, allowed, a.QoS, listed, a.Name, reserved)
}

// cpusAllowed is the set of a /proc/PID/status Cpus_allowed_list line.
func cpusAllowed(out string) (cpuset.CPUSet, error) {
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "Cpus_allowed_list:"); ok {
			return cpuset.Parse(strings.TrimSpace(v))
		}
	}
	return cpuset.CPUSet{}, fmt.Errorf("no Cpus_allowed_list line in %q", kubetest.Tail(out, 512))
}

// ctlListCpuset is the CPUSET column of name's row in corepin ctl list's
// table (other lines, such as its note on stderr, are skipped).
func ctlListCpuset(out, name string) (cpuset.CPUSet, error) {
	col := -1
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 0 && f[0] == "NAME" {
			col = slices.Index(f, "CPUSET")
			continue
		}
		if col >= 0 && len(f) > col && f[0] == name {
			return cpuset.Parse(f[col])
		}
	}
	return cpuset.CPUSet{}, fmt.Errorf("no row %s under a NAME ... CPUSET header in %q", name, kubetest.Tail(out, 1024))
}

// uninstall deletes the docs' pod and the release as a user would, then
// waits for the plugin's pod and its NRI connection to go.
func (n *newcomer) uninstall() {
	t := n.t
	for _, cmd := range []string{"kubectl delete -f docs/examples/pinned-pod.yaml --wait", "helm uninstall " + newcomerRelease + " --wait"} {
		if s := n.run(cmd, 3*time.Minute); s.code != 0 {
			t.Errorf("%s exited %d:\n%s", cmd, s.code, kubetest.Tail(s.out, 2048))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		l, err := n.cs.CoreV1().Pods(newcomerNS).List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) == 0 && n.corepinConnected() == 0, nil
	})
	if err != nil {
		n.explainNS(newcomerNS)
		t.Fatalf("after helm uninstall the plugin's pod or its NRI connection stayed (containerd: %d connected): %v", n.corepinConnected(), err)
	}
	n.note("uninstalled: no pod left in %s, containerd holds 0 corepin plugins", newcomerNS)
}

// report writes the commands' table: to $COREPIN_NEWCOMER_REPORT and the
// test's output.
func (n *newcomer) report() {
	var b strings.Builder
	status := "PASS"
	if n.t.Failed() {
		status = "FAIL"
	}
	fmt.Fprintf(&b, "e2e-newcomer %s at %s: %s %q of a fresh clone of %s\n", status, time.Now().UTC().Format(time.RFC3339), newcomerDoc, newcomerHeading, n.commit)
	fmt.Fprintf(&b, "each command through bash -c in the clone, as root; KUBECONFIG the cluster's admin kubeconfig; sudo %s\n", n.sudo)
	for _, v := range n.tools {
		fmt.Fprintf(&b, "  %s\n", v)
	}
	fmt.Fprintf(&b, "\n%-3s %9s %4s  %s\n", "#", "wall", "exit", "command")
	for i, s := range n.steps {
		fmt.Fprintf(&b, "%-3d %9s %4d  %s\n", i+1, fmtDur(s.wall), s.code, s.cmd)
	}
	for i, s := range n.steps {
		fmt.Fprintf(&b, "\n--- %d. %s (last lines)\n%s\n", i+1, s.cmd, lastLines(s.out, 8))
	}
	fmt.Fprintf(&b, "\nnotes:\n")
	for _, l := range n.notes {
		fmt.Fprintf(&b, "  %s\n", l)
	}
	fmt.Print(b.String())
	if path := os.Getenv(envNewcomerReport); path != "" {
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			n.t.Errorf("writing the report: %v", err)
		}
	}
}

func lastLines(s string, k int) string {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(ls[max(0, len(ls)-k):], "\n")
}

// docCommands returns the commands of the first ```sh block under the
// Markdown heading line heading (before the next heading of any level):
// one a line, its trailing comment removed, blank lines skipped.
func docCommands(doc, heading string) ([]string, error) {
	lines := strings.Split(doc, "\n")
	start := slices.IndexFunc(lines, func(l string) bool { return strings.TrimSpace(l) == heading })
	if start < 0 {
		return nil, fmt.Errorf("no heading %q", heading)
	}
	var cmds []string
	in := false
	for _, l := range lines[start+1:] {
		t := strings.TrimSpace(l)
		switch {
		case !in && strings.HasPrefix(t, "#"):
			return nil, fmt.Errorf("no ```sh block under %q", heading)
		case !in && t == "```sh":
			in = true
		case in && strings.HasPrefix(t, "```"):
			if len(cmds) == 0 {
				return nil, fmt.Errorf("the ```sh block under %q holds no command", heading)
			}
			return cmds, nil
		case in:
			cmd := strings.TrimSpace(stripComment(l))
			if strings.HasSuffix(cmd, `\`) {
				return nil, fmt.Errorf("command %q continues on the next line: give each command one line", cmd)
			}
			if cmd != "" {
				cmds = append(cmds, cmd)
			}
		}
	}
	if in {
		return nil, fmt.Errorf("the ```sh block under %q is not closed", heading)
	}
	return nil, fmt.Errorf("no ```sh block under %q", heading)
}

// stripComment cuts a shell line at its comment: a # at the start of a
// word, outside quotes.
func stripComment(line string) string {
	var quote rune
	escaped := false
	for i, r := range line {
		switch {
		case escaped:
			escaped = false
		case quote == '\'':
			if r == '\'' {
				quote = 0
			}
		case r == '\\':
			escaped = true
		case quote == '"':
			if r == '"' {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t'):
			return line[:i]
		}
	}
	return line
}

// TestDocCommands checks what docCommands reads: the docs' own block
// (six commands, the first make image, none with its comment) and the
// shapes of block it refuses.
func TestDocCommands(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "..", newcomerDoc))
	if err != nil {
		t.Fatal(err)
	}
	cmds, err := docCommands(string(doc), newcomerHeading)
	if err != nil {
		t.Fatalf("%s: %v", newcomerDoc, err)
	}
	if len(cmds) != 6 || cmds[0] != "make image" || strings.Contains(strings.Join(cmds, "\n"), "#") {
		t.Errorf("%s's commands = %q, want six, the first make image, no comment", newcomerDoc, cmds)
	}
	for _, tc := range []struct {
		name, doc string
		want      []string
		err       string
	}{
		{name: "comments cut, blank lines skipped", doc: "## H\ntext\n```sh\na b   # 1. x\n\n  c # y\n```\n", want: []string{"a b", "c"}},
		{name: "hash in quotes or a word kept", doc: "## H\n```sh\necho '#x' \"a # b\" c#d \\# e # f\n```\n", want: []string{`echo '#x' "a # b" c#d \# e`}},
		{name: "the first block under the heading", doc: "```sh\nbefore\n```\n## H\n```sh\nx\n```\n```sh\ny\n```\n", want: []string{"x"}},
		{name: "no heading", doc: "## G\n```sh\nx\n```\n", err: "no heading"},
		{name: "block under the next heading", doc: "## H\n### I\n```sh\nx\n```\n", err: "no ```sh block"},
		{name: "not closed", doc: "## H\n```sh\nx\n", err: "not closed"},
		{name: "empty block", doc: "## H\n```sh\n# only a comment\n```\n", err: "holds no command"},
		{name: "continued line", doc: "## H\n```sh\nmake \\\n  image\n```\n", err: "continues on the next line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := docCommands(tc.doc, "## H")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("docCommands = %q, %v; want an error containing %q", got, err, tc.err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("docCommands = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// FuzzDocCommands: whatever the doc, each command read is one non-empty
// line of it, trimmed, with no comment left to cut.
func FuzzDocCommands(f *testing.F) {
	if doc, err := os.ReadFile(filepath.Join("..", "..", "..", newcomerDoc)); err == nil {
		f.Add(string(doc))
	}
	f.Add("## H\n```sh\necho 'a # b' \"#\" \\# x # c\n```\n")
	f.Fuzz(func(t *testing.T, doc string) {
		cmds, err := docCommands(doc, "## H")
		if err != nil {
			return
		}
		for _, c := range cmds {
			if c == "" || strings.Contains(c, "\n") || c != strings.TrimSpace(c) || !strings.Contains(doc, c) {
				t.Fatalf("command %q is not a trimmed, non-empty part of one line of the doc", c)
			}
			if again := strings.TrimSpace(stripComment(c)); again != c {
				t.Fatalf("command %q still holds a comment: %q", c, again)
			}
		}
	})
}
