package manifests

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/corepin/corepin/schedext"
)

// TestChartLayerConfigIsCorepins: the layer config the chart hands
// scx_layered (schedExt.enabled, issue 30 §2) is `corepin sched-ext
// config`'s output byte for byte, so a change of corepin's layers cannot
// leave the chart's behind; with the value off the chart has none.
func TestChartLayerConfigIsCorepins(t *testing.T) {
	want, err := schedext.MarshalLayered(schedext.LayeredConfig())
	if err != nil {
		t.Fatal(err)
	}
	on := named(t, render(t, map[string]any{"schedExt": map[string]any{"enabled": true, "image": "registry.example.com/scx:1.1.4"}}))
	cm, ok := on["ConfigMap/kube-system/corepin-scx-layered"].(*corev1.ConfigMap)
	if !ok {
		t.Fatalf("schedExt.enabled=true: no ConfigMap corepin-scx-layered among %v", keys(on))
	}
	if got := cm.Data["layered.json"]; got != string(want) {
		t.Errorf("the chart's layered.json:\n%s\nwant corepin sched-ext config's:\n%s", got, want)
	}
	if _, ok := on["DaemonSet/kube-system/corepin-scx-layered"]; !ok {
		t.Errorf("schedExt.enabled=true: no DaemonSet corepin-scx-layered among %v", keys(on))
	}
	off := named(t, render(t, nil))
	for _, k := range []string{"ConfigMap/kube-system/corepin-scx-layered", "DaemonSet/kube-system/corepin-scx-layered"} {
		if _, ok := off[k]; ok {
			t.Errorf("schedExt off: the chart renders %s", k)
		}
	}
}
