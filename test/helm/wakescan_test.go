package helm

import (
	"strings"
	"testing"
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
			m := renderClean(t, tc.set)
			if !strings.Contains(m, "    "+tc.config+"\n") {
				t.Errorf("helm template --set %s: the config lacks %q", tc.set, tc.config)
			}
			hasMount := strings.Contains(m, "mountPath: /host/sys/kernel/debug") && strings.Contains(m, "path: /sys/kernel/debug")
			if hasMount != tc.debugfs {
				t.Errorf("helm template --set %s: host debugfs mounted %v, want %v", tc.set, hasMount, tc.debugfs)
			}
		})
	}
}
