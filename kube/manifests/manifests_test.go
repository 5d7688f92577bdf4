package manifests

import (
	"bytes"
	"cmp"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corepin/corepin/agent"
)

var update = flag.Bool("update", false, "rewrite deploy/kubernetes/corepin-nri.yaml from the chart's defaults")

const (
	chartDir  = "../../deploy/helm/corepin"
	plainFile = "../../deploy/kubernetes/corepin-nri.yaml"
	tomlFile  = "../../deploy/kubernetes/containerd-nri.toml"
)

var defaultRelease = Release{Name: "corepin", Namespace: "kube-system"}

// objects decodes every document of stream strictly (unknown fields are
// errors) into its typed Kubernetes object, by kind: one document of each.
func objects(t *testing.T, stream []byte) map[string]any {
	t.Helper()
	out := map[string]any{}
	for key, obj := range named(t, stream) {
		kind, _, _ := strings.Cut(key, "/")
		if _, dup := out[kind]; dup {
			t.Fatalf("two %s documents", kind)
		}
		out[kind] = obj
	}
	return out
}

func render(t *testing.T, overrides map[string]any) []byte {
	t.Helper()
	b, err := Render(os.DirFS(chartDir), defaultRelease, overrides)
	if err != nil {
		t.Fatalf("Render: %v", err)
	}
	return b
}

func TestChartRendersValidObjects(t *testing.T) {
	tests := []struct {
		name      string
		overrides map[string]any
		wantKinds []string
		wantCfg   agent.Config
	}{
		{name: "defaults", wantKinds: []string{"ConfigMap", "DaemonSet", "ServiceAccount", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"},
			wantCfg: agent.Config{State: "/var/lib/corepin/agent.db", ReservedCPUs: "0", Policy: "corepin",
				PolicyOptions: []string{"full-pcpus-only"}, TopologyPolicy: "best-effort", LogFormat: "json", WakeScan: "default"}},
		{name: "kubelet migration without rbac", overrides: map[string]any{"policy": "kubelet", "reservedCPUs": "0-1,32-33",
			"policyOptions": []any{"full-pcpus-only", "strict-cpu-reservation"}, "topologyPolicy": "single-numa-node",
			"rbac": map[string]any{"create": false}, "nodeSelector": map[string]any{"corepin.io/enabled": "true"},
			"nodeResourceTopology": map[string]any{"publish": true}, "annotateNode": true},
			wantKinds: []string{"ConfigMap", "DaemonSet"},
			wantCfg: agent.Config{State: "/var/lib/corepin/agent.db", ReservedCPUs: "0-1,32-33", Policy: "kubelet",
				PolicyOptions: []string{"full-pcpus-only", "strict-cpu-reservation"}, TopologyPolicy: "single-numa-node", LogFormat: "json", WakeScan: "default"}},
		{name: "publishing with rbac", overrides: map[string]any{"nodeResourceTopology": map[string]any{"publish": true}, "annotateNode": true},
			wantKinds: []string{"ClusterRole", "ClusterRoleBinding", "ConfigMap", "DaemonSet", "ServiceAccount", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"},
			wantCfg: agent.Config{State: "/var/lib/corepin/agent.db", ReservedCPUs: "0", Policy: "corepin",
				PolicyOptions: []string{"full-pcpus-only"}, TopologyPolicy: "best-effort", LogFormat: "json", WakeScan: "default"}},
		{name: "wake scan full", overrides: map[string]any{"wakeScan": "full"},
			wantKinds: []string{"ConfigMap", "DaemonSet", "ServiceAccount", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"},
			wantCfg: agent.Config{State: "/var/lib/corepin/agent.db", ReservedCPUs: "0", Policy: "corepin",
				PolicyOptions: []string{"full-pcpus-only"}, TopologyPolicy: "best-effort", LogFormat: "json", WakeScan: "full"}},
		{name: "irq isolate exclusive", overrides: map[string]any{"irqIsolate": "exclusive"},
			wantKinds: []string{"ConfigMap", "DaemonSet", "ServiceAccount", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"},
			wantCfg: agent.Config{State: "/var/lib/corepin/agent.db", ReservedCPUs: "0", Policy: "corepin",
				PolicyOptions: []string{"full-pcpus-only"}, TopologyPolicy: "best-effort", LogFormat: "json", WakeScan: "default"}},
		{name: "irq isolate pod beside beSchedIdle", overrides: map[string]any{"irqIsolate": "pod", "beSchedIdle": true},
			wantKinds: []string{"ConfigMap", "DaemonSet", "ServiceAccount", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"},
			wantCfg: agent.Config{State: "/var/lib/corepin/agent.db", ReservedCPUs: "0", Policy: "corepin",
				PolicyOptions: []string{"full-pcpus-only"}, TopologyPolicy: "best-effort", LogFormat: "json", WakeScan: "default"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			objs := objects(t, render(t, tc.overrides))
			var kinds []string
			for k := range objs {
				kinds = append(kinds, k)
			}
			slices.Sort(kinds)
			if !slices.Equal(kinds, tc.wantKinds) {
				t.Fatalf("kinds = %v, want %v", kinds, tc.wantKinds)
			}
			cm := objs["ConfigMap"].(*corev1.ConfigMap)
			cfg, err := agent.ParseConfig(strings.NewReader(cm.Data["config.yaml"]))
			if err != nil {
				t.Fatalf("the ConfigMap's config.yaml is not a valid corepin config: %v\n%s", err, cm.Data["config.yaml"])
			}
			if fmt.Sprintf("%+v", cfg) != fmt.Sprintf("%+v", tc.wantCfg) {
				t.Errorf("config = %+v, want %+v", cfg, tc.wantCfg)
			}
			ds := objs["DaemonSet"].(*appsv1.DaemonSet)
			checkDaemonSet(t, ds, cm, objs["ServiceAccount"] != nil, tc.overrides["beSchedIdle"] == true)
			checkDebugfs(t, ds, tc.wantCfg.WakeScan == "full")
			irqMode, _ := tc.overrides["irqIsolate"].(string)
			checkIRQSync(t, ds, cmp.Or(irqMode, "off"), tc.wantCfg.State)
			publish, _ := tc.overrides["nodeResourceTopology"].(map[string]any)
			if got := slices.Contains(ds.Spec.Template.Spec.Containers[0].Args, "--publish-nrt=true"); got != (publish["publish"] == true) {
				t.Errorf("--publish-nrt in args = %v, want %v", got, publish["publish"] == true)
			}
			if got := slices.Contains(ds.Spec.Template.Spec.Containers[0].Args, "--annotate-node=true"); got != (tc.overrides["annotateNode"] == true) {
				t.Errorf("--annotate-node in args = %v, want %v", got, tc.overrides["annotateNode"] == true)
			}
			if tc.overrides["nodeSelector"] != nil {
				if got := objs["DaemonSet"].(*appsv1.DaemonSet).Spec.Template.Spec.NodeSelector["corepin.io/enabled"]; got != "true" {
					t.Errorf("nodeSelector corepin.io/enabled = %q, want \"true\"", got)
				}
			}
			if cr, ok := objs["ClusterRole"].(*rbacv1.ClusterRole); ok {
				// Exactly the verbs the plugin sends: a merge patch, and a
				// create for a missing NodeResourceTopology.
				want := []rbacv1.PolicyRule{
					{APIGroups: []string{"topology.node.k8s.io"}, Resources: []string{"noderesourcetopologies"}, Verbs: []string{"create", "patch"}},
					{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"patch"}},
				}
				if fmt.Sprint(cr.Rules) != fmt.Sprint(want) {
					t.Errorf("ClusterRole rules %+v, want %+v", cr.Rules, want)
				}
				crb := objs["ClusterRoleBinding"].(*rbacv1.ClusterRoleBinding)
				sa := objs["ServiceAccount"].(*corev1.ServiceAccount)
				if crb.RoleRef.Name != cr.Name || len(crb.Subjects) != 1 || crb.Subjects[0].Name != sa.Name || crb.Subjects[0].Namespace != sa.Namespace {
					t.Errorf("ClusterRoleBinding %+v does not bind ClusterRole %s to ServiceAccount %s/%s", crb, cr.Name, sa.Namespace, sa.Name)
				}
			}
		})
	}
}

// checkDaemonSet checks what the plugin needs from its pod: the selector
// matching the template, the runtime's socket, the state directory, the
// host's sysfs, the config at the path the args name, and no privilege
// but CAP_SYS_NICE with beSchedIdle (nice). A second container may be
// irq-sync alone (checkIRQSync).
func checkDaemonSet(t *testing.T, ds *appsv1.DaemonSet, cm *corev1.ConfigMap, withSA, nice bool) {
	t.Helper()
	if ds.Namespace != defaultRelease.Namespace || cm.Namespace != ds.Namespace {
		t.Errorf("namespaces: DaemonSet %q, ConfigMap %q, want %q", ds.Namespace, cm.Namespace, defaultRelease.Namespace)
	}
	sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil || sel.Empty() {
		t.Fatalf("DaemonSet selector %v: %v", ds.Spec.Selector, err)
	}
	for k, v := range ds.Spec.Selector.MatchLabels {
		if ds.Spec.Template.Labels[k] != v {
			t.Errorf("selector %s=%s does not match the pod template's labels %v", k, v, ds.Spec.Template.Labels)
		}
	}
	pod := ds.Spec.Template.Spec
	if (pod.ServiceAccountName != "") != withSA {
		t.Errorf("serviceAccountName = %q with rbac.create %v", pod.ServiceAccountName, withSA)
	}
	if n := len(pod.Containers); n != 1 && (n != 2 || pod.Containers[1].Name != "irq-sync") {
		t.Fatalf("%d containers, want the plugin's (and irq-sync's)", n)
	}
	c := pod.Containers[0]
	if c.Image == "" || len(c.Args) == 0 || c.Args[0] != "nri" {
		t.Errorf("container image %q args %v, want an image running `corepin nri`", c.Image, c.Args)
	}
	flags := map[string]string{}
	for _, a := range c.Args[1:] {
		k, v, ok := strings.Cut(a, "=")
		if !ok || !slices.Contains([]string{"--config", "--nri-socket", "--sysfs-root", "--state", "--publish-nrt", "--annotate-node", "--info-dir", "--irq-isolate"}, k) {
			t.Errorf("argument %q is not a --flag=value of corepin nri", a)
		}
		flags[k] = v
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m
	}
	vols := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		vols[v.Name] = v
	}
	for name := range mounts {
		if _, ok := vols[name]; !ok {
			t.Errorf("mount %s has no volume", name)
		}
	}
	if m := mounts["config"]; vols["config"].ConfigMap == nil || vols["config"].ConfigMap.Name != cm.Name ||
		filepath.Join(m.MountPath, "config.yaml") != flags["--config"] {
		t.Errorf("--config %q is not config.yaml of ConfigMap %s mounted at %q", flags["--config"], cm.Name, m.MountPath)
	}
	if v := vols["nri"].HostPath; v == nil || v.Path != flags["--nri-socket"] || mounts["nri"].MountPath != flags["--nri-socket"] ||
		v.Type == nil || *v.Type != corev1.HostPathSocket {
		t.Errorf("--nri-socket %q is not the host's socket mounted at the same path (%+v)", flags["--nri-socket"], vols["nri"])
	}
	// Only the parts of the host's /sys topology discovery reads, read only.
	for name, path := range map[string]string{"sys-devices": "/sys/devices", "sys-cgroup": "/sys/fs/cgroup"} {
		if v := vols[name].HostPath; v == nil || v.Path != path || mounts[name].MountPath != filepath.Join(flags["--sysfs-root"], path) || !mounts[name].ReadOnly {
			t.Errorf("--sysfs-root %q does not hold the host's %s read-only", flags["--sysfs-root"], path)
		}
	}
	// The containers' info files: the host's directory, seen by the
	// plugin at the same path (the runtime mounts it from the host).
	if dir, ok := flags["--info-dir"]; ok {
		if v := vols["container-info"].HostPath; v == nil || v.Path != dir || mounts["container-info"].MountPath != dir || mounts["container-info"].ReadOnly {
			t.Errorf("--info-dir %q is not the host's directory mounted writable at the same path (%+v)", dir, vols["container-info"])
		}
	}
	for _, v := range pod.Volumes {
		if _, mounted := mounts[v.Name]; !mounted {
			continue // irq-sync's (checkIRQSync)
		}
		if v.HostPath != nil && !slices.Contains([]string{"/sys/devices", "/sys/fs/cgroup", "/sys/kernel/debug", flags["--nri-socket"], "/var/lib/corepin", flags["--info-dir"]}, v.HostPath.Path) {
			t.Errorf("host path %s: the plugin uses no other", v.HostPath.Path)
		}
	}
	if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("the root filesystem is writable; the plugin writes only the state directory")
	}
	if v := vols["state"].HostPath; v == nil || !strings.HasPrefix("/var/lib/corepin/agent.db", v.Path+"/") {
		t.Errorf("the state file is not on the host (%+v)", vols["state"])
	}
	for _, f := range []string{"--publish-nrt", "--annotate-node"} {
		if _, ok := flags[f]; !ok {
			continue
		}
		var env bool
		for _, e := range c.Env {
			env = env || (e.Name == "NODE_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName")
		}
		if !env {
			t.Errorf("%s without NODE_NAME from spec.nodeName: %+v", f, c.Env)
		}
	}
	sc := c.SecurityContext
	// The one capability: CAP_SYS_NICE with the host's PID namespace, to
	// set SCHED_IDLE on BE containers' processes (beSchedIdle).
	wantCaps := []corev1.Capability(nil)
	if nice {
		wantCaps = []corev1.Capability{"SYS_NICE"}
	}
	if nice && !pod.HostPID {
		t.Errorf("beSchedIdle without hostPID: the plugin cannot name a BE container's process")
	}
	if sc == nil || (sc.Privileged != nil && *sc.Privileged) || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || !slices.Equal(sc.Capabilities.Add, wantCaps) {
		t.Errorf("securityContext %+v (hostPID %v): the plugin writes no cgroup and needs no privilege or capability but CAP_SYS_NICE with beSchedIdle", sc, pod.HostPID)
	}
	for _, m := range c.VolumeMounts {
		if strings.HasPrefix(m.MountPath, "/host/proc") {
			t.Errorf("the plugin mounts %s: it writes no /proc/irq (irq-sync does)", m.MountPath)
		}
	}
	if len(pod.Tolerations) == 0 || pod.PriorityClassName != "system-node-critical" {
		t.Errorf("the plugin must run on every node (tolerations %v) at system-node-critical (%q)", pod.Tolerations, pod.PriorityClassName)
	}
}

// checkIRQSync: with irqIsolate pod or exclusive (mode), and only then,
// the plugin runs with --irq-isolate=mode and the pod has the irq-sync
// container, in the host's PID namespace: corepin irq sync on the
// plugin's state file (state), the host's /proc/irq writable at
// /host/proc/irq and /run/corepin at /host/run/corepin under --root=/host,
// as root without privilege or capability, its root filesystem read-only,
// and no other host path.
func checkIRQSync(t *testing.T, ds *appsv1.DaemonSet, mode, state string) {
	t.Helper()
	pod := ds.Spec.Template.Spec
	i := slices.IndexFunc(pod.Containers, func(c corev1.Container) bool { return c.Name == "irq-sync" })
	flag := "--irq-isolate=" + mode
	if mode == "off" {
		if i >= 0 || slices.ContainsFunc(pod.Containers[0].Args, func(a string) bool { return strings.HasPrefix(a, "--irq-isolate") }) {
			t.Errorf("irqIsolate off: irq-sync container at %d, plugin args %v; want neither", i, pod.Containers[0].Args)
		}
		return
	}
	if !slices.Contains(pod.Containers[0].Args, flag) {
		t.Errorf("irqIsolate %s: the plugin's args %v lack %s", mode, pod.Containers[0].Args, flag)
	}
	if i < 0 {
		t.Fatalf("irqIsolate %s: no irq-sync container", mode)
	}
	c := pod.Containers[i]
	if want := []string{"irq", "sync", "--state=" + state, "--root=/host", "--log-format=json"}; !slices.Equal(c.Args, want) || c.Image != pod.Containers[0].Image {
		t.Errorf("irq-sync: image %s args %v, want the plugin's image (%s) with %v", c.Image, c.Args, pod.Containers[0].Image, want)
	}
	if !pod.HostPID {
		t.Errorf("irqIsolate %s without hostPID: irq-sync's holder identity would name another process to the host's holders", mode)
	}
	sc := c.SecurityContext
	if sc == nil || sc.Privileged == nil || *sc.Privileged || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 ||
		sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.RunAsUser == nil || *sc.RunAsUser != 0 {
		t.Errorf("irq-sync securityContext %+v: want root without privilege or capability, root filesystem read-only", sc)
	}
	vols := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		vols[v.Name] = v
	}
	want := map[string]struct{ host, at string }{
		"state": {filepath.Dir(state), filepath.Dir(state)}, "proc-irq": {"/proc/irq", "/host/proc/irq"}, "run-corepin": {"/run/corepin", "/host/run/corepin"},
	}
	if len(c.VolumeMounts) != len(want) {
		t.Errorf("irq-sync mounts %+v, want only %v", c.VolumeMounts, want)
	}
	for _, m := range c.VolumeMounts {
		w, ok := want[m.Name]
		v := vols[m.Name].HostPath
		if !ok || v == nil || v.Path != w.host || m.MountPath != w.at || m.ReadOnly {
			t.Errorf("irq-sync mount %+v of %+v, want the host's %s writable at %s", m, v, w.host, w.at)
		}
	}
}

// checkDebugfs: with wakeScan full (and only then) the plugin sees the
// host's /sys/kernel/debug, writable, where --sysfs-root puts it
// (/host/sys/kernel/debug), for the features file it switches.
func checkDebugfs(t *testing.T, ds *appsv1.DaemonSet, full bool) {
	t.Helper()
	pod := ds.Spec.Template.Spec
	var host string
	for _, v := range pod.Volumes {
		if v.Name == "sys-kernel-debug" && v.HostPath != nil {
			host = v.HostPath.Path
		}
	}
	c := pod.Containers[0]
	var mount *corev1.VolumeMount
	for i, m := range c.VolumeMounts {
		if m.Name == "sys-kernel-debug" {
			mount = &c.VolumeMounts[i]
		}
	}
	if !full {
		if host != "" || mount != nil {
			t.Errorf("wakeScan default mounts the host's debugfs (%q, %+v); it changes nothing", host, mount)
		}
		return
	}
	if host != "/sys/kernel/debug" || mount == nil || mount.MountPath != "/host/sys/kernel/debug" || mount.ReadOnly ||
		!slices.Contains(c.Args, "--sysfs-root=/host") {
		t.Errorf("wakeScan full: host path %q mounted %+v, args %v; want /sys/kernel/debug writable at /host/sys/kernel/debug under --sysfs-root=/host",
			host, mount, c.Args)
	}
}

func TestRenderRefusesMissingValues(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"Chart.yaml":        "apiVersion: v2\nname: x\nversion: 0.1.0\n",
		"values.yaml":       "a: 1\n",
		"templates/cm.yaml": "v: {{ .Values.nope }}\n",
	} {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755)
		os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644)
	}
	if _, err := Render(os.DirFS(dir), defaultRelease, nil); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("Render with a missing value = %v, want an error naming it", err)
	}
}

// The plain manifest is the chart rendered with its defaults; -update
// rewrites it.
func TestPlainManifestIsTheChartsDefaults(t *testing.T) {
	want := append([]byte("# corepin NRI plugin: deploy/helm/corepin rendered with its default values\n"+
		"# (namespace kube-system). Regenerate: go test ./kube/manifests -update\n"), render(t, nil)...)
	if *update {
		if err := os.WriteFile(plainFile, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(plainFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the chart rendered with its defaults; run go test ./kube/manifests -update", plainFile)
	}
	objects(t, got)
}

func TestContainerdSnippetEnablesNRIWithValidator(t *testing.T) {
	b, err := os.ReadFile(tomlFile)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Version int `toml:"version"`
		Plugins struct {
			NRI struct {
				Disable                   bool   `toml:"disable"`
				SocketPath                string `toml:"socket_path"`
				PluginRegistrationTimeout string `toml:"plugin_registration_timeout"`
				PluginRequestTimeout      string `toml:"plugin_request_timeout"`
				DefaultValidator          struct {
					Enable bool `toml:"enable"`
				} `toml:"default_validator"`
			} `toml:"io.containerd.nri.v1.nri"`
		} `toml:"plugins"`
	}
	dec := toml.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		t.Fatalf("parsing %s: %v", tomlFile, err)
	}
	nri := cfg.Plugins.NRI
	if cfg.Version < 3 || nri.Disable || !nri.DefaultValidator.Enable {
		t.Errorf("snippet: version %d, disable %v, default_validator.enable %v; want version >= 3, NRI on, validator on", cfg.Version, nri.Disable, nri.DefaultValidator.Enable)
	}
	objs := objects(t, render(t, nil))
	var mounted bool
	for _, v := range objs["DaemonSet"].(*appsv1.DaemonSet).Spec.Template.Spec.Volumes {
		mounted = mounted || (v.HostPath != nil && v.HostPath.Path == nri.SocketPath)
	}
	if !mounted {
		t.Errorf("the DaemonSet does not mount the snippet's NRI socket %s", nri.SocketPath)
	}
}
