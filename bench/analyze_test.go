package bench

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/enforce"
	"github.com/corepin/corepin/experiment"
	"github.com/corepin/corepin/topology"
)

func pr(p experiment.Point, metric string, values ...float64) experiment.PointResult {
	r := experiment.PointResult{Point: p}
	for _, v := range values {
		r.Repeats = append(r.Repeats, experiment.Metrics{metric: v})
	}
	return r
}

func TestConcurrencyAnalyzePenalty(t *testing.T) {
	e := &concurrencyExp{}
	e.Spec(true)
	e.spec.Modes = []string{"pinned", "quota"}
	pts := []experiment.PointResult{
		pr(experiment.P("cpus", "1", "mode", "pinned", "concurrency", 1), "job_wall_s", 1, 1.1, 0.9),
		pr(experiment.P("cpus", "1", "mode", "pinned", "concurrency", 2), "job_wall_s", 1.2, 1.2, 1.2),
		pr(experiment.P("cpus", "1", "mode", "quota", "concurrency", 1), "job_wall_s", 2, 2, 2),
		pr(experiment.P("cpus", "1", "mode", "quota", "concurrency", 2), "job_wall_s", 3, 3, 3),
	}
	a := e.Analyze(&Env{}, pts)
	rows := a.Tables[0].Rows
	if rows[1][5] != "+20%" || rows[3][5] != "+50%" {
		t.Errorf("penalties = %s, %s; want +20%% (pinned) and +50%% (quota)", rows[1][5], rows[3][5])
	}
	if !strings.Contains(a.Recommendation, "pinned mode (corepin run's default) slowed each job least (+20%") {
		t.Errorf("recommendation = %q", a.Recommendation)
	}
	if len(a.Charts) != 2 || a.Charts[0].Kind != ChartHeatmap || a.Charts[0].Grid[1][1] != 50 {
		t.Errorf("charts = %+v, want a heatmap with quota x 2 = 50%%", a.Charts)
	}
}

func TestColocationAnalyzeBar(t *testing.T) {
	e := &colocationExp{}
	e.Spec(true)
	m := func(p99, batch, svc float64) experiment.Metrics {
		return experiment.Metrics{"p99_ms": p99, "p50_ms": 1, "batch_cpus": batch, "service_cpus": svc, "machine_cpus": 2}
	}
	pt := func(pol string, ms ...experiment.Metrics) experiment.PointResult {
		return experiment.PointResult{Point: experiment.P("service", "cpu", "policy", pol), Repeats: ms}
	}
	pts := []experiment.PointResult{
		pt(polAlone, m(10, 0, 0.5), m(10, 0, 0.5), m(12, 0, 0.5)),
		pt(polBatchAlone, experiment.Metrics{"batch_cpus": 2}),
		pt(polNone, m(30, 1.45, 0.5), m(31, 1.45, 0.5), m(29, 1.45, 0.5), m(30.5, 1.45, 0.5), m(29.5, 1.45, 0.5)),
		pt(polCorepin, m(10.5, 1.4, 0.5), m(10.8, 1.4, 0.5), m(10.2, 1.4, 0.5), m(10.4, 1.4, 0.5), m(10.6, 1.4, 0.5)),
		pt(polNice, m(20, 1.0, 0.5), m(20, 1.0, 0.5), m(20, 1.0, 0.5)),
	}
	a := e.Analyze(&Env{}, pts)
	rec := a.Recommendation
	for _, want := range []string{"cpu: use corepin (p99 1.05x alone", "lower than no policy's 3.00x beyond the noise (Mann-Whitney p=0.00794, n=5 vs 5)",
		"corepin's default meets the bar", "Without a policy p99 is 3.00x alone"} {
		if !strings.Contains(rec, want) {
			t.Errorf("recommendation %q lacks %q", rec, want)
		}
	}
	// nice keeps only 67% of the idle CPU for the batch: not eligible.
	if strings.Contains(rec, "use nice") {
		t.Errorf("recommended a policy that starves the batch: %q", rec)
	}
	pts[3] = pt(polCorepin, m(13, 1.4, 0.5))
	if rec := e.Analyze(&Env{}, pts).Recommendation; !strings.Contains(rec, "corepin's default misses the bar") {
		t.Errorf("a 1.3x p99 must miss the bar: %q", rec)
	}
}

// A colocation policy is recommended over the default, no policy (none),
// only when its p99 is lower beyond the noise of the repeats and it leaves
// the batch 90% of the idle CPU; otherwise none stays, and the text says
// why with the test.
func TestColocationRecommendationNeedsSignificance(t *testing.T) {
	m := func(p99, batch float64) experiment.Metrics {
		return experiment.Metrics{"p99_ms": p99, "batch_cpus": batch, "service_cpus": 0.5, "machine_cpus": 2}
	}
	// pt gives pol one repeat per p99, the batch at batch CPUs (of 1.5
	// idle) in each.
	pt := func(pol string, batch float64, p99s ...float64) experiment.PointResult {
		p := experiment.PointResult{Point: experiment.P("service", "cpu", "policy", pol)}
		for _, v := range p99s {
			p.Repeats = append(p.Repeats, m(v, batch))
		}
		return p
	}
	alone := pt(polAlone, 0, 10, 10, 10, 10, 10)
	tests := []colocationCase{
		{
			name: "clearly better, no overlap",
			pts: []experiment.PointResult{alone,
				pt(polNone, 1.45, 30, 31, 29, 32, 28),
				pt(polIdle, 1.4, 12, 12.5, 11.5, 13, 11)},
			want:    []string{"cpu: use idle (p99 1.20x alone, batch keeps 93% of the idle CPU), lower than no policy's 3.00x beyond the noise (Mann-Whitney p=0.00794, n=5 vs 5)."},
			notWant: []string{"keep the default"},
		},
		{
			name: "lower median, overlapping repeats",
			pts: []experiment.PointResult{alone,
				pt(polNone, 1.45, 20, 12, 25, 14, 18),
				pt(polIdle, 1.4, 13, 19, 11, 24, 15)},
			want:    []string{"cpu: keep the default (none: no policy): idle measured p99 1.50x alone against its 1.80x, a difference that is not significant (Mann-Whitney p=", "n=5 vs 5)."},
			notWant: []string{"use idle"},
		},
		{
			name: "better p99 but the batch starved",
			pts: []experiment.PointResult{alone,
				pt(polNone, 1.45, 30, 31, 29, 32, 28),
				pt(polNice, 1.0, 11, 11.5, 10.5, 12, 10)},
			want:    []string{"cpu: keep the default (none: no policy): none of the policies leaving the batch 90% of the idle CPU had a lower p99 (none: 3.00x alone, batch keeps 97%)."},
			notWant: []string{"use nice"},
		},
		{
			name: "the starved one loses to an eligible one that must pass its own test",
			pts: []experiment.PointResult{alone,
				pt(polNone, 1.45, 20, 12, 25, 14, 18),
				pt(polNice, 1.0, 11, 11.5, 10.5, 12, 10),
				pt(polIdle, 1.4, 13, 19, 11, 24, 15)},
			want:    []string{"keep the default", "idle measured p99 1.50x", "not significant"},
			notWant: []string{"use nice", "use idle"},
		},
		{
			name: "every policy starves the batch",
			pts: []experiment.PointResult{alone,
				pt(polNone, 1.2, 30, 31, 29, 32, 28),
				pt(polNice, 1.0, 11, 11.5, 10.5, 12, 10)},
			want:    []string{"cpu: keep the default (none: no policy): every policy left the batch under 90% of the idle CPU."},
			notWant: []string{"use nice"},
		},
		{
			name: "significantly worse than none",
			pts: []experiment.PointResult{alone,
				pt(polNone, 1.2, 11, 11.5, 10.5, 12, 10),
				pt(polIdle, 1.4, 30, 31, 29, 32, 28)},
			want:    []string{"keep the default (none: no policy): none of the policies leaving the batch 90% of the idle CPU had a lower p99; the best, idle, measured 3.00x alone against its 1.10x (Mann-Whitney p=0.00794, n=5 vs 5)."},
			notWant: []string{"use idle"},
		},
		{
			// The tie rule between corepin's default and no policy: a
			// lower median inside the noise keeps corepin's default, as
			// against another policy, so the headline does not flip
			// between them on noise (issue 17 §3).
			name: "corepin ties with none: its lower median keeps the headline",
			pts: []experiment.PointResult{alone,
				pt(polNone, 1.45, 20, 12, 25, 14, 18),
				pt(polCorepin, 1.4, 13, 19, 11, 24, 15)},
			want: []string{"cpu: use corepin (p99 1.50x alone, batch keeps 93% of the idle CPU); no policy measured 1.80x, not different beyond the noise (Mann-Whitney p=",
				"and a tie goes to corepin's default",
				"corepin's default misses the bar (p99 <= 1.10x alone with >= 90% of idle CPU to the batch): 1.50x, 93%."},
			notWant: []string{"keep the default", "its p99 and no policy's"},
		},
		{
			// Every policy measured alike (the tails measured other
			// work), corepin's median the higher: nothing that measured
			// worse than the default is recommended, tie or not.
			name: "corepin ties with none at a higher median: the default stays",
			pts: []experiment.PointResult{alone,
				pt(polNone, 1.45, 13, 19, 11, 24, 15),
				pt(polCorepin, 1.4, 20, 12, 25, 14, 18)},
			want:    []string{"cpu: keep the default (none: no policy): corepin measured p99 1.80x alone against its 1.50x, a difference that is not significant (Mann-Whitney p="},
			notWant: []string{"use corepin", "tie goes to corepin"},
		},
		{
			// The same tie at a lower median: the tie goes to corepin.
			name: "corepin ties with none at a lower median: corepin",
			pts: []experiment.PointResult{alone,
				pt(polNone, 1.45, 20, 12, 25, 14, 18),
				pt(polCorepin, 1.4, 13, 19, 11, 24, 15)},
			want:    []string{"cpu: use corepin (p99 1.50x alone, batch keeps 93% of the idle CPU); no policy measured 1.80x, not different beyond the noise (Mann-Whitney p=", "a tie goes to corepin's default."},
			notWant: []string{"keep the default", "so the tie goes to corepin's default"},
		},
		{
			name: "corepin worse than none beyond the noise: never recommended",
			pts: []experiment.PointResult{alone,
				pt(polNone, 1.45, 11, 11.5, 10.5, 12, 10),
				pt(polCorepin, 1.4, 30, 31, 29, 32, 28)},
			want:    []string{"cpu: keep the default (none: no policy): none of the policies leaving the batch 90% of the idle CPU had a lower p99 (none: 1.10x alone", "its p99 is higher than no policy's 1.10x beyond the noise (Mann-Whitney p=0.00794, n=5 vs 5)."},
			notWant: []string{"use corepin"},
		},
		{
			name: "another policy at a higher median than none: never recommended",
			pts: []experiment.PointResult{alone,
				pt(polNone, 1.45, 13, 19, 11, 24, 15),
				pt(polIdle, 1.4, 20, 12, 25, 14, 18)},
			want:    []string{"cpu: keep the default (none: no policy): none of the policies leaving the batch 90% of the idle CPU had a lower p99 (none: 1.50x alone"},
			notWant: []string{"use idle"},
		},
		{
			// Issue 17 §3: no policy must not win against a policy
			// several times better only because five repeats overlap.
			name: "several times better, five repeats overlapping",
			pts: []experiment.PointResult{alone,
				pt(polNone, 1.45, 12, 90, 60, 80, 100),
				pt(polIdle, 1.4, 13, 19, 11, 24, 15)},
			want:    []string{"cpu: use idle (p99 1.50x alone, batch keeps 93% of the idle CPU); no policy measured 8.00x, 5.3 times its p99, though the repeats overlap (Mann-Whitney p="},
			notWant: []string{"keep the default"},
		},
		{
			name: "corepin beside the pick: tested against none on its own",
			pts: []experiment.PointResult{alone,
				pt(polNone, 1.45, 30, 31, 29, 32, 28),
				pt(polIdle, 1.4, 10.5, 10.6, 10.4, 10.7, 10.3),
				pt(polCorepin, 1.4, 14, 20, 12, 25, 16)},
			want: []string{"use idle", "corepin's default misses the bar (p99 <= 1.10x alone with >= 90% of idle CPU to the batch): 1.60x, 93%; its p99 is lower than no policy's 3.00x beyond the noise (Mann-Whitney p=0.00794, n=5 vs 5)."},
		},
		{
			name:    "none not measured",
			pts:     []experiment.PointResult{alone, pt(polIdle, 1.4, 12, 12.5, 11.5, 13, 11)},
			want:    []string{"cpu: use idle (p99 1.20x alone, batch keeps 93% of the idle CPU); the default (none: no policy) was not measured to compare with."},
			notWant: []string{"Mann-Whitney"},
		},
	}
	runColocationCases(t, tests)
}

func TestThreadsAndThroughputAnalyze(t *testing.T) {
	th := &threadsExp{}
	th.Spec(true)
	a := th.Analyze(&Env{}, []experiment.PointResult{
		pr(experiment.P("cpus", 2, "threads", "1"), "rate", 50, 51, 49, 50, 52),
		pr(experiment.P("cpus", 2, "threads", "2"), "rate", 120, 121, 119, 120, 122),
		pr(experiment.P("cpus", 2, "threads", "auto"), "rate", 100, 101, 99, 100, 102),
	})
	if !strings.Contains(a.Recommendation, "run 2 threads") || !strings.Contains(a.Recommendation, "+20%") ||
		!strings.Contains(a.Recommendation, "Mann-Whitney p=0.00794, n=5 vs 5") {
		t.Errorf("threads recommendation = %q", a.Recommendation)
	}
	tp := &throughputExp{}
	tp.Spec(true)
	a = tp.Analyze(&Env{}, []experiment.PointResult{
		pr(experiment.P("config", defaultConfig, "write", "no"), "rate", 100, 101, 99, 100, 102),
		pr(experiment.P("config", "2x1", "write", "no"), "rate", 130, 131, 129, 130, 132),
		pr(experiment.P("config", "1x2", "write", "no"), "rate", 90, 91, 89, 90, 92),
	})
	if !strings.Contains(a.Recommendation, "run 2 workers x 1 pinned CPUs") || !strings.Contains(a.Recommendation, "+30%") ||
		!strings.Contains(a.Recommendation, "Mann-Whitney p=0.00794, n=5 vs 5") {
		t.Errorf("throughput recommendation = %q", a.Recommendation)
	}
}

// Issue 8 §4: the quick demo recommended "run 1 workers x 2 pinned CPUs
// ...: -2% over the default" and, with 2 CPUs, "run 4 threads: +0% vs
// auto". A recommendation is never worse than the default, and a
// difference inside the noise is a tie, broken toward threads = CPUs.
func TestRecommendationsAreNeverWorseThanDefault(t *testing.T) {
	tests := []struct {
		name    string
		exp     string
		pts     []experiment.PointResult
		want    []string
		notWant []string
	}{
		{
			name: "throughput: every pinned configuration slower",
			exp:  "throughput",
			pts: []experiment.PointResult{
				pr(experiment.P("config", defaultConfig, "write", "no"), "rate", 100, 101, 99, 100, 102),
				pr(experiment.P("config", "2x1", "write", "no"), "rate", 97, 98, 96, 97, 99),
				pr(experiment.P("config", "1x2", "write", "no"), "rate", 98, 99, 97, 98, 100),
			},
			want:    []string{"keep the default", "the best, 1x2, measured -2%", "Mann-Whitney p=", "n=5 vs 5"},
			notWant: []string{"run 1 workers"},
		},
		{
			// Issue 17 §6: every pinned configuration slower than the
			// default beyond the noise, which a recommendation that only
			// asked for significance would take.
			name: "throughput: the best pinned configuration significantly slower",
			exp:  "throughput",
			pts: []experiment.PointResult{
				pr(experiment.P("config", defaultConfig, "write", "no"), "rate", 100, 101, 99, 100, 102),
				pr(experiment.P("config", "2x1", "write", "no"), "rate", 80, 81, 79, 80, 82),
				pr(experiment.P("config", "1x2", "write", "no"), "rate", 70, 71, 69, 70, 72),
			},
			want:    []string{"keep the default (unpinned, threads auto, all jobs at once): 100.0", "the best, 2x1, measured -20% (Mann-Whitney p=0.00794, n=5 vs 5, significantly slower)"},
			notWant: []string{"run 2 workers", "run 1 workers"},
		},
		{
			name: "threads: the best count significantly slower than auto",
			exp:  "threads",
			pts: []experiment.PointResult{
				pr(experiment.P("cpus", 2, "threads", "1"), "rate", 50, 51, 49, 50, 52),
				pr(experiment.P("cpus", 2, "threads", "2"), "rate", 80, 81, 79, 80, 82),
				pr(experiment.P("cpus", 2, "threads", "auto"), "rate", 100, 101, 99, 100, 102),
			},
			want:    []string{"run auto threads"},
			notWant: []string{"run 2 threads", "run 1 threads"},
		},
		{
			// Issue 17 §3: "run 2 threads: -19% vs auto" with a spread of
			// 106k-214k ops/s. A count whose median is below auto's is
			// never the pick on a tie.
			name: "threads: threads = CPUs below auto inside the noise",
			exp:  "threads",
			pts: []experiment.PointResult{
				pr(experiment.P("cpus", 2, "threads", "2"), "rate", 106, 150, 214, 120, 140),
				pr(experiment.P("cpus", 2, "threads", "auto"), "rate", 170, 110, 200, 173, 160),
			},
			want:    []string{"run auto threads", "not significant", "the tie goes to the workload's auto"},
			notWant: []string{"run 2 threads"},
		},
		{
			name: "throughput: better median inside the noise",
			exp:  "throughput",
			pts: []experiment.PointResult{
				pr(experiment.P("config", defaultConfig, "write", "no"), "rate", 100, 90, 110, 95, 105),
				pr(experiment.P("config", "2x1", "write", "no"), "rate", 102, 92, 112, 89, 104),
			},
			want:    []string{"keep the default", "not significant", "n=5 vs 5"},
			notWant: []string{"run 2 workers"},
		},
		{
			name: "throughput: two repeats can never be significant",
			exp:  "throughput",
			pts: []experiment.PointResult{
				pr(experiment.P("config", defaultConfig, "write", "no"), "rate", 100, 101),
				pr(experiment.P("config", "2x1", "write", "no"), "rate", 150, 151),
			},
			want:    []string{"keep the default", "p=0.333, n=2 vs 2", "not significant"},
			notWant: []string{"run 2 workers"},
		},
		{
			name: "threads: 4 threads on 2 CPUs ties with 2",
			exp:  "threads",
			pts: []experiment.PointResult{
				pr(experiment.P("cpus", 2, "threads", "1"), "rate", 50, 51, 49, 50, 52),
				pr(experiment.P("cpus", 2, "threads", "2"), "rate", 99, 100, 101, 98, 100),
				pr(experiment.P("cpus", 2, "threads", "4"), "rate", 100, 101, 102, 101, 99),
				pr(experiment.P("cpus", 2, "threads", "auto"), "rate", 100, 99, 101, 100, 98),
			},
			want:    []string{"run 2 threads", "threads = CPUs", "not significant", "Mann-Whitney p=", "the tie goes to threads = CPUs"},
			notWant: []string{"run 4 threads"},
		},
		{
			name: "threads: more threads than CPUs win beyond the noise",
			exp:  "threads",
			pts: []experiment.PointResult{
				pr(experiment.P("cpus", 2, "threads", "2"), "rate", 99, 100, 101, 98, 100),
				pr(experiment.P("cpus", 2, "threads", "4"), "rate", 120, 121, 119, 120, 122),
				pr(experiment.P("cpus", 2, "threads", "auto"), "rate", 100, 99, 101, 100, 98),
			},
			want: []string{"run 4 threads", "beats 2 threads beyond the noise (Mann-Whitney p=0.00794, n=5 vs 5)"},
		},
		{
			name: "threads: without threads = CPUs, ties go to auto",
			exp:  "threads",
			pts: []experiment.PointResult{
				pr(experiment.P("cpus", 2, "threads", "4"), "rate", 100, 101, 99, 100, 102),
				pr(experiment.P("cpus", 2, "threads", "auto"), "rate", 100, 99, 101, 100, 98),
			},
			want:    []string{"run auto threads", "the tie goes to the workload's auto"},
			notWant: []string{"run 4 threads"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			exps, err := Select([]string{tc.exp})
			if err != nil {
				t.Fatal(err)
			}
			e := exps[0]
			e.(experiment.Configurable).Spec(true)
			rec := e.Analyze(&Env{}, tc.pts).Recommendation
			checkRecommendation(t, rec, tc.want, tc.notWant)
		})
	}
}

// Every colocation policy puts the service and the batch where its name
// says, on a 4-CPU machine where the load generator gets a core.
func TestColocationPlacements(t *testing.T) {
	topo := topology.MustSynthetic(topology.Shape{Sockets: 1, NodesPerSocket: 1, L3PerNode: 1, CoresPerL3: 4, ThreadsPerCore: 1})
	e := &colocationExp{}
	e.Spec(false)
	env := &Env{Topo: topo}
	// Two distinct drivers tell the BE root from corepin's own (no groups
	// are created).
	var err error
	if env.Driver, err = enforce.NewAffinity(); err != nil {
		t.Fatal(err)
	}
	if e.be, err = enforce.NewAffinity(enforce.WithRoot("corepin-be")); err != nil {
		t.Fatal(err)
	}
	work := cpuset.MustParse("0-2") // CPU 3 is the generator's
	half := 1500 * time.Millisecond / 10
	for _, tc := range []struct {
		policy           string
		svcCPUs, batchCP string
		svcQuota, bQuota time.Duration
		batchIdle, same  bool
		nice, beRoot     bool
		batchWeight      uint64
		rt               string
		rtShare          float64
	}{
		{policy: polNone, svcCPUs: "0-2", batchCP: "0-2", same: true},
		{policy: polNice, svcCPUs: "0-2", batchCP: "0-2", nice: true},
		{policy: polNiceBatchLim, svcCPUs: "0-2", batchCP: "0-2", nice: true, bQuota: half},
		{policy: polNiceSvcLim, svcCPUs: "0-2", batchCP: "0-2", nice: true, svcQuota: half},
		{policy: polNiceBothLim, svcCPUs: "0-2", batchCP: "0-2", nice: true, svcQuota: half, bQuota: half},
		{policy: polWeight, svcCPUs: "0-2", batchCP: "0-2", batchWeight: 1},
		{policy: polIdle, svcCPUs: "0-2", batchCP: "0-2", batchIdle: true},
		{policy: polLSE, svcCPUs: "0-1", batchCP: "2"},
		{policy: polLSR, svcCPUs: "0-1", batchCP: "0-2", batchIdle: true, beRoot: true},
		{policy: polCorepin, svcCPUs: "0-2", batchCP: "0-2", batchIdle: true, beRoot: true},
		{policy: polSuppressCpuset, svcCPUs: "0-2", batchCP: "0-2", batchIdle: true, beRoot: true},
		{policy: polSuppressQuota, svcCPUs: "0-2", batchCP: "0-2", batchIdle: true, beRoot: true},
		{policy: polInterference, svcCPUs: "0-2", batchCP: "0-2", batchIdle: true, beRoot: true},
		{policy: polSlice, svcCPUs: "0-2", batchCP: "0-2", batchIdle: true, beRoot: true},
		{policy: polBESlice, svcCPUs: "0-2", batchCP: "0-2", batchIdle: true, beRoot: true},
		{policy: polQoS, svcCPUs: "0-2", batchCP: "0-2", batchIdle: true, beRoot: true},
		{policy: polThreadIdle, svcCPUs: "0-2", batchCP: "0-2"},
		{policy: polRTRR, svcCPUs: "0-2", batchCP: "0-2", batchIdle: true, beRoot: true, rt: "rr", rtShare: 0.5},
		{policy: polRTFIFO, svcCPUs: "0-2", batchCP: "0-2", batchIdle: true, beRoot: true, rt: "fifo", rtShare: 0.5},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			pl, err := e.place(env, tc.policy)
			if err != nil {
				t.Fatal(err)
			}
			if pl.genCPUs.String() != "3" {
				t.Errorf("generator on %q, want 3", pl.genCPUs)
			}
			if pl.svcRes.CPUs.String() != tc.svcCPUs || pl.batchRes.CPUs.String() != tc.batchCP || !pl.batchCPUs.IsSubsetOf(work) {
				t.Errorf("service on %q, batch on %q; want %s and %s", pl.svcRes.CPUs, pl.batchRes.CPUs, tc.svcCPUs, tc.batchCP)
			}
			if pl.svcRes.Quota != tc.svcQuota || pl.batchRes.Quota != tc.bQuota {
				t.Errorf("quotas service %v batch %v, want %v %v", pl.svcRes.Quota, pl.batchRes.Quota, tc.svcQuota, tc.bQuota)
			}
			if pl.batchRes.Idle != tc.batchIdle || pl.sameGroup != tc.same || pl.nice != tc.nice || pl.batchRes.Weight != tc.batchWeight {
				t.Errorf("batch idle %v same %v nice %v weight %d", pl.batchRes.Idle, pl.sameGroup, pl.nice, pl.batchRes.Weight)
			}
			if pl.svcRT.String() != cmp.Or(tc.rt, "normal") || math.Abs(pl.svcRes.RTShare-tc.rtShare) > 1e-9 {
				t.Errorf("service class %s, real-time share %v; want %s and %v", pl.svcRT, pl.svcRes.RTShare, cmp.Or(tc.rt, "normal"), tc.rtShare)
			}
			if (pl.batchDriver == e.be) != tc.beRoot {
				t.Errorf("batch under the BE root = %v, want %v", pl.batchDriver == e.be, tc.beRoot)
			}
			if err := pl.svcRes.Validate(); err != nil {
				t.Errorf("service resources invalid: %v", err)
			}
			if err := pl.batchRes.Validate(); err != nil {
				t.Errorf("batch resources invalid: %v", err)
			}
		})
	}
}

// A mode is recommended over pinned (corepin run's default) only when it
// beats it beyond the noise of the repeats (Mann-Whitney); a lower median
// alone is a tie, and the default stays.
func TestConcurrencyRecommendationNeedsSignificance(t *testing.T) {
	e := &concurrencyExp{}
	e.Spec(true)
	e.spec.Modes = []string{"pinned", "quota", "unbounded"}
	alone := func(mode string) experiment.PointResult {
		return pr(experiment.P("cpus", "2", "mode", mode, "concurrency", 1), "job_wall_s", 1, 1, 1, 1, 1)
	}
	// quota clearly faster than pinned in every repeat.
	clear := []experiment.PointResult{alone("pinned"), alone("quota"), alone("unbounded"),
		pr(experiment.P("cpus", "2", "mode", "pinned", "concurrency", 4), "job_wall_s", 1.5, 1.52, 1.49, 1.51, 1.5),
		pr(experiment.P("cpus", "2", "mode", "quota", "concurrency", 4), "job_wall_s", 1.2, 1.21, 1.19, 1.2, 1.22),
		pr(experiment.P("cpus", "2", "mode", "unbounded", "concurrency", 4), "job_wall_s", 1.9, 2, 2.1, 1.95, 2.05),
	}
	rec := e.Analyze(&Env{}, clear).Recommendation
	for _, want := range []string{"quota mode slowed each job least (+20%", "beating pinned mode (corepin run's default) (+50%)", "Mann-Whitney p=0.00794, n=5 vs 5", "Use quota"} {
		if !strings.Contains(rec, want) {
			t.Errorf("clear case: recommendation %q lacks %q", rec, want)
		}
	}
	// quota's median is lower but the repeats overlap: a tie, pinned stays.
	noisy := []experiment.PointResult{alone("pinned"), alone("quota"), alone("unbounded"),
		pr(experiment.P("cpus", "2", "mode", "pinned", "concurrency", 4), "job_wall_s", 1.5, 1.1, 1.9, 1.3, 1.6),
		pr(experiment.P("cpus", "2", "mode", "quota", "concurrency", 4), "job_wall_s", 1.4, 1.8, 1.0, 1.45, 1.2),
		pr(experiment.P("cpus", "2", "mode", "unbounded", "concurrency", 4), "job_wall_s", 1.9, 2, 2.1, 1.95, 2.05),
	}
	rec = e.Analyze(&Env{}, noisy).Recommendation
	for _, want := range []string{"keep pinned mode (corepin run's default)", "quota measured +40%", "not significant", "unbounded slowed it most"} {
		if !strings.Contains(rec, want) {
			t.Errorf("noisy case: recommendation %q lacks %q", rec, want)
		}
	}
	if strings.Contains(rec, "Use quota") {
		t.Errorf("noisy case recommends quota: %q", rec)
	}
}

// Issue 17 §3: the quick colocation experiment's verdict flipped between
// runs on a busy 2-CPU machine. Each case is one of the ways it flipped.
func TestColocationVerdictOnABusyMachine(t *testing.T) {
	// rep is a repeat with its requests' distribution (repeatWithTail),
	// the batch at batch CPUs with idle CPUs left unused and other work
	// on the machine.
	rep := func(p99, batch, idle, other float64) experiment.Metrics {
		m := repeatWithTail(p99, 300, batch)
		m["idle_cpus"], m["other_cpus"] = idle, other
		return m
	}
	pt := func(pol string, ms ...experiment.Metrics) experiment.PointResult {
		return experiment.PointResult{Point: experiment.P("service", "cpu", "policy", pol), Repeats: ms}
	}
	reps := func(batch, idle, other float64, p99s ...float64) []experiment.Metrics {
		var ms []experiment.Metrics
		for _, v := range p99s {
			ms = append(ms, rep(v, batch, idle, other))
		}
		return ms
	}
	alone := pt(polAlone, reps(0, 1.4, 0.1, 5, 5, 5, 5, 5)...)
	tests := []colocationCase{
		{
			// Other builds took 1.2 of the 1.5 CPUs the service left;
			// the batch under cpu.idle got the 0.29 nobody used, and
			// 0.01 stayed idle: it wasted nothing, it is not starved.
			name: "other work takes what the service leaves",
			pts: []experiment.PointResult{alone,
				pt(polNone, reps(0.9, 0.01, 0.6, 30, 31, 29, 32, 28)...),
				pt(polCorepin, reps(0.29, 0.01, 1.2, 5.5, 5.4, 5.6, 5.3, 5.7)...)},
			want: []string{"cpu: use corepin (p99 1.10x alone, batch keeps 97% of the idle CPU), lower than no policy's 6.00x beyond the noise (bootstrap of pooled requests p=", "corepin's default meets the bar",
				"Other work used 0.60 of the 2 CPUs during the runs: the tails measure it as much as the policies."},
			notWant: []string{"under 90%", "keep the default"},
		},
		{
			// One calm repeat of no policy overlaps corepin's five p99s
			// (Mann-Whitney p=0.15): the requests still tell them apart.
			name: "a several times better median, five p99s overlapping",
			pts: []experiment.PointResult{alone,
				pt(polNone, reps(1.4, 0.05, 0, 5, 25, 30, 40, 50)...),
				pt(polCorepin, reps(1.4, 0.05, 0, 5.5, 6, 5.8, 6.2, 6.5)...)},
			want:    []string{"cpu: use corepin (p99 1.20x alone", "lower than no policy's 6.00x beyond the noise (bootstrap of pooled requests p="},
			notWant: []string{"keep the default", "not significant", "Other work used"},
		},
		{
			// idle's median is a little lower than corepin's, inside the
			// noise: the headline stays corepin's instead of flipping.
			name: "a lower median inside the noise does not displace corepin",
			pts: []experiment.PointResult{alone,
				pt(polNone, reps(1.4, 0.05, 0, 30, 31, 29, 32, 28)...),
				pt(polIdle, reps(1.4, 0.05, 0, 5.2, 6.1, 5.0, 5.9, 5.4)...),
				pt(polCorepin, reps(1.4, 0.05, 0, 5.3, 6.0, 5.1, 6.2, 5.5)...)},
			want:    []string{"cpu: use corepin (p99 1.10x alone", "idle measured 1.08x, not lower beyond the noise (bootstrap of pooled requests p=", "so the tie goes to corepin's default"},
			notWant: []string{"use idle"},
		},
		{
			name: "a lower tail beyond the noise does",
			pts: []experiment.PointResult{alone,
				pt(polNone, reps(1.4, 0.05, 0, 30, 31, 29, 32, 28)...),
				pt(polIdle, reps(1.4, 0.05, 0, 5.2, 5.1, 5.0, 5.3, 5.4)...),
				pt(polCorepin, reps(1.4, 0.05, 0, 15, 16, 14, 17, 15.5)...)},
			want:    []string{"cpu: use idle (p99 1.04x alone"},
			notWant: []string{"tie goes to corepin", "Not recommended"},
		},
		{
			// Session 9's demo 1 (load 11-14): idle's batch, under cpu.idle
			// inside the service's group, kept that group runnable and took
			// 0.72 CPUs from the machine's other work; the service's tail
			// came out below alone's. Not a best-effort batch: corepin's
			// default, lower than no policy's beyond the noise, stays.
			name: "a lower tail bought with other work's CPU does not",
			pts: []experiment.PointResult{
				pt(polAlone, reps(0, 0.05, 1.36, 5, 5.2, 4.9, 5.1, 5)...),
				pt(polNone, reps(0.6, 0.05, 0.8, 30, 31, 29, 32, 28)...),
				pt(polIdle, reps(0.7, 0.05, 0.64, 1.5, 1.4, 1.6, 1.45, 1.5)...),
				pt(polCorepin, reps(0.05, 0.004, 1.3, 5.5, 5.4, 5.6, 5.3, 5.7)...)},
			want: []string{"cpu: use corepin (p99 1.10x alone", "lower than no policy's 6.00x beyond the noise",
				"Not recommended: idle (p99 0.30x alone), whose batch took 0.72 CPUs from other work on the machine against the service alone (Mann-Whitney p=0.00794, n=5 vs 5)"},
			notWant: []string{"use idle", "Not recommended: corepin", "Not recommended: none"},
		},
		{
			// Issue 27 §2.5: the other work's CPU swings between repeats
			// as other builds come and go; under idle its median is 0.30
			// lower than alone's, beyond minDisplaced, but the two sets
			// of repeats interleave (not significant): idle's batch is
			// not shown to take anything, and its lower tail wins.
			name: "other work's CPU lower by a median of 0.3 inside the noise does not disqualify",
			pts: []experiment.PointResult{
				pt(polAlone, withOther(reps(0, 0.05, 0, 5, 5.2, 4.9, 5.1, 5), 0.4, 1.5, 1.3, 0.6, 1.6)...),
				pt(polNone, withOther(reps(1.4, 0.05, 0, 30, 31, 29, 32, 28), 0.5, 1.4, 1.2, 0.7, 1.5)...),
				pt(polIdle, withOther(reps(1.4, 0.05, 0, 5.2, 5.1, 5.0, 5.3, 5.4), 0.5, 1.4, 0.3, 1.0, 1.7)...),
				pt(polCorepin, withOther(reps(1.4, 0.05, 0, 15, 16, 14, 17, 15.5), 0.4, 1.5, 1.2, 0.6, 1.6)...)},
			want:    []string{"cpu: use idle (p99 1.04x alone"},
			notWant: []string{"Not recommended"},
		},
	}
	runColocationCases(t, tests)
}

// withOther sets each repeat's other_cpus in turn.
func withOther(ms []experiment.Metrics, other ...float64) []experiment.Metrics {
	for i, v := range other {
		ms[i]["other_cpus"] = v
	}
	return ms
}

// displacedBy counts a policy's batch as taking CPU from other work only
// when the other work's median CPU under it is lower than alone's by
// minDisplaced or more and the difference is beyond the noise.
func TestDisplacedBy(t *testing.T) {
	for _, tc := range []struct {
		name        string
		alone, with []float64
		displaces   bool
	}{
		{name: "0.72 lower in every repeat", alone: []float64{1.36, 1.35, 1.37, 1.36, 1.38}, with: []float64{0.64, 0.63, 0.65, 0.64, 0.66}, displaces: true},
		{name: "0.3 lower by the medians, repeats interleaved", alone: []float64{0.4, 1.5, 1.3, 0.6, 1.6}, with: []float64{0.5, 1.4, 0.3, 1.0, 1.7}},
		{name: "0.1 lower in every repeat", alone: []float64{1.36, 1.35, 1.37, 1.36, 1.38}, with: []float64{1.26, 1.25, 1.27, 1.26, 1.28}},
		{name: "higher", alone: []float64{0.64, 0.63, 0.65, 0.64, 0.66}, with: []float64{1.36, 1.35, 1.37, 1.36, 1.38}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cpus, displaces, c := displacedBy(tc.alone, tc.with)
			if displaces != tc.displaces {
				t.Errorf("displacedBy = %.2f CPUs, displaces %v (%s); want displaces %v", cpus, displaces, c, tc.displaces)
			}
		})
	}
}

// Colocation asks for a second stage of repeats of every point but the
// batch alone while the pick's and no policy's p99s differ by openGap or
// more and the test cannot tell them apart, and only then: a second stage
// of the two alone measured them, and not the others, through a burst of
// other work (issue 17 §3).
func TestColocationOpen(t *testing.T) {
	m := func(p99, batch float64) experiment.Metrics {
		return experiment.Metrics{"p99_ms": p99, "batch_cpus": batch, "service_cpus": 0.5, "machine_cpus": 2}
	}
	pt := func(svc, pol string, p99s ...float64) experiment.PointResult {
		p := experiment.PointResult{Point: experiment.P("service", svc, "policy", pol)}
		for _, v := range p99s {
			p.Repeats = append(p.Repeats, m(v, 1.45))
		}
		return p
	}
	tests := []struct {
		name string
		pts  []experiment.PointResult
		want string
	}{
		{name: "twice as good, five repeats overlapping", pts: []experiment.PointResult{
			pt("cpu", polAlone, 10, 10, 10, 10, 10), pt("cpu", polNone, 20, 12, 25, 40, 30), pt("cpu", polIdle, 50, 50, 50, 50, 50),
			pt("cpu", polCorepin, 6, 21, 7, 24, 13)}, want: "[0 1 2 3]"},
		{name: "decided", pts: []experiment.PointResult{
			pt("cpu", polAlone, 10, 10, 10, 10, 10), pt("cpu", polNone, 30, 31, 29, 32, 28), pt("cpu", polCorepin, 11, 12, 10, 13, 11)}, want: "[]"},
		{name: "close medians", pts: []experiment.PointResult{
			pt("cpu", polAlone, 10, 10, 10, 10, 10), pt("cpu", polNone, 20, 12, 25, 14, 18), pt("cpu", polCorepin, 13, 19, 11, 24, 15)}, want: "[]"},
		{name: "per service", pts: []experiment.PointResult{
			pt("cpu", polAlone, 10, 10, 10, 10, 10), pt("cpu", polNone, 30, 31, 29, 32, 28), pt("cpu", polCorepin, 11, 12, 10, 13, 11),
			pt("nginx", polAlone, 1, 1, 1, 1, 1), pt("nginx", polCorepin, 0.6, 2.1, 0.7, 2.4, 1.3), pt("nginx", polNone, 2, 1.2, 2.5, 4, 3)}, want: "[3 4 5]"},
		{name: "every point but the batch alone", pts: []experiment.PointResult{
			pt("cpu", polAlone, 10, 10, 10, 10, 10), pt("cpu", polBatchAlone, 0, 0, 0, 0, 0), pt("cpu", polNone, 20, 12, 25, 40, 30),
			pt("cpu", polQoS, 7, 20, 8, 22, 12), pt("cpu", polCorepin, 6, 21, 7, 24, 13)}, want: "[0 2 3 4]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := &colocationExp{}
			e.Spec(true)
			if got := fmt.Sprint(e.Open(&Env{}, tc.pts)); got != tc.want {
				t.Errorf("Open = %s, want %s", got, tc.want)
			}
		})
	}
}

// checkRecommendation fails t unless rec holds every string of want and
// none of notWant.
func checkRecommendation(t *testing.T, rec string, want, notWant []string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(rec, w) {
			t.Errorf("recommendation %q lacks %q", rec, w)
		}
	}
	for _, w := range notWant {
		if strings.Contains(rec, w) {
			t.Errorf("recommendation %q contains %q", rec, w)
		}
	}
}

// colocationCase is a quick colocation run's points and what its
// recommendation must and must not say.
type colocationCase struct {
	name    string
	pts     []experiment.PointResult
	want    []string
	notWant []string
}

func runColocationCases(t *testing.T, tests []colocationCase) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := &colocationExp{}
			e.Spec(true)
			checkRecommendation(t, e.Analyze(&Env{}, tc.pts).Recommendation, tc.want, tc.notWant)
		})
	}
}

// The load generator runs in the fifo class where it shares the CPUs under
// test (generator_class auto) and this user may use a real-time class, in
// the fair class where it has a core of its own, and as the spec forces
// otherwise; its start spec carries the class and a real-time share.
func TestColocationGeneratorClass(t *testing.T) {
	rtErr := enforce.CheckRealTime(enforce.RealTime{Policy: enforce.RTFIFO})
	for _, tc := range []struct {
		class  string
		shares bool
		want   string // "" : fifo where permitted, else normal with a reason
		err    bool
	}{
		{class: "", shares: false, want: "normal"},
		{class: "auto", shares: false, want: "normal"},
		{class: "", shares: true},
		{class: "auto", shares: true},
		{class: "normal", shares: true, want: "normal"},
		{class: "rr", shares: false, want: "rr"},
		{class: "fifo", shares: false, want: "fifo"},
		{class: "idle", shares: true, err: true},
		{class: "FIFO", shares: true, err: true},
	} {
		t.Run(fmt.Sprintf("%s/shares=%v", tc.class, tc.shares), func(t *testing.T) {
			rt, why, err := generatorClass(tc.class, tc.shares)
			switch {
			case tc.err:
				if !errors.Is(err, experiment.ErrUsage) || !strings.Contains(err.Error(), "generator_class") {
					t.Errorf("generatorClass(%q) = %v, want a usage error naming generator_class", tc.class, err)
				}
				return
			case tc.want == "normal" || tc.want == "":
				if err != nil {
					t.Fatal(err)
				}
			case rtErr != nil: // a forced real-time class without the right to it
				if err == nil {
					t.Errorf("generatorClass(%q) without the right to a real-time class = %s, want an error", tc.class, rt)
				}
				return
			}
			want := tc.want
			if want == "" {
				want = "fifo"
				if rtErr != nil {
					want = "normal"
					if !strings.Contains(why, "fair class") {
						t.Errorf("auto without the right to fifo says %q, want the reason", why)
					}
				}
			}
			if rt.String() != want {
				t.Errorf("generatorClass(%q, shares %v) = %s, want %s", tc.class, tc.shares, rt, want)
			}
			env := &Env{}
			spec := generatorSpec(env, placement{genCPUs: cpuset.MustParse("0-1"), genRT: rt}, []string{"load"})
			if spec.RealTime != rt || (rt.IsZero() != (spec.Resources.RTShare == 0)) {
				t.Errorf("generator starts in %s with real-time share %v, want %s with a share exactly when real-time", spec.RealTime, spec.Resources.RTShare, rt)
			}
			if err := spec.Resources.Validate(); err != nil {
				t.Errorf("generator resources invalid: %v", err)
			}
		})
	}
}
