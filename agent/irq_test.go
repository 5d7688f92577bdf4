package agent

import (
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/internal/testutil"
	"github.com/corepin/corepin/irq"
	"github.com/corepin/corepin/measure"
	"github.com/corepin/corepin/nodecore"
)

// irqRoot is a machine root of 8 CPUs whose irq 10 is movable over all
// of them and irq 12 runs only on CPUs 4-5.
func irqRoot(t *testing.T) string {
	return testutil.FakeIRQs(t, map[int]string{10: "0-7", 12: "4-5"})
}

func irqAffinity(t *testing.T, root string, n int) string { return testutil.IRQAffinity(t, root, n) }

// TestAgentIRQIsolateFollowsWorkloads: the CPUs of the irq_isolate
// workloads are kept clear as they come and go (two overlapping, one
// deleted keeps the other's clear), a container's never (corepin irq
// sync holds those), and the agent's stop gives the affinities back.
func TestAgentIRQIsolateFollowsWorkloads(t *testing.T) {
	root, state := irqRoot(t), filepath.Join(t.TempDir(), "agent.db")
	var logs syncBuffer
	f, err := openIRQs(state, root, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	web := Workload{Name: "web", QoS: "LSE", Cpuset: "4-5", IRQIsolate: true}
	db := Workload{Name: "db", QoS: "LSR", Cpuset: "5-6", IRQIsolate: true}
	plain := Workload{Name: "enc", QoS: "LSE", Cpuset: "0-1"}
	steps := []struct {
		name string
		ws   []Workload
		want string
	}{
		{name: "none", ws: []Workload{plain}, want: "0-7"},
		{name: "a container's", ws: []Workload{plain, {Name: "nri-c1", QoS: "LSE", Cpuset: "2-3", IRQIsolate: true, Source: "container"}}, want: "0-7"},
		{name: "web", ws: []Workload{plain, web}, want: "0-3,6-7"},
		{name: "web and db", ws: []Workload{plain, web, db}, want: "0-3,7"},
		{name: "web deleted", ws: []Workload{plain, db}, want: "0-4,7"},
		{name: "db deleting", ws: []Workload{{Name: "db", QoS: "LSR", Cpuset: "5-6", IRQIsolate: true, Deleting: true}}, want: "0-7"},
		{name: "web again", ws: []Workload{web}, want: "0-3,6-7"},
	}
	for _, s := range steps {
		f.Sync(s.ws)
		if got := irqAffinity(t, root, 10); got != s.want {
			t.Errorf("%s: irq 10 = %s, want %s", s.name, got, s.want)
		}
	}
	if got := irqAffinity(t, root, 12); got != "4-5" {
		t.Errorf("irq 12 = %s, want 4-5: it may run only on web's CPUs and is left", got)
	}
	if !strings.Contains(logs.String(), "only_on_kept_clear_cpus=[12]") {
		t.Errorf("log does not name irq 12 as left where it is:\n%s", logs.String())
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if got := irqAffinity(t, root, 10); got != "0-7" {
		t.Errorf("after the agent stopped irq 10 = %s, want 0-7, as found", got)
	}
}

// TestAgentIRQIsolateAfterCrash: an agent killed while its workload ran
// left its hold (a dead owner); the next agent's start keeps the CPUs of
// the workload it still runs clear, and gives back those of one gone.
func TestAgentIRQIsolateAfterCrash(t *testing.T) {
	for _, tc := range []struct {
		name string
		ws   []Workload
		want string
	}{
		{name: "workload still runs", ws: []Workload{{Name: "web", QoS: "LSE", Cpuset: "4-5", IRQIsolate: true}}, want: "0-3,6-7"},
		{name: "workload gone", ws: nil, want: "0-7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, state := irqRoot(t), filepath.Join(t.TempDir(), "agent.db")
			db, err := nodecore.OpenState(state)
			if err != nil {
				t.Fatal(err)
			}
			dead, err := irq.New(db, irq.Options{Root: root, Name: "agent", Owner: measure.Identity{PID: 1 << 22, Start: 1}})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := dead.Hold("web", cpuset.New(4, 5)); err != nil {
				t.Fatal(err)
			}
			db.Close()
			f, err := openIRQs(state, root, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			f.Sync(tc.ws) // the start's first sync
			if got := irqAffinity(t, root, 10); got != tc.want {
				t.Errorf("after the restart irq 10 = %s, want %s", got, tc.want)
			}
		})
	}
}

// An LS or BE workload cannot ask for irq_isolate: refused, nothing
// admitted.
func TestSpecIRQIsolateRefusedForShared(t *testing.T) {
	for _, tc := range []struct {
		body string
		ok   bool
	}{
		{body: `{"name":"w","qos":"LSE","cpus":2,"command":"sleep","irq_isolate":true}`, ok: true},
		{body: `{"name":"w","qos":"LSR","cpus":2,"command":"sleep","irq_isolate":true}`, ok: true},
		{body: `{"name":"w","qos":"LS","cpus":2,"command":"sleep","irq_isolate":true}`},
		{body: `{"name":"w","qos":"BE","cpus":2,"command":"sleep","irq_isolate":true}`},
	} {
		_, err := DecodeSpec(strings.NewReader(tc.body))
		switch {
		case tc.ok && err != nil:
			t.Errorf("DecodeSpec(%s) = %v, want accepted", tc.body, err)
		case !tc.ok && (err == nil || !strings.Contains(err.Error(), `use "qos": "LSE" or "LSR"`)):
			t.Errorf("DecodeSpec(%s) = %v, want %v saying to use LSE or LSR", tc.body, err, ErrInvalid)
		}
	}
}

// TestAgentIRQIsolateThroughNode: a workload created with irq_isolate
// through the agent's node shows it, its CPUs are kept clear (on a fake
// /proc/irq) once created, and given back once deleted.
func TestAgentIRQIsolateThroughNode(t *testing.T) {
	requireCgroups(t)
	root, state := irqRoot(t), filepath.Join(t.TempDir(), "state.db")
	n, err := openNode(t, testRoot(t), state)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	f, err := openIRQs(state, root, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	n.changed = func() { f.Sync(n.List()) }
	w, err := n.Create(Spec{Name: "web", QoS: "LSE", CPUs: f64(1), Command: "sleep", Args: []string{"600"}, IRQIsolate: true})
	if err != nil {
		t.Fatalf("Create(web, irq_isolate) = %v", err)
	}
	if !w.IRQIsolate {
		t.Errorf("the created workload's view lacks irq_isolate: %+v", w)
	}
	cpus, err := cpuset.Parse(w.Cpuset)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := irqAffinity(t, root, 10), cpuset.Range(0, 7).Difference(cpus).String(); got != want {
		t.Errorf("with web on %s irq 10 = %s, want %s", cpus, got, want)
	}
	if err := n.Delete("web"); err != nil {
		t.Fatal(err)
	}
	if got := irqAffinity(t, root, 10); got != "0-7" {
		t.Errorf("after web's delete irq 10 = %s, want 0-7, as found", got)
	}
}
