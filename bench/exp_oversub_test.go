package bench

import (
	"context"
	"errors"
	"math"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/corepin/corepin/experiment"
	"github.com/corepin/corepin/netbench"
	"github.com/corepin/corepin/topology"
)

// oversubChildEnv makes the test binary act as corepin (rank_child_test.go),
// so the experiment's ranks are real processes without building corepin.
const oversubChildEnv = "COREPIN_BENCH_TEST_PINGPONG"

type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func TestOversubProcs(t *testing.T) {
	for _, tc := range []struct {
		name      string
		kind      string
		k, cpus   int
		wantProcs int
	}{
		{name: "compute 2 per CPU", kind: OversubCompute, k: 2, cpus: 2, wantProcs: 4},
		{name: "pairs 1 per CPU", kind: OversubLoopback, k: 1, cpus: 2, wantProcs: 2},
		{name: "pairs round down", kind: OversubVeth, k: 3, cpus: 3, wantProcs: 8},
		{name: "at least one pair", kind: OversubLoopback, k: 1, cpus: 1, wantProcs: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := oversubProcs(tc.kind, tc.k, tc.cpus); got != tc.wantProcs {
				t.Errorf("oversubProcs(%s, %d, %d) = %d, want %d", tc.kind, tc.k, tc.cpus, got, tc.wantProcs)
			}
		})
	}
}

func TestOversubSpec(t *testing.T) {
	e := newOversubExp()
	if err := experiment.Configure([]Experiment{e}, []byte("oversubscription:\n  procs_per_cpu: [1, 3]\n  kinds: [compute]\n"), true); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(e.spec.ProcsPerCPU, []int{1, 3}) || !slices.Equal(e.spec.Kinds, []string{"compute"}) {
		t.Errorf("spec = %+v, want procs_per_cpu [1 3], kinds [compute]", e.spec)
	}
	if got := e.Spec(true).(*oversubSpec); !slices.Equal(got.ProcsPerCPU, []int{1, 2, 4}) || len(got.Kinds) != 3 {
		t.Errorf("quick spec = %+v, want 3 kinds at 1, 2, 4 per CPU", got)
	}
	for _, bad := range []string{"kinds: [gpu]", "procs_per_cpu: [0]", "procs_per_cpu: []", "size: 0"} {
		e := newOversubExp()
		if err := experiment.Configure([]Experiment{e}, []byte("oversubscription:\n  "+bad+"\n"), true); err != nil {
			t.Fatalf("experiment.Configure(%s) = %v", bad, err)
		}
		if err := e.Setup(context.Background(), &Env{Exe: "/bin/true"}); !errors.Is(err, experiment.ErrUsage) {
			t.Errorf("Setup with %s = %v, want experiment.ErrUsage", bad, err)
		}
	}
}

// oversubPoint is a synthetic point with per-repeat metric values.
func oversubPoint(kind string, k int, metrics map[string][]float64) experiment.PointResult {
	pr := experiment.PointResult{Point: experiment.P("kind", kind, "procs_per_cpu", k, "procs", 2*k)}
	n := 0
	for _, v := range metrics {
		n = max(n, len(v))
	}
	for i := range n {
		m := experiment.Metrics{}
		for name, v := range metrics {
			m[name] = v[i]
		}
		pr.Repeats = append(pr.Repeats, m)
	}
	return pr
}

func TestOversubAnalyzeSynthetic(t *testing.T) {
	pts := []experiment.PointResult{
		oversubPoint(OversubLoopback, 1, map[string][]float64{
			"ops_per_s": {1000, 1000, 1000, 1000, 1000}, "per_proc_ops_per_s": {1000, 1000, 1000, 1000, 1000},
			"wall_s": {1, 1, 1, 1, 1}, "rtt_p99_us": {100, 100, 100, 100, 100}}),
		oversubPoint(OversubLoopback, 2, map[string][]float64{
			"ops_per_s": {500, 600, 700, 600, 600}, "per_proc_ops_per_s": {250, 300, 350, 300, 300},
			"wall_s": {2, 1.7, 1.4, 1.7, 1.7}, "rtt_p99_us": {300, 300, 300, 300, 300}}),
		oversubPoint(OversubCompute, 1, map[string][]float64{
			"ops_per_s": {200, 200, 200, 200, 200}, "per_proc_ops_per_s": {100, 100, 100, 100, 100}, "wall_s": {1, 1, 1, 1, 1}}),
		oversubPoint(OversubCompute, 2, map[string][]float64{
			"ops_per_s": {190, 190, 190, 190, 190}, "per_proc_ops_per_s": {47.5, 47.5, 47.5, 47.5, 47.5}, "wall_s": {1.05, 1.05, 1.05, 1.05, 1.05}}),
	}
	e := newOversubExp()
	a := e.Analyze(&Env{}, pts)
	if len(a.Tables) != 3 {
		t.Fatalf("%d tables, want per-process, aggregate and points (no veth table without veth points)", len(a.Tables))
	}
	per, agg := a.Tables[0], a.Tables[1]
	if want := []string{"kind", "1/CPU", "2/CPU"}; !slices.Equal(per.Columns, want) {
		t.Errorf("columns = %v, want %v", per.Columns, want)
	}
	wantPer := [][]string{
		{OversubLoopback, "1.00 (1.00-1.00)", "0.30 (0.25-0.35)"},
		{OversubCompute, "1.00 (1.00-1.00)", "0.47 (0.47-0.47)"},
		{"fair share", "1.00", "0.50"},
	}
	if !slices.EqualFunc(per.Rows, wantPer, slices.Equal) {
		t.Errorf("per-process rows = %v, want %v", per.Rows, wantPer)
	}
	wantAgg := [][]string{
		{OversubLoopback, "1.00 (1.00-1.00)", "0.60 (0.50-0.70)"},
		{OversubCompute, "1.00 (1.00-1.00)", "0.95 (0.95-0.95)"},
	}
	if !slices.EqualFunc(agg.Rows, wantAgg, slices.Equal) {
		t.Errorf("aggregate rows = %v, want %v", agg.Rows, wantAgg)
	}
	if !strings.Contains(per.Note, OversubVeth+" not measured") {
		t.Errorf("note = %q, want it to say veth was not measured", per.Note)
	}
	for _, want := range []string{"At 2 processes per CPU", "(pingpong-loopback) lose 40% of their aggregate throughput against 1 per CPU (Mann-Whitney p=0.00794, n=5 vs 5)",
		"p99 x3.0 (Mann-Whitney p=0.00794, n=5 vs 5)", "compute-only processes lose 5% (Mann-Whitney p=0.00794, n=5 vs 5)",
		"Don't oversubscribe communication-heavy ranks (they lose 35 points more than compute-only, beyond the noise: Mann-Whitney p=0.00794, n=5 vs 5)"} {
		if !strings.Contains(a.Recommendation, want) {
			t.Errorf("recommendation %q lacks %q", a.Recommendation, want)
		}
	}
	if len(a.Charts) != 3 || a.Charts[0].Kind != ChartLine || a.Charts[2].Kind != ChartBox {
		t.Fatalf("charts = %+v, want two lines and a box", a.Charts)
	}
	line := a.Charts[0]
	if len(line.Series) != 3 || line.Series[0].Name != OversubLoopback || line.Series[2].Name != "fair share (1/k)" {
		t.Errorf("line series = %+v", line.Series)
	}
	if y := line.Series[0].Y; len(y) != 2 || math.Abs(y[1]-0.3) > 1e-9 {
		t.Errorf("loopback relative per-process throughput = %v, want [1 0.3]", y)
	}
	box := a.Charts[2]
	if !slices.Equal(box.XLabels, []string{"1", "2"}) || !slices.Equal(box.Series[0].Values[1], []float64{2, 1.7, 1.4, 1.7, 1.7}) {
		t.Errorf("box = %+v", box)
	}

	// With a veth kind that only gains throughput but loses tail latency.
	pts = append(pts,
		oversubPoint(OversubVeth, 1, map[string][]float64{"ops_per_s": {800, 800, 800, 800, 800}, "per_proc_ops_per_s": {800, 800, 800, 800, 800},
			"wall_s": {1, 1, 1, 1, 1}, "rtt_p99_us": {120, 120, 120, 120, 120}}),
		oversubPoint(OversubVeth, 2, map[string][]float64{"ops_per_s": {960, 960, 960, 960, 960}, "per_proc_ops_per_s": {480, 480, 480, 480, 480},
			"wall_s": {1, 1, 1, 1, 1}, "rtt_p99_us": {480, 480, 480, 480, 480}}))
	a = e.Analyze(&Env{}, pts)
	for _, want := range []string{"(pingpong-veth) gain 20%", "p99 x4.0 (Mann-Whitney p=0.00794, n=5 vs 5)", "Throughput holds up but tail latency does not",
		"gives 80% of loopback's round trips per second at the lowest level (Mann-Whitney p=0.00794, n=5 vs 5), with p99 x1.2 (Mann-Whitney p=0.00794, n=5 vs 5)."} {
		if !strings.Contains(a.Recommendation, want) {
			t.Errorf("recommendation %q lacks %q", a.Recommendation, want)
		}
	}
	if len(a.Tables) != 4 || !strings.HasPrefix(a.Tables[2].Title, "veth") {
		t.Fatalf("tables = %d, want the veth table third", len(a.Tables))
	}
	if got := a.Tables[2].Rows[0]; !slices.Equal(got, []string{"1", "0.80 (0.80-0.80)", "-", "1.20 (1.20-1.20)"}) {
		t.Errorf("veth row = %v", got)
	}
}

// Advice from the oversubscription experiment rests on differences beyond
// the noise of the repeats (Mann-Whitney): a gap between communication and
// compute, or a tail-latency rise, that the repeats do not separate gives
// no advice, and a level whose tail latency rose beyond the noise is never
// called safe however well its throughput held.
func TestOversubAdviceNeedsSignificance(t *testing.T) {
	five := func(v float64) []float64 { return []float64{v, v, v, v, v} }
	base := []experiment.PointResult{
		oversubPoint(OversubLoopback, 1, map[string][]float64{"ops_per_s": five(1000), "rtt_p99_us": five(100)}),
		oversubPoint(OversubCompute, 1, map[string][]float64{"ops_per_s": five(200)}),
		oversubPoint(OversubCompute, 2, map[string][]float64{"ops_per_s": {190, 189, 191, 190, 190}}),
	}
	loop2 := func(ops, p99 []float64) []experiment.PointResult {
		return append(slices.Clone(base), oversubPoint(OversubLoopback, 2, map[string][]float64{"ops_per_s": ops, "rtt_p99_us": p99}))
	}
	tests := []struct {
		name    string
		pts     []experiment.PointResult
		want    []string
		notWant []string
	}{
		{
			name: "communication loses more, no overlap",
			pts:  loop2([]float64{600, 610, 590, 605, 595}, []float64{120, 121, 119, 122, 118}),
			want: []string{"lose 40% of their aggregate throughput against 1 per CPU (Mann-Whitney p=0.00794, n=5 vs 5)",
				"Don't oversubscribe communication-heavy ranks (they lose 35 points more than compute-only, beyond the noise: Mann-Whitney p=0.00794, n=5 vs 5)"},
			notWant: []string{"within the noise", "safe"},
		},
		{
			name: "communication loses more on the median, repeats overlap",
			pts:  loop2([]float64{600, 980, 700, 990, 850}, []float64{120, 121, 119, 122, 118}),
			want: []string{"lose 15% of their aggregate throughput against 1 per CPU (Mann-Whitney p=0.00794, n=5 vs 5)",
				"No advice follows from this run: communication-heavy pairs lost 10 points more than compute-only (Mann-Whitney p=", "n=5 vs 5), within the noise"},
			notWant: []string{"Don't oversubscribe", "safe"},
		},
		{
			name:    "throughput holds, tail latency rises beyond the noise",
			pts:     loop2([]float64{940, 945, 950, 955, 960}, []float64{300, 310, 290, 305, 295}),
			want:    []string{"round-trip p99 x3.0 (Mann-Whitney p=0.00794, n=5 vs 5)", "Throughput holds up but tail latency does not"},
			notWant: []string{"safe", "Don't oversubscribe"},
		},
		{
			name: "throughput holds, tail latency rises on the median only",
			pts:  loop2([]float64{940, 945, 950, 955, 960}, []float64{300, 90, 350, 95, 280}),
			want: []string{"round-trip p99 x2.8 (within the noise: Mann-Whitney p=",
				"No advice follows from this run: their round-trip p99 rose x2.8 (Mann-Whitney p="},
			notWant: []string{"safe", "tail latency does not", "Don't oversubscribe"},
		},
		{
			name: "communication gains, no overlap",
			pts:  loop2([]float64{2400, 2500, 2450, 2550, 2600}, []float64{90, 91, 89, 92, 88}),
			want: []string{"gain 150% of their aggregate throughput against 1 per CPU (Mann-Whitney p=0.00794, n=5 vs 5)",
				"oversubscription costs communication less than it costs compute (communication-heavy pairs fared 155 points better than compute-only, beyond the noise: Mann-Whitney p=0.00794, n=5 vs 5)"},
			notWant: []string{"within 5 points", "Don't oversubscribe", "No advice"},
		},
		{
			name:    "communication gains on the median, repeats overlap",
			pts:     loop2([]float64{1500, 900, 1400, 950, 1300}, []float64{90, 91, 89, 92, 88}),
			want:    []string{"No advice follows from this run: communication-heavy pairs fared 35 points better than compute-only (Mann-Whitney p=", "within the noise"},
			notWant: []string{"within 5 points", "costs communication less", "Don't oversubscribe"},
		},
		{
			name: "no difference",
			pts:  loop2([]float64{940, 945, 950, 955, 960}, []float64{100, 101, 99, 100, 102}),
			want: []string{"lose 5% of their aggregate throughput against 1 per CPU (Mann-Whitney p=0.00794, n=5 vs 5)",
				"round-trip p99 x1.0 (within the noise: Mann-Whitney p=",
				"costs communication within 5 points of what it costs compute (+0 points, Mann-Whitney p=",
				"it is as safe for one as for the other"},
			notWant: []string{"Don't oversubscribe", "tail latency does not"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := newOversubExp().Analyze(&Env{}, tc.pts).Recommendation
			checkRecommendation(t, rec, tc.want, tc.notWant)
		})
	}
}

// "Placement matters" only when pairs pinned together and apart differ
// beyond the noise of the repeats.
func TestOversubPlacementNeedsSignificance(t *testing.T) {
	place := func(pl string, ops ...float64) experiment.PointResult {
		pr := oversubPoint(OversubLoopback, 1, map[string][]float64{"ops_per_s": ops})
		pr.Point = experiment.P("kind", OversubLoopback, "procs_per_cpu", 1, "procs", 2, "placement", pl)
		return pr
	}
	os := place(PlaceOS, 1000, 1000, 1000, 1000, 1000)
	for _, tc := range []struct {
		name            string
		together, apart experiment.PointResult
		want            []string
		notWant         []string
	}{
		{
			name:     "together clearly faster",
			together: place(PlaceTogether, 3000, 3100, 2900, 3050, 2950),
			apart:    place(PlaceApart, 1000, 1010, 990, 1005, 995),
			want:     []string{"Placement matters: at 1 per CPU, pingpong-loopback pairs pinned to one CPU ran 3.00x the round trips of pairs pinned apart, beyond the noise (Mann-Whitney p=0.00794, n=5 vs 5; 3.00x and 1.00x the scheduler's own placement)."},
			notWant:  []string{"within the noise"},
		},
		{
			name:     "together faster on the median, repeats overlap",
			together: place(PlaceTogether, 1300, 900, 1250, 950, 1200),
			apart:    place(PlaceApart, 1000, 1280, 880, 1100, 920),
			want:     []string{"Placement: at 1 per CPU, pingpong-loopback pairs pinned to one CPU ran 1.20x the round trips of pairs pinned apart, a difference within the noise (Mann-Whitney p=", "this run does not show that placement matters"},
			notWant:  []string{"Placement matters"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := newOversubExp().Analyze(&Env{}, []experiment.PointResult{os, tc.together, tc.apart}).Recommendation
			checkRecommendation(t, rec, tc.want, tc.notWant)
		})
	}
}

func TestOversubAnalyzeWarnsOfOtherWork(t *testing.T) {
	pts := []experiment.PointResult{
		oversubPoint(OversubCompute, 1, map[string][]float64{"ops_per_s": {100}, "per_proc_ops_per_s": {50}, "wall_s": {1}, "other_cpu_frac": {0.4}}),
		oversubPoint(OversubCompute, 2, map[string][]float64{"ops_per_s": {130}, "per_proc_ops_per_s": {32.5}, "wall_s": {1}, "other_cpu_frac": {0.2}}),
	}
	a := newOversubExp().Analyze(&Env{}, pts)
	if !strings.Contains(a.Tables[0].Note, "other work used 30% of the CPUs") || !strings.Contains(a.Recommendation, "Caution: other work used 30%") {
		t.Errorf("note %q, recommendation %q: want a warning about 30%% other work", a.Tables[0].Note, a.Recommendation)
	}
	pts[0].Repeats[0]["other_cpu_frac"], pts[1].Repeats[0]["other_cpu_frac"] = 0.01, 0.01
	if a := newOversubExp().Analyze(&Env{}, pts); strings.Contains(a.Recommendation, "Caution") {
		t.Errorf("recommendation %q warns on an idle machine", a.Recommendation)
	}
}

func TestCPUBusy(t *testing.T) {
	a, err := cpuBusy(&Env{})
	if err != nil {
		t.Skipf("skipping: no /proc/stat: %v", err)
	}
	x := uint64(1)
	for range 50_000_000 {
		x = x*6364136223846793005 + 1
	}
	b, err := cpuBusy(&Env{})
	if err != nil {
		t.Fatal(err)
	}
	if b < a || a <= 0 {
		t.Errorf("cpuBusy = %v then %v (sink %d), want positive and non-decreasing", a, b, x&1)
	}
}

func TestOversubAnalyzeNothing(t *testing.T) {
	a := newOversubExp().Analyze(&Env{}, nil)
	if a.Recommendation == "" || len(a.Tables) != 0 {
		t.Errorf("Analyze(nil) = %+v", a)
	}
	one := []experiment.PointResult{oversubPoint(OversubCompute, 1, map[string][]float64{"ops_per_s": {1}, "per_proc_ops_per_s": {1}, "wall_s": {1}})}
	if a := newOversubExp().Analyze(&Env{}, one); !strings.Contains(a.Recommendation, "Only one oversubscription level") {
		t.Errorf("recommendation = %q", a.Recommendation)
	}
}

// A quick run with tiny work through RunExperiment, ranks as real
// processes (this test binary); the veth half runs as root with ip.
func TestOversubQuickRun(t *testing.T) {
	t.Setenv(oversubChildEnv, "1")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	e := newOversubExp()
	e.Spec(true)
	e.spec.ProcsPerCPU = []int{1, 2}
	e.spec.Messages, e.spec.Ops, e.spec.PointSeconds = 200, 2000, 1
	env := &Env{Exe: exe, Dir: t.TempDir(), Quick: true, Log: testLog{t}}
	rep, err := RunExperiment(context.Background(), env, e, Options{Repeats: 2, Warmup: true, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	vethOK := netbench.ProbeVeth() == nil
	wantKinds := []string{OversubLoopback, OversubCompute}
	if vethOK {
		wantKinds = []string{OversubLoopback, OversubVeth, OversubCompute}
	}
	if len(rep.Points) != 2*len(wantKinds) {
		t.Fatalf("%d points, want %d (no topology: no pinned placements)", len(rep.Points), 2*len(wantKinds))
	}
	for _, pr := range rep.Points {
		if len(pr.Repeats) != 2 {
			t.Errorf("%s: %d repeats, want 2 (errors %v)", pr.Point.Label(), len(pr.Repeats), pr.Errors)
		}
		if v := pr.Median("other_cpu_frac"); !(v >= 0) {
			t.Errorf("%s: other_cpu_frac = %v, want >= 0", pr.Point.Label(), v)
		}
		for _, m := range []string{"wall_s", "ops_per_s", "per_proc_ops_per_s"} {
			if v := pr.Median(m); !(v > 0) {
				t.Errorf("%s: %s = %v, want > 0", pr.Point.Label(), m, v)
			}
		}
		if pr.Point.Get("kind") != OversubCompute && !(pr.Median("rtt_p99_us") > 0) {
			t.Errorf("%s: no rtt_p99_us", pr.Point.Label())
		}
	}
	a := rep.Analysis
	if len(a.Tables) < 3 || len(a.Charts) != 3 || a.Recommendation == "" {
		t.Fatalf("analysis = %+v", a)
	}
	var rows []string
	for _, r := range a.Tables[0].Rows {
		rows = append(rows, r[0])
	}
	if want := append(slices.Clone(wantKinds), "fair share"); !slices.Equal(rows, want) {
		t.Errorf("per-process table rows %v, want %v", rows, want)
	}
	if !vethOK && !strings.Contains(a.Tables[0].Note, "needs root") && !strings.Contains(a.Tables[0].Note, "ip command") {
		t.Errorf("note = %q, want why veth was skipped", a.Tables[0].Note)
	}
	if vethOK {
		out, err := exec.Command("ip", "netns", "list").Output()
		if err != nil {
			t.Fatal(err)
		}
		if prefix := "corepin-" + strconv.Itoa(os.Getpid()) + "-ov-"; strings.Contains(string(out), prefix) {
			t.Errorf("namespaces %s* left after the run: %s", prefix, out)
		}
	}
}

// Pairs pinned together and apart, on the live topology, give the
// placement table.
func TestOversubPlacements(t *testing.T) {
	topo, err := topology.Discover(os.DirFS("/"))
	if err != nil || topo.Allowed().Size() < 2 {
		t.Skip("needs a readable topology with 2 or more allowed CPUs")
	}
	t.Setenv(oversubChildEnv, "1")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	e := newOversubExp()
	e.Spec(true)
	e.spec.ProcsPerCPU, e.spec.Kinds = []int{1}, []string{OversubLoopback}
	e.spec.Messages, e.spec.PointSeconds = 200, 1
	env := &Env{Exe: exe, Dir: t.TempDir(), Quick: true, Topo: topo, Log: testLog{t}}
	rep, err := RunExperiment(context.Background(), env, e, Options{Repeats: 2, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	var places []string
	for _, pr := range rep.Points {
		places = append(places, pr.Point.Get("placement"))
	}
	if strings.Join(places, ",") != "os,together,apart" {
		t.Errorf("placements = %v, want os, together, apart", places)
	}
	var found bool
	for _, tb := range rep.Analysis.Tables {
		if strings.HasPrefix(tb.Title, "Ping-pong pair placement") && len(tb.Rows) == 1 {
			found = true
		}
	}
	// Two repeats can never differ beyond the noise (p >= 1/3).
	if rec := rep.Analysis.Recommendation; !found || !strings.Contains(rec, "pairs pinned to one CPU ran") ||
		!strings.Contains(rec, "within the noise (Mann-Whitney p=") || !strings.Contains(rec, "n=2 vs 2") || strings.Contains(rec, "Placement matters") {
		t.Errorf("no placement table, or a placement sentence without its test: %+v", rep.Analysis)
	}
}

func TestPairCPUs(t *testing.T) {
	cpus := []int{0, 1, 2, 3}
	for _, tc := range []struct {
		place    string
		i        int
		srv, cli int
	}{
		{PlaceOS, 0, -1, -1},
		{PlaceTogether, 1, 1, 1},
		{PlaceApart, 0, 0, 2},
		{PlaceApart, 3, 3, 1},
	} {
		if s, c := pairCPUs(cpus, tc.i, tc.place); s != tc.srv || c != tc.cli {
			t.Errorf("pairCPUs(%s, %d) = %d, %d, want %d, %d", tc.place, tc.i, s, c, tc.srv, tc.cli)
		}
	}
}
