package nri

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/containerd/nri/pkg/api"

	"github.com/corepin/corepin/enforce"
	"github.com/corepin/corepin/topology"
)

// fakeTasks is a node's processes: each pid's cgroup file and whether it
// is SCHED_IDLE; setErr fails SetIdle, sticky false makes a set not hold.
type fakeTasks struct {
	cgroups map[int]string
	idle    map[int]bool
	setErr  error
	noHold  bool
	sets    []int
	// class is each process's real-time class (enforce.RTRR, RTFIFO;
	// absent: normal).
	class map[int]string
}

func (f *fakeTasks) Class(pid int) (string, error) {
	if c, ok := f.class[pid]; ok {
		return c, nil
	}
	return enforce.RTNormal, nil
}

func (f *fakeTasks) SetRealTime(pid int, rt enforce.RealTime) error {
	f.sets = append(f.sets, pid)
	if f.setErr != nil {
		return f.setErr
	}
	if !f.noHold {
		if f.class == nil {
			f.class = map[int]string{}
		}
		f.class[pid] = rt.Policy
	}
	return nil
}

func (f *fakeTasks) Cgroups(pid int) (string, error) {
	cg, ok := f.cgroups[pid]
	if !ok {
		return "", fmt.Errorf("open /proc/%d/cgroup: %w", pid, syscall.ENOENT)
	}
	return cg, nil
}

func (f *fakeTasks) Idle(pid int) (bool, error) { return f.idle[pid], nil }

func (f *fakeTasks) SetIdle(pid int) error {
	f.sets = append(f.sets, pid)
	if f.setErr != nil {
		return f.setErr
	}
	if !f.noHold {
		f.idle[pid] = true
	}
	return nil
}

const beID = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// beCgroups is /proc/<pid>/cgroup of a BE container's process under the
// kubelet's cgroupfs driver, as a plugin in a cgroup namespace reads it.
const beCgroups = "12:cpu,cpuacct:/../../kubepods/besteffort/pod1234/" + beID + "\n1:name=systemd:/../kubepods/besteffort/pod1234/" + beID + "\n"

func TestProtectBEChoosesTheBestRouteThatHolds(t *testing.T) {
	for _, tc := range []struct {
		name     string
		pid      int
		tasks    fakeTasks
		want     BERoute
		wantSets int
		why      string // part of the reason, "" for none
	}{
		{name: "runtime applied SCHED_IDLE", pid: 42, tasks: fakeTasks{cgroups: map[int]string{42: beCgroups}, idle: map[int]bool{42: true}},
			want: RouteRuntimeIdle},
		{name: "runtime ignored it: the plugin sets it", pid: 42, tasks: fakeTasks{cgroups: map[int]string{42: beCgroups}, idle: map[int]bool{}},
			want: RoutePluginIdle, wantSets: 1},
		{name: "setting is refused", pid: 42, tasks: fakeTasks{cgroups: map[int]string{42: beCgroups}, idle: map[int]bool{}, setErr: syscall.EPERM},
			want: RouteMinWeight, wantSets: 1, why: "CAP_SYS_NICE"},
		{name: "set but does not hold", pid: 42, tasks: fakeTasks{cgroups: map[int]string{42: beCgroups}, idle: map[int]bool{}, noHold: true},
			want: RouteMinWeight, wantSets: 1, why: "did not hold"},
		{name: "no pid from the runtime", pid: 0, tasks: fakeTasks{idle: map[int]bool{}},
			want: RouteMinWeight, why: "no process"},
		{name: "pid not visible: not the host's PID namespace", pid: 42, tasks: fakeTasks{cgroups: map[int]string{}, idle: map[int]bool{}},
			want: RouteMinWeight, why: "hostPID"},
		{name: "pid is another process: never touched", pid: 1, tasks: fakeTasks{cgroups: map[int]string{1: "0::/\n"}, idle: map[int]bool{}},
			want: RouteMinWeight, why: "is not container"},
		{name: "pid of a group below the container's name: not it", pid: 7,
			tasks: fakeTasks{cgroups: map[int]string{7: "4:cpu:/kubepods/" + beID + "/other\n"}, idle: map[int]bool{}},
			want:  RouteMinWeight, why: "is not container"},
		{name: "systemd driver's scope", pid: 9,
			tasks: fakeTasks{cgroups: map[int]string{9: "0::/kubepods.slice/kubepods-besteffort.slice/cri-containerd-" + beID + ".scope\n"}, idle: map[int]bool{}},
			want:  RoutePluginIdle, wantSets: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, why := ProtectBE(&tc.tasks, tc.pid, beID)
			if got != tc.want {
				t.Errorf("ProtectBE = %s (%v), want %s", got, why, tc.want)
			}
			if len(tc.tasks.sets) != tc.wantSets {
				t.Errorf("SetIdle called on %v, want %d calls", tc.tasks.sets, tc.wantSets)
			}
			checkReason(t, why, tc.why)
		})
	}
}

// TestBEContainerAsksForIdleAndRecordsItsRoute drives the plugin through
// the runtime's library: the BE container's adjustment asks for
// SCHED_IDLE, StartContainer records the route the process got, an LS
// container gets neither, and the metric counts the routes.
func TestBEContainerAsksForIdleAndRecordsItsRoute(t *testing.T) {
	f := newRuntime(t, socketDir(t))
	t.Cleanup(f.r.Stop)
	tasks := &fakeTasks{cgroups: map[int]string{}, idle: map[int]bool{}}
	p, err := New(Options{State: filepath.Join(t.TempDir(), "state.db"), Topology: topology.MustSynthetic(twoNodes), Tasks: tasks})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	f.connect(p)

	bec, rsp, err := f.create(be)
	if err != nil {
		t.Fatal(err)
	}
	if got := rsp.GetAdjust().GetLinux().GetScheduler().GetPolicy(); got != api.LinuxSchedulerPolicy_SCHED_IDLE {
		t.Errorf("BE adjustment's scheduler policy = %v, want SCHED_IDLE", got)
	}
	lsc, rsp, err := f.create(ls1500)
	if err != nil {
		t.Fatal(err)
	}
	if s := rsp.GetAdjust().GetLinux().GetScheduler(); s != nil {
		t.Errorf("LS adjustment's scheduler = %v, want none", s)
	}
	tasks.cgroups[100] = "0::/kubepods/besteffort/pod-be/" + bec.Id + "\n"
	tasks.cgroups[200] = "0::/kubepods/burstable/pod-ls/" + lsc.Id + "\n"
	start := func(c *api.Container, pid uint32) {
		t.Helper()
		c.Pid = pid
		if err := f.r.StartContainer(context.Background(), &api.StartContainerRequest{Pod: f.pods[c.PodSandboxId], Container: c}); err != nil {
			t.Fatalf("StartContainer: %v", err)
		}
	}
	start(bec, 100)
	start(lsc, 200)
	if !tasks.idle[100] || tasks.idle[200] {
		t.Errorf("SCHED_IDLE after start: BE %v, LS %v; want the BE process only", tasks.idle[100], tasks.idle[200])
	}
	ca, err := p.Containers().Get(bec.Id)
	if err != nil || ca.BERoute != string(RoutePluginIdle) {
		t.Errorf("BE container's recorded route = %q (%v), want %s", ca.BERoute, err, RoutePluginIdle)
	}

	rec := httptest.NewRecorder()
	p.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{`corepin_nri_be_protection{route="plugin-sched-idle"} 1`, `corepin_nri_be_protection{route="min-weight"} 0`,
		`corepin_nri_be_protection{route="runtime-sched-idle"} 0`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %q:\n%s", want, body)
		}
	}
	if n, err := p.BERoutes(); err != nil || n[RoutePluginIdle] != 1 || len(n) != 1 {
		t.Errorf("BERoutes = %v (%v), want one plugin-sched-idle", n, err)
	}
}

// TestKernelTasksSetsEveryThreadIdle checks the kernel side on a real
// child process: not idle at first, every thread idle after SetIdle.
func TestKernelTasksSetsEveryThreadIdle(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skipf("no sleep to start: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	pid := cmd.Process.Pid
	var k KernelTasks
	if idle, err := k.Idle(pid); err != nil || idle {
		t.Fatalf("Idle of a fresh child = %v (%v), want false", idle, err)
	}
	cg, err := k.Cgroups(pid)
	if err != nil || cg == "" {
		t.Fatalf("Cgroups = %q (%v), want the child's cgroup file", cg, err)
	}
	if err := k.SetIdle(pid); err != nil {
		t.Fatalf("SetIdle: %v", err)
	}
	if idle, err := k.Idle(pid); err != nil || !idle {
		t.Errorf("Idle after SetIdle = %v (%v), want true", idle, err)
	}
	if _, err := k.Cgroups(1 << 30); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("Cgroups of no process = %v, want ENOENT", err)
	}
}

// FuzzInContainer checks the reading of /proc/<pid>/cgroup that guards
// every SCHED_IDLE the plugin sets: it never panics, and whenever it
// says yes, some line is hierarchy-id:controllers:path with the id in the
// path's last element.
func FuzzInContainer(f *testing.F) {
	f.Add(beCgroups, beID)
	f.Add("0::/kubepods.slice/cri-containerd-"+beID+".scope\n", beID)
	f.Add("0::/\n", beID)
	f.Add("::", "")
	f.Add("1:cpu:/a/b\x00\n2", "b")
	f.Fuzz(func(t *testing.T, cgroups, id string) {
		if !inContainer(cgroups, id) {
			return
		}
		for _, line := range strings.Split(cgroups, "\n") {
			parts := strings.SplitN(line, ":", 3)
			if len(parts) == 3 && strings.Contains(parts[2][strings.LastIndexByte(parts[2], '/')+1:], id) {
				return
			}
		}
		t.Errorf("inContainer(%q, %q) = true, but no line names the id as its group", cgroups, id)
	})
}

// checkReason fails t unless why names part ("": no reason at all).
func checkReason(t *testing.T, why error, part string) {
	t.Helper()
	switch {
	case part == "" && why != nil:
		t.Errorf("reason = %v, want none", why)
	case part != "" && (why == nil || !strings.Contains(why.Error(), part)):
		t.Errorf("reason = %v, want one naming %q", why, part)
	}
}
