package benchsched

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestChecksJudgeTheMedians: the targets are judged on the median of the
// repeats, so one slow burst of either scheduler decides nothing; a pod
// refused in any one burst is a miss; N other than 1000 and 5000 is shown.
func TestChecksJudgeTheMedians(t *testing.T) {
	burst := func(n int, s string, rp int, podsPerS, p99, rss float64, refused int) result {
		return result{Nodes: n, Scheduler: s, Repeat: rp, Pods: 300, Bound: 300, PodsPerS: podsPerS, P99Ms: p99,
			SchedRSSMiB: rss, SchedCPUS: 1, Refused: refused}
	}
	rs := []result{
		burst(5000, stock, 1, 250, 600, 190, 0), burst(5000, plugin, 1, 120, 1900, 220, 0), // a slow plugin burst
		burst(5000, stock, 2, 240, 620, 192, 0), burst(5000, plugin, 2, 230, 700, 230, 0),
		burst(5000, stock, 3, 100, 2000, 194, 0), burst(5000, plugin, 3, 225, 720, 225, 0), // a slow stock burst
		burst(10000, stock, 1, 200, 700, 290, 0), burst(10000, plugin, 1, 100, 1500, 350, 1),
	}
	meds := medians(rs)
	if len(meds) != 4 || meds[0].Nodes != 5000 || meds[0].Scheduler != stock || meds[1].Scheduler != plugin {
		t.Fatalf("medians %+v, want stock and plugin at 5000 then at 10000, in the order they ran", meds)
	}
	if m := meds[1]; m.PodsPerS != 225 || m.P99Ms != 720 || m.SchedRSSMiB != 225 || m.Bound != 900 || m.Repeat != 0 {
		t.Errorf("plugin's median at 5000 %+v, want 225 pods/s, p99 720, RSS 225 of 900 bound", m)
	}
	got := strings.Join(checks(meds), "\n")
	for _, want := range []string{
		"N=5000 plugin/stock pods/s 0.94 (want >= 0.90 at 1000 and 5000): ok",
		"N=5000 plugin/stock p99 1.16 (want <= 1.50 at 1000 and 5000): ok",
		"N=5000 plugin/stock peak RSS 1.17 (want <= 1.25 at 5000): ok",
		"N=10000 plugin/stock pods/s 0.50 (want >= 0.90 at 1000 and 5000): shown",
		"N=10000 plugin refused on replay 1 of 300 bound (want 0): MISSED",
		"plugin from 5000 to 10000 nodes: pods/s x0.44",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("checks:\n%s\nwant a line %q", got, want)
		}
	}
	// The plugin's slow burst alone would have missed.
	if got := strings.Join(checks(rs[:2]), "\n"); !strings.Contains(got, "pods/s 0.48 (want >= 0.90 at 1000 and 5000): MISSED") {
		t.Errorf("checks of one burst each:\n%s\nwant the pods/s target missed", got)
	}
}

// TestPluginConfigIsTheCharts: the plugin bursts under the profile the
// chart ships (kube/manifests' rendering), its share of nodes scored
// overridden only when asked, with the run's own client and name.
func TestPluginConfigIsTheCharts(t *testing.T) {
	cfg, share, weight := pluginConfig(t, "/tmp/kc", 700, nil)
	if share != 1 || weight != 5 {
		t.Errorf("the chart's profile: percentageOfNodesToScore %d, Corepin weight %d; want 1 and 5 (values.yaml)", share, weight)
	}
	var c struct {
		ClientConnection struct {
			Kubeconfig string `json:"kubeconfig"`
			QPS, Burst int
		} `json:"clientConnection"`
		LeaderElection struct {
			LeaderElect *bool `json:"leaderElect"`
		} `json:"leaderElection"`
		Profiles []map[string]any `json:"profiles"`
	}
	if err := yaml.Unmarshal(cfg, &c); err != nil {
		t.Fatal(err)
	}
	if c.ClientConnection.Kubeconfig != "/tmp/kc" || c.ClientConnection.QPS != 700 || c.ClientConnection.Burst != 700 ||
		c.LeaderElection.LeaderElect == nil || *c.LeaderElection.LeaderElect || len(c.Profiles) != 1 || c.Profiles[0]["schedulerName"] != profileName(plugin) {
		t.Errorf("config %s: want the run's kubeconfig, qps and burst 700, no leader election, one profile named %s", cfg, profileName(plugin))
	}
	zero := 0
	if _, share, _ := pluginConfig(t, "/tmp/kc", 700, &zero); share != 0 {
		t.Errorf("BENCH_PLUGIN_PCT=0: percentageOfNodesToScore %d, want it unset (kube-scheduler's adaptive default)", share)
	}
	ten := 10
	if _, share, _ := pluginConfig(t, "/tmp/kc", 700, &ten); share != 10 {
		t.Errorf("BENCH_PLUGIN_PCT=10: percentageOfNodesToScore %d, want 10", share)
	}
}
