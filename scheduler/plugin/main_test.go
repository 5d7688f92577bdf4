package plugin

import (
	"os"
	"testing"

	"k8s.io/kubernetes/pkg/scheduler/metrics"
)

// TestMain registers the scheduler's metrics, which the framework records
// into, as kube-scheduler does at start.
func TestMain(m *testing.M) {
	metrics.Register()
	os.Exit(m.Run())
}
