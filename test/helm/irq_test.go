package helm

import (
	"slices"
	"strings"
	"testing"
)

// TestIRQIsolate: irqIsolate (issue 31 §2) lints clean at each value;
// with pod or exclusive (and only then) the DaemonSet's pod has the
// irq-sync container (corepin irq sync, the host's /proc/irq mounted at
// /host/proc/irq, no privilege) and runs in the host's PID namespace, and
// the plugin gets --irq-isolate with the value; kube/manifests renders
// each as Helm does.
func TestIRQIsolate(t *testing.T) {
	for _, tc := range []struct {
		set string
		on  bool
	}{
		{set: "irqIsolate=off"},
		{set: "irqIsolate=pod", on: true},
		{set: "irqIsolate=exclusive", on: true},
	} {
		t.Run(tc.set, func(t *testing.T) {
			m := renderClean(t, tc.set)
			var ds map[string]any
			for _, o := range objects(t, m) {
				if o.GetKind() == "DaemonSet" {
					ds = o.Object
				}
			}
			if ds == nil {
				t.Fatalf("helm template --set %s: no DaemonSet", tc.set)
			}
			spec := ds["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
			var names []string
			var plugin, sync map[string]any
			for _, c := range spec["containers"].([]any) {
				c := c.(map[string]any)
				names = append(names, c["name"].(string))
				switch c["name"] {
				case "corepin-nri":
					plugin = c
				case "irq-sync":
					sync = c
				}
			}
			if (sync != nil) != tc.on || len(names) != map[bool]int{false: 1, true: 2}[tc.on] {
				t.Errorf("helm template --set %s: containers %v, want irq-sync %v", tc.set, names, tc.on)
			}
			if hostPID, _ := spec["hostPID"].(bool); hostPID != tc.on {
				t.Errorf("helm template --set %s: hostPID %v, want %v", tc.set, hostPID, tc.on)
			}
			mode := strings.TrimPrefix(tc.set, "irqIsolate=")
			if got := slices.Contains(anys(plugin["args"]), "--irq-isolate="+mode); got != tc.on {
				t.Errorf("helm template --set %s: plugin args %v, --irq-isolate=%s %v, want %v", tc.set, plugin["args"], mode, got, tc.on)
			}
			if tc.on {
				if args := anys(sync["args"]); !slices.Equal(args[:3], []string{"irq", "sync", "--state=/var/lib/corepin/agent.db"}) || !slices.Contains(args, "--root=/host") {
					t.Errorf("helm template --set %s: irq-sync args %v", tc.set, args)
				}
				if !strings.Contains(m, "mountPath: /host/proc/irq") || !strings.Contains(m, "path: /proc/irq") {
					t.Errorf("helm template --set %s: the host's /proc/irq is not mounted at /host/proc/irq", tc.set)
				}
				if sc := sync["securityContext"].(map[string]any); sc["privileged"] != false || sc["allowPrivilegeEscalation"] != false {
					t.Errorf("helm template --set %s: irq-sync securityContext %v, want no privilege", tc.set, sc)
				}
			}
		})
	}
}

// anys is a rendered list of strings.
func anys(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}
