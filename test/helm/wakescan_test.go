package helm

import (
	"os"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/v2/lint/support"

	"github.com/corepin/corepin/kube/manifests"
)

// TestWakeScanFull: wakeScan=full (issue 28 §2, a value the switches do
// not multiply) lints clean, puts wake_scan: full in the plugin's config,
// mounts the host's /sys/kernel/debug at /host/sys/kernel/debug, and
// kube/manifests renders it as Helm does; the default puts wake_scan:
// default and mounts nothing more.
func TestWakeScanFull(t *testing.T) {
	for _, tc := range []struct {
		set     string
		config  string
		debugfs bool
	}{
		{set: "wakeScan=default", config: "wake_scan: default"},
		{set: "wakeScan=full", config: "wake_scan: full", debugfs: true},
	} {
		t.Run(tc.set, func(t *testing.T) {
			vals := values(t, tc.set)
			msgs, errs := lint(t, vals)
			for _, m := range msgs {
				if m.Severity > support.InfoSev {
					t.Errorf("helm lint --strict --set %s: %s", tc.set, m)
				}
			}
			for _, err := range errs {
				t.Errorf("helm lint --strict --set %s: %v", tc.set, err)
			}
			m, err := template(t, vals)
			if err != nil {
				t.Fatalf("helm template --set %s: %v", tc.set, err)
			}
			if !strings.Contains(m, "    "+tc.config+"\n") {
				t.Errorf("helm template --set %s: the config lacks %q", tc.set, tc.config)
			}
			hasMount := strings.Contains(m, "mountPath: /host/sys/kernel/debug") && strings.Contains(m, "path: /sys/kernel/debug")
			if hasMount != tc.debugfs {
				t.Errorf("helm template --set %s: host debugfs mounted %v, want %v", tc.set, hasMount, tc.debugfs)
			}
			own, err := manifests.Render(os.DirFS(chartDir), manifests.Release{Name: "corepin", Namespace: namespace}, vals)
			if err != nil {
				t.Fatalf("kube/manifests --set %s: %v", tc.set, err)
			}
			if diff := sameObjects(objects(t, m), objects(t, string(own))); diff != "" {
				t.Errorf("--set %s: kube/manifests renders differently from Helm: %s", tc.set, diff)
			}
		})
	}
}
