package helm

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// scxCaps are the capabilities the scx_layered container gets, and no
// others (issue 30 §2).
var scxCaps = []corev1.Capability{"BPF", "PERFMON", "SYS_ADMIN"}

// TestSchedExtLayered: schedExt.enabled (issue 30 §2) off renders no
// scx_layered container; on, exactly one, in a DaemonSet of its own, with
// exactly CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN added and every other
// dropped, not privileged, on a read-only root, running the binary and
// arguments given on the ConfigMap's layer config. Either way the NRI plugin's container
// stays capability-free and read-only, the chart lints clean, and
// kube/manifests renders it as Helm does.
func TestSchedExtLayered(t *testing.T) {
	for _, tc := range []struct {
		set string
		on  bool
	}{
		{set: "schedExt.enabled=false"},
		{set: "schedExt.enabled=true,schedExt.image=registry.example.com/scx:1.1.4,schedExt.args={--disable-topology=false}", on: true},
	} {
		t.Run(tc.set, func(t *testing.T) {
			m := renderClean(t, tc.set)
			objs := objects(t, m)
			var scx []corev1.Container
			var scxDS *appsv1.DaemonSet
			var cm *corev1.ConfigMap
			for _, o := range objs {
				switch o.GetKind() {
				case "DaemonSet":
					var ds appsv1.DaemonSet
					if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &ds); err != nil {
						t.Fatal(err)
					}
					for _, c := range ds.Spec.Template.Spec.Containers {
						switch {
						case strings.Contains(c.Name, "scx") || slices.ContainsFunc(c.Command, func(s string) bool { return strings.Contains(s, "scx_layered") }):
							scx = append(scx, c)
							scxDS = &ds
						case c.Name == "corepin-nri":
							sc := c.SecurityContext
							if sc == nil || sc.Capabilities == nil || len(sc.Capabilities.Add) != 0 ||
								!slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
								t.Errorf("--set %s: the NRI plugin's container is no longer capability-free and read-only: %+v", tc.set, sc)
							}
						}
					}
				case "ConfigMap":
					if o.GetName() == "corepin-scx-layered" {
						cm = &corev1.ConfigMap{}
						if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, cm); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
			if !tc.on {
				if len(scx) != 0 || cm != nil {
					t.Errorf("--set %s: %d scx_layered containers, config map %v; want none", tc.set, len(scx), cm != nil)
				}
				return
			}
			if len(scx) != 1 {
				t.Fatalf("--set %s: %d scx_layered containers, want exactly one", tc.set, len(scx))
			}
			c := scx[0]
			if scxDS.Name == "corepin-nri" || len(scxDS.Spec.Template.Spec.Containers) != 1 {
				t.Errorf("scx_layered runs in %s beside %d containers, want a DaemonSet of its own", scxDS.Name, len(scxDS.Spec.Template.Spec.Containers)-1)
			}
			sc := c.SecurityContext
			if sc == nil || sc.Capabilities == nil {
				t.Fatalf("scx_layered's container has no capabilities set: %+v", sc)
			}
			add := slices.Clone(sc.Capabilities.Add)
			slices.Sort(add)
			if !slices.Equal(add, scxCaps) || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
				t.Errorf("scx_layered's capabilities add %v drop %v, want exactly %v over ALL dropped", sc.Capabilities.Add, sc.Capabilities.Drop, scxCaps)
			}
			if sc.Privileged == nil || *sc.Privileged || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
				sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || scxDS.Spec.Template.Spec.HostPID {
				t.Errorf("scx_layered's container: privileged %v, read-only root %v, escalation %v, hostPID %v; want not privileged, read-only, no escalation, no host PIDs",
					sc.Privileged, sc.ReadOnlyRootFilesystem, sc.AllowPrivilegeEscalation, scxDS.Spec.Template.Spec.HostPID)
			}
			if want := []string{"/usr/bin/scx_layered"}; !slices.Equal(c.Command, want) || c.Image != "registry.example.com/scx:1.1.4" {
				t.Errorf("scx_layered runs %v from %s", c.Command, c.Image)
			}
			if want := []string{"--disable-topology=false", "f:/etc/corepin-scx/layered.json"}; !slices.Equal(c.Args, want) {
				t.Errorf("scx_layered's args %v, want %v", c.Args, want)
			}
			// That it is corepin sched-ext config's output byte for byte is
			// kube/manifests' TestChartLayerConfigIsCorepins (this module
			// stays clear of the state file's SQLite).
			if cm == nil || !strings.Contains(cm.Data["layered.json"], `"name": "be"`) {
				t.Errorf("no layer config in the chart's config map: %v", cm)
			}
		})
	}
}
