package bench

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/enforce"
	"github.com/corepin/corepin/experiment"
	"github.com/corepin/corepin/internal/testutil"
	"github.com/corepin/corepin/proc"
	"github.com/corepin/corepin/topology"
	"github.com/corepin/corepin/workload"
)

func TestStackedRound(t *testing.T) {
	four := cpuset.New(0, 1, 2, 3)
	tests := []struct {
		name string
		wake []int
		cpus cpuset.CPUSet
		want bool
	}{
		{name: "apart on two CPUs", wake: []int{0, 1}, cpus: cpuset.New(0, 1), want: false},
		{name: "stacked, the other CPU free", wake: []int{1, 1}, cpus: cpuset.New(0, 1), want: true},
		{name: "three threads on two CPUs: no CPU free", wake: []int{0, 1, 1}, cpus: cpuset.New(0, 1), want: false},
		{name: "two of two stacked on four CPUs", wake: []int{2, 2}, cpus: four, want: true},
		{name: "four threads, two pairs, two CPUs free", wake: []int{0, 0, 1, 1}, cpus: four, want: true},
		{name: "four threads spread", wake: []int{0, 1, 2, 3}, cpus: four, want: false},
		{name: "a CPU outside the set does not count", wake: []int{7, 7}, cpus: cpuset.New(0, 1), want: false},
		{name: "unknown CPUs do not count", wake: []int{-1, -1}, cpus: cpuset.New(0, 1), want: false},
		{name: "one thread", wake: []int{0}, cpus: cpuset.New(0, 1), want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := stackedRound(tc.wake, tc.cpus); got != tc.want {
				t.Errorf("stackedRound(%v, %s) = %v, want %v", tc.wake, tc.cpus, got, tc.want)
			}
		})
	}
}

func TestAnalyzeWakeRounds(t *testing.T) {
	res := workload.WakeupResult{Threads: 2,
		WakeCPUs:   [][]int{{0, 1}, {1, 1}, {0, 0}, {0, 1}},
		RunqWaitNS: [][]int64{{0, 1000}, {0, 2_000_000}, {5000, 3000}, {0, 0}},
	}
	got := analyzeWakeRounds(res, cpuset.New(0, 1))
	if got.Rounds != 4 || got.Stacked != 2 || got.StackedPct != 50 {
		t.Errorf("rounds, stacked, pct = %d, %d, %v; want 4, 2, 50", got.Rounds, got.Stacked, got.StackedPct)
	}
	// Waits in µs: 0 0 0 0 1 3 5 2000: the median is 0 or 1, the p99 2000 (3 figures).
	if got.WaitP50US > 1 || math.Abs(got.WaitP99US-2000) > 2 {
		t.Errorf("wait p50, p99 = %v, %v µs; want <= 1, 2000", got.WaitP50US, got.WaitP99US)
	}
	if empty := analyzeWakeRounds(workload.WakeupResult{}, cpuset.New(0, 1)); !math.IsNaN(empty.StackedPct) || !math.IsNaN(empty.WaitP99US) {
		t.Errorf("no rounds: %+v, want NaN figures", empty)
	}
}

func TestBEShareOfIdle(t *testing.T) {
	// 2 CPUs for 1 s, the service used 0.5 s: 1.5 s idle, the batch took 1.2 s.
	if got := beShareOfIdle(1200*time.Millisecond, 500*time.Millisecond, time.Second, 2); math.Abs(got-0.8) > 1e-9 {
		t.Errorf("beShareOfIdle = %v, want 0.8", got)
	}
	if got := beShareOfIdle(time.Second, 2*time.Second, time.Second, 2); !math.IsNaN(got) {
		t.Errorf("nothing left idle: %v, want NaN", got)
	}
}

// The JSON rows are the design.md contract: one per point with the keys
// named there, null where not measured, and what was skipped.
func TestWakeupJSONShape(t *testing.T) {
	e := &wakeupExp{}
	e.Spec(true)
	e.spec.Skipped = []Skip{{What: "ls_class rr", Reason: "no right"}, {What: "ls_class fifo", Reason: "no right"}, {What: "be_route weight", Reason: "no cgroup"}}
	pts := []experiment.PointResult{
		{Point: experiment.P("be_route", "none", "ls_class", "normal", "batch_threads", 0, "ls_threads", 2),
			Repeats: []experiment.Metrics{{"stacked_pct": 4, "runq_wait_p50_us": 10, "runq_wait_p99_us": 90}}},
		{Point: experiment.P("be_route", "sched_idle", "ls_class", "normal", "batch_threads", 1, "ls_threads", 2),
			Repeats: []experiment.Metrics{{"stacked_pct": 40, "runq_wait_p50_us": 2000, "runq_wait_p99_us": 3000, "be_share_of_idle": 0.9}}},
	}
	b, err := json.Marshal(e.Analyze(&Env{}, pts))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Notice  string           `json:"notice"`
		Rec     string           `json:"recommendation"`
		Rows    []map[string]any `json:"rows"`
		Skipped []Skip           `json:"skipped"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Rows) != 2 {
		t.Fatalf("rows = %d, want 2: %s", len(got.Rows), b)
	}
	for _, row := range got.Rows {
		for _, k := range []string{"be_route", "ls_class", "batch_threads", "stacked_pct", "runq_wait_p50_us", "runq_wait_p99_us", "be_share_of_idle"} {
			if _, ok := row[k]; !ok {
				t.Errorf("row %v lacks %q", row, k)
			}
		}
	}
	if got.Rows[0]["be_share_of_idle"] != nil || got.Rows[1]["be_share_of_idle"] != 0.9 || got.Rows[1]["batch_threads"] != 1.0 {
		t.Errorf("rows = %v; want be_share_of_idle null without a batch, 0.9 with, batch_threads a number", got.Rows)
	}
	if len(got.Skipped) != 3 || strings.Count(got.Notice, "no right") != 1 || !strings.Contains(got.Notice, "ls_class rr, ls_class fifo: no right") {
		t.Errorf("skipped %v, notice %q: want 3 skips, each reason said once", got.Skipped, got.Notice)
	}
	if !strings.Contains(got.Rec, "route sched_idle, LS class normal") || !strings.Contains(got.Rec, "40% of rounds stacked (4% with no batch)") {
		t.Errorf("recommendation %q: want the sched_idle row beside its no-batch figure", got.Rec)
	}
}

// wakeupTestEnv is a quick experiment with a tiny probe, run by this test
// binary acting as corepin (rank_child_test.go).
func wakeupTestEnv(t *testing.T, d enforce.Driver) (*wakeupExp, *Env) {
	t.Helper()
	t.Setenv(oversubChildEnv, "1")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	topo, err := topology.Open("/")
	if err != nil {
		t.Fatal(err)
	}
	e := &wakeupExp{}
	e.Spec(true)
	e.spec.Rounds, e.spec.Period, e.spec.Burn = 3, 5*time.Millisecond, time.Millisecond
	return e, &Env{Topo: topo, Driver: d, Exe: exe, Dir: t.TempDir(), Quick: true, Log: testLog{t}}
}

// As a user without rights (nobody, at nice 5: issue 28's non-root run),
// the experiment skips the real-time classes and the cgroup routes, says
// why, and measures the rest: the batch of the sched_idle route runs in
// SCHED_IDLE, every thread.
func TestWakeupAsUser(t *testing.T) {
	if os.Getenv("COREPIN_TEST_WAKE_USER") == "" {
		testutil.RunAsNobodyNicer(t, "TestWakeupAsUser", "COREPIN_TEST_WAKE_USER=1")
		return
	}
	d, err := enforce.NewAffinity()
	if err != nil {
		t.Fatal(err)
	}
	e, env := wakeupTestEnv(t, d)
	e.Resolve(env)
	var skipped []string
	for _, s := range e.spec.Skipped {
		skipped = append(skipped, s.What)
		want := "writable cgroup"
		if strings.HasPrefix(s.What, "ls_class") {
			want = "RLIMIT_RTPRIO"
		}
		if !strings.Contains(s.Reason, want) {
			t.Errorf("skip %s: reason %q does not say %q", s.What, s.Reason, want)
		}
	}
	if want := []string{"ls_class rr", "be_route cpu_idle", "be_route idle_parent", "be_route weight"}; !slices.Equal(skipped, want) {
		t.Errorf("skipped = %q, want %q", skipped, want)
	}
	var routes []string
	for _, p := range e.Points(env) {
		if r := p.Get("be_route") + " " + p.Get("ls_class"); !slices.Contains(routes, r) {
			routes = append(routes, r)
		}
	}
	if want := []string{"none normal", "sched_idle normal"}; !slices.Equal(routes, want) {
		t.Errorf("points cover %q, want %q", routes, want)
	}
	checkRoute(t, e, env, topology.RouteSchedIdle)
}

// The cgroup routes as root: the batch's every thread is in the route's
// group, with the route's setting.
func TestWakeupRoutesApplied(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: the cgroup routes need root")
	}
	d, err := enforce.Detect()
	if err != nil {
		t.Fatal(err)
	}
	if d.Name() == enforce.NameAffinity {
		t.Skipf("skipping: no writable cgroup: %q", d.Limitations())
	}
	e, env := wakeupTestEnv(t, d)
	routes := []string{topology.RouteSchedIdle, topology.RouteCPUIdle, topology.RouteIdleParent, topology.RouteWeight}
	if d.Name() == enforce.NameV2 {
		routes = append(routes, topology.RouteLayered)
	}
	for _, r := range routes {
		t.Run(r, func(t *testing.T) { checkRoute(t, e, env, r) })
	}
}

// namedDriver is a driver that only has a name: enough for the checks
// that read nothing else.
type namedDriver struct {
	enforce.Driver
	name string
}

func (d namedDriver) Name() string { return d.name }

func (d namedDriver) Create(string, enforce.Resources) (enforce.Group, error) {
	return nil, errors.New("a named driver makes no group")
}

// The layered route is measured only when asked for, and only where
// scx_layered can match a cgroup: cgroup v2.
func TestWakeupLayeredRoute(t *testing.T) {
	e := &wakeupExp{}
	if slices.Contains(e.Spec(false).(*wakeupSpec).Routes, topology.RouteLayered) {
		t.Errorf("the default spec measures %s; it is for a spec that asks", topology.RouteLayered)
	}
	e.spec.Routes = []string{topology.RouteLayered}
	if err := e.validate(); err != nil {
		t.Errorf("a spec asking for route %s: %v", topology.RouteLayered, err)
	}
	e.spec.Routes = []string{"layerd"}
	if err := e.validate(); err == nil || !strings.Contains(err.Error(), "idle_parent, weight, layered") {
		t.Errorf("route layerd: %v; want a refusal naming every route", err)
	}
	tests := []struct {
		name   string
		driver enforce.Driver
		want   string
	}{
		{name: "cgroup v1", driver: namedDriver{name: enforce.NameV1}, want: "needs cgroup v2"},
		{name: "affinity", driver: namedDriver{name: enforce.NameAffinity}, want: "needs a writable cgroup"},
		{name: "no driver", want: "needs a writable cgroup"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := e.probeRoute(&Env{Driver: tc.driver}, topology.RouteLayered)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("probeRoute(layered) on %s = %v, want an error saying %q", tc.name, err, tc.want)
			}
		})
	}
}

// checkRoute runs one point of route and checks, while its batch runs,
// that every batch thread is under the route.
func checkRoute(t *testing.T, e *wakeupExp, env *Env, route string) {
	t.Helper()
	seen := false
	e.observe = func(r string, b *proc.Process) {
		seen = true
		tids, err := os.ReadDir("/proc/" + strconv.Itoa(b.Pid()) + "/task")
		if err != nil {
			t.Fatal(err)
		}
		for _, tid := range tids {
			dir := "/proc/" + strconv.Itoa(b.Pid()) + "/task/" + tid.Name()
			if got := threadPolicy(t, dir); (route == topology.RouteSchedIdle) != (got == 5) {
				t.Errorf("%s: thread %s has policy %d (5 is SCHED_IDLE)", route, tid.Name(), got)
			}
			if route == topology.RouteSchedIdle {
				continue
			}
			cg := cpuGroup(t, dir)
			underBE := route == topology.RouteIdleParent || route == topology.RouteLayered
			if !strings.Contains(cg, "wake-batch") || underBE != strings.Contains(cg, "corepin-be") {
				t.Errorf("%s: thread %s is in cpu group %q", route, tid.Name(), cg)
			}
			file, want := "cpu.idle", "1"
			if route == topology.RouteWeight {
				file, want = "cpu.shares", strconv.FormatUint(enforce.SharesFromWeight(1), 10)
				if env.Driver.Name() == enforce.NameV2 {
					file, want = "cpu.weight", "1"
				}
			}
			if got := groupFile(t, cg, file); got != want {
				t.Errorf("%s: %s of %s = %q, want %q", route, file, cg, got, want)
			}
		}
	}
	// The probe runs where bench runs, but for the layered route: in a
	// group under corepin's root.
	probeSeen := false
	e.observeProbe = func(r string, p *proc.Process) {
		probeSeen = true
		cg := cpuGroup(t, "/proc/"+strconv.Itoa(p.Pid()))
		if inLS := strings.HasPrefix(cg, "/"+enforce.DefaultRoot+"/") && strings.Contains(cg, wakeupLSGroup); inLS != (route == topology.RouteLayered) {
			t.Errorf("%s: the probe runs in cpu group %q", route, cg)
		}
	}
	defer func() { e.observe, e.observeProbe = nil, nil }()
	m, err := e.Run(context.Background(), env, experiment.P("be_route", route, "ls_class", "normal", "batch_threads", 1, "ls_threads", 2))
	if err != nil {
		t.Fatalf("%s: %v", route, err)
	}
	if !seen || !probeSeen || m["rounds"] != 3 {
		t.Errorf("%s: observed batch %v, probe %v, metrics %v: want both seen and 3 rounds", route, seen, probeSeen, m)
	}
}

// threadPolicy is field 41 of a thread's stat (proc(5)).
func threadPolicy(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile(dir + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	n, err := strconv.Atoi(f[41-3])
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// cpuGroup is the thread's group in the cpu hierarchy (v1) or its only
// group (v2).
func cpuGroup(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(dir + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 && (parts[1] == "" || slices.Contains(strings.Split(parts[1], ","), "cpu")) {
			return parts[2]
		}
	}
	t.Fatalf("no cpu group in %s", b)
	return ""
}

func groupFile(t *testing.T, group, file string) string {
	t.Helper()
	for _, mnt := range []string{"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup"} {
		if b, err := os.ReadFile(filepath.Join(mnt, group, file)); err == nil {
			return strings.TrimSpace(string(b))
		}
	}
	t.Fatalf("no %s for group %s", file, group)
	return ""
}

// The recommendation names a route only when it stacks fewer wakes than
// corepin's default beyond the noise over the repeats; otherwise it keeps
// the default; where the default was not measured it says so.
func TestWakeupRecommendationIsTested(t *testing.T) {
	row := func(route, class string, batch int, stacked float64) Row {
		return Row{"be_route": route, "ls_class": class, "batch_threads": batch, "stacked_pct": stacked, "runq_wait_p99_us": 100.0}
	}
	rows := []Row{row("none", "normal", 0, 0), row("idle_parent", "normal", 1, 70), row("idle_parent", "rr", 1, 0), row("weight", "normal", 1, 90)}
	k := func(route, class string) wakeKey { return wakeKey{route, class, "1"} }
	apart := map[wakeKey][]float64{k("idle_parent", "normal"): {60, 70, 72, 80, 76}, k("idle_parent", "rr"): {0, 0, 2, 0, 0}, k("weight", "normal"): {90, 88, 92, 95, 85}}
	if got := wakeupRecommendation(rows, apart); !strings.Contains(got, "route idle_parent, LS class rr") || !strings.Contains(got, "Mann-Whitney p=") {
		t.Errorf("5 repeats apart: %q, want rr named with its test", got)
	}
	few := map[wakeKey][]float64{k("idle_parent", "normal"): {70}, k("idle_parent", "rr"): {0}, k("weight", "normal"): {90}}
	if got := wakeupRecommendation(rows, few); !strings.HasPrefix(got, "keep corepin's default") {
		t.Errorf("one repeat each: %q, want the default kept (nothing is significant)", got)
	}
	noDefault := []Row{row("none", "normal", 0, 0), row("sched_idle", "normal", 1, 92), row("sched_idle", "normal", 2, 100)}
	if got := wakeupRecommendation(noDefault, map[wakeKey][]float64{}); !strings.Contains(got, "not compared with corepin's default") {
		t.Errorf("default not measured: %q, want it said", got)
	}
}
