package nri

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"

	"github.com/corepin/corepin/internal/testutil"
	"github.com/corepin/corepin/topology"
	"github.com/corepin/corepin/wakescan"
)

// TestRunWakeScanFollowsBEContainers: with wake_scan full the plugin
// turns SIS_UTIL off once a BE container is admitted and restores the
// value found once it is removed (a root holding the features file as a
// regular file stands for the host's /host).
func TestRunWakeScanFollowsBEContainers(t *testing.T) {
	root := t.TempDir()
	path := filepath.Join(root, topology.SchedFeaturesFile)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("WA_IDLE SIS_UTIL NO_SIS_PROP\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	says := func(off bool) func() bool {
		return func() bool {
			b, _ := os.ReadFile(path)
			return strings.Contains(string(b), "SIS_UTIL") && strings.Contains(string(b), "NO_SIS_UTIL") == off
		}
	}
	f := newRuntime(t, socketDir(t))
	t.Cleanup(f.r.Stop)
	runPlugin(t, f, Options{WakeScan: wakescan.Full, SchedRoot: root})
	c := f.mustCreate(be)
	testutil.Eventually(t, "SIS_UTIL off while the BE container is admitted", says(true))
	f.mu.Lock()
	pod := f.pods[c.PodSandboxId]
	f.mu.Unlock()
	if err := f.r.RemoveContainer(context.Background(), &api.RemoveContainerRequest{Pod: pod, Container: c}); err != nil {
		t.Fatalf("RemoveContainer: %v", err)
	}
	testutil.Eventually(t, "SIS_UTIL back on once the BE container is removed", says(false))
}
