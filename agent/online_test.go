package agent

import (
	"maps"
	"testing"

	"github.com/corepin/corepin/cpuset"
)

// offlineGauge reads corepin_workload_offline_cpus by workload from m.
func offlineGauge(t *testing.T, m *Metrics) map[string]float64 {
	t.Helper()
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != "corepin_workload_offline_cpus" {
			continue
		}
		for _, mt := range f.GetMetric() {
			for _, l := range mt.GetLabel() {
				if l.GetName() == "workload" {
					out[l.GetValue()] = mt.GetGauge().GetValue()
				}
			}
		}
	}
	return out
}

// TestCheckOnlineReportsAndKeepsOfflineCPU takes an LSE workload's CPU
// offline (as the kernel reports it) and back: the workload is reported
// (view, metric) and keeps the CPU, which no other admission gets.
func TestCheckOnlineReportsAndKeepsOfflineCPU(t *testing.T) {
	m := NewMetrics()
	var online cpuset.CPUSet
	n, root := newNode(t, func(o *Options) {
		o.Observer = m
		o.Online = func() (cpuset.CPUSet, error) { return online, nil }
	})
	if n.Topology().Online().Size() < 2 {
		t.Skip("skipping: needs 2 online CPUs (one LSE, the LS pool)")
	}
	online = n.Topology().Online()
	w, err := n.Create(Spec{Name: "lse", QoS: "LSE", CPUs: f64(1), Command: "sleep", Args: []string{"600"}})
	if err != nil {
		t.Fatalf("Create(lse) = %v", err)
	}
	cpu := cpuset.MustParse(w.Cpuset)
	online = online.Difference(cpu)
	held, err := n.CheckOnline()
	if err != nil || !held.Equals(cpu) {
		t.Fatalf("CheckOnline() = %s, %v; want %s", held, err, cpu)
	}
	if g, _ := n.Get("lse"); g.OfflineCPUs != cpu.String() || g.Cpuset != w.Cpuset {
		t.Errorf("Get(lse) offline_cpus %q cpuset %q, want %q and %q", g.OfflineCPUs, g.Cpuset, cpu, w.Cpuset)
	}
	if got := offlineGauge(t, m); got["lse"] != 1 {
		t.Errorf("corepin_workload_offline_cpus = %v, want lse at 1", got)
	}
	want := map[string]float64{"lse": 0}
	if n.Topology().Online().Size() >= 3 { // one more exclusive CPU leaves the LS pool one
		other, err := n.Create(Spec{Name: "other", QoS: "LSE", CPUs: f64(1), Command: "sleep", Args: []string{"600"}})
		if err != nil {
			t.Fatalf("Create(other) = %v", err)
		}
		if cpuset.MustParse(other.Cpuset).Intersects(cpu) {
			t.Errorf("other got %s, which holds lse's offline CPU %s", other.Cpuset, cpu)
		}
		want["other"] = 0
	}
	checkConsistent(t, root, n.List())

	online = online.Union(cpu)
	if held, err := n.CheckOnline(); err != nil || !held.IsEmpty() {
		t.Fatalf("CheckOnline() after the CPU came back = %s, %v; want none", held, err)
	}
	if g, _ := n.Get("lse"); g.OfflineCPUs != "" {
		t.Errorf("Get(lse) offline_cpus = %q after the CPU came back, want none", g.OfflineCPUs)
	}
	if got := offlineGauge(t, m); !maps.Equal(got, want) {
		t.Errorf("corepin_workload_offline_cpus = %v after the CPU came back, want %v", got, want)
	}
}
