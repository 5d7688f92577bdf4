package testutil

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"sigs.k8s.io/yaml"
)

// ChartScoreShare is the chart's default
// scheduler.percentageOfNodesToScore (deploy/helm/corepin/values.yaml):
// the share of the nodes that can take a pod mode plugin's profile has
// kube-scheduler score, for the benchmarks that count as it does.
func ChartScoreShare(tb testing.TB) int {
	tb.Helper()
	_, file, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "deploy", "helm", "corepin", "values.yaml"))
	if err != nil {
		tb.Fatal(err)
	}
	var v struct {
		Scheduler struct {
			Pct *int `json:"percentageOfNodesToScore"`
		} `json:"scheduler"`
	}
	if err := yaml.Unmarshal(b, &v); err != nil || v.Scheduler.Pct == nil {
		tb.Fatalf("the chart's values.yaml has no scheduler.percentageOfNodesToScore (%v)", err)
	}
	return *v.Scheduler.Pct
}
