package extender

import (
	"net/http"
	"net/url"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	schedconfig "k8s.io/kube-scheduler/config/v1"
	"sigs.k8s.io/yaml"
)

// TestShippedSchedulerConfig parses the scheduler configuration shipped in
// deploy/ strictly into the KubeSchedulerConfiguration v1 type and checks
// that its extender stanza names the verbs this handler serves.
func TestShippedSchedulerConfig(t *testing.T) {
	data, err := os.ReadFile("../../deploy/kubernetes/scheduler/scheduler-config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg schedconfig.KubeSchedulerConfiguration
	if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
		t.Fatalf("parsing scheduler-config.yaml: %v", err)
	}
	if cfg.APIVersion != "kubescheduler.config.k8s.io/v1" || cfg.Kind != "KubeSchedulerConfiguration" {
		t.Errorf("apiVersion/kind = %s/%s, want kubescheduler.config.k8s.io/v1/KubeSchedulerConfiguration", cfg.APIVersion, cfg.Kind)
	}
	if len(cfg.Extenders) != 1 {
		t.Fatalf("%d extenders, want 1", len(cfg.Extenders))
	}
	x := cfg.Extenders[0]
	got := struct {
		Filter, Prioritize string
		Weight             int64
		NodeCacheCapable   bool
	}{x.FilterVerb, x.PrioritizeVerb, x.Weight, x.NodeCacheCapable}
	want := got
	want.Filter, want.Prioritize, want.NodeCacheCapable = "filter", "prioritize", false
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("extender stanza (-want +got):\n%s", diff)
	}
	if x.Weight < 1 {
		t.Errorf("weight = %d, want at least 1 (0 disables prioritize)", x.Weight)
	}
	u, err := url.Parse(x.URLPrefix)
	if err != nil || u.Host != "127.0.0.1:18888" {
		t.Errorf("urlPrefix %q: want the host of corepin extender's default --listen, 127.0.0.1:18888 (%v)", x.URLPrefix, err)
	}
	// The scheduler POSTs to urlPrefix/verb: both verbs must be routes.
	h := New().Handler()
	for _, verb := range []string{x.FilterVerb, x.PrioritizeVerb} {
		code, _ := post(t, h, "/"+verb, []byte(`{}`))
		if code == http.StatusNotFound || code == http.StatusMethodNotAllowed {
			t.Errorf("POST /%s = %d: the handler does not serve the configured verb", verb, code)
		}
	}
}
