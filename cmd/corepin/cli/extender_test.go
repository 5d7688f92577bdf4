package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/corepin/corepin/internal/testutil"
)

// TestExtenderServesFilter runs `corepin extender` in process on a free
// port and sends it the scheduler's JSON over real HTTP.
func TestExtenderServesFilter(t *testing.T) {
	line, stop := startInProcess(t, "extender", "--listen", "127.0.0.1:0", "-o", "json")
	var addr struct {
		Listen string `json:"listen"`
	}
	if err := json.Unmarshal([]byte(line), &addr); err != nil {
		t.Fatalf("first line %q: %v", line, err)
	}
	body, err := os.ReadFile("../../../kube/extender/testdata/filter-single-numa.json")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post("http://"+addr.Listen+"/filter", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("POST /filter: %v", err)
	}
	var res extenderv1.ExtenderFilterResult
	err = json.NewDecoder(resp.Body).Decode(&res)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("decoding the filter result: %v", err)
	}
	if res.Nodes == nil || len(res.Nodes.Items) != 1 || res.Nodes.Items[0].Name != "whole" {
		t.Errorf("filter kept %+v, want only node whole", res.Nodes)
	}
	if err := stop(); err != nil {
		t.Errorf("extender exit = %v, want nil after cancel", err)
	}
}

// TestExtenderMetricsListen: --metrics-listen serves /healthz and /metrics
// on their own address and not the scheduler's verbs; a port in use is bad
// input.
func TestExtenderMetricsListen(t *testing.T) {
	// Port 0 for both: the first line names what was bound (no port is
	// reserved and freed for another process to take first).
	line, stop := startInProcess(t, "extender", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "-o", "json")
	var addr struct {
		Listen        string `json:"listen"`
		MetricsListen string `json:"metrics_listen"`
	}
	if err := json.Unmarshal([]byte(line), &addr); err != nil {
		t.Fatalf("first line %q: %v", line, err)
	}
	ops := addr.MetricsListen
	if ops == "" || strings.HasSuffix(ops, ":0") || ops == addr.Listen {
		t.Fatalf("first line %q: want the bound metrics address beside the listen one", line)
	}
	get := func(url string) (int, string) {
		// Both listeners are bound before the first line.
		rsp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer rsp.Body.Close()
		b, _ := io.ReadAll(rsp.Body)
		return rsp.StatusCode, string(b)
	}
	if code, body := get("http://" + ops + "/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Errorf("ops /healthz = %d %q", code, body)
	}
	// One call through the scheduler's address shows on the ops one.
	body, err := os.ReadFile("../../../kube/extender/testdata/filter-single-numa.json")
	if err != nil {
		t.Fatal(err)
	}
	if rsp, err := http.Post("http://"+addr.Listen+"/filter", "application/json", bytes.NewReader(body)); err != nil {
		t.Fatal(err)
	} else {
		rsp.Body.Close()
	}
	if code, body := get("http://" + ops + "/metrics"); code != http.StatusOK || !strings.Contains(body, `corepin_extender_requests_total{code="200",verb="filter"} 1`) {
		t.Errorf("ops /metrics = %d, lacks the extender's series", code)
	}
	rsp, err := http.Post("http://"+ops+"/filter", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	rsp.Body.Close()
	if rsp.StatusCode != http.StatusNotFound && rsp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("ops POST /filter = %d, want it not served there", rsp.StatusCode)
	}
	if code, _ := get("http://" + addr.Listen + "/metrics"); code != http.StatusOK {
		t.Errorf("--listen /metrics = %d", code)
	}
	if err := stop(); err != nil {
		t.Errorf("extender exit = %v, want nil after cancel", err)
	}

	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	var out, errb strings.Builder
	if code := Main([]string{"extender", "--listen", "127.0.0.1:0", "--metrics-listen", busy.Addr().String()}, strings.NewReader(""), &out, &errb); code != 2 || !strings.Contains(errb.String(), "--metrics-listen") {
		t.Errorf("--metrics-listen on a port in use: exit %d, stderr %q; want exit 2 naming the flag", code, errb.String())
	}
}

func TestExtenderRefusesBadFlags(t *testing.T) {
	for _, args := range [][]string{{"extender", "--max-nodes", "0"}, {"extender", "--max-body-bytes", "10"}, {"extender", "x"},
		{"extender", "--memory-limit", "1000"}, {"extender", "--memory-limit", "256Mi"},
		{"extender", "--kubeconfig", "/dev/null"}, {"extender", "--nrt-sync-timeout", "1s"},
		{"extender", "--nrt", "--nrt-sync-timeout", "0s"}, {"extender", "--nrt", "--kubeconfig", "/nonexistent/kubeconfig"},
		{"extender", "--max-pods", "10"}, {"extender", "--track-pods", "--max-pods", "0"}, {"extender", "--track-pods", "--max-pods", "1000001"},
		{"extender", "--track-pods", "--kubeconfig", "/nonexistent/kubeconfig"}} {
		var out, errb strings.Builder
		if code := Main(args, strings.NewReader(""), &out, &errb); code != 2 || strings.Count(errb.String(), "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line", args, code, errb.String())
		}
	}
}

// TestExtenderTrackPodsNotSynced starts `corepin extender --track-pods`
// on an API server that will not list pods: the extender listens, then
// exits 1 once --nrt-sync-timeout has passed, saying what to check.
func TestExtenderTrackPodsNotSynced(t *testing.T) {
	var mu sync.Mutex
	listed := false
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/pods" {
			mu.Lock()
			listed = listed || strings.Contains(r.URL.Query().Get("fieldSelector"), "spec.nodeName!=")
			mu.Unlock()
		}
		http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403}`, http.StatusForbidden)
	}))
	defer api.Close()
	var out, errb strings.Builder
	code := Main([]string{"extender", "--listen", "127.0.0.1:0", "--track-pods", "--kubeconfig", plainKubeconfig(t, api.URL), "--nrt-sync-timeout", "1s"},
		strings.NewReader(""), &out, &errb)
	if code != 1 || !strings.Contains(errb.String(), "listing pods at") || !strings.Contains(errb.String(), "may the extender list and watch pods") {
		t.Errorf("exit %d, stderr %q; want exit 1 saying the pods were not listed and what to check", code, errb.String())
	}
	mu.Lock()
	defer mu.Unlock()
	if !listed {
		t.Error("the extender never listed the bound pods (GET /api/v1/pods with spec.nodeName!=)")
	}
}

// plainKubeconfig writes a kubeconfig for the plain-HTTP API server at url.
func plainKubeconfig(t *testing.T, url string) string {
	t.Helper()
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: " + url + "}}]\n" +
		"contexts: [{name: c, context: {cluster: c, user: u}}]\nusers: [{name: u, user: {token: t}}]\ncurrent-context: c\n"
	if err := os.WriteFile(kc, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return kc
}

// TestExtenderNRTWithoutCRD starts `corepin extender --nrt` on an API
// server that serves no NodeResourceTopology version: the extender exits 1
// at once, saying the CRD is not installed.
func TestExtenderNRTWithoutCRD(t *testing.T) {
	api := httptest.NewServer(http.NotFoundHandler())
	defer api.Close()
	var out, errb strings.Builder
	code := Main([]string{"extender", "--listen", "127.0.0.1:0", "--nrt", "--kubeconfig", plainKubeconfig(t, api.URL)}, strings.NewReader(""), &out, &errb)
	if code != 1 || !strings.Contains(errb.String(), "the NodeResourceTopology CRD is not installed (topology.node.k8s.io serves neither v1alpha2 nor v1alpha1)") {
		t.Errorf("exit %d, stderr %q; want exit 1 saying the CRD is not installed", code, errb.String())
	}
	if out.String() != "" {
		t.Errorf("stdout %q, want nothing: the extender never listened", out.String())
	}
}

// TestExtenderNRTNotSynced starts `corepin extender --nrt` on an API
// server whose discovery serves only v1alpha1 (as Koordinator's CRD) but
// that lists no objects: it watches v1alpha1, /healthz answers 503, and
// the extender exits 1 once --nrt-sync-timeout has passed, saying what to
// check.
func TestExtenderNRTNotSynced(t *testing.T) {
	var mu sync.Mutex
	var paths []string
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		if r.URL.Path == "/apis/topology.node.k8s.io/v1alpha1" {
			io.WriteString(w, `{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"topology.node.k8s.io/v1alpha1","resources":[{"name":"noderesourcetopologies","singularName":"noderesourcetopology","namespaced":false,"kind":"NodeResourceTopology","verbs":["get","list","watch"]}]}`)
			return
		}
		http.NotFound(w, r)
	}))
	defer api.Close()
	kc := plainKubeconfig(t, api.URL)

	line, stop := startInProcess(t, "extender", "--listen", "127.0.0.1:0", "-o", "json", "--nrt", "--kubeconfig", kc, "--nrt-sync-timeout", "2s")
	var addr struct {
		Listen string `json:"listen"`
	}
	if err := json.Unmarshal([]byte(line), &addr); err != nil {
		t.Fatalf("first line %q: %v", line, err)
	}
	// A machine slow enough to reach this line after --nrt-sync-timeout
	// finds the listener closed: the exit below still says why.
	if resp, err := http.Get("http://" + addr.Listen + "/healthz"); err != nil {
		t.Logf("GET /healthz: %v: the extender gave up before the first look", err)
	} else {
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("GET /healthz before sync = %d, want 503", resp.StatusCode)
		}
	}
	// stop cancels only after the extender has given up by itself.
	testutil.Eventually(t, "the extender give up and close its listener", func() bool {
		resp, err := http.Get("http://" + addr.Listen + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err != nil
	})
	if err := stop(); err == nil || !strings.Contains(err.Error(), "noderesourcetopologies.topology.node.k8s.io") {
		t.Errorf("extender exit = %v, want the sync error naming the CRD", err)
	}
	mu.Lock()
	defer mu.Unlock()
	listed := false
	for _, p := range paths {
		if strings.HasPrefix(p, "/apis/topology.node.k8s.io/v1alpha2/") {
			t.Errorf("requested %s: v1alpha2 is not served", p)
		}
		listed = listed || p == "/apis/topology.node.k8s.io/v1alpha1/noderesourcetopologies"
	}
	if !listed {
		t.Errorf("requests %q: want a list of v1alpha1 noderesourcetopologies", paths)
	}
}
