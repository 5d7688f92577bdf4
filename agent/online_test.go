package agent

import (
	"maps"
	"testing"
	"testing/fstest"

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

func TestOnlineFrom(t *testing.T) {
	for _, tc := range []struct {
		name, data, want string
		err              bool
	}{
		{name: "list", data: "0-2,4-7\n", want: "0-2,4-7"},
		{name: "trailing NUL", data: "0-3\x00\n", want: "0-3"},
		{name: "garbage", data: "0-x\n", err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := OnlineFrom(fstest.MapFS{onlinePath: {Data: []byte(tc.data)}})()
			if (err != nil) != tc.err {
				t.Fatalf("OnlineFrom() error = %v, want error %v", err, tc.err)
			}
			if err == nil && got.String() != tc.want {
				t.Errorf("OnlineFrom() = %s, want %s", got, tc.want)
			}
		})
	}
	if _, err := OnlineFrom(fstest.MapFS{})(); err == nil {
		t.Error("OnlineFrom() without the file: no error")
	}
}

// TestCheckOnlineReportsAndKeepsOfflineCPU takes an LSE workload's CPU
// offline (as the kernel reports it) and back: the workload is reported
// (view, metric) and keeps the CPU, which no other admission gets.
func TestCheckOnlineReportsAndKeepsOfflineCPU(t *testing.T) {
	n, root := newNode(t)
	if n.topo.Online().Size() < 2 {
		t.Skip("skipping: needs 2 online CPUs (one LSE, the LS pool)")
	}
	m := NewMetrics()
	n.metrics = m
	online := n.topo.Online()
	n.opts.Online = func() (cpuset.CPUSet, error) { return online, nil }
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
	if n.topo.Online().Size() >= 3 { // one more exclusive CPU leaves the LS pool one
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
