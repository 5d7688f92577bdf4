package testutil

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"sigs.k8s.io/yaml"
)

// ChartScheduler is the chart's default scheduler.percentageOfNodesToScore
// and scheduler.weight (deploy/helm/corepin/values.yaml): what mode
// plugin's profile sets, for the benchmarks that run the plugin as the
// chart deploys it.
func ChartScheduler(tb testing.TB) (pct, weight int) {
	tb.Helper()
	_, file, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "deploy", "helm", "corepin", "values.yaml"))
	if err != nil {
		tb.Fatal(err)
	}
	var v struct {
		Scheduler struct {
			Pct    *int `json:"percentageOfNodesToScore"`
			Weight *int `json:"weight"`
		} `json:"scheduler"`
	}
	if err := yaml.Unmarshal(b, &v); err != nil || v.Scheduler.Pct == nil || v.Scheduler.Weight == nil {
		tb.Fatalf("the chart's values.yaml has no scheduler.percentageOfNodesToScore or scheduler.weight (%v)", err)
	}
	return *v.Scheduler.Pct, *v.Scheduler.Weight
}
