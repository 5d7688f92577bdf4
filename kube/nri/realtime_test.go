package nri

import (
	"context"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/containerd/nri/pkg/api"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/enforce"
	"github.com/corepin/corepin/topology"
)

// An LS pod annotated corepin.io/sched gets its class in the adjustment
// (SCHED_RR or SCHED_FIFO, priority 1); an LS pod without it gets none;
// an LSE pod with it is refused, naming the annotation, and holds nothing.
func TestRealTimeRouteOfPods(t *testing.T) {
	f, p := connected(t, alloc.NodeSettings{})
	for _, c := range []struct {
		spec podSpec
		want api.LinuxSchedulerPolicy
	}{
		{podSpec{name: "svc-rr", shares: 512, quota: 50000, annotations: map[string]string{AnnotationSched: "rr"}}, api.LinuxSchedulerPolicy_SCHED_RR},
		{podSpec{name: "svc-fifo", shares: 512, quota: 50000, annotations: map[string]string{AnnotationSched: "fifo"}}, api.LinuxSchedulerPolicy_SCHED_FIFO},
	} {
		_, rsp, err := f.create(c.spec)
		if err != nil {
			t.Fatal(err)
		}
		s := rsp.GetAdjust().GetLinux().GetScheduler()
		if s.GetPolicy() != c.want || s.GetPriority() != 1 {
			t.Errorf("%s: adjustment's scheduler %v, want %v at priority 1", c.spec.name, s, c.want)
		}
	}
	if _, rsp, err := f.create(ls1500); err != nil || rsp.GetAdjust().GetLinux().GetScheduler() != nil {
		t.Errorf("LS pod without the annotation: scheduler %v (%v), want none", rsp.GetAdjust().GetLinux().GetScheduler(), err)
	}
	held := func() int {
		t.Helper()
		l, err := p.Containers().List()
		if err != nil {
			t.Fatal(err)
		}
		return len(l)
	}
	before := held()
	_, _, err := f.create(podSpec{name: "lse-rr", shares: 2048, quota: 200000, annotations: map[string]string{AnnotationSched: "rr"}})
	if err == nil || !strings.Contains(err.Error(), "corepin.io/sched rr is the real-time route of LS pods") {
		t.Errorf("LSE pod with sched rr: %v, want refused naming the annotation", err)
	}
	if after := held(); after != before {
		t.Errorf("the refused pod is held: %d containers, was %d", after, before)
	}
}

// lsCgroups is /proc/<pid>/cgroup of an LS container's process.
const lsCgroups = "12:cpu,cpuacct:/kubepods/burstable/pod1234/" + beID + "\n"

func TestEnsureRealTimeSetsWhatTheRuntimeIgnored(t *testing.T) {
	rr := enforce.RealTime{Policy: enforce.RTRR}
	for _, tc := range []struct {
		name     string
		pid      int
		tasks    fakeTasks
		want     RTRoute
		wantSets int
		why      string
	}{
		{name: "runtime applied rr", pid: 42, tasks: fakeTasks{cgroups: map[int]string{42: lsCgroups}, class: map[int]string{42: enforce.RTRR}},
			want: RTRouteRuntime},
		{name: "runtime ignored it (runc 1.1): the plugin sets it", pid: 42, tasks: fakeTasks{cgroups: map[int]string{42: lsCgroups}},
			want: RTRoutePlugin, wantSets: 1},
		{name: "runtime applied fifo, rr asked: the plugin sets rr", pid: 42,
			tasks: fakeTasks{cgroups: map[int]string{42: lsCgroups}, class: map[int]string{42: enforce.RTFIFO}}, want: RTRoutePlugin, wantSets: 1},
		{name: "setting is refused: says what to change", pid: 42, tasks: fakeTasks{cgroups: map[int]string{42: lsCgroups}, setErr: syscall.EPERM},
			want: RTRouteNone, wantSets: 1, why: "use runc >= 1.2 or crun"},
		{name: "set but does not hold", pid: 42, tasks: fakeTasks{cgroups: map[int]string{42: lsCgroups}, noHold: true},
			want: RTRouteNone, wantSets: 1, why: "did not hold"},
		{name: "pid is another process: never touched", pid: 1, tasks: fakeTasks{cgroups: map[int]string{1: "0::/\n"}},
			want: RTRouteNone, why: "is not container"},
		{name: "no pid from the runtime", pid: 0, want: RTRouteNone, why: "no process"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, why := EnsureRealTime(&tc.tasks, tc.pid, beID, rr)
			if got != tc.want {
				t.Errorf("EnsureRealTime = %s (%v), want %s", got, why, tc.want)
			}
			if len(tc.tasks.sets) != tc.wantSets {
				t.Errorf("SetRealTime called on %v, want %d calls", tc.tasks.sets, tc.wantSets)
			}
			checkReason(t, why, tc.why)
		})
	}
}

// StartContainer of an rr pod's LS container that the runtime left in the
// fair class puts it in rr itself and counts it by route in the metric;
// one the runtime served is counted as such; an LS pod without the
// annotation is left alone.
func TestStartContainerEnsuresTheRealTimeClass(t *testing.T) {
	f := newRuntime(t, socketDir(t))
	t.Cleanup(f.r.Stop)
	tasks := &fakeTasks{cgroups: map[int]string{}, idle: map[int]bool{}, class: map[int]string{}}
	p, err := New(Options{State: filepath.Join(t.TempDir(), "state.db"), Topology: topology.MustSynthetic(twoNodes), Tasks: tasks})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	f.connect(p)
	start := func(spec podSpec, pid uint32, class string) {
		t.Helper()
		c, _, err := f.create(spec)
		if err != nil {
			t.Fatal(err)
		}
		tasks.cgroups[int(pid)] = "0::/kubepods/burstable/pod-" + spec.name + "/" + c.Id + "\n"
		if class != "" {
			tasks.class[int(pid)] = class
		}
		c.Pid = pid
		if err := f.r.StartContainer(context.Background(), &api.StartContainerRequest{Pod: f.pods[c.PodSandboxId], Container: c}); err != nil {
			t.Fatalf("StartContainer: %v", err)
		}
	}
	rr := map[string]string{AnnotationSched: "rr"}
	start(podSpec{name: "svc-ignored", shares: 512, quota: 50000, annotations: rr}, 300, "")
	start(podSpec{name: "svc-applied", shares: 512, quota: 50000, annotations: rr}, 301, enforce.RTRR)
	start(podSpec{name: "svc-plain", shares: 512, quota: 50000}, 302, "")
	if got := tasks.class[300]; got != enforce.RTRR {
		t.Errorf("the ignored container's process is %q, want rr set by the plugin", got)
	}
	if _, set := tasks.class[302]; set || len(tasks.sets) != 1 {
		t.Errorf("SetRealTime calls %v (pid 302 class %q): want only the ignored container's", tasks.sets, tasks.class[302])
	}
	got := p.RTStarts()
	if got[RTRoutePlugin] != 1 || got[RTRouteRuntime] != 1 || got[RTRouteNone] != 0 {
		t.Errorf("real-time starts by route %v, want plugin 1, runtime 1, none 0", got)
	}
}
