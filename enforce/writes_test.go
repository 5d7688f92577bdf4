package enforce

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/corepin/corepin/cpuset"
)

var (
	allFeatures = features{cpuset: true, cpu: true, bandwidth: true, burst: true, idle: true}
	linux510    = features{cpuset: true, cpu: true, bandwidth: true} // no burst, no idle
	noBandwidth = features{cpuset: true, cpu: true, idle: true}
	root0to3    = rootSets{cpus: cpuset.Range(0, 3), mems: cpuset.New(0)}
)

func TestV1Writes(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    Resources
		f    features
		want []Write
		err  error
	}{{
		name: "zero value: the root's sets, no quota, default weight",
		f:    allFeatures,
		want: []Write{{"cpuset.cpus", "0-3"}, {"cpuset.mems", "0"}, {"cpu.cfs_burst_us", "0"},
			{"cpu.cfs_period_us", "100000"}, {"cpu.cfs_quota_us", "-1"}, {"cpu.idle", "0"}, {"cpu.shares", "1024"}},
	}, {
		name: "pinned with quota, burst and weight",
		r: Resources{CPUs: cpuset.MustParse("1-2"), Mems: cpuset.New(0), Quota: 2 * time.Second / 10,
			Period: 50 * time.Millisecond, Burst: 100 * time.Millisecond, Weight: 200},
		f: allFeatures,
		want: []Write{{"cpuset.cpus", "1-2"}, {"cpuset.mems", "0"}, {"cpu.cfs_burst_us", "0"},
			{"cpu.cfs_period_us", "50000"}, {"cpu.cfs_quota_us", "200000"}, {"cpu.cfs_burst_us", "100000"},
			{"cpu.idle", "0"}, {"cpu.shares", "2048"}},
	}, {
		name: "idle: no shares written",
		r:    Resources{Idle: true},
		f:    allFeatures,
		want: []Write{{"cpuset.cpus", "0-3"}, {"cpuset.mems", "0"}, {"cpu.cfs_burst_us", "0"},
			{"cpu.cfs_period_us", "100000"}, {"cpu.cfs_quota_us", "-1"}, {"cpu.idle", "1"}},
	}, {
		name: "real-time share, with real-time group scheduling: after the quota",
		r:    Resources{Quota: 100 * time.Millisecond, RTShare: 0.25},
		f:    func() features { f := allFeatures; f.rt = true; return f }(),
		want: []Write{{"cpuset.cpus", "0-3"}, {"cpuset.mems", "0"}, {"cpu.cfs_burst_us", "0"},
			{"cpu.cfs_period_us", "100000"}, {"cpu.cfs_quota_us", "100000"},
			{"cpu.rt_period_us", "1000000"}, {"cpu.rt_runtime_us", "250000"}, {"cpu.idle", "0"}, {"cpu.shares", "1024"}},
	}, {
		name: "real-time share, without real-time group scheduling: the kernel's throttling bounds it, nothing written",
		r:    Resources{RTShare: 0.25},
		f:    allFeatures,
		want: []Write{{"cpuset.cpus", "0-3"}, {"cpuset.mems", "0"}, {"cpu.cfs_burst_us", "0"},
			{"cpu.cfs_period_us", "100000"}, {"cpu.cfs_quota_us", "-1"}, {"cpu.idle", "0"}, {"cpu.shares", "1024"}},
	}, {
		name: "idle on Linux 5.10: lowest shares",
		r:    Resources{Idle: true, Quota: 10 * time.Millisecond},
		f:    linux510,
		want: []Write{{"cpuset.cpus", "0-3"}, {"cpuset.mems", "0"},
			{"cpu.cfs_period_us", "100000"}, {"cpu.cfs_quota_us", "10000"}, {"cpu.shares", "2"}},
	}, {
		name: "burst on Linux 5.10",
		r:    Resources{Quota: 10 * time.Millisecond, Burst: time.Millisecond},
		f:    linux510,
		err:  ErrNotSupported,
	}, {
		name: "no CFS bandwidth, no quota asked",
		r:    Resources{Weight: 1},
		f:    noBandwidth,
		want: []Write{{"cpuset.cpus", "0-3"}, {"cpuset.mems", "0"}, {"cpu.idle", "0"}, {"cpu.shares", "10"}},
	}, {
		name: "no CFS bandwidth, quota asked",
		r:    Resources{Quota: 10 * time.Millisecond},
		f:    noBandwidth,
		err:  ErrNotSupported,
	}, {
		name: "sub-microsecond quota is truncated",
		r:    Resources{Quota: 1500*time.Microsecond + 999},
		f:    allFeatures,
		want: []Write{{"cpuset.cpus", "0-3"}, {"cpuset.mems", "0"}, {"cpu.cfs_burst_us", "0"},
			{"cpu.cfs_period_us", "100000"}, {"cpu.cfs_quota_us", "1500"}, {"cpu.idle", "0"}, {"cpu.shares", "1024"}},
	}, {
		name: "invalid",
		r:    Resources{Quota: time.Microsecond},
		f:    allFeatures,
		err:  ErrInvalidResources,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := v1Writes(tc.r, root0to3, tc.f)
			if !errors.Is(err, tc.err) {
				t.Fatalf("v1Writes() error = %v, want %v", err, tc.err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("v1Writes() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestV2Writes(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    Resources
		f    features
		want []Write
		err  error
	}{{
		name: "zero value",
		f:    allFeatures,
		want: []Write{{"cpuset.cpus", "0-3"}, {"cpuset.mems", "0"}, {"cpu.max.burst", "0"},
			{"cpu.max", "max 100000"}, {"cpu.idle", "0"}, {"cpu.weight", "100"}},
	}, {
		name: "quota mode: 2 CPUs' worth over the shared pool",
		r:    Resources{Quota: 200 * time.Millisecond, Weight: 10000},
		f:    allFeatures,
		want: []Write{{"cpuset.cpus", "0-3"}, {"cpuset.mems", "0"}, {"cpu.max.burst", "0"},
			{"cpu.max", "200000 100000"}, {"cpu.idle", "0"}, {"cpu.weight", "10000"}},
	}, {
		name: "burst mode",
		r:    Resources{CPUs: cpuset.New(3), Quota: 100 * time.Millisecond, Burst: 100 * time.Millisecond, Period: time.Second},
		f:    allFeatures,
		want: []Write{{"cpuset.cpus", "3"}, {"cpuset.mems", "0"}, {"cpu.max.burst", "0"},
			{"cpu.max", "100000 1000000"}, {"cpu.max.burst", "100000"}, {"cpu.idle", "0"}, {"cpu.weight", "100"}},
	}, {
		name: "idle",
		r:    Resources{Idle: true},
		f:    allFeatures,
		want: []Write{{"cpuset.cpus", "0-3"}, {"cpuset.mems", "0"}, {"cpu.max.burst", "0"},
			{"cpu.max", "max 100000"}, {"cpu.idle", "1"}},
	}, {
		name: "idle on Linux 5.10: weight 1",
		r:    Resources{Idle: true},
		f:    linux510,
		want: []Write{{"cpuset.cpus", "0-3"}, {"cpuset.mems", "0"}, {"cpu.max", "max 100000"}, {"cpu.weight", "1"}},
	}, {
		name: "no controllers, nothing asked: nothing written",
		f:    features{},
	}, {
		name: "no cpuset controller, cpus asked",
		r:    Resources{CPUs: cpuset.New(1)},
		f:    features{cpu: true},
		err:  ErrNotSupported,
	}, {
		name: "no cpu controller, weight asked",
		r:    Resources{Weight: 5},
		f:    features{cpuset: true},
		err:  ErrNotSupported,
	}, {
		name: "burst above quota",
		r:    Resources{Quota: 10 * time.Millisecond, Burst: 20 * time.Millisecond},
		f:    allFeatures,
		err:  ErrInvalidResources,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := v2Writes(tc.r, root0to3, tc.f)
			if !errors.Is(err, tc.err) {
				t.Fatalf("v2Writes() error = %v, want %v", err, tc.err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("v2Writes() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestResourcesValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    Resources
		ok   bool
	}{
		{name: "zero", ok: true},
		{name: "quota 1ms", r: Resources{Quota: time.Millisecond}, ok: true},
		{name: "quota below 1ms", r: Resources{Quota: time.Millisecond - 1}},
		{name: "negative quota", r: Resources{Quota: -1}},
		{name: "period 1s", r: Resources{Period: time.Second}, ok: true},
		{name: "period above 1s", r: Resources{Period: time.Second + 1}},
		{name: "period below 1ms", r: Resources{Period: time.Microsecond}},
		{name: "burst without quota", r: Resources{Burst: time.Millisecond}},
		{name: "burst equal to quota", r: Resources{Quota: time.Millisecond, Burst: time.Millisecond}, ok: true},
		{name: "weight 10000", r: Resources{Weight: 10000}, ok: true},
		{name: "weight 10001", r: Resources{Weight: 10001}},
		{name: "idle with weight", r: Resources{Idle: true, Weight: 100}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.r.Validate()
			if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrInvalidResources)) {
				t.Errorf("Validate() = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

func TestSharesFromWeight(t *testing.T) {
	for _, tc := range []struct{ weight, shares uint64 }{
		{1, 10}, {50, 512}, {100, 1024}, {200, 2048}, {10000, 102400}, {0, 2},
	} {
		if got := SharesFromWeight(tc.weight); got != tc.shares {
			t.Errorf("SharesFromWeight(%d) = %d, want %d", tc.weight, got, tc.shares)
		}
	}
}

func TestNiceFromWeight(t *testing.T) {
	for _, tc := range []struct {
		weight uint64
		nice   int
	}{{100, 0}, {1, 19}, {10000, -20}, {80, 1}, {125, -1}, {10, 10}} {
		if got := NiceFromWeight(tc.weight); got != tc.nice {
			t.Errorf("NiceFromWeight(%d) = %d, want %d", tc.weight, got, tc.nice)
		}
	}
}

func TestNiceLimitNote(t *testing.T) {
	for _, tc := range []struct {
		name string
		l    NiceLimit
		want string // a part of the note; "" for none
	}{
		{name: "CAP_SYS_NICE", l: NiceLimit{Own: 5, Lowest: -20}},
		{name: "nice 5, no right", l: NiceLimit{Own: 5, Lowest: 5}, want: "runs at nice 5 and may not lower it"},
		{name: "nice 0, no right", l: NiceLimit{Own: 0, Lowest: 0}, want: "keep nice 0 where a Weight asks for less"},
		{name: "RLIMIT_NICE", l: NiceLimit{Own: 5, Lowest: 2}, want: "run at nice 2"},
		{name: "stuck in SCHED_IDLE", l: NiceLimit{Own: 0, Lowest: 20}, want: "may not set SCHED_OTHER"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.l.Note()
			if (got == "") != (tc.want == "") || !strings.Contains(got, tc.want) {
				t.Errorf("Note() = %q, want one with %q", got, tc.want)
			}
		})
	}
}

func TestAffinityPlan(t *testing.T) {
	allowed := cpuset.Range(0, 3)
	anyNice := NiceLimit{Lowest: -20}
	// Issue 17 §2: a user at nice 5 without CAP_SYS_NICE.
	atFive := NiceLimit{Own: 5, Lowest: 5}
	for _, tc := range []struct {
		name string
		r    Resources
		nice NiceLimit
		want affinityPlan
		err  error
	}{
		{name: "zero", want: affinityPlan{CPUs: allowed}},
		{name: "pinned, low weight", r: Resources{CPUs: cpuset.New(2), Weight: 10}, want: affinityPlan{CPUs: cpuset.New(2), Nice: 10}},
		{name: "idle", r: Resources{Idle: true}, want: affinityPlan{CPUs: allowed, Idle: true}},
		{name: "quota", r: Resources{Quota: 10 * time.Millisecond}, err: ErrNotSupported},
		// Issue 8 §3: a pinned job's memory nodes are a documented
		// limitation of this driver, not a reason to fail the job.
		{name: "mems ignored", r: Resources{CPUs: cpuset.New(1), Mems: cpuset.New(0)}, want: affinityPlan{CPUs: cpuset.New(1)}},
		{name: "outside affinity", r: Resources{CPUs: cpuset.New(4)}, err: ErrInvalidResources},
		{name: "high weight, privileged", r: Resources{Weight: 10000}, nice: anyNice, want: affinityPlan{CPUs: allowed, Nice: -20}},
		{name: "default weight at nice 5 keeps 5", r: Resources{CPUs: cpuset.New(1)}, nice: atFive, want: affinityPlan{CPUs: cpuset.New(1), Nice: 5}},
		{name: "high weight at nice 5 keeps 5", r: Resources{Weight: 10000}, nice: atFive, want: affinityPlan{CPUs: allowed, Nice: 5}},
		{name: "low weight at nice 5 is nicer", r: Resources{Weight: 10}, nice: atFive, want: affinityPlan{CPUs: allowed, Nice: 10}},
		{name: "idle at nice 5", r: Resources{Idle: true}, nice: atFive, want: affinityPlan{CPUs: allowed, Idle: true}},
		{name: "RLIMIT_NICE down to 2", r: Resources{Weight: 10000}, nice: NiceLimit{Own: 5, Lowest: 2}, want: affinityPlan{CPUs: allowed, Nice: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.nice == (NiceLimit{}) {
				tc.nice = anyNice
			}
			got, err := affinityPlanFor(tc.r, allowed, tc.nice)
			if !errors.Is(err, tc.err) {
				t.Fatalf("affinityPlanFor() error = %v, want %v", err, tc.err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(cpuset.CPUSet.Equals)); diff != "" {
				t.Errorf("affinityPlanFor() (-want +got):\n%s", diff)
			}
		})
	}
}
