package nri

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/internal/testutil"
	"github.com/corepin/corepin/irq"
	"github.com/corepin/corepin/nodecore"
	"github.com/corepin/corepin/topology"
)

func TestParseIRQMode(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want IRQMode
		ok   bool
	}{
		{in: "", want: IRQOff, ok: true},
		{in: "off", want: IRQOff, ok: true},
		{in: "pod", want: IRQPod, ok: true},
		{in: "exclusive", want: IRQExclusive, ok: true},
		{in: "on"}, {in: "Pod"}, {in: "true"}, {in: "exclusive "}, {in: "disable"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseIRQMode(tc.in)
			if tc.ok && (err != nil || got != tc.want) {
				t.Errorf("ParseIRQMode(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
			if !tc.ok && (err == nil || !strings.Contains(err.Error(), "want off, pod or exclusive")) {
				t.Errorf("ParseIRQMode(%q) = %q, %v; want an error naming the values", tc.in, got, err)
			}
		})
	}
}

// The node setting and the pod's annotation decide together, for
// exclusive classes only.
func TestIRQModeHolds(t *testing.T) {
	yes, no := true, false
	for _, tc := range []struct {
		mode IRQMode
		qos  alloc.QoS
		said *bool
		want bool
	}{
		{mode: IRQOff, qos: alloc.LSE, said: &yes},
		{mode: IRQPod, qos: alloc.LSE, said: &yes, want: true},
		{mode: IRQPod, qos: alloc.LSR, said: &yes, want: true},
		{mode: IRQPod, qos: alloc.LSE},
		{mode: IRQPod, qos: alloc.LSE, said: &no},
		{mode: IRQExclusive, qos: alloc.LSE, want: true},
		{mode: IRQExclusive, qos: alloc.LSR, said: &yes, want: true},
		{mode: IRQExclusive, qos: alloc.LSE, said: &no},
		{mode: IRQExclusive, qos: alloc.LS},
		{mode: IRQExclusive, qos: alloc.BE},
		{mode: IRQPod, qos: alloc.LS, said: &yes},
	} {
		said := "unsaid"
		if tc.said != nil {
			said = strconv.FormatBool(*tc.said)
		}
		if got := tc.mode.holds(tc.qos, tc.said); got != tc.want {
			t.Errorf("%s.holds(%s, %s) = %v, want %v", tc.mode, tc.qos, said, got, tc.want)
		}
	}
}

// irqMachine is a fake host root on twoNodes' 16 CPUs: irq 10 movable
// over all of them, irq 11 over CPUs 0-7 (node 0).
func irqMachine(t *testing.T) string {
	return testutil.FakeIRQs(t, map[int]string{10: "0-15", 11: "0-7"})
}

func irqAffinity(t *testing.T, root string, n int) cpuset.CPUSet {
	return cpuset.MustParse(testutil.IRQAffinity(t, root, n))
}

// irqPlugin is a runtime with a plugin of node setting mode, logging to
// the buffer returned.
func irqPlugin(t *testing.T, mode IRQMode) (*fakeRuntime, *Plugin, string, *testutil.SyncBuffer) {
	t.Helper()
	f := newRuntime(t, socketDir(t))
	t.Cleanup(f.r.Stop)
	state := filepath.Join(t.TempDir(), "state.db")
	logs := &testutil.SyncBuffer{}
	p, err := New(Options{State: state, Topology: topology.MustSynthetic(twoNodes), IRQIsolate: mode, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	f.connect(p)
	return f, p, state, logs
}

// holds is what the state file says the containers keep clear.
func holds(t *testing.T, state string) cpuset.CPUSet {
	t.Helper()
	db, err := nodecore.OpenState(state)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c, err := IRQHolds(db)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func lsePod(name string, annotations map[string]string) podSpec {
	return podSpec{name: name, labels: map[string]string{LabelQoSClass: "LSE"}, annotations: annotations, shares: 2048, quota: 200000}
}

// TestIRQIsolateOfPods: through the NRI library, the node setting and
// the annotation decide which exclusive containers are admitted to be
// kept clear (the state file's IRQHolds), and a shared pod asking is
// refused with the reason, holding nothing.
func TestIRQIsolateOfPods(t *testing.T) {
	ask := map[string]string{AnnotationIRQIsolate: "true"}
	optOut := map[string]string{AnnotationIRQIsolate: "false"}
	for _, tc := range []struct {
		mode IRQMode
		pods []podSpec
		held []string // pods whose CPUs are held
	}{
		{mode: IRQOff, pods: []podSpec{lsePod("asks", ask), lsePod("plain", nil)}},
		{mode: IRQPod, pods: []podSpec{lsePod("asks", ask), lsePod("plain", nil), lsePod("opts-out", optOut)}, held: []string{"asks"}},
		{mode: IRQExclusive, pods: []podSpec{lsePod("asks", ask), lsePod("plain", nil), lsePod("opts-out", optOut),
			{name: "ls", shares: 1024, quota: 150000}}, held: []string{"asks", "plain"}},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			f, p, state, logs := irqPlugin(t, tc.mode)
			var want cpuset.Builder
			for _, ps := range tc.pods {
				c := f.mustCreate(ps)
				if slices.Contains(tc.held, ps.name) {
					want.AddSet(cpuset.MustParse(c.Linux.Resources.Cpu.Cpus))
				}
			}
			if got := holds(t, state); !got.Equals(want.Result()) {
				t.Errorf("containers' CPUs kept clear = %q, want %q (the CPUs of %v)", got, want.Result(), tc.held)
			}
			warned := strings.Contains(logs.String(), "which this node does not do")
			if warned != (tc.mode == IRQOff) {
				t.Errorf("the log warns of an ask the node does not honour: %v, want %v:\n%s", warned, tc.mode == IRQOff, logs.String())
			}
			before, _ := p.Containers().List()
			_, _, err := f.create(podSpec{name: "ls-asks", shares: 1024, quota: 150000, annotations: ask})
			if err == nil || !strings.Contains(err.Error(), "annotation corepin.io/irq-isolate true keeps interrupts off CPUs of the pod's own; this one is LS") {
				t.Errorf("LS pod asking: %v, want refused naming the annotation", err)
			}
			if after, _ := p.Containers().List(); len(after) != len(before) {
				t.Errorf("the refused pod is held: %d containers, was %d", len(after), len(before))
			}
		})
	}
}

// TestIRQSyncFollowsContainers: RunIRQSync keeps the CPUs of the pod that
// asked clear on a fake /proc/irq while its container runs, follows a
// second one, gives each back as its container is removed, and gives
// everything back when it stops (the record gone).
func TestIRQSyncFollowsContainers(t *testing.T) {
	f, _, state, _ := irqPlugin(t, IRQPod)
	root := irqMachine(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- RunIRQSync(ctx, IRQSyncOptions{State: state, Root: root, Proc: "/proc", Interval: 20 * time.Millisecond})
	}()
	var once sync.Once
	var runErr error
	stop := func() error {
		once.Do(func() { cancel(); runErr = <-done })
		return runErr
	}
	t.Cleanup(func() { stop() })
	all := cpuset.Range(0, 15)
	clearOf := func(what string, kept cpuset.CPUSet) {
		t.Helper()
		testutil.Eventually(t, "irq 10 kept off "+kept.String()+" ("+what+")", func() bool {
			return irqAffinity(t, root, 10).Equals(all.Difference(kept))
		})
	}
	a := f.mustCreate(lsePod("a", map[string]string{AnnotationIRQIsolate: "true"}))
	ca := cpuset.MustParse(a.Linux.Resources.Cpu.Cpus)
	clearOf("a runs", ca)
	f.mustCreate(lsePod("plain", nil))
	b := f.mustCreate(lsePod("b", map[string]string{AnnotationIRQIsolate: "true"}))
	cb := cpuset.MustParse(b.Linux.Resources.Cpu.Cpus)
	clearOf("a and b run", ca.Union(cb))
	if got, want := irqAffinity(t, root, 11), cpuset.Range(0, 7).Difference(ca.Union(cb)); !got.Equals(want) && !got.Equals(cpuset.Range(0, 7)) {
		t.Errorf("irq 11 = %s, want %s (or as found, where a and b hold all of node 0)", got, want)
	}
	f.mu.Lock()
	pod := f.pods[a.PodSandboxId]
	f.mu.Unlock()
	if err := f.r.RemoveContainer(context.Background(), &api.RemoveContainerRequest{Pod: pod, Container: a}); err != nil {
		t.Fatalf("RemoveContainer: %v", err)
	}
	clearOf("a removed, b runs", cb)
	if err := stop(); err != nil {
		t.Fatalf("RunIRQSync: %v", err)
	}
	if got := irqAffinity(t, root, 10); !got.Equals(all) {
		t.Errorf("after irq sync stopped irq 10 = %s, want %s, as found", got, all)
	}
	if got := irqAffinity(t, root, 11); !got.Equals(cpuset.Range(0, 7)) {
		t.Errorf("after irq sync stopped irq 11 = %s, want 0-7, as found", got)
	}
	if _, err := os.Stat(filepath.Join(root, irq.DefaultBannedFile)); err == nil {
		t.Errorf("irqbalance's banned CPUs left in %s with nothing held", irq.DefaultBannedFile)
	}
}

// RunIRQSync where /proc/irq cannot be steered fails at once, saying why.
func TestIRQSyncRefusesWithoutIRQs(t *testing.T) {
	err := RunIRQSync(context.Background(), IRQSyncOptions{State: filepath.Join(t.TempDir(), "state.db"), Root: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "no /proc/irq") {
		t.Fatalf("RunIRQSync on a root without proc/irq = %v, want an error saying there is none", err)
	}
}
