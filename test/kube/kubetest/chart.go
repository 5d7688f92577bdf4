package kubetest

import (
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/corepin/corepin/kube/manifests"
)

// ChartDir is the Helm chart, from a test package directory under
// test/kube.
const ChartDir = "../../../deploy/helm/corepin"

// ChartSchedulerConfig is the KubeSchedulerConfiguration the chart's
// ConfigMap corepin-scheduler holds, rendered by kube/manifests as Helm
// renders it (test/helm holds the two equal) with the scheduler values
// given (scheduler.enabled set), decoded as a map for a test to adapt.
func ChartSchedulerConfig(t *testing.T, scheduler map[string]any) map[string]any {
	t.Helper()
	values := map[string]any{"enabled": true}
	for k, v := range scheduler {
		values[k] = v
	}
	stream, err := manifests.Render(os.DirFS(ChartDir), manifests.Release{Name: "corepin", Namespace: "kube-system"},
		map[string]any{"scheduler": values})
	if err != nil {
		t.Fatalf("rendering the chart: %v", err)
	}
	for _, doc := range manifests.Documents(stream) {
		var cm corev1.ConfigMap
		if yaml.Unmarshal(doc, &cm) != nil || cm.Kind != "ConfigMap" || cm.Name != "corepin-scheduler" {
			continue
		}
		var cfg map[string]any
		if err := yaml.Unmarshal([]byte(cm.Data["scheduler-config.yaml"]), &cfg); err != nil {
			t.Fatalf("the chart's scheduler config: %v", err)
		}
		return cfg
	}
	t.Fatal("the chart rendered no ConfigMap corepin-scheduler with scheduler.enabled")
	return nil
}
