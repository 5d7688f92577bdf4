package manifests

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	schedconfig "k8s.io/kube-scheduler/config/v1"
	"sigs.k8s.io/yaml"
)

const schedulerConfigFile = "../../deploy/kubernetes/scheduler/scheduler-config.yaml"

// named decodes every document of stream strictly into its typed object,
// keyed "Kind/namespace/name".
func named(t *testing.T, stream []byte) map[string]any {
	t.Helper()
	out := map[string]any{}
	for i, doc := range Documents(stream) {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			t.Fatalf("document %d: %v\n%s", i, err, doc)
		}
		var obj metav1.Object
		switch tm.APIVersion + " " + tm.Kind {
		case "apps/v1 DaemonSet":
			obj = &appsv1.DaemonSet{}
		case "apps/v1 Deployment":
			obj = &appsv1.Deployment{}
		case "v1 ConfigMap":
			obj = &corev1.ConfigMap{}
		case "v1 ServiceAccount":
			obj = &corev1.ServiceAccount{}
		case "rbac.authorization.k8s.io/v1 ClusterRole":
			obj = &rbacv1.ClusterRole{}
		case "rbac.authorization.k8s.io/v1 ClusterRoleBinding":
			obj = &rbacv1.ClusterRoleBinding{}
		case "rbac.authorization.k8s.io/v1 Role":
			obj = &rbacv1.Role{}
		case "rbac.authorization.k8s.io/v1 RoleBinding":
			obj = &rbacv1.RoleBinding{}
		case "admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy":
			obj = &admissionregistrationv1.ValidatingAdmissionPolicy{}
		case "admissionregistration.k8s.io/v1 ValidatingAdmissionPolicyBinding":
			obj = &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
		default:
			t.Fatalf("document %d: unexpected %s %s", i, tm.APIVersion, tm.Kind)
		}
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			t.Fatalf("document %d (%s): %v\n%s", i, tm.Kind, err, doc)
		}
		key := tm.Kind + "/" + obj.GetNamespace() + "/" + obj.GetName()
		if _, dup := out[key]; dup {
			t.Fatalf("two documents %s", key)
		}
		out[key] = obj
	}
	return out
}

func parseSchedulerConfig(t *testing.T, data string) schedconfig.KubeSchedulerConfiguration {
	t.Helper()
	var cfg schedconfig.KubeSchedulerConfiguration
	if err := yaml.UnmarshalStrict([]byte(data), &cfg); err != nil {
		t.Fatalf("scheduler config: %v\n%s", err, data)
	}
	if cfg.APIVersion != "kubescheduler.config.k8s.io/v1" || cfg.Kind != "KubeSchedulerConfiguration" {
		t.Fatalf("apiVersion/kind %s/%s", cfg.APIVersion, cfg.Kind)
	}
	if len(cfg.Extenders) != 1 {
		t.Fatalf("%d extenders, want corepin's", len(cfg.Extenders))
	}
	return cfg
}

// TestChartShipsTheScheduler renders the chart with scheduler.enabled and
// checks the second scheduler: its configuration is a valid
// KubeSchedulerConfiguration whose extender stanza is the plain file's (the
// one for the cluster's own scheduler) and reaches the extender container
// of the same pod; the profile carries the scheduler name pods opt in with;
// its own lease is grantable; and the nodes publish their state for it.
func TestChartShipsTheScheduler(t *testing.T) {
	objs := named(t, render(t, map[string]any{"scheduler": map[string]any{"enabled": true, "mode": "extender", "name": "pinned", "extenderPort": 19999}}))
	ns := defaultRelease.Namespace
	cm, ok := objs["ConfigMap/"+ns+"/corepin-scheduler"].(*corev1.ConfigMap)
	if !ok {
		t.Fatalf("no ConfigMap corepin-scheduler; objects: %v", keys(objs))
	}
	cfg := parseSchedulerConfig(t, cm.Data["scheduler-config.yaml"])
	if len(cfg.Profiles) != 1 || cfg.Profiles[0].SchedulerName == nil || *cfg.Profiles[0].SchedulerName != "pinned" {
		t.Errorf("profiles %+v, want one named pinned", cfg.Profiles)
	}
	le := cfg.LeaderElection
	if le.LeaderElect == nil || !*le.LeaderElect || le.ResourceName != "corepin-scheduler" || le.ResourceNamespace != ns {
		t.Errorf("leader election %+v: want its own lease corepin-scheduler in %s", le, ns)
	}

	// The same extender stanza as the plain configuration, but the port.
	plain, err := os.ReadFile(schedulerConfigFile)
	if err != nil {
		t.Fatal(err)
	}
	pcfg := parseSchedulerConfig(t, string(plain))
	x, px := cfg.Extenders[0], pcfg.Extenders[0]
	u, err := url.Parse(x.URLPrefix)
	if err != nil || u.Host != "127.0.0.1:19999" {
		t.Errorf("urlPrefix %q, want the extender's loopback port 19999 (%v)", x.URLPrefix, err)
	}
	x.URLPrefix, px.URLPrefix = "", ""
	if fmt.Sprintf("%+v", x) != fmt.Sprintf("%+v", px) {
		t.Errorf("chart extender stanza %+v differs from %s's %+v", x, schedulerConfigFile, px)
	}
	if x.Ignorable {
		t.Errorf("ignorable by default: pods would land unaligned while the extender is down")
	}

	dep, ok := objs["Deployment/"+ns+"/corepin-scheduler"].(*appsv1.Deployment)
	if !ok {
		t.Fatalf("no Deployment corepin-scheduler; objects: %v", keys(objs))
	}
	pod := dep.Spec.Template.Spec
	ctr := map[string]corev1.Container{}
	for _, c := range pod.Containers {
		ctr[c.Name] = c
	}
	ks, ext := ctr["kube-scheduler"], ctr["extender"]
	var configFlag string
	for _, a := range ks.Command {
		if v, ok := strings.CutPrefix(a, "--config="); ok {
			configFlag = v
		}
	}
	var mounted bool
	for _, m := range ks.VolumeMounts {
		for _, v := range pod.Volumes {
			if v.Name == m.Name && v.ConfigMap != nil && v.ConfigMap.Name == cm.Name && filepath.Join(m.MountPath, "scheduler-config.yaml") == configFlag {
				mounted = true
			}
		}
	}
	if !mounted {
		t.Errorf("kube-scheduler --config=%q is not scheduler-config.yaml of ConfigMap %s", configFlag, cm.Name)
	}
	if len(ext.Args) < 2 || ext.Args[0] != "extender" || !slices.Contains(ext.Args, "--listen=127.0.0.1:19999") {
		t.Errorf("extender container args %v, want corepin extender --listen=127.0.0.1:19999", ext.Args)
	}
	// Probes reach the extender's own ops port, not the loopback verbs.
	var metricsPort int32
	for _, p := range ext.Ports {
		if p.Name == "metrics" {
			metricsPort = p.ContainerPort
		}
	}
	if metricsPort == 0 || !slices.Contains(ext.Args, fmt.Sprintf("--metrics-listen=:%d", metricsPort)) {
		t.Errorf("extender ports %+v args %v: want a metrics port it serves with --metrics-listen", ext.Ports, ext.Args)
	}
	for _, pr := range []*corev1.Probe{ext.LivenessProbe, ext.ReadinessProbe} {
		if pr == nil || pr.HTTPGet == nil || pr.HTTPGet.Path != "/healthz" || pr.HTTPGet.Port.String() != "metrics" || pr.HTTPGet.Host != "" {
			t.Errorf("extender probe %+v: want GET /healthz on the metrics port at the pod IP", pr)
		}
	}
	if pod.ServiceAccountName != "corepin-scheduler" {
		t.Errorf("serviceAccountName %q", pod.ServiceAccountName)
	}
	sel, err := metav1.LabelSelectorAsSelector(dep.Spec.Selector)
	if err != nil || sel.Empty() {
		t.Errorf("Deployment selector %v: %v", dep.Spec.Selector, err)
	}
	for k, v := range dep.Spec.Selector.MatchLabels {
		if dep.Spec.Template.Labels[k] != v {
			t.Errorf("selector %s=%s does not match the template", k, v)
		}
	}

	// The scheduler's own lease, bound to its service account.
	role, ok := objs["Role/"+ns+"/corepin-scheduler-lease"].(*rbacv1.Role)
	if !ok {
		t.Fatalf("no lease Role; objects: %v", keys(objs))
	}
	var canUpdate bool
	for _, r := range role.Rules {
		canUpdate = canUpdate || (slices.Contains(r.Resources, "leases") && slices.Contains(r.ResourceNames, le.ResourceName) && slices.Contains(r.Verbs, "update"))
	}
	if !canUpdate {
		t.Errorf("Role %+v does not let the scheduler update lease %s", role.Rules, le.ResourceName)
	}
	for _, key := range []string{"ClusterRoleBinding//corepin-scheduler-as-kube-scheduler", "RoleBinding/kube-system/corepin-scheduler-authentication-reader", "RoleBinding/" + ns + "/corepin-scheduler-lease"} {
		var subj []rbacv1.Subject
		switch b := objs[key].(type) {
		case *rbacv1.ClusterRoleBinding:
			subj = b.Subjects
		case *rbacv1.RoleBinding:
			subj = b.Subjects
		default:
			t.Errorf("no %s; objects: %v", key, keys(objs))
			continue
		}
		if len(subj) != 1 || subj[0].Name != "corepin-scheduler" || subj[0].Namespace != ns {
			t.Errorf("%s binds %+v, want ServiceAccount %s/corepin-scheduler", key, subj, ns)
		}
	}

	// The nodes publish what the extender reads.
	ds := objs["DaemonSet/"+ns+"/corepin-nri"].(*appsv1.DaemonSet)
	if !slices.Contains(ds.Spec.Template.Spec.Containers[0].Args, "--annotate-node=true") {
		t.Errorf("scheduler.enabled without --annotate-node on the plugin: %v", ds.Spec.Template.Spec.Containers[0].Args)
	}
}

// TestChartSchedulerNRT checks scheduler.nrt: the extender runs with --nrt
// and its service account may list and watch NodeResourceTopology objects
// (and no more); without it, neither.
func TestChartSchedulerNRT(t *testing.T) {
	ns := defaultRelease.Namespace
	for _, nrt := range []bool{false, true} {
		t.Run(fmt.Sprint("nrt=", nrt), func(t *testing.T) {
			objs := named(t, render(t, map[string]any{"scheduler": map[string]any{"enabled": true, "mode": "extender", "nrt": nrt}}))
			dep := objs["Deployment/"+ns+"/corepin-scheduler"].(*appsv1.Deployment)
			var args []string
			for _, c := range dep.Spec.Template.Spec.Containers {
				if c.Name == "extender" {
					args = c.Args
				}
			}
			if got := slices.Contains(args, "--nrt"); got != nrt {
				t.Errorf("extender args %v: --nrt present %v, want %v", args, got, nrt)
			}
			// What the scheduler's service account may do with
			// noderesourcetopologies, through the chart's own roles.
			var verbs []string
			for _, o := range objs {
				b, ok := o.(*rbacv1.ClusterRoleBinding)
				if !ok || !slices.ContainsFunc(b.Subjects, func(s rbacv1.Subject) bool {
					return s.Kind == "ServiceAccount" && s.Name == "corepin-scheduler" && s.Namespace == ns
				}) {
					continue
				}
				role, ok := objs["ClusterRole//"+b.RoleRef.Name].(*rbacv1.ClusterRole)
				if !ok {
					continue // a cluster's own role (system:kube-scheduler)
				}
				for _, r := range role.Rules {
					if slices.Contains(r.APIGroups, "topology.node.k8s.io") && slices.Contains(r.Resources, "noderesourcetopologies") {
						verbs = append(verbs, r.Verbs...)
					}
				}
			}
			slices.Sort(verbs)
			want := []string(nil)
			if nrt {
				want = []string{"list", "watch"}
			}
			if !slices.Equal(verbs, want) {
				t.Errorf("corepin-scheduler may %v noderesourcetopologies, want %v", verbs, want)
			}
		})
	}
}

// TestChartSchedulerTrackPods checks scheduler.trackPods: on by default,
// the extender runs with --track-pods; off, without.
func TestChartSchedulerTrackPods(t *testing.T) {
	ns := defaultRelease.Namespace
	for _, tc := range []struct {
		values map[string]any
		want   bool
	}{
		{map[string]any{"enabled": true, "mode": "extender"}, true},
		{map[string]any{"enabled": true, "mode": "extender", "trackPods": false}, false},
	} {
		objs := named(t, render(t, map[string]any{"scheduler": tc.values}))
		dep := objs["Deployment/"+ns+"/corepin-scheduler"].(*appsv1.Deployment)
		var args []string
		for _, c := range dep.Spec.Template.Spec.Containers {
			if c.Name == "extender" {
				args = c.Args
			}
		}
		if got := slices.Contains(args, "--track-pods"); got != tc.want {
			t.Errorf("scheduler %v: extender args %v, --track-pods present %v, want %v", tc.values, args, got, tc.want)
		}
	}
}

func TestChartWithoutSchedulerHasNone(t *testing.T) {
	for key := range named(t, render(t, nil)) {
		if strings.Contains(key, "corepin-scheduler") {
			t.Errorf("default values render %s", key)
		}
	}
}

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestChartSchedulerExtenderMemoryLimit checks that the extender container
// is given scheduler.extenderResources and runs with --memory-limit set to
// its own memory limit (through resourceFieldRef), so the extender fits
// what the container may use (issue 17) whatever the limit is set to.
func TestChartSchedulerExtenderMemoryLimit(t *testing.T) {
	ns := defaultRelease.Namespace
	for _, tc := range []struct {
		values map[string]any
		want   string
	}{
		{map[string]any{"enabled": true, "mode": "extender"}, "256Mi"},
		{map[string]any{"enabled": true, "mode": "extender", "extenderResources": map[string]any{"limits": map[string]any{"memory": "1Gi"}}}, "1Gi"},
	} {
		objs := named(t, render(t, map[string]any{"scheduler": tc.values}))
		dep := objs["Deployment/"+ns+"/corepin-scheduler"].(*appsv1.Deployment)
		var ext corev1.Container
		for _, c := range dep.Spec.Template.Spec.Containers {
			if c.Name == "extender" {
				ext = c
			}
		}
		if got := ext.Resources.Limits[corev1.ResourceMemory]; got.String() != tc.want {
			t.Errorf("scheduler %v: extender memory limit %s, want %s", tc.values, got.String(), tc.want)
		}
		var flag string
		for _, a := range ext.Args {
			if v, ok := strings.CutPrefix(a, "--memory-limit="); ok {
				flag = v
			}
		}
		var ref *corev1.ResourceFieldSelector
		for _, e := range ext.Env {
			if "$("+e.Name+")" == flag && e.ValueFrom != nil {
				ref = e.ValueFrom.ResourceFieldRef
			}
		}
		if ref == nil || ref.ContainerName != "extender" || ref.Resource != "limits.memory" || (!ref.Divisor.IsZero() && ref.Divisor.Value() != 1) {
			t.Errorf("scheduler %v: extender --memory-limit=%q with env %+v, want the variable of its own limits.memory in bytes", tc.values, flag, ext.Env)
		}
	}
}

// schedulerPod is the corepin-scheduler Deployment's pod and the
// KubeSchedulerConfiguration it runs, rendered with values.
func schedulerPod(t *testing.T, values map[string]any) (corev1.PodSpec, schedconfig.KubeSchedulerConfiguration) {
	t.Helper()
	objs := named(t, render(t, values))
	ns := defaultRelease.Namespace
	dep, ok := objs["Deployment/"+ns+"/corepin-scheduler"].(*appsv1.Deployment)
	if !ok {
		t.Fatalf("no Deployment corepin-scheduler; objects: %v", keys(objs))
	}
	cm := objs["ConfigMap/"+ns+"/corepin-scheduler"].(*corev1.ConfigMap)
	var cfg schedconfig.KubeSchedulerConfiguration
	if err := yaml.UnmarshalStrict([]byte(cm.Data["scheduler-config.yaml"]), &cfg); err != nil {
		t.Fatalf("scheduler config: %v\n%s", err, cm.Data["scheduler-config.yaml"])
	}
	return dep.Spec.Template.Spec, cfg
}

// TestChartShipsThePluginScheduler checks scheduler.mode plugin, the
// default: one container running make image's corepin-scheduler image
// (scheduler.repository at the plugin image's tag), a profile enabling
// corepin's plugin ("Corepin", scheduler/plugin's Name) with the chart's
// weight and no extender, and a client sized for a burst of pods.
func TestChartShipsThePluginScheduler(t *testing.T) {
	app := chartAppVersion(t)
	for _, tc := range []struct {
		name      string
		scheduler map[string]any
		image     map[string]any
		want      string
	}{
		{"default", map[string]any{"enabled": true}, nil, "ghcr.io/corepin/corepin-scheduler:" + app},
		{"image.tag", map[string]any{"enabled": true}, map[string]any{"tag": "1.2.3"}, "ghcr.io/corepin/corepin-scheduler:1.2.3"},
		{"scheduler.image", map[string]any{"enabled": true, "image": "example.com/s:9"}, nil, "example.com/s:9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			values := map[string]any{"scheduler": tc.scheduler}
			if tc.image != nil {
				values["image"] = tc.image
			}
			pod, cfg := schedulerPod(t, values)
			if len(pod.Containers) != 1 || pod.Containers[0].Name != "corepin-scheduler" {
				t.Fatalf("containers %+v, want corepin-scheduler alone", pod.Containers)
			}
			c := pod.Containers[0]
			if c.Image != tc.want || len(c.Command) != 0 || !slices.Equal(c.Args, []string{"--config=/etc/corepin-scheduler/scheduler-config.yaml"}) {
				t.Errorf("container image %q command %v args %v, want %s run by its entrypoint with the ConfigMap's --config", c.Image, c.Command, c.Args, tc.want)
			}
			if len(cfg.Extenders) != 0 || len(cfg.Profiles) != 1 || cfg.Profiles[0].Plugins == nil {
				t.Fatalf("config %+v: want one profile with plugins and no extender", cfg)
			}
			mp := cfg.Profiles[0].Plugins.MultiPoint.Enabled
			if len(mp) != 1 || mp[0].Name != "Corepin" || mp[0].Weight == nil || *mp[0].Weight != 5 {
				t.Errorf("profile multiPoint plugins %+v, want Corepin at weight 5 (scheduler.weight)", mp)
			}
			if cc := cfg.ClientConnection; cc.QPS != 500 || cc.Burst != 1000 {
				t.Errorf("clientConnection qps %v burst %v, want 500 and 1000 (kube-scheduler's 50 caps binding)", cc.QPS, cc.Burst)
			}
			if p := cfg.Profiles[0].PercentageOfNodesToScore; p == nil || *p != 1 {
				t.Errorf("profile percentageOfNodesToScore %s, want 1 (scheduler.percentageOfNodesToScore)", percentage(p))
			}
		})
	}
	// 0 is kube-scheduler's adaptive default: the field is left out.
	_, cfg := schedulerPod(t, map[string]any{"scheduler": map[string]any{"enabled": true, "percentageOfNodesToScore": 0}})
	if p := cfg.Profiles[0].PercentageOfNodesToScore; p != nil {
		t.Errorf("scheduler.percentageOfNodesToScore 0: profile percentageOfNodesToScore %d, want it unset (kube-scheduler's adaptive default)", *p)
	}
	pod, cfg := schedulerPod(t, map[string]any{"scheduler": map[string]any{"enabled": true, "mode": "extender", "qps": 80, "burst": 160}})
	if p := cfg.Profiles[0].PercentageOfNodesToScore; p != nil {
		t.Errorf("mode extender: profile percentageOfNodesToScore %d, want it unset (mode plugin's alone)", *p)
	}
	if len(pod.Containers) != 2 || pod.Containers[0].Image != "registry.k8s.io/kube-scheduler:v1.36.3" {
		t.Errorf("mode extender: containers %+v, want kube-scheduler's image and the extender", pod.Containers)
	}
	if cc := cfg.ClientConnection; cc.QPS != 80 || cc.Burst != 160 {
		t.Errorf("mode extender: clientConnection qps %v burst %v, want the values' 80 and 160", cc.QPS, cc.Burst)
	}
}

// percentage says a profile's percentageOfNodesToScore, "unset" when nil.
func percentage(p *int32) string {
	if p == nil {
		return "unset"
	}
	return strconv.Itoa(int(*p))
}

func chartAppVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../deploy/helm/corepin/Chart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(b, &c); err != nil || c.AppVersion == "" {
		t.Fatalf("Chart.yaml appVersion %q: %v", c.AppVersion, err)
	}
	return c.AppVersion
}

// TestChartAPIServerWithoutKubeProxy checks apiServer.host and
// hostNetwork: every corepin container gets KUBERNETES_SERVICE_HOST and
// _PORT (over the kubelet's) and both pods the node's network; by
// default neither.
func TestChartAPIServerWithoutKubeProxy(t *testing.T) {
	ns := defaultRelease.Namespace
	for _, mode := range []string{"plugin", "extender"} {
		for _, set := range []bool{false, true} {
			values := map[string]any{"scheduler": map[string]any{"enabled": true, "mode": mode}}
			if set {
				values["apiServer"] = map[string]any{"host": "10.0.0.1", "port": 7443}
				values["hostNetwork"] = true
			}
			objs := named(t, render(t, values))
			ds := objs["DaemonSet/"+ns+"/corepin-nri"].(*appsv1.DaemonSet)
			dep := objs["Deployment/"+ns+"/corepin-scheduler"].(*appsv1.Deployment)
			// Two pods can not both hold the node's port 10259.
			if ru := dep.Spec.Strategy.RollingUpdate; set && (ru == nil || ru.MaxSurge == nil || ru.MaxSurge.IntValue() != 0) {
				t.Errorf("mode %s on the host's network: rolling update %+v, want no surge", mode, ru)
			}
			for _, pod := range []corev1.PodSpec{ds.Spec.Template.Spec, dep.Spec.Template.Spec} {
				if pod.HostNetwork != set || (set && pod.DNSPolicy != corev1.DNSClusterFirstWithHostNet) {
					t.Errorf("mode %s, set %v: hostNetwork %v dnsPolicy %q", mode, set, pod.HostNetwork, pod.DNSPolicy)
				}
				for _, c := range pod.Containers {
					env := map[string]string{}
					for _, e := range c.Env {
						env[e.Name] = e.Value
					}
					host, port := env["KUBERNETES_SERVICE_HOST"], env["KUBERNETES_SERVICE_PORT"]
					if set && (host != "10.0.0.1" || port != "7443") || !set && (host != "" || port != "") {
						t.Errorf("mode %s, apiServer set %v: container %s has KUBERNETES_SERVICE_HOST %q _PORT %q", mode, set, c.Name, host, port)
					}
				}
			}
		}
	}
}
