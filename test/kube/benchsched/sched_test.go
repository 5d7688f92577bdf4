package benchsched

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/corepin/corepin/test/kube/kubetest"
)

// The schedulers under test, in the order each N runs them.
const (
	stock    = "stock"    // kube-scheduler, no topology
	plugin   = "plugin"   // corepin-scheduler: kube-scheduler with corepin's framework plugin
	extender = "extender" // kube-scheduler + corepin extender under the shipped configuration
)

var allSchedulers = []string{stock, plugin, extender}

// profileName is the scheduler name the burst of scheduler s asks for.
func profileName(s string) string { return "bench-" + s }

// env is what the harness runs: the binaries, the control plane's files.
type env struct {
	bin, corepin, sched string // KUBE_BIN, bin/corepin, bin/corepin-scheduler
	qps                 int    // every scheduler's client qps and burst
	// pluginPct overrides the chart's scheduler.percentageOfNodesToScore
	// (nil: the chart's own).
	pluginPct *int
}

// pluginConfig is the KubeSchedulerConfiguration the chart ships for
// corepin-scheduler (scheduler.enabled, mode plugin), rendered by
// kube/manifests as Helm renders it (test/helm holds the two equal), with
// pct for scheduler.percentageOfNodesToScore unless nil: its one profile
// as the chart writes it but named profileName(plugin), the run's
// kubeconfig, client qps and burst q, no leader election (each scheduler
// of the run starts alone). It returns the profile's
// percentageOfNodesToScore too (0 when unset) and Corepin's weight there.
func pluginConfig(t *testing.T, kubeconfig string, q int, pct *int) (cfg []byte, share, weight int) {
	t.Helper()
	values := map[string]any{"mode": "plugin"}
	if pct != nil {
		values["percentageOfNodesToScore"] = *pct
	}
	m := kubetest.ChartSchedulerConfig(t, values)
	data, err := yaml.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Profiles []struct {
			Share   int `json:"percentageOfNodesToScore"`
			Plugins struct {
				MultiPoint struct {
					Enabled []struct {
						Name   string `json:"name"`
						Weight int    `json:"weight"`
					} `json:"enabled"`
				} `json:"multiPoint"`
			} `json:"plugins"`
		} `json:"profiles"`
	}
	if err := yaml.Unmarshal(data, &c); err != nil || len(c.Profiles) != 1 {
		t.Fatalf("the chart's corepin-scheduler config %s: want one profile (%v)", data, err)
	}
	for _, pl := range c.Profiles[0].Plugins.MultiPoint.Enabled {
		if pl.Name == "Corepin" {
			weight = pl.Weight
		}
	}
	if weight == 0 {
		t.Fatalf("the chart's corepin-scheduler profile enables no Corepin plugin with a weight: %s", data)
	}
	m["clientConnection"] = map[string]any{"kubeconfig": kubeconfig, "qps": q, "burst": q}
	m["leaderElection"] = map[string]any{"leaderElect": false}
	m["profiles"].([]any)[0].(map[string]any)["schedulerName"] = profileName(plugin)
	if cfg, err = yaml.Marshal(m); err != nil {
		t.Fatal(err)
	}
	return cfg, c.Profiles[0].Share, weight
}

// schedConfig is a KubeSchedulerConfiguration of one profile named
// profileName(s), no leader election, client qps and burst q; extra are
// the profile's fields besides its name.
func schedConfig(kubeconfig, s string, q int, extra string) []byte {
	return fmt.Appendf(nil, `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: false
clientConnection:
  kubeconfig: %s
  qps: %d
  burst: %d
profiles:
- schedulerName: %s
%s`, kubeconfig, q, q, profileName(s), extra)
}

// extenderConfig is the shipped scheduler configuration
// (kubetest.ShippedSchedulerConfig, as make e2e-cluster runs it) with its
// one profile named profileName(extender), client qps and burst q, and no
// leader election (each scheduler of the run starts alone, as the others).
func extenderConfig(t *testing.T, kubeconfig string, port, q int) []byte {
	var cfg map[string]any
	if err := yaml.Unmarshal(kubetest.ShippedSchedulerConfig(t, kubeconfig, port), &cfg); err != nil {
		t.Fatal(err)
	}
	cc := cfg["clientConnection"].(map[string]any)
	cc["qps"], cc["burst"] = q, q
	cfg["leaderElection"] = map[string]any{"leaderElect": false}
	profiles, _ := cfg["profiles"].([]any)
	if len(profiles) != 1 {
		t.Fatalf("the shipped scheduler config has %d profiles, want 1", len(profiles))
	}
	profiles[0].(map[string]any)["schedulerName"] = profileName(extender)
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// startScheduler runs scheduler s (and, for the extender, corepin
// extender as make e2e-cluster runs it: --track-pods) and returns the
// scheduler's process and its secure port once its /readyz answers ok
// (its informers synced: every node is in its cache before the burst).
func startScheduler(t *testing.T, e env, ps *kubetest.Procs, dir, kubeconfig, s string) (*kubetest.Proc, int) {
	path, cfg := filepath.Join(e.bin, "kube-scheduler"), schedConfig(kubeconfig, s, e.qps, "")
	switch s {
	case plugin:
		path = e.sched
		cfg, _, _ = pluginConfig(t, kubeconfig, e.qps, e.pluginPct)
	case extender:
		_, ports := kubetest.StartServing(t, 1, time.Minute, func(ports []int) (*kubetest.Proc, string, string) {
			return ps.Start("corepin extender", nil, e.corepin, "extender", "--listen", fmt.Sprintf("127.0.0.1:%d", ports[0]),
				"--track-pods", "--kubeconfig", kubeconfig), fmt.Sprintf("http://127.0.0.1:%d/healthz", ports[0]), ""
		})
		cfg = extenderConfig(t, kubeconfig, ports[0], e.qps)
	}
	file := filepath.Join(dir, s+"-scheduler.yaml")
	if err := os.WriteFile(file, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	p, ports := kubetest.StartServing(t, 1, 5*time.Minute, func(ports []int) (*kubetest.Proc, string, string) {
		return ps.Start(s+" scheduler", nil, path, "--config="+file,
				fmt.Sprintf("--secure-port=%d", ports[0]), "--bind-address=127.0.0.1",
				"--authentication-kubeconfig="+kubeconfig, "--authorization-kubeconfig="+kubeconfig),
			fmt.Sprintf("https://127.0.0.1:%d/readyz", ports[0]), ""
	})
	return p, ports[0]
}

// profile saves a CPU profile of the scheduler listening on port, taken
// over the next seconds through its /debug/pprof (the admin's token), to
// path; a failure is logged, not fatal (the figures stand without it).
func profile(t *testing.T, port int, token string, seconds int, path string) {
	fetchProfile(t, port, token, fmt.Sprintf("debug/pprof/profile?seconds=%d", seconds), time.Duration(seconds+30)*time.Second, path)
	t.Logf("CPU profile of the scheduler: %s (go tool pprof -top %s)", path, path)
}

// heapProfile saves the heap profile of the scheduler listening on port,
// after a garbage collection (gc=1: what the scheduler holds, not what it
// has yet to free), to path; a failure is logged, not fatal.
func heapProfile(t *testing.T, port int, token string, path string) {
	fetchProfile(t, port, token, "debug/pprof/heap?gc=1", time.Minute, path)
	t.Logf("heap profile of the scheduler: %s (go tool pprof -sample_index=inuse_space -top %s)", path, path)
}

// metricsDump saves the scheduler's /metrics (its framework's counts and
// durations per extension point and plugin, sampled on a tenth of the
// cycles as kube-scheduler records them) to path.
func metricsDump(t *testing.T, port int, token string, path string) {
	fetchProfile(t, port, token, "metrics", time.Minute, path)
	t.Logf("metrics of the scheduler: %s", path)
}

// fetchProfile saves the scheduler's /<what> to path.
func fetchProfile(t *testing.T, port int, token, what string, limit time.Duration, path string) {
	client := &http.Client{Timeout: limit, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/%s", port, what), nil)
	req.Header.Set("Authorization", "Bearer "+token)
	rsp, err := client.Do(req)
	if err != nil {
		t.Logf("profiling the scheduler: %v", err)
		return
	}
	defer rsp.Body.Close()
	b, err := io.ReadAll(rsp.Body)
	if err != nil || rsp.StatusCode != http.StatusOK {
		t.Logf("profiling the scheduler: %s %v", rsp.Status, err)
		return
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Logf("profiling the scheduler: %v", err)
	}
}

// procUsage is a process's CPU time so far and its peak resident memory.
func procUsage(pid int) (cpu time.Duration, hwmMiB float64) {
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		s := string(b)
		if i := strings.LastIndexByte(s, ')'); i > 0 {
			f := strings.Fields(s[i+1:])
			if len(f) > 13 {
				ut, _ := strconv.ParseInt(f[11], 10, 64)
				st, _ := strconv.ParseInt(f[12], 10, 64)
				cpu = time.Duration(ut+st) * time.Second / 100 // USER_HZ
			}
		}
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for l := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
				kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
				hwmMiB = kb / 1024
			}
		}
	}
	return cpu, hwmMiB
}
